"""Held-out kernels written from the docs only, session 43c: indexing-heavy kernels, with computed
and data-dependent indices.

* EmbeddingBag (``include_last_offset`` offsets, empty bags) with per-sample weights (mode sum)
  and without (mode mean), over a recommendation-size table: at the GPU shape the table holds
  more than 2**31 elements, so its row offsets need 64 bits;
* the embedding backward / ``index_put_(accumulate=True)``: rows of a gradient scattered into a
  table by an index tensor with many duplicates and negative (from-the-end) indices, skipping a
  ``padding_idx``, with fp32 atomics;
* a histogram of bucketized values (``torch.bucketize`` against sorted edges, NaN included) as
  int32 counts and fp32 weight sums, both by atomic adds;
* a mixture-of-experts combine: each token gathers its top-k rows of the experts' permuted output
  buffer (a ``-1`` slot reads the buffer's last row, the zero row of dropped tokens) and sums
  them with its routing weights, bf16 in and out;
* paged-KV-cache decode attention (grouped-query heads): each token's key and value are read
  through the sequence's block table (page = token // page_size, slot = token % page_size),
  per-sequence context lengths, empty sequences giving zeros;
* bilinear sampling ``F.grid_sample(..., padding_mode="border", align_corners=False)`` with
  clamped computed coordinates, four gathers a pixel.

Each comes with its eager reference. Negative indices are wrapped in the kernels
(``torch.where(idx < 0, idx + n, idx)``): tilecraft's tensor indices do not count from the end
(documented, and ref mode says so when it meets one).

Notes: all six match eager at every CPU shape (seeds 0 and 1) with the autotuner and with
``TILECRAFT_NO_AUTOTUNE=1`` (max errors 7.6e-6 embedding bag, 0 scatter-add, 0 histogram, 0 MoE
combine, 0 paged attention, 1.8e-6 grid sample), with 20 explicit configs (split reductions,
persistent grids, chunked reductions, loop orders), with ``static_shapes=False`` and with
strided / transposed / expanded / offset index tensors and int32 indices. Every default
cross-compiles for cuda:90 and hip:gfx942 at the GPU shape without spills; the embedding table
(2.56e9 elements) and large KV caches / images / expert buffers get 64-bit offsets (int32 indices
widened before the multiply). No kernel was rewritten for tilecraft. Bugs: a bool index tensor is
gathered as rows 0/1 (repro_1.py), float loop bounds / float indices / a tensor shorter than a
data-dependent loop give errors that do not name the argument (repro_2..4.py), provably in-range
computed indices are bounds-checked per lane (repro_5.py). See /work/fuzz43c/REPORT.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, gen, randn, with_args

F32 = torch.float32
BF16 = torch.bfloat16


# --------------------------------------------------------------------------- embedding bag


@tc.kernel(static_shapes=True)
def embedding_bag(
    table: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    per_sample_weights: torch.Tensor,
    mean: bool,
) -> torch.Tensor:
    """table [R, D], indices [N] int64, offsets [B + 1] int64 (bag b is
    indices[offsets[b]:offsets[b + 1]], may be empty), per_sample_weights [N] fp32.
    mean=False: sum of weighted rows; mean=True: mean of rows (weights all ones). fp32 [B, D]."""
    b = offsets.size(0) - 1
    d = table.size(1)
    out = torch.empty([b, d], dtype=F32, device=table.device)
    for bag, td in tc.tile([b, d], block_size=[1, None]):
        start = offsets[bag.begin]
        end = offsets[bag.begin + 1]
        acc = tc.zeros([td], dtype=F32)
        for tt in tc.tile(start, end):
            rows = table[indices[tt], td].to(F32)
            acc = acc + torch.sum(rows * per_sample_weights[tt][:, None], dim=0)
        if mean:
            acc = acc / torch.clamp(end - start, min=1).to(F32)
        out[bag.begin, td] = acc
    return out


def _ebag_inputs(shape, device, seed):
    r, d, b, avg = shape
    n = b * avg
    if device == "meta":
        return (
            torch.empty(r, d, dtype=F32, device="meta"),
            torch.empty(n, dtype=torch.int64, device="meta"),
            torch.empty(b + 1, dtype=torch.int64, device="meta"),
            torch.empty(n, dtype=F32, device="meta"),
        )
    g = gen(seed)
    table = torch.randn(r, d, generator=g)
    indices = torch.randint(0, r, (n,), generator=g)
    indices[: n // 8] = indices[0]  # a hot row, duplicated within and across bags
    # bag lengths: random cut points (some bags empty, the first and last ones included)
    cuts = torch.sort(torch.randint(0, n + 1, (b - 1,), generator=g)).values
    offsets = torch.cat([torch.tensor([0]), cuts, torch.tensor([n])])
    offsets[1] = 0  # bag 0 empty
    offsets[-2] = n  # last bag empty
    offsets = torch.cummax(offsets, 0).values
    psw = torch.rand(n, generator=g) + 0.5
    return tuple(x.to(device) for x in (table, indices, offsets, psw))


def _ebag_run(k, inp):
    table, indices, offsets, psw = inp
    s = k["embedding_bag"](table, indices, offsets, psw, False)
    m = k["embedding_bag"](table, indices, offsets, torch.ones_like(psw), True)
    return s, m


def embedding_bag_reference(table, indices, offsets, psw):
    s = F.embedding_bag(
        indices, table, offsets, mode="sum", per_sample_weights=psw, include_last_offset=True
    )
    m = F.embedding_bag(indices, table, offsets, mode="mean", include_last_offset=True)
    return s, m


# --------------------------------------------------------------------------- scatter-add rows


@tc.kernel(static_shapes=True)
def scatter_add_rows_(
    grad_table: torch.Tensor, idx: torch.Tensor, grad_rows: torch.Tensor, padding_idx: int
) -> None:
    """grad_table [R, D] fp32 += grad_rows [N, D] at rows idx [N] (duplicates add up; a negative
    index counts from the end, as in PyTorch), rows whose index is padding_idx skipped."""
    n = idx.size(0)
    r, d = grad_table.size()
    for tn, td in tc.tile([n, d]):
        rows = idx[tn]
        rows = torch.where(rows < 0, rows + r, rows)
        g = grad_rows[tn, td].to(F32)
        g = torch.where((rows == padding_idx)[:, None], 0.0, g)
        tc.atomic_add(grad_table, [rows, td], g)


def _scatter_inputs(shape, device, seed):
    r, d, n = shape
    if device == "meta":
        return (
            torch.empty(r, d, dtype=F32, device="meta"),
            torch.empty(n, dtype=torch.int64, device="meta"),
            torch.empty(n, d, dtype=BF16, device="meta"),
        )
    g = gen(seed)
    table = torch.randn(r, d, generator=g)
    idx = torch.randint(-r, r, (n,), generator=g)
    idx[::5] = 3  # padding rows
    idx[1::7] = -1  # many duplicates of the last row, from the end
    src = randn((n, d), BF16, "cpu", g)
    return tuple(x.to(device) for x in (table, idx, src))


PADDING_IDX = 3


def scatter_add_rows_reference(table, idx, src, padding_idx):
    out = table.clone()
    r = table.size(0)
    keep = torch.where(idx < 0, idx + r, idx) != padding_idx
    out.index_put_((idx[keep],), src[keep].float(), accumulate=True)
    return out


def _scatter_run(k, inp):
    table = inp[0].clone()
    k["scatter_add_rows_"](table, inp[1], inp[2], PADDING_IDX)
    return table


# --------------------------------------------------------------------------- bucket histogram


@tc.kernel(static_shapes=True)
def bucket_histogram(
    x: torch.Tensor, edges: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N] fp32 bucketized against sorted edges [E] (torch.bucketize, right=True: bucket i
    holds edges[i-1] <= x < edges[i]; NaN goes to the last bucket); int32 counts [E + 1] and
    fp32 sums of weights [N] per bucket."""
    n = x.size(0)
    e = edges.size(0)
    counts = torch.zeros([e + 1], dtype=torch.int32, device=x.device)
    sums = torch.zeros([e + 1], dtype=F32, device=x.device)
    for tn in tc.tile(n):
        bucket = torch.bucketize(x[tn], edges[:], right=True)
        tc.atomic_add(counts, [bucket], torch.ones_like(bucket, dtype=torch.int32))
        tc.atomic_add(sums, [bucket], weights[tn])
    return counts, sums


def _hist_inputs(shape, device, seed):
    n, e = shape
    if device == "meta":
        return (
            torch.empty(n, dtype=F32, device="meta"),
            torch.empty(e, dtype=F32, device="meta"),
            torch.empty(n, dtype=F32, device="meta"),
        )
    g = gen(seed)
    x = torch.randn(n, generator=g) * 2
    x[::97] = float("nan")
    edges = torch.sort(torch.randn(e, generator=g) * 2).values
    x[1::13] = edges[torch.randint(0, e, (len(x[1::13]),), generator=g)]  # exactly on an edge
    w = torch.rand(n, generator=g)
    return tuple(t.to(device) for t in (x, edges, w))


def bucket_histogram_reference(x, edges, w):
    b = torch.bucketize(x, edges, right=True)
    e1 = edges.numel() + 1
    return torch.bincount(b, minlength=e1).to(torch.int32), torch.bincount(
        b, w, minlength=e1
    ).float()


# --------------------------------------------------------------------------- MoE combine


@tc.kernel(static_shapes=True)
def moe_combine(
    expert_out: torch.Tensor, slots: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """expert_out [R, D] bf16 (rows of every expert's output, permuted by expert); slots [T, K]
    int64: the row of each token's k-th choice (-1: the buffer's last row); weights [T, K] fp32.
    out[t] = sum_k weights[t, k] * expert_out[slots[t, k]], bf16 [T, D]."""
    t, _ = slots.size()
    r, d = expert_out.size()
    out = torch.empty([t, d], dtype=expert_out.dtype, device=expert_out.device)
    for tt, td in tc.tile([t, d]):
        rows = slots[tt, :]
        rows = torch.where(rows < 0, rows + r, rows)
        x = expert_out[rows, td].to(F32)  # [BT, K, BD]
        out[tt, td] = torch.sum(x * weights[tt, :][:, :, None], dim=1).to(out.dtype)
    return out


def _moe_inputs(shape, device, seed):
    t, k, d = shape
    r = t * k + 1
    if device == "meta":
        return (
            torch.empty(r, d, dtype=BF16, device="meta"),
            torch.empty(t, k, dtype=torch.int64, device="meta"),
            torch.empty(t, k, dtype=F32, device="meta"),
        )
    g = gen(seed)
    buf = randn((r, d), BF16, "cpu", g)
    buf[-1] = 0
    slots = torch.randperm(t * k, generator=g).view(t, k)
    slots[torch.rand(t, k, generator=g) < 0.1] = -1  # dropped (over capacity)
    w = torch.softmax(torch.randn(t, k, generator=g), -1)
    return tuple(x.to(device) for x in (buf, slots, w))


def moe_combine_reference(buf, slots, w):
    return (buf[slots].float() * w[..., None]).sum(1).to(buf.dtype)


# --------------------------------------------------------------------------- paged decode attention


@tc.kernel(static_shapes=True)
def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    ctx_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """One decode query per sequence: q [B, H, D] bf16; k_cache, v_cache [P, PAGE, KVH, D] bf16;
    block_table [B, MAXP] int32 (page ids); ctx_lens [B] int32 (0: an empty sequence, zeros).
    H = G * KVH query heads share each kv head. Returns [B, H, D] bf16."""
    b, h, d = q.size()
    _, page, kvh, _ = k_cache.size()
    page = tc.specialize(page)
    grp = tc.specialize(h // kvh)
    out = torch.empty_like(q)
    for tb, tkv in tc.tile([b, kvh], block_size=[1, 1]):
        length = ctx_lens[tb.begin]
        heads = tkv.begin * grp + tc.arange(grp)
        qt = q[tb.begin, heads, :].to(F32) * scale  # [G, D]
        m_i = tc.full([grp], float("-inf"), dtype=F32)
        l_i = tc.zeros([grp], dtype=F32)
        acc = tc.zeros([grp, d], dtype=F32)
        for tt in tc.tile(length):
            pg = block_table[tb.begin, tt.index // page]
            slot = tt.index % page
            kt = k_cache[pg, slot, tkv.begin, :].to(F32)  # [BT, D]
            vt = v_cache[pg, slot, tkv.begin, :].to(F32)
            s = torch.sum(qt[:, None, :] * kt[None, :, :], dim=-1)  # [G, BT]
            m_new = torch.maximum(m_i, torch.amax(s, dim=1))
            p = torch.exp(s - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=1)
            acc = acc * alpha[:, None] + torch.sum(p[:, :, None] * vt[None, :, :], dim=1)
            m_i = m_new
        res = acc / torch.where(l_i == 0.0, 1.0, l_i)[:, None]
        out[tb.begin, heads, :] = res.to(out.dtype)
    return out


def _paged_inputs(shape, device, seed):
    b, h, kvh, d, page, maxlen = shape
    maxp = (maxlen + page - 1) // page
    npages = b * maxp + 3
    if device == "meta":
        return (
            torch.empty(b, h, d, dtype=BF16, device="meta"),
            torch.empty(npages, page, kvh, d, dtype=BF16, device="meta"),
            torch.empty(npages, page, kvh, d, dtype=BF16, device="meta"),
            torch.empty(b, maxp, dtype=torch.int32, device="meta"),
            torch.empty(b, dtype=torch.int32, device="meta"),
        )
    g = gen(seed)
    q = randn((b, h, d), BF16, "cpu", g)
    kc = randn((npages, page, kvh, d), BF16, "cpu", g)
    vc = randn((npages, page, kvh, d), BF16, "cpu", g)
    bt = torch.randperm(npages, generator=g)[: b * maxp].view(b, maxp).to(torch.int32)
    lens = torch.randint(1, maxlen + 1, (b,), generator=g).to(torch.int32)
    lens[0] = 0
    lens[-1] = maxlen
    return tuple(x.to(device) for x in (q, kc, vc, bt, lens))


def paged_decode_attention_reference(q, kc, vc, bt, lens, scale):
    b, h, d = q.shape
    page, kvh = kc.shape[1], kc.shape[2]
    out = torch.zeros(b, h, d, dtype=F32, device=q.device)
    for i in range(b):
        n = int(lens[i])
        if n == 0:
            continue
        tok = torch.arange(n, device=q.device)
        pg = bt[i, tok // page].long()
        k = kc[pg, tok % page].float().repeat_interleave(h // kvh, dim=1)  # [n, H, D]
        v = vc[pg, tok % page].float().repeat_interleave(h // kvh, dim=1)
        s = torch.einsum("hd,nhd->hn", q[i].float() * scale, k)
        out[i] = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


SCALE = 0.125


# --------------------------------------------------------------------------- bilinear sampling


@tc.kernel(static_shapes=True)
def grid_sample_border(img: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """F.grid_sample(img [N, C, H, W], grid [N, Ho, Wo, 2] (x, y in [-1, 1]), bilinear,
    padding_mode="border", align_corners=False) -> [N, C, Ho, Wo] fp32."""
    n, c, h, w = img.size()
    _, ho, wo, _ = grid.size()
    out = torch.empty([n, c, ho * wo], dtype=F32, device=img.device)
    gflat = grid.view(n, ho * wo, 2)
    for tn, tp, tch in tc.tile([n, ho * wo, c], block_size=[1, None, None]):
        gx = gflat[tn.begin, tp, 0]
        gy = gflat[tn.begin, tp, 1]
        ix = torch.clamp(((gx + 1.0) * w - 1.0) * 0.5, 0.0, w - 1.0)
        iy = torch.clamp(((gy + 1.0) * h - 1.0) * 0.5, 0.0, h - 1.0)
        x0f = torch.floor(ix)
        y0f = torch.floor(iy)
        wx = ix - x0f
        wy = iy - y0f
        x0 = x0f.to(torch.int32)
        y0 = y0f.to(torch.int32)
        x1 = torch.clamp(x0 + 1, max=w - 1)
        y1 = torch.clamp(y0 + 1, max=h - 1)
        v00 = img[tn.begin, tch, y0, x0]
        v01 = img[tn.begin, tch, y0, x1]
        v10 = img[tn.begin, tch, y1, x0]
        v11 = img[tn.begin, tch, y1, x1]
        top = v00 * (1.0 - wx)[None, :] + v01 * wx[None, :]
        bot = v10 * (1.0 - wx)[None, :] + v11 * wx[None, :]
        out[tn.begin, tch, tp] = top * (1.0 - wy)[None, :] + bot * wy[None, :]
    return out.view(n, c, ho, wo)


def _gs_inputs(shape, device, seed):
    n, c, h, w, ho, wo = shape
    if device == "meta":
        return (
            torch.empty(n, c, h, w, dtype=F32, device="meta"),
            torch.empty(n, ho, wo, 2, dtype=F32, device="meta"),
        )
    g = gen(seed)
    img = torch.randn(n, c, h, w, generator=g)
    grid = torch.rand(n, ho, wo, 2, generator=g) * 2.6 - 1.3  # some samples off the image
    grid[:, 0, 0] = torch.tensor([-1.0, 1.0])  # corners exactly
    return img.to(device), grid.to(device)


def grid_sample_reference(img, grid):
    return F.grid_sample(img, grid, mode="bilinear", padding_mode="border", align_corners=False)


# --------------------------------------------------------------------------- cases


CASES = [
    Case(
        name="embedding_bag_sum_mean_s43c",
        kernels=(embedding_bag,),
        make_inputs=_ebag_inputs,
        reference=embedding_bag_reference,
        run=_ebag_run,
        # 10M x 256 fp32 table: 2.56e9 elements, past 2**31 (64-bit row offsets)
        gpu_shapes=((10_000_000, 256, 4096, 40),),
        cpu_shapes=((1000, 64, 17, 6), (300, 33, 9, 11), (50, 128, 5, 3)),
        atol=1e-4,
    ),
    Case(
        name="scatter_add_rows_dup_neg_s43c",
        kernels=(scatter_add_rows_,),
        make_inputs=_scatter_inputs,
        reference=lambda t, i, s: scatter_add_rows_reference(t, i, s, PADDING_IDX),
        run=_scatter_run,
        gpu_shapes=((50_000, 1024, 65_536),),
        cpu_shapes=((40, 64, 100), (7, 33, 57), (300, 16, 513)),
        atol=1e-3,
    ),
    Case(
        name="bucket_histogram_atomic_s43c",
        kernels=(bucket_histogram,),
        make_inputs=_hist_inputs,
        reference=bucket_histogram_reference,
        run=with_args("bucket_histogram"),
        gpu_shapes=((1 << 24, 255),),
        cpu_shapes=((1000, 15), (4097, 64), (333, 1)),
        atol=1e-3,
    ),
    Case(
        name="moe_combine_topk_gather_s43c",
        kernels=(moe_combine,),
        make_inputs=_moe_inputs,
        reference=moe_combine_reference,
        run=with_args("moe_combine"),
        gpu_shapes=((8192, 8, 4096),),
        cpu_shapes=((37, 2, 64), (16, 8, 100), (5, 4, 256)),
        atol=2e-2,
    ),
    Case(
        name="paged_kv_decode_attention_s43c",
        kernels=(paged_decode_attention,),
        make_inputs=_paged_inputs,
        reference=lambda *a: paged_decode_attention_reference(*a, SCALE),
        run=with_args("paged_decode_attention", SCALE),
        gpu_shapes=((64, 32, 8, 128, 16, 4096),),
        cpu_shapes=((3, 4, 2, 16, 4, 37), (2, 8, 1, 32, 16, 100), (4, 2, 2, 64, 8, 9)),
        atol=2e-2,
    ),
    Case(
        name="grid_sample_bilinear_border_s43c",
        kernels=(grid_sample_border,),
        make_inputs=_gs_inputs,
        reference=grid_sample_reference,
        run=with_args("grid_sample_border"),
        gpu_shapes=((16, 64, 256, 256, 224, 224),),
        cpu_shapes=((2, 3, 9, 13, 5, 7), (1, 8, 32, 32, 16, 16), (3, 2, 5, 4, 11, 6)),
        atol=1e-5,
    ),
]

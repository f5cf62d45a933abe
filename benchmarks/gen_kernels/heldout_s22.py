"""Held-out kernels written from the docs only, session 22 (see :mod:`.heldout_rows` for why
held-out kernels exist): paged decode attention (a vLLM-style KV cache of pages read through a
block table, GQA with the four query heads of a KV head in one program, an online softmax over the
sequence's pages, a loop bounded by the loaded sequence length), a MoE grouped GEMM (tokens
sorted by expert, a grid over expert, row tile and column tile with an early exit for row tiles
past an expert's rows), a 3x3 same-padding conv2d on NHWC bf16 as an implicit GEMM (nine shifted,
masked gathers of the input, each a K loop over channels), sliding-window causal attention (the
key loop starts at the window's first key), a chunked gated-linear-attention forward (per
position scalar log decay: a masked, decayed ``q k^T`` within a chunk plus a carried ``[Dk, BV]``
state, chunk after chunk), a mean embedding bag (1-D indices with ``[B + 1]`` offsets, a loop
bounded by loaded offsets), bilinear 2x upsampling of NCHW maps (``align_corners=False``, fp32
and bf16) and a w4a16 GEMM at prefill size (int4 weights packed two per byte along K, one bf16
scale per 128-wide K group, symmetric: ``w = (q - 8) * scale``). Each comes with its eager
reference (see :mod:`.case`).
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, MakeInputs, gen, one_kernel_case, randn

GQA_GROUP = 4  # paged_decode_attention: query heads per KV head
WINDOW = 1024  # sliding_window_attention: keys each query sees (itself included)
GLA_CHUNK = 64  # chunked_gla_forward: positions per chunk
W4_GROUP = 128  # w4a16_gemm: K elements per scale


# --------------------------------------------------------------------------- paged decode attention


@tc.kernel(static_shapes=True)
def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
) -> torch.Tensor:
    """One decode step of attention over a paged KV cache. q [B, H, D] bf16 (one new token per
    sequence), k_cache / v_cache [num_pages, page_size, H_kv, D] bf16, block_table int32
    [B, max_pages] (the cache pages of sequence b in order), seq_lens int32 [B] (tokens in the
    cache, >= 1). GQA: query head h reads KV head h // (H / H_kv). One program per (sequence,
    KV head) holding that KV head's query heads; an online softmax (fp32) over the sequence's
    pages, the last one masked past seq_len. Returns bf16 [B, H, D]."""
    b, h, d = q.size()
    _, page_size, h_kv, _ = k_cache.size()
    d = tc.specialize(d)
    group = h // h_kv
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, th in tc.tile([b, h], block_size=[1, group]):
        kvh = th.begin // group
        seqlen = seq_lens[tb.begin]
        qt = q[tb.begin, th, :]
        m_i = tc.full([th], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([th], dtype=torch.float32)
        acc = tc.zeros([th, d], dtype=torch.float32)
        n_pages = (seqlen + page_size - 1) // page_size
        for p in tc.grid(n_pages):
            page = block_table[tb.begin, p]
            kt = k_cache[page, :, kvh, :]
            vt = v_cache[page, :, kvh, :]
            sc = tc.dot(qt, kt.t(), out_dtype=torch.float32) * scale
            pos = p * page_size + tc.arange(page_size)
            sc = torch.where(pos[None, :] < seqlen, sc, float("-inf"))
            m_new = torch.maximum(m_i, torch.amax(sc, dim=-1))
            pr = torch.exp(sc - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(pr, dim=-1)
            acc = tc.dot(pr.to(vt.dtype), vt, acc=acc * alpha[:, None])
            m_i = m_new
        out[tb.begin, th, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


def _paged_kv_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H_kv, max_ctx, D, page_size)``: q for H = 4 * H_kv heads, a cache of
    ``B * max_pages + 3`` pages handed out in random order (block_table int32), and seq_lens
    int32 in [1, max_ctx] (the first sequence the longest)."""
    b, h_kv, max_ctx, d, page_size = shape
    g = gen(seed)
    max_pages = -(-max_ctx // page_size)
    num_pages = b * max_pages + 3
    q = randn((b, GQA_GROUP * h_kv, d), torch.bfloat16, device, g)
    k_cache = randn((num_pages, page_size, h_kv, d), torch.bfloat16, device, g)
    v_cache = randn((num_pages, page_size, h_kv, d), torch.bfloat16, device, g)
    table = torch.randperm(num_pages, generator=g)[: b * max_pages].view(b, max_pages)
    lens = torch.randint(1, max_ctx + 1, (b,), generator=g)
    lens[0] = max_ctx
    return (
        q,
        k_cache,
        v_cache,
        table.to(device=device, dtype=torch.int32),
        lens.to(device=device, dtype=torch.int32),
    )


def paged_decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
) -> torch.Tensor:
    b, h, d = q.shape
    _, page_size, h_kv, _ = k_cache.shape
    out = torch.empty_like(q)
    for i, n in enumerate(seq_lens.tolist()):
        pages = block_table[i, : -(-n // page_size)].long()
        ks = k_cache[pages].flatten(0, 1)[:n].float()  # [n, H_kv, D]
        vs = v_cache[pages].flatten(0, 1)[:n].float()
        ks = ks.repeat_interleave(h // h_kv, dim=1).transpose(0, 1)  # [H, n, D]
        vs = vs.repeat_interleave(h // h_kv, dim=1).transpose(0, 1)
        scores = (q[i].float()[:, None, :] @ ks.transpose(1, 2)) / math.sqrt(d)  # [H, 1, n]
        out[i] = (scores.softmax(dim=-1) @ vs)[:, 0].to(q.dtype)
    return out


# --------------------------------------------------------------------------- MoE grouped GEMM


@tc.kernel(static_shapes=True)
def moe_grouped_gemm(
    x: torch.Tensor, w: torch.Tensor, expert_offsets: torch.Tensor
) -> torch.Tensor:
    """x [T, K] bf16, the routed tokens sorted by expert (expert e owns rows
    expert_offsets[e] to expert_offsets[e + 1], int32 [E + 1]), w [E, K, N] bf16: out[rows of e]
    = x[rows of e] @ w[e], fp32 accumulation, bf16 [T, N]. The grid covers (expert, row tile of
    up to T rows, column tile); a row tile past its expert's rows exits at once."""
    t, k = x.size()
    e, _, n = w.size()
    out = torch.empty([t, n], dtype=x.dtype, device=x.device)
    for te, tm, tn in tc.tile([e, t, n], block_size=[1, None, None]):
        start = expert_offsets[te.begin]
        rows_e = expert_offsets[te.begin + 1] - start
        if tm.begin < rows_e:
            rows = start + tm.index
            live = tm.index < rows_e
            acc = tc.zeros([tm, tn], dtype=torch.float32)
            for tk in tc.tile(k):
                xt = tc.load(x, [rows, tk], extra_mask=live[:, None])
                acc = tc.dot(xt, w[te.begin, tk, tn], acc=acc)
            tc.store(out, [rows, tn], acc.to(out.dtype), extra_mask=live[:, None])
    return out


def _moe_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, K, N, E)``: T routed tokens split among E experts by a random (uneven,
    possibly empty) count each, x bf16, w bf16 scaled by 1 / sqrt(K), offsets int32."""
    t, k, n, e = shape
    g = gen(seed)
    probs = torch.rand(e, generator=g) + 0.1
    expert_of = torch.multinomial(probs, t, replacement=True, generator=g)
    counts = torch.bincount(expert_of, minlength=e)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]).to(torch.int32)
    x = randn((t, k), torch.bfloat16, device, g)
    w = randn((e, k, n), torch.float32, device, g).div_(k**0.5).to(torch.bfloat16)
    return x, w, offsets.to(device)


def moe_grouped_gemm_reference(
    x: torch.Tensor, w: torch.Tensor, expert_offsets: torch.Tensor
) -> torch.Tensor:
    out = torch.empty(x.shape[0], w.shape[2], dtype=x.dtype, device=x.device)
    bounds = expert_offsets.tolist()
    for e, (start, end) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        out[start:end] = (x[start:end].float() @ w[e].float()).to(x.dtype)
    return out


# --------------------------------------------------------------------------- conv2d 3x3 NHWC


@tc.kernel(static_shapes=True)
def conv2d_3x3_nhwc(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x [N, H, W, C] bf16 (channels last), w [3, 3, C, F] bf16: a 3x3 convolution with stride 1
    and zero padding 1, as an implicit GEMM: rows are the N * H * W output pixels, columns the
    F filters, and each of the nine taps adds (shifted input pixels, masked at the borders) @
    w[dy, dx] over a K loop on channels, fp32 accumulation. Returns bf16 [N, H, W, F]."""
    n, h, wd, c = x.size()
    f = w.size(3)
    pixels = n * h * wd
    out = torch.empty([n, h, wd, f], dtype=x.dtype, device=x.device)
    out_rows = out.view(pixels, f)
    for tp, tf in tc.tile([pixels, f]):
        img = tp.index // (h * wd)
        oy = (tp.index // wd) % h
        ox = tp.index % wd
        acc = tc.zeros([tp, tf], dtype=torch.float32)
        for dy in tc.static_range(3):
            for dx in tc.static_range(3):
                iy = oy + (dy - 1)
                ix = ox + (dx - 1)
                inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < wd)
                for tch in tc.tile(c):
                    a = tc.load(x, [img, iy, ix, tch], extra_mask=inside[:, None])
                    acc = tc.dot(a, w[dy, dx, tch, tf], acc=acc)
        out_rows[tp, tf] = acc.to(out_rows.dtype)
    return out


def _conv_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, H, W, C, F)``: NHWC bf16 activations and a [3, 3, C, F] bf16 filter scaled
    by 1 / sqrt(9 C)."""
    n, h, w, c, f = shape
    g = gen(seed)
    x = randn((n, h, w, c), torch.bfloat16, device, g)
    wt = randn((3, 3, c, f), torch.float32, device, g).div_((9 * c) ** 0.5).to(torch.bfloat16)
    return x, wt


def conv2d_3x3_nhwc_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.conv2d(
        x.float().permute(0, 3, 1, 2), w.float().permute(3, 2, 0, 1), padding=1
    )
    return y.permute(0, 2, 3, 1).to(x.dtype)


# --------------------------------------------------------------------------- sliding-window attention


@tc.kernel(static_shapes=True)
def sliding_window_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int
) -> torch.Tensor:
    """q, k, v [B, H, S, D] bf16: causal attention where query i sees keys i - window + 1 .. i
    (Mistral's sliding window). A query tile's key loop starts at its first row's first key and
    ends at its last row, so it is at most window + tile rows long; an online softmax (fp32)
    whose max is kept finite for rows that see no key of a block. Returns bf16 [B, H, S, D]."""
    b, h, s, d = q.size()
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, th, tm in tc.tile([b, h, s], block_size=[1, 1, None]):
        qt = q[tb, th, tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        acc = tc.zeros([tm, d], dtype=torch.float32)
        lo = max(tm.begin - window + 1, 0)
        for tn in tc.tile(lo, tm.end):
            sc = tc.dot(qt, k[tb, th, tn, :].t(), out_dtype=torch.float32) * scale
            behind = tm.index[:, None] - tn.index[None, :]
            sc = torch.where((behind >= 0) & (behind < window), sc, float("-inf"))
            m_new = torch.maximum(m_i, torch.amax(sc, dim=-1))
            m_use = torch.where(m_new == float("-inf"), 0.0, m_new)
            p = torch.exp(sc - m_use[:, None])
            alpha = torch.exp(m_i - m_use)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            acc = tc.dot(p.to(v.dtype), v[tb, th, tn, :], acc=acc * alpha[:, None])
            m_i = m_new
        out[tb, th, tm, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


def _window(seq: int) -> int:
    """The window at sequence length ``seq``: ``WINDOW`` (1024 at 8192), a third of the tiny CPU
    sequences so that their windows slide too."""
    return min(WINDOW, max(seq // 3, 1))


def _swa_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S, D)``: q, k, v bf16."""
    g = gen(seed)
    return tuple(randn(shape, torch.bfloat16, device, g) for _ in range(3))


def sliding_window_attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None
) -> torch.Tensor:
    s = q.shape[2]
    win = _window(s) if window is None else window
    i = torch.arange(s, device=q.device)
    behind = i[:, None] - i[None, :]
    allowed = (behind >= 0) & (behind < win)
    o = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=allowed
    )
    return o.to(q.dtype)


# --------------------------------------------------------------------------- chunked gated linear attention


@tc.kernel(static_shapes=True)
def chunked_gla_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor
) -> torch.Tensor:
    """Gated linear attention with a scalar decay per position, chunked. q, k [B, H, T, Dk] bf16,
    v [B, H, T, Dv] bf16, g [B, H, T] fp32 log decay (<= 0). The recurrence S_t = exp(g_t)
    S_{t-1} + k_t^T v_t, o_t = (q_t / sqrt(Dk)) S_t, run 64 positions at a time: with G the
    cumulative g within the chunk, o = (q * exp(G)) S + (q k^T * exp(G_i - G_j), j <= i) v, and
    S <- exp(G_last) S + (k * exp(G_last - G))^T v. One program per (batch, head, Dv tile), the
    chunks in order, the state fp32. Returns bf16 [B, H, T, Dv]."""
    b, h, t, dk = q.size()
    dv = v.size(3)
    dk = tc.specialize(dk)
    scale = 1.0 / math.sqrt(dk)
    out = torch.empty_like(v)
    for tb, th, tv in tc.tile([b, h, dv], block_size=[1, 1, None]):
        state = tc.zeros([dk, tv], dtype=torch.float32)
        for tt in tc.tile(t, block_size=GLA_CHUNK):
            qc = q[tb, th, tt, :].to(torch.float32) * scale
            kc = k[tb, th, tt, :].to(torch.float32)
            vc = v[tb, th, tt, tv].to(torch.float32)
            gl = g[tb, th, tt]
            gc = torch.cumsum(gl, dim=0)
            g_last = torch.sum(gl)
            inter = tc.dot(qc * torch.exp(gc)[:, None], state)
            causal = tt.index[:, None] >= tt.index[None, :]
            decay = torch.exp(torch.where(causal, gc[:, None] - gc[None, :], float("-inf")))
            att = tc.dot(qc, kc.t()) * decay
            intra = tc.dot(att, vc)
            out[tb, th, tt, tv] = (inter + intra).to(out.dtype)
            kd = kc * torch.exp(g_last - gc)[:, None]
            state = state * torch.exp(g_last) + tc.dot(kd.t(), vc)
    return out


def _gla_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, T, D)``: q, k, v bf16 (Dk = Dv = D) and GLA's log decay
    logsigmoid(x) / 16 (about -0.05 per position), fp32."""
    b, h, t, d = shape
    gen_ = gen(seed)
    q, k, v = (randn((b, h, t, d), torch.bfloat16, device, gen_) for _ in range(3))
    gate = torch.nn.functional.logsigmoid(randn((b, h, t), torch.float32, device, gen_)) / 16
    return q, k, v, gate


def chunked_gla_forward_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor
) -> torch.Tensor:
    """The parallel (quadratic) form: o = (q k^T / sqrt(Dk) * exp(G_i - G_j), j <= i) v with G
    the cumulative log decay over the whole sequence."""
    t = q.shape[2]
    cum = g.float().cumsum(-1)
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    gap = torch.where(causal, cum[..., :, None] - cum[..., None, :], float("-inf"))
    att = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1]) * gap.exp()
    return (att @ v.float()).to(v.dtype)


# --------------------------------------------------------------------------- embedding bag (mean)


@tc.kernel(static_shapes=True)
def embedding_bag_mean(
    indices: torch.Tensor, offsets: torch.Tensor, table: torch.Tensor
) -> torch.Tensor:
    """torch.nn.functional.embedding_bag(indices, table, offsets, mode="mean",
    include_last_offset=True): indices int64 [nnz], offsets int64 [B + 1] (bag b is indices
    offsets[b] to offsets[b + 1]), table [V, D] bf16; each bag's rows averaged in fp32 (an empty
    bag gives zeros). One program per (bag, D tile), a loop over tiles of the bag's indices.
    Returns bf16 [B, D]."""
    nb = offsets.size(0) - 1
    d = table.size(1)
    out = torch.empty([nb, d], dtype=table.dtype, device=table.device)
    for tb, td in tc.tile([nb, d], block_size=[1, None]):
        start = offsets[tb.begin]
        end = offsets[tb.begin + 1]
        acc = tc.zeros([td], dtype=torch.float32)
        for tj in tc.tile(start, end):
            rows = table[indices[tj], td].to(torch.float32)
            acc = acc + torch.sum(rows, dim=0)
        count = max(end - start, 1)
        out[tb.begin, td] = (acc / count).to(out.dtype)
    return out


def _bag_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V, D, max_bag)``: bags of 0 to ``max_bag`` random ids in [0, V) (the first
    one the largest, one empty where B > 2), offsets int64 [B + 1] and a bf16 table."""
    b, v, d, max_bag = shape
    g = gen(seed)
    sizes = torch.randint(0, max_bag + 1, (b,), generator=g)
    sizes[0] = max_bag
    if b > 2:
        sizes[2] = 0
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    indices = torch.randint(0, v, (int(offsets[-1]),), generator=g)
    table = randn((v, d), torch.bfloat16, device, g)
    return indices.to(device), offsets.to(device), table


def embedding_bag_mean_reference(
    indices: torch.Tensor, offsets: torch.Tensor, table: torch.Tensor
) -> torch.Tensor:
    out = torch.nn.functional.embedding_bag(
        indices, table.float(), offsets, mode="mean", include_last_offset=True
    )
    return out.to(table.dtype)


# --------------------------------------------------------------------------- bilinear 2x upsample


@tc.kernel(static_shapes=True)
def bilinear_upsample2x(x: torch.Tensor) -> torch.Tensor:
    """x [N, C, H, W] (fp32 or bf16) -> [N, C, 2H, 2W]: torch.nn.functional.interpolate(x,
    scale_factor=2, mode="bilinear", align_corners=False). Output pixel (oy, ox) reads source
    (oy + 0.5) / 2 - 0.5 (clamped at 0) and blends its four neighbours (the far one clamped at
    the edge) in fp32. One program per (map, row tile, column tile)."""
    n, c, h, w = x.size()
    oh, ow = 2 * h, 2 * w
    out = torch.empty([n, c, oh, ow], dtype=x.dtype, device=x.device)
    maps = x.view(n * c, h, w)
    out_maps = out.view(n * c, oh, ow)
    for tp, ty, tx in tc.tile([n * c, oh, ow], block_size=[1, None, None]):
        sy = torch.clamp((ty.index.to(torch.float32) + 0.5) * 0.5 - 0.5, min=0.0)
        sx = torch.clamp((tx.index.to(torch.float32) + 0.5) * 0.5 - 0.5, min=0.0)
        y0 = sy.to(torch.int32)
        x0 = sx.to(torch.int32)
        y1 = torch.clamp(y0 + 1, max=h - 1)
        x1 = torch.clamp(x0 + 1, max=w - 1)
        ly = (sy - y0.to(torch.float32))[:, None]
        lx = (sx - x0.to(torch.float32))[None, :]
        p = tp.begin
        v00 = maps[p, y0[:, None], x0[None, :]].to(torch.float32)
        v01 = maps[p, y0[:, None], x1[None, :]].to(torch.float32)
        v10 = maps[p, y1[:, None], x0[None, :]].to(torch.float32)
        v11 = maps[p, y1[:, None], x1[None, :]].to(torch.float32)
        top = v00 * (1.0 - lx) + v01 * lx
        bottom = v10 * (1.0 - lx) + v11 * lx
        out_maps[p, ty, tx] = (top * (1.0 - ly) + bottom * ly).to(out_maps.dtype)
    return out


def _image_inputs(dtype: torch.dtype) -> MakeInputs:
    def make(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
        """``shape = (N, C, H, W)``: one NCHW map of ``dtype``."""
        return (randn(shape, dtype, device, gen(seed)),)

    return make


def bilinear_upsample2x_reference(x: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.interpolate(
        x.float(), scale_factor=2, mode="bilinear", align_corners=False
    )
    return y.to(x.dtype)


# --------------------------------------------------------------------------- w4a16 GEMM


@tc.kernel(static_shapes=True)
def w4a16_gemm(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """x [M, K] bf16 times an int4 weight [K, N]: w_packed uint8 [K / 2, N] holds rows 2i (low
    nibble) and 2i + 1 (high nibble), each an unsigned 0..15 with a symmetric offset of 8;
    scales bf16 [K / 128, N] (one per 128-wide K group and column): w = ((q - 8) * scale) in
    bf16, out = x @ w with fp32 accumulation, bf16 [M, N]. The K loop walks packed rows: x's
    even and odd columns (x viewed [M, K / 2, 2]) meet the low and high nibbles."""
    m, k = x.size()
    n = w_packed.size(1)
    x_pairs = x.view(m, k // 2, 2)
    out = torch.empty([m, n], dtype=torch.bfloat16, device=x.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k // 2):
            x_even = x_pairs[tm, tk, 0]
            x_odd = x_pairs[tm, tk, 1]
            packed = w_packed[tk, tn]
            s = scales[(2 * tk.index) // W4_GROUP, tn].to(torch.float32)
            w_lo = (((packed & 15).to(torch.int32) - 8).to(torch.float32) * s).to(torch.bfloat16)
            w_hi = (((packed >> 4).to(torch.int32) - 8).to(torch.float32) * s).to(torch.bfloat16)
            acc = tc.dot(x_even, w_lo, acc=acc)
            acc = tc.dot(x_odd, w_hi, acc=acc)
        out[tm, tn] = acc.to(out.dtype)
    return out


def _w4_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K, N)``: bf16 activations and a random weight (scaled by 1 / sqrt(K))
    quantized to symmetric int4 per 128-wide K group (scale = absmax / 7, rounded to bf16 first),
    packed two per uint8 along K."""
    m, k, n = shape
    g = gen(seed)
    x = randn((m, k), torch.bfloat16, device, g)
    if device == "meta":  # shapes only: nothing to quantize
        packed = torch.empty((k // 2, n), dtype=torch.uint8, device=device)
        return x, packed, torch.empty((k // W4_GROUP, n), dtype=torch.bfloat16, device=device)
    w = torch.randn((k, n), generator=g) / k**0.5
    groups = w.view(k // W4_GROUP, W4_GROUP, n)
    scale = (groups.abs().amax(dim=1) / 7).clamp(min=1e-8).to(torch.bfloat16)
    q = (groups / scale.float()[:, None, :]).round().clamp(-8, 7).to(torch.int32) + 8
    q = q.view(k, n)
    packed = (q[0::2] | (q[1::2] << 4)).to(torch.uint8)
    return x, packed.to(device), scale.to(device)


def w4a16_gemm_reference(
    x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor
) -> torch.Tensor:
    half, n = w_packed.shape
    q = torch.stack([w_packed & 15, w_packed >> 4], dim=1).view(2 * half, n).to(torch.int32)
    s = scales.float().repeat_interleave(W4_GROUP, dim=0)
    w = ((q - 8).float() * s).to(torch.bfloat16)
    return (x.float() @ w.float()).to(torch.bfloat16)


CASES = [
    one_kernel_case(
        "paged_decode_attention_gqa",
        paged_decode_attention,
        _paged_kv_inputs,
        paged_decode_attention_reference,
        ((64, 8, 4096, 128, 16),),
        ((3, 2, 77, 32, 16), (2, 1, 37, 16, 16)),
        2e-2,
    ),
    one_kernel_case(
        "moe_grouped_gemm_sorted",
        moe_grouped_gemm,
        _moe_inputs,
        moe_grouped_gemm_reference,
        ((8192, 4096, 14336, 8), (16384, 7168, 2048, 32)),
        ((77, 40, 50, 3), (50, 33, 21, 5)),
        3e-2,
    ),
    one_kernel_case(
        "conv2d_3x3_nhwc_implicit_gemm",
        conv2d_3x3_nhwc,
        _conv_inputs,
        conv2d_3x3_nhwc_reference,
        ((32, 56, 56, 256, 256), (8, 128, 128, 128, 128)),
        ((2, 5, 7, 19, 21), (1, 9, 6, 33, 17)),
        3e-2,
    ),
    Case(
        name="sliding_window_attention_causal",
        kernels=(sliding_window_attention,),
        make_inputs=_swa_inputs,
        reference=sliding_window_attention_reference,
        run=lambda k, inp: k["sliding_window_attention"](*inp, _window(inp[0].shape[2])),
        gpu_shapes=((4, 32, 8192, 128),),
        cpu_shapes=((1, 2, 77, 32), (2, 1, 50, 16)),
        atol=2e-2,
    ),
    one_kernel_case(
        "chunked_gla_forward",
        chunked_gla_forward,
        _gla_inputs,
        chunked_gla_forward_reference,
        ((8, 16, 4096, 128),),
        ((1, 2, 150, 32), (2, 1, 50, 24)),
        5e-2,
    ),
    one_kernel_case(
        "embedding_bag_mean_offsets",
        embedding_bag_mean,
        _bag_inputs,
        embedding_bag_mean_reference,
        ((16384, 1_000_000, 128, 64),),
        ((13, 100, 37, 9), (7, 50, 20, 5)),
        2e-2,
    ),
    one_kernel_case(
        "bilinear_upsample2x_fp32",
        bilinear_upsample2x,
        _image_inputs(torch.float32),
        bilinear_upsample2x_reference,
        ((16, 64, 256, 256),),
        ((2, 3, 7, 9), (1, 2, 13, 5)),
        1e-5,
    ),
    one_kernel_case(
        "bilinear_upsample2x_bf16",
        bilinear_upsample2x,
        _image_inputs(torch.bfloat16),
        bilinear_upsample2x_reference,
        ((32, 128, 128, 128),),
        ((2, 3, 7, 9), (1, 2, 13, 5)),
        # bf16 out: one ulp of values up to ~4
        2e-2,
    ),
    one_kernel_case(
        "w4a16_gemm_prefill",
        w4a16_gemm,
        _w4_inputs,
        w4a16_gemm_reference,
        ((4096, 4096, 14336), (4096, 8192, 8192)),
        ((37, 256, 50), (5, 384, 33)),
        3e-2,
    ),
]

"""Held-out kernels written from the docs only, session 21 (see :mod:`.heldout_rows` for why
held-out kernels exist): a DeepSeek-style blockwise fp8 GEMM (fp8 operands with one fp32 scale
per row and 128-wide K block of A and per 128 x 128 block of B, applied to each K block's partial
product: fixed 128 tiles), packed variable-length causal attention (``cu_seqlens``: a grid over
sequence, head and query tile up to the longest sequence, an early exit past a sequence's end,
gathered rows and masked stores), Gemma-2 style attention with logit soft-capping
(``cap * tanh(s / cap)`` inside the online softmax), a row-wise InfoNCE loss (an online
logsumexp over column tiles of a dot, minus the positive pair's logit), a squared euclidean
distance matrix (a dot and the row norms in one K loop), a CSR sparse matrix times a dense vector
(one program per row, a loop bounded by loaded ``indptr`` values gathering ``x``), a weighted
histogram by atomic adds, and the per-sequence masked mean of the PPO clipped policy loss. Each
comes with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
QBLOCK = 128  # blockwise_fp8_gemm: the quantization block along K (and N for B)
SOFTCAP = 50.0
TEMPERATURE = 0.07
MAX_NNZ_PER_ROW = 64
PPO_EPS = 0.2


# --------------------------------------------------------------------------- blockwise fp8 GEMM


@tc.kernel(static_shapes=True)
def blockwise_fp8_gemm(
    a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor
) -> torch.Tensor:
    """a [M, K] float8_e4m3fn with a_scale [M, K / 128] fp32 (one scale per row and 128-wide K
    block), b [K, N] float8_e4m3fn with b_scale [K / 128, N / 128] fp32 (one per 128 x 128
    block): out = sum over K blocks kb of (a_blk @ b_blk) * a_scale[:, kb, None] *
    b_scale[kb, nb], accumulated in fp32, bf16 [M, N]. The K loop and the N tile are fixed at
    128 so each partial product has one B scale."""
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.bfloat16, device=a.device)
    for tm, tn in tc.tile([m, n], block_size=[None, 128]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k, block_size=128):
            part = tc.dot(a[tm, tk], b[tk, tn])
            acc = acc + part * a_scale[tm, tk.id][:, None] * b_scale[tk.id, tn.id]
        out[tm, tn] = acc.to(torch.bfloat16)
    return out


def _quantize_blocks(x: torch.Tensor, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 values of fp32 ``x`` [R, C] and one fp32 scale (absmax / 448) per ``rows x cols``
    block, [ceil(R / rows), ceil(C / cols)]; partial blocks are padded with zeros."""
    r, c = x.shape
    rb, cb = -(-r // rows), -(-c // cols)
    padded = torch.nn.functional.pad(x, (0, cb * cols - c, 0, rb * rows - r))
    blocks = padded.view(rb, rows, cb, cols)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-10) / FP8_MAX
    q = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn)
    return q.view(rb * rows, cb * cols)[:r, :c], scale


def _blockwise_fp8_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K, N)``: activations quantized per row and 128-wide K block, a weight
    (scaled by 1 / sqrt(K)) quantized per 128 x 128 block, as DeepSeek-V3 stores them."""
    m, k, n = shape
    g = gen(seed)
    a, a_scale = _quantize_blocks(randn((m, k), torch.float32, device, g), 1, QBLOCK)
    w = randn((k, n), torch.float32, device, g) / k**0.5
    b, b_scale = _quantize_blocks(w, QBLOCK, QBLOCK)
    return a, a_scale, b, b_scale


def blockwise_fp8_gemm_reference(
    a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor
) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    a_deq = a.float() * a_scale.repeat_interleave(QBLOCK, dim=1)[:, :k]
    b_full = b_scale.repeat_interleave(QBLOCK, dim=0).repeat_interleave(QBLOCK, dim=1)
    b_deq = b.float() * b_full[:k, :n]
    return (a_deq @ b_deq).to(torch.bfloat16)


# --------------------------------------------------------------------------- varlen causal attention


@tc.kernel(static_shapes=True)
def varlen_causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
) -> torch.Tensor:
    """q, k, v [T, H, D] bf16 holding B packed sequences (sequence i is rows cu_seqlens[i] to
    cu_seqlens[i + 1], cu_seqlens int32 [B + 1]): causal softmax(q k^T / sqrt(D)) v within each
    sequence (flash-attention's varlen prefill). One program per (sequence, head, query tile of
    the longest sequence); tiles past a sequence's end exit at once; the keys up to the tile's
    causal limit are walked with an online softmax (fp32). Returns bf16 [T, H, D]."""
    t, h, d = q.size()
    d = tc.specialize(d)
    b = cu_seqlens.size(0) - 1
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, th, tm in tc.tile([b, h, max_seqlen], block_size=[1, 1, None]):
        start = cu_seqlens[tb.begin]
        seqlen = cu_seqlens[tb.begin + 1] - start
        hi = th.begin
        if tm.begin < seqlen:
            rows = start + tm.index
            live = tm.index < seqlen
            qt = tc.load(q, [rows, hi, slice(None)], extra_mask=live[:, None])
            m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
            l_i = tc.zeros([tm], dtype=torch.float32)
            acc = tc.zeros([tm, d], dtype=torch.float32)
            kv_end = min(tm.end, seqlen)
            for tn in tc.tile(kv_end):
                cols = start + tn.index
                kt = k[cols, hi, :]
                sc = tc.dot(qt, kt.t(), out_dtype=torch.float32) * scale
                sc = torch.where(tm.index[:, None] >= tn.index[None, :], sc, float("-inf"))
                m_new = torch.maximum(m_i, torch.amax(sc, dim=-1))
                p = torch.exp(sc - m_new[:, None])
                alpha = torch.exp(m_i - m_new)
                l_i = l_i * alpha + torch.sum(p, dim=-1)
                acc = tc.dot(p.to(v.dtype), v[cols, hi, :], acc=acc * alpha[:, None])
                m_i = m_new
            tc.store(
                out,
                [rows, hi, slice(None)],
                (acc / l_i[:, None]).to(out.dtype),
                extra_mask=live[:, None],
            )
    return out


def _varlen_qkv_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, H, D)``: B packed sequences of uneven random lengths summing to T (the
    first one the longest-ish), q, k, v bf16 and cu_seqlens int32."""
    b, t, h, d = shape
    g = gen(seed)
    cuts = torch.randperm(t - 1, generator=g)[: b - 1].sort().values + 1
    cu = torch.cat([torch.tensor([0]), cuts, torch.tensor([t])]).to(torch.int32)
    q, k, v = (randn((t, h, d), torch.bfloat16, device, g) for _ in range(3))
    return q, k, v, cu.to(device)


def _max_seqlen(cu_seqlens: torch.Tensor, total: int) -> int:
    """The longest sequence (read on the host, as a user's launcher does); on ``meta`` inputs
    (default sweeps, nothing to read) the bound ``total`` tokens."""
    if cu_seqlens.device.type == "meta":
        return total
    return int((cu_seqlens[1:] - cu_seqlens[:-1]).max())


def varlen_causal_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int | None = None,
) -> torch.Tensor:
    out = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        qs, ks, vs = (x[start:end].float().transpose(0, 1) for x in (q, k, v))  # [H, L, D]
        o = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
        out[start:end] = o.transpose(0, 1).to(q.dtype)
    return out


# --------------------------------------------------------------------------- soft-capped attention


@tc.kernel(static_shapes=True)
def softcap_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softcap: float
) -> torch.Tensor:
    """q, k, v [B, H, S, D] bf16: Gemma-2's attention with logit soft-capping, non-causal:
    scores = softcap * tanh(q k^T / sqrt(D) / softcap), softmax over the keys, times v, with
    an online softmax (fp32 running max, sum and accumulator). Returns bf16 [B, H, S, D]."""
    b, h, s, d = q.size()
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, th, tm in tc.tile([b, h, s], block_size=[1, 1, None]):
        qt = q[tb, th, tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        acc = tc.zeros([tm, d], dtype=torch.float32)
        for tn in tc.tile(s):
            sc = tc.dot(qt, k[tb, th, tn, :].t(), out_dtype=torch.float32) * scale
            sc = softcap * torch.tanh(sc / softcap)
            m_new = torch.maximum(m_i, torch.amax(sc, dim=-1))
            p = torch.exp(sc - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            acc = tc.dot(p.to(v.dtype), v[tb, th, tn, :], acc=acc * alpha[:, None])
            m_i = m_new
        out[tb, th, tm, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


def _bhsd_qkv(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S, D)``: q, k, v bf16; q scaled up so that some logits reach the cap's
    bend (|s| of tens)."""
    g = gen(seed)
    q = randn(shape, torch.bfloat16, device, g) * 8
    return q, randn(shape, torch.bfloat16, device, g), randn(shape, torch.bfloat16, device, g)


def softcap_attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softcap: float = SOFTCAP
) -> torch.Tensor:
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = softcap * torch.tanh(scores / softcap)
    return (scores.softmax(dim=-1) @ v.float()).to(q.dtype)


# --------------------------------------------------------------------------- InfoNCE loss


@tc.kernel(static_shapes=True)
def infonce_loss_rows(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """a, b [N, D] bf16 (L2-normalized rows; pair i is the positive of row i): per-row
    InfoNCE / CLIP loss, logits = a @ b^T / temperature, loss[i] = logsumexp(logits[i, :]) -
    logits[i, i]. One program per row tile, an online logsumexp over column tiles of b (fp32).
    Returns fp32 [N]."""
    n, d = a.size()
    out = torch.empty([n], dtype=torch.float32, device=a.device)
    for tm in tc.tile(n):
        at = a[tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            logits = tc.dot(at, b[tn, :].t(), out_dtype=torch.float32) / temperature
            m_new = torch.maximum(m_i, torch.amax(logits, dim=-1))
            l_i = l_i * torch.exp(m_i - m_new) + torch.sum(
                torch.exp(logits - m_new[:, None]), dim=-1
            )
            m_i = m_new
        pos = torch.sum(at.to(torch.float32) * b[tm, :].to(torch.float32), dim=-1) / temperature
        out[tm] = m_i + torch.log(l_i) - pos
    return out


def _embedding_pairs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, D)``: two batches of L2-normalized bf16 embeddings, b a noisy copy of a
    (cosine about 0.3 with its positive, about 0 with the others: losses well above 0)."""
    g = gen(seed)
    a = randn(shape, torch.float32, device, g)
    b = a + 3 * randn(shape, torch.float32, device, g)
    a, b = (torch.nn.functional.normalize(x, dim=-1).to(torch.bfloat16) for x in (a, b))
    return a, b


def infonce_loss_rows_reference(
    a: torch.Tensor, b: torch.Tensor, temperature: float = TEMPERATURE
) -> torch.Tensor:
    logits = a.float() @ b.float().t() / temperature
    return torch.logsumexp(logits, dim=-1) - logits.diagonal()


# --------------------------------------------------------------------------- pairwise distances


@tc.kernel(static_shapes=True)
def pairwise_sq_dist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [M, D], b [N, D] fp32: squared euclidean distances out[i, j] = ||a_i||^2 + ||b_j||^2 -
    2 a_i . b_j, clamped at 0 (fp32 [M, N]); the dot and both row norms accumulate in one K
    loop."""
    m, d = a.size()
    n = b.size(0)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        a_sq = tc.zeros([tm], dtype=torch.float32)
        b_sq = tc.zeros([tn], dtype=torch.float32)
        for tk in tc.tile(d):
            at = a[tm, tk]
            bt = b[tn, tk]
            acc = tc.dot(at, bt.t(), acc=acc)
            a_sq = a_sq + torch.sum(at * at, dim=-1)
            b_sq = b_sq + torch.sum(bt * bt, dim=-1)
        dist = a_sq[:, None] + b_sq[None, :] - 2.0 * acc
        out[tm, tn] = torch.clamp(dist, min=0.0)
    return out


def _fp32_points(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N, D)``: two fp32 point sets."""
    m, n, d = shape
    g = gen(seed)
    return randn((m, d), torch.float32, device, g), randn((n, d), torch.float32, device, g)


def pairwise_sq_dist_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a_sq = a.pow(2).sum(-1)
    b_sq = b.pow(2).sum(-1)
    return (a_sq[:, None] + b_sq[None, :] - 2.0 * (a @ b.t())).clamp(min=0.0)


# --------------------------------------------------------------------------- CSR SpMV


@tc.kernel(static_shapes=True)
def csr_spmv(
    indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, x: torch.Tensor
) -> torch.Tensor:
    """A sparse CSR matrix [R, C] (indptr int32 [R + 1], indices int32 [nnz], values fp32
    [nnz]) times a dense x fp32 [C]: y[r] = sum of values[j] * x[indices[j]] over the row's
    nonzeros j in [indptr[r], indptr[r + 1]). One program per row, a loop over tiles of its
    nonzeros gathering x. Returns fp32 [R]."""
    r = indptr.size(0) - 1
    y = torch.empty([r], dtype=torch.float32, device=x.device)
    for row in tc.grid(r):
        start = indptr[row]
        end = indptr[row + 1]
        acc = tc.zeros([], dtype=torch.float32)
        for tj in tc.tile(start, end):
            cols = indices[tj]
            acc = acc + torch.sum(values[tj] * x[cols])
        y[row] = acc
    return y


def _csr_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (R, C)``: a random CSR matrix with 1 to ``MAX_NNZ_PER_ROW`` nonzeros per row at
    random columns (int32 indices), fp32 values, and a dense fp32 vector."""
    r, c = shape
    g = gen(seed)
    counts = torch.randint(1, MAX_NNZ_PER_ROW + 1, (r,), generator=g)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]).to(torch.int32)
    nnz = int(indptr[-1])
    indices = torch.randint(0, c, (nnz,), generator=g, dtype=torch.int32)
    values = randn((nnz,), torch.float32, device, g)
    x = randn((c,), torch.float32, device, g)
    return indptr.to(device), indices.to(device), values, x


def csr_spmv_reference(
    indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, x: torch.Tensor
) -> torch.Tensor:
    r = indptr.numel() - 1
    rows = torch.repeat_interleave(
        torch.arange(r, device=x.device), (indptr[1:] - indptr[:-1]).long()
    )
    return torch.zeros(r, device=x.device).index_add_(0, rows, values * x[indices.long()])


# --------------------------------------------------------------------------- weighted histogram


@tc.kernel(static_shapes=True)
def weighted_histogram(ids: torch.Tensor, weights: torch.Tensor, num_bins: int) -> torch.Tensor:
    """ids int64 [N] in [0, num_bins), weights fp32 [N]: torch.bincount(ids, weights,
    minlength=num_bins), each tile adding its weights into their bins by atomic adds. Returns
    fp32 [num_bins]."""
    n = ids.size(0)
    out = torch.zeros([num_bins], dtype=torch.float32, device=weights.device)
    for tn in tc.tile(n):
        tc.atomic_add(out, [ids[tn]], weights[tn])
    return out


def _num_bins(n: int) -> int:
    """The histogram's bin count for ``n`` samples: sqrt(n) (4096 bins for 2**24 samples)."""
    return math.isqrt(n)


def _ids_weights(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: random bin ids in [0, sqrt(N)) (int64) and fp32 weights."""
    (n,) = shape
    bins = _num_bins(n)
    g = gen(seed)
    ids = torch.randint(0, bins, (n,), generator=g)
    ids[0] = bins - 1
    return ids.to(device), randn((n,), torch.float32, device, g)


def weighted_histogram_reference(
    ids: torch.Tensor, weights: torch.Tensor, num_bins: int | None = None
) -> torch.Tensor:
    bins = _num_bins(ids.numel()) if num_bins is None else num_bins
    return torch.bincount(ids, weights, minlength=bins)


# --------------------------------------------------------------------------- PPO clipped loss


@tc.kernel(static_shapes=True)
def ppo_clipped_loss(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps: float = PPO_EPS,
) -> torch.Tensor:
    """logp_new, logp_old, advantages fp32 [B, T], mask bool [B, T] (the response tokens): the
    PPO / GRPO clipped surrogate per token, ratio = exp(new - old), loss = -min(ratio * adv,
    clamp(ratio, 1 - eps, 1 + eps) * adv), averaged over each sequence's masked tokens
    (sum(loss * mask) / max(sum(mask), 1)). Returns fp32 [B]."""
    b, t = logp_new.size()
    out = torch.empty([b], dtype=torch.float32, device=logp_new.device)
    for tb in tc.tile(b):
        ratio = torch.exp(logp_new[tb, :] - logp_old[tb, :])
        adv = advantages[tb, :]
        loss = -torch.minimum(ratio * adv, torch.clamp(ratio, 1.0 - eps, 1.0 + eps) * adv)
        m = mask[tb, :].to(torch.float32)
        count = torch.clamp(torch.sum(m, dim=-1), min=1.0)
        out[tb] = torch.sum(loss * m, dim=-1) / count
    return out


def _ppo_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T)``: old log-probs (negative), new ones a small step away (so some ratios
    leave [1 - eps, 1 + eps]), per-token advantages, and a response mask of a random length
    (at least one token) per sequence."""
    b, t = shape
    g = gen(seed)
    logp_old = -randn(shape, torch.float32, device, g).abs() * 2
    logp_new = logp_old + 0.3 * randn(shape, torch.float32, device, g)
    adv = randn(shape, torch.float32, device, g)
    lengths = torch.randint(1, t + 1, (b, 1), generator=g)
    mask = torch.arange(t)[None, :] < lengths
    return logp_new, logp_old, adv, mask.to(device)


def ppo_clipped_loss_reference(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps: float = PPO_EPS,
) -> torch.Tensor:
    ratio = torch.exp(logp_new - logp_old)
    loss = -torch.minimum(ratio * advantages, ratio.clamp(1 - eps, 1 + eps) * advantages)
    m = mask.float()
    return (loss * m).sum(-1) / m.sum(-1).clamp(min=1.0)


CASES = [
    one_kernel_case(
        "blockwise_fp8_gemm",
        blockwise_fp8_gemm,
        _blockwise_fp8_inputs,
        blockwise_fp8_gemm_reference,
        ((4096, 4096, 4096), (2048, 7168, 4096)),
        ((37, 300, 200), (5, 130, 77)),
        # bf16 out: one bf16 ulp of values up to ~4 apart where fp32 sums round differently
        3e-2,
    ),
    Case(
        name="varlen_causal_attention",
        kernels=(varlen_causal_attention,),
        make_inputs=_varlen_qkv_inputs,
        reference=varlen_causal_attention_reference,
        run=lambda k, inp: k["varlen_causal_attention"](*inp, _max_seqlen(inp[3], inp[0].shape[0])),
        gpu_shapes=((16, 32768, 16, 128),),
        cpu_shapes=((3, 100, 2, 32), (2, 37, 3, 16)),
        atol=2e-2,
    ),
    Case(
        name="softcap_attention",
        kernels=(softcap_attention,),
        make_inputs=_bhsd_qkv,
        reference=softcap_attention_reference,
        run=lambda k, inp: k["softcap_attention"](*inp, SOFTCAP),
        gpu_shapes=((4, 16, 2048, 128),),
        cpu_shapes=((1, 2, 37, 32), (2, 1, 50, 16)),
        atol=2e-2,
    ),
    Case(
        name="infonce_loss_rows",
        kernels=(infonce_loss_rows,),
        make_inputs=_embedding_pairs,
        reference=infonce_loss_rows_reference,
        run=lambda k, inp: k["infonce_loss_rows"](*inp, TEMPERATURE),
        gpu_shapes=((16384, 256),),
        cpu_shapes=((37, 100), (75, 33)),
        atol=1e-3,
    ),
    one_kernel_case(
        "pairwise_sq_dist",
        pairwise_sq_dist,
        _fp32_points,
        pairwise_sq_dist_reference,
        ((8192, 8192, 128),),
        ((37, 50, 100), (20, 33, 17)),
        1e-3,
    ),
    one_kernel_case(
        "csr_spmv",
        csr_spmv,
        _csr_inputs,
        csr_spmv_reference,
        ((1_000_000, 1_000_000),),
        ((37, 100), (13, 333)),
        1e-4,
    ),
    Case(
        name="weighted_histogram",
        kernels=(weighted_histogram,),
        make_inputs=_ids_weights,
        reference=weighted_histogram_reference,
        run=lambda k, inp: k["weighted_histogram"](*inp, _num_bins(inp[0].numel())),
        gpu_shapes=((1 << 24,),),
        cpu_shapes=((1000,), (333,)),
        # fp32 atomic adds in another order: a few ulps of bin sums of tens
        atol=1e-4,
    ),
    one_kernel_case(
        "ppo_clipped_loss",
        ppo_clipped_loss,
        _ppo_inputs,
        ppo_clipped_loss_reference,
        ((4096, 8192),),
        ((37, 100), (5, 333)),
        1e-5,
    ),
]

"""Held-out kernels written from the docs only, session 19, second set (see :mod:`.heldout_rows`
for why held-out kernels exist): single-token decode attention over a paged KV cache (vLLM's
layout: a block table maps each sequence's logical pages to physical cache blocks; per-sequence
lengths bound the key loop, and keys are gathered through the loaded page numbers; grouped query
heads), an RMSNorm fused with per-token dynamic fp8 (e4m3) quantization, a segment sum over sorted
segment ids by atomic adds (a tile whose rows all fall in one segment adds its column sums once:
a scalar ``if`` on loaded ids), a top-p (nucleus) mask of each row's softmax without a sort (the
probability threshold found by bisection in a scalar ``while`` loop with an ``if``), the weight
gradient of a causal depthwise conv1d (a reduction over batch and time of shifted loads), and the
mean cross-entropy with ``ignore_index`` (logsumexp, the target logit gathered from the logits,
the sum and count of the kept rows by atomic adds). Each comes with its eager reference (see
:mod:`.case`).
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
TOP_P = 0.9
BISECT_STEPS = 24  # the threshold to 2**-24 of the row's largest probability
CONV_WIDTH = 4
ROWS_PER_SEGMENT = 100  # segment_sum_sorted: N rows fall into ceil(N / 100) segments
IGNORE_INDEX = -100


# --------------------------------------------------------------------------- paged decode attention


@tc.kernel(static_shapes=True)
def paged_kv_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
) -> torch.Tensor:
    """q [B, H, D] bf16 (one new token per sequence), k_cache / v_cache [NB, BS, HK, D] bf16
    (NB physical blocks of BS tokens, HK kv heads, H a multiple of HK), block_table [B, MB]
    int32 (sequence b's token t lives in block block_table[b, t // BS], slot t % BS), seq_lens
    [B] int32: softmax(q k^T * sm_scale) v over each sequence's first seq_lens[b] tokens, one
    program per (sequence, head) walking its tokens in tiles with an online softmax (fp32 running
    max, sum and accumulator). Returns [B, H, D] bf16."""
    b, h, d = q.size()
    bs, hk = k_cache.size(1), k_cache.size(2)
    group = h // hk
    out = torch.empty_like(q)
    for bi, hi in tc.grid([b, h]):
        seq_len = seq_lens[bi]
        kv_head = hi // group
        qt = q[bi, hi, :].to(torch.float32) * sm_scale
        m_i = tc.full([], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([], dtype=torch.float32)
        acc = tc.zeros([d], dtype=torch.float32)
        for tt in tc.tile(seq_len):
            blk = block_table[bi, tt.index // bs]
            slot = tt.index % bs
            kt = k_cache[blk, slot, kv_head, :].to(torch.float32)
            scores = torch.sum(kt * qt[None, :], dim=-1)
            m_new = torch.maximum(m_i, torch.amax(scores))
            p = torch.exp(scores - m_new)
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p)
            vt = v_cache[blk, slot, kv_head, :].to(torch.float32)
            acc = acc * alpha + torch.sum(p[:, None] * vt, dim=0)
            m_i = m_new
        out[bi, hi, :] = (acc / l_i).to(out.dtype)
    return out


def _paged_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, HK, D, BS, MAXLEN)``: the new tokens' queries, a cache of shuffled
    physical blocks (a few more than the table uses), each sequence's block table and a random
    length in [1, MAXLEN]."""
    b, h, hk, d, bs, maxlen = shape
    g = gen(seed)
    max_blocks = -(-maxlen // bs)
    num_blocks = b * max_blocks + 3
    q = randn((b, h, d), torch.bfloat16, device, g)
    k_cache = randn((num_blocks, bs, hk, d), torch.bfloat16, device, g)
    v_cache = randn((num_blocks, bs, hk, d), torch.bfloat16, device, g)
    perm = torch.randperm(num_blocks, generator=g)[: b * max_blocks]
    block_table = perm.reshape(b, max_blocks).to(torch.int32)
    seq_lens = torch.randint(1, maxlen + 1, (b,), generator=g, dtype=torch.int32)
    seq_lens[0] = maxlen  # one full-length sequence
    return q, k_cache, v_cache, block_table.to(device), seq_lens.to(device)


def paged_kv_decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float | None = None,
) -> torch.Tensor:
    b, h, d = q.shape
    hk = k_cache.shape[2]
    scale = d**-0.5 if sm_scale is None else sm_scale
    k = k_cache[block_table.long()].flatten(1, 2)  # [B, MB * BS, HK, D] in token order
    v = v_cache[block_table.long()].flatten(1, 2)
    qg = q.float().view(b, hk, h // hk, d)
    scores = torch.einsum("bkgd,blkd->bkgl", qg, k.float()) * scale
    pos = torch.arange(k.shape[1], device=q.device)
    live = pos[None, :] < seq_lens[:, None].long()  # [B, L]
    scores = scores.masked_fill(~live[:, None, None, :], float("-inf"))
    out = torch.einsum("bkgl,blkd->bkgd", scores.softmax(-1), v.float())
    return out.reshape(b, h, d).to(q.dtype)


# --------------------------------------------------------------------------- RMSNorm + fp8 quant


@tc.kernel(static_shapes=True)
def rms_norm_dynamic_fp8_quant(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, D] bf16, weight [D] fp32: y = x * rsqrt(mean(x^2) + eps) * weight per row in fp32,
    then per-token dynamic fp8: scale = max|y| / 448 (fp32, [T]) and q = clamp(y / scale, -448,
    448) as float8_e4m3fn [T, D] (y ~ q * scale)."""
    t, d = x.size()
    q = torch.empty([t, d], dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty([t], dtype=torch.float32, device=x.device)
    for tt in tc.tile(t):
        xt = x[tt, :].to(torch.float32)
        inv = torch.rsqrt(torch.mean(xt * xt, dim=-1) + eps)
        y = xt * inv[:, None] * weight[None, :].to(torch.float32)
        amax = torch.amax(torch.abs(y), dim=-1)
        scale = torch.clamp(amax / FP8_MAX, min=1e-12)
        scales[tt] = scale
        q[tt, :] = torch.clamp(y / scale[:, None], -FP8_MAX, FP8_MAX).to(q.dtype)
    return q, scales


def _rms_fp8_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, D)``: bf16 hidden states and an fp32 RMSNorm weight near 1 (an fp32 weight
    keeps y / scale off the exact midpoints between fp8 values that bf16 x bf16 products hit,
    where a one-ulp difference in the fp32 mean, from another summation order, flips the
    rounding by a whole fp8 step)."""
    d = shape[1]
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g) * 2
    w = 1 + 0.2 * randn((d,), torch.float32, device, g)
    return x, w


def rms_norm_dynamic_fp8_quant_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    scale = (y.abs().amax(-1) / FP8_MAX).clamp(min=1e-12)
    q = (y / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


# --------------------------------------------------------------------------- sorted segment sum


@tc.kernel(static_shapes=True)
def segment_sum_sorted(
    values: torch.Tensor, segment_ids: torch.Tensor, num_segments: int
) -> torch.Tensor:
    """values [N, D] bf16, segment_ids [N] int64 sorted ascending (in [0, num_segments)): out
    [S, D] fp32, zeroed on the host, out[s] = sum of the rows of segment s, by atomic adds. The
    ids are sorted, so a tile's rows all belong to one segment when its first and last ids match:
    such a tile adds its column sums once; a tile spanning segments adds row by row."""
    n, d = values.size()
    out = torch.zeros([num_segments, d], dtype=torch.float32, device=values.device)
    for tn, td in tc.tile([n, d]):
        first = segment_ids[tn.begin]
        last = segment_ids[tn.end - 1]
        v = values[tn, td].to(torch.float32)
        # one atomic add per branch: assigning a scalar row in one branch and a [tn] tile in
        # the other would broadcast the scalar branch's column sums to every row of the tile
        if first == last:
            tc.atomic_add(out, [first, td], torch.sum(v, dim=0))
        else:
            tc.atomic_add(out, [segment_ids[tn], td], v)
    return out


def _num_segments(n: int) -> int:
    return -(-n // ROWS_PER_SEGMENT)


def _segment_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, D)``: bf16 rows and their sorted ids in [0, ceil(N / ROWS_PER_SEGMENT))
    (uneven segments, some empty)."""
    n, d = shape
    g = gen(seed)
    values = randn((n, d), torch.bfloat16, device, g)
    ids = torch.randint(0, _num_segments(n), (n,), generator=g).sort().values
    return values, ids.to(device)


def segment_sum_sorted_reference(
    values: torch.Tensor, segment_ids: torch.Tensor, num_segments: int | None = None
) -> torch.Tensor:
    s = _num_segments(values.shape[0]) if num_segments is None else num_segments
    out = torch.zeros(s, values.shape[1], device=values.device)
    return out.index_add_(0, segment_ids, values.float())


# --------------------------------------------------------------------------- top-p mask


@tc.kernel(static_shapes=True)
def top_p_mask_rows(logits: torch.Tensor, p: float) -> torch.Tensor:
    """logits [B, V] fp32: the nucleus (top-p) of each row's softmax without a sort. The
    smallest kept probability is the largest threshold whose mass sum(probs >= threshold) still
    reaches p: bisection on it for ``BISECT_STEPS`` steps in a scalar loop (one program per
    row). Returns the probabilities inside the nucleus renormalized to sum to 1, 0 outside
    (fp32 [B, V])."""
    b, v = logits.size()
    out = torch.empty([b, v], dtype=torch.float32, device=logits.device)
    for bi in tc.grid(b):
        probs = torch.softmax(logits[bi, :].to(torch.float32), dim=-1)
        lo = tc.zeros([], dtype=torch.float32)
        hi = torch.amax(probs)
        step = 0
        while step < BISECT_STEPS:
            mid = (lo + hi) * 0.5
            mass = torch.sum(torch.where(probs >= mid, probs, 0.0))
            if mass >= p:
                lo = mid
            else:
                hi = mid
            step += 1
        keep = probs >= lo
        kept = torch.sum(torch.where(keep, probs, 0.0))
        out[bi, :] = torch.where(keep, probs / kept, 0.0)
    return out


def _top_p_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V)``: fp32 logits (a sampler's), spread enough that the nucleus is a
    fraction of the vocabulary."""
    return (randn(shape, torch.float32, device, gen(seed)) * 3,)


def top_p_mask_rows_reference(logits: torch.Tensor, p: float = TOP_P) -> torch.Tensor:
    probs = torch.softmax(logits.float(), dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(-1) - sorted_probs  # mass of the tokens ranked above
    sorted_probs = sorted_probs.masked_fill(before >= p, 0.0)
    kept = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return kept / kept.sum(-1, keepdim=True)


# --------------------------------------------------------------------------- conv1d weight grad


@tc.kernel(static_shapes=True)
def conv1d_depthwise_bwd_weight(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """x, dy [B, L, C] bf16 (channels last), for the causal depthwise conv1d
    y[b, t, c] = sum_k w[k, c] * x[b, t - k, c] of width 4: dw[k, c] = sum over b and t of
    x[b, t - k, c] * dy[b, t, c] (x is 0 before the sequence start), fp32 [4, C]. One program per
    block of channels; each tap is a reduction over batch tiles and time tiles of a shifted
    load."""
    b, seq, c = x.size()
    dw = torch.empty([CONV_WIDTH, c], dtype=torch.float32, device=x.device)
    for tch in tc.tile(c):
        for k in tc.static_range(CONV_WIDTH):
            acc = tc.zeros([tch], dtype=torch.float32)
            for tb in tc.tile(b):
                for tt in tc.tile(seq):
                    src = tt.index - k
                    # x[tb, src, tch] with torch.where(src >= 0, ..., 0) would read before the
                    # row (src < 0 is not masked): mask the load instead
                    valid = (src >= 0)[None, :, None]
                    xv = tc.load(x, [tb, src, tch], extra_mask=valid).to(torch.float32)
                    g = dy[tb, tt, tch].to(torch.float32)
                    acc = acc + torch.sum(xv * g, dim=[0, 1])
            dw[k, tch] = acc
    return dw


def _conv_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, L, C)``: the conv's input and the gradient of its output."""
    g = gen(seed)
    return randn(shape, torch.bfloat16, device, g), randn(shape, torch.bfloat16, device, g)


def conv1d_depthwise_bwd_weight_reference(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    length = x.shape[1]
    xf, gf = x.float(), dy.float()
    taps = []
    for k in range(CONV_WIDTH):
        shifted = torch.nn.functional.pad(xf, (0, 0, k, 0))[:, :length]  # x[b, t - k, c]
        taps.append((shifted * gf).sum((0, 1)))
    return torch.stack(taps)


# --------------------------------------------------------------------------- cross entropy (NLL)


@tc.kernel(static_shapes=True)
def log_softmax_gather_nll(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """logits [N, V] bf16, target [N] int64 (``IGNORE_INDEX`` rows contribute nothing):
    F.cross_entropy's mean, -log_softmax(logits)[i, target[i]] = logsumexp(row) - the target
    logit, averaged over the rows not ignored. Each tile adds its loss sum and its count of kept
    rows into one-element buffers by atomic adds; the host divides. Returns a 0-d fp32 tensor."""
    n, v = logits.size()
    total = torch.zeros([1], dtype=torch.float32, device=logits.device)
    count = torch.zeros([1], dtype=torch.int64, device=logits.device)
    for tn in tc.tile(n):
        lse = torch.logsumexp(logits[tn, :].to(torch.float32), dim=-1)
        tgt = target[tn]
        valid = tgt != IGNORE_INDEX
        safe = torch.where(valid, tgt, 0)
        # torch.gather(log_softmax, 1, ...) is not a device op: gather from the logits
        picked = logits[tn.index, safe].to(torch.float32)
        loss = torch.where(valid, lse - picked, 0.0)
        tc.atomic_add(total, [0], torch.sum(loss))
        tc.atomic_add(count, [0], valid.sum())
    return total[0] / count[0]


def _nll_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, V)``: bf16 logits and targets with about one row in eight ignored (never
    all of them)."""
    n, v = shape
    g = gen(seed)
    logits = randn(shape, torch.bfloat16, device, g) * 3
    target = torch.randint(0, v, (n,), generator=g)
    target[torch.rand(n, generator=g) < 0.125] = IGNORE_INDEX
    target[0] = v - 1
    return logits, target.to(device)


def log_softmax_gather_nll_reference(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.float(), target, ignore_index=IGNORE_INDEX)


CASES = [
    Case(
        name="paged_kv_decode_attention",
        kernels=(paged_kv_decode_attention,),
        make_inputs=_paged_inputs,
        reference=paged_kv_decode_attention_reference,
        run=lambda k, inp: k["paged_kv_decode_attention"](*inp, inp[0].shape[-1] ** -0.5),
        gpu_shapes=((64, 32, 8, 128, 16, 4096),),
        cpu_shapes=((3, 4, 2, 32, 4, 37), (2, 3, 3, 16, 8, 21)),
        atol=2e-2,
    ),
    one_kernel_case(
        "rms_norm_dynamic_fp8_quant",
        rms_norm_dynamic_fp8_quant,
        _rms_fp8_inputs,
        rms_norm_dynamic_fp8_quant_reference,
        ((16384, 8192),),
        ((37, 100), (5, 333)),
        # q matches bit for bit (fp8 casts round as torch does), the scales to fp32 rounding
        1e-6,
    ),
    Case(
        name="segment_sum_sorted",
        kernels=(segment_sum_sorted,),
        make_inputs=_segment_inputs,
        reference=segment_sum_sorted_reference,
        run=lambda k, inp: k["segment_sum_sorted"](*inp, _num_segments(inp[0].shape[0])),
        gpu_shapes=((1048576, 256),),
        cpu_shapes=((250, 37), (301, 20)),
        atol=1e-4,
    ),
    Case(
        name="top_p_mask_rows",
        kernels=(top_p_mask_rows,),
        make_inputs=_top_p_inputs,
        reference=top_p_mask_rows_reference,
        run=lambda k, inp: k["top_p_mask_rows"](*inp, TOP_P),
        gpu_shapes=((256, 32000), (128, 128256)),
        cpu_shapes=((5, 333), (3, 1000)),
        atol=1e-5,
    ),
    one_kernel_case(
        "conv1d_depthwise_bwd_weight",
        conv1d_depthwise_bwd_weight,
        _conv_bwd_inputs,
        conv1d_depthwise_bwd_weight_reference,
        ((8, 4096, 4096),),
        ((2, 37, 20), (3, 9, 70)),
        1e-4,
    ),
    one_kernel_case(
        "log_softmax_gather_nll",
        log_softmax_gather_nll,
        _nll_inputs,
        log_softmax_gather_nll_reference,
        ((4096, 128256),),
        ((37, 100), (9, 333)),
        1e-4,
    ),
]

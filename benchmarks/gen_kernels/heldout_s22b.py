"""Held-out kernels written from the docs only, session 22b (see :mod:`.heldout_rows` for why
held-out kernels exist): a CTC loss forward (the log-space alpha recursion over time, one program
per batch element, the extended label sequence as one tile, each step a masked logsumexp over the
allowed predecessor states), attention with T5's bidirectional bucketed relative position bias
(the bucket computed in-kernel from key - query with the log-spaced formula, a ``[buckets, H]``
bias table gathered per score; online softmax), a LayerNorm backward whose dw / db are summed per
block of rows and then added with ``tc.atomic_add`` into fp32 buffers, a cumulative logsumexp
along rows (``tc.associative_scan`` with a logaddexp combine within a chunk, a carried running
logsumexp across chunks), a segment max (``scatter_reduce`` "amax" of rows into unsorted segments
with ``tc.atomic_max``, empty segments 0 as with ``include_self=False`` on a zero tensor), a 5x5
depthwise Gaussian blur of NCHW fp32 maps (zero padding 2), a 2-D blockwise fp8 (e4m3fn)
dequantization to bf16 (one fp32 scale per 128x128 block) and a linear layer's weight gradient
``dY^T @ X`` with the bias gradient ``dY.sum(0)`` fused into the same M loop. Each comes with its
eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

T5_BUCKETS = 32  # t5_relative_bias_attention: buckets of the bias table (both directions)
T5_MAX_DISTANCE = 128  # t5_relative_bias_attention: distances past this share the last bucket
FP8_BLOCK = 128  # fp8_block_dequant: rows and columns per scale


# --------------------------------------------------------------------------- CTC loss forward


@tc.kernel(static_shapes=True)
def ctc_loss_forward(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    """CTC negative log likelihood per sample, blank = 0. log_probs [T, B, C] fp32 (log
    softmax over C), targets int64 [B, S] padded past target_lengths[b], input_lengths /
    target_lengths int64 [B]. The extended labels l' = (blank, y1, blank, y2, ..., blank) have
    L = 2S + 1 states; alpha_0 = lp[0, l'] on states 0 and 1, then for t in 1 .. T_b - 1
    alpha_t[s] = logsumexp(alpha_{t-1}[s'] for s' in {s, s - 1, s - 2 if l'[s] != blank and
    l'[s] != l'[s - 2]}) + lp[t, l'[s]], each step one masked [L, L] logsumexp (source state x
    destination state), so alpha stays in registers (a scratch row stored each step and read
    back at s - 1 / s - 2 would need a barrier between the store and the other lanes' loads,
    which the generated code does not emit). nll = -logsumexp(alpha_{T_b - 1}[2 S_b],
    alpha_{T_b - 1}[2 S_b - 1]). Returns fp32 [B]."""
    _, b, _ = log_probs.size()
    s_max = targets.size(1)
    n_states = 2 * s_max + 1
    nll = torch.empty([b], dtype=torch.float32, device=log_probs.device)
    for tb in tc.tile(b, block_size=1):
        n_t = input_lengths[tb.begin]
        n_s = target_lengths[tb.begin]
        pos = tc.arange(n_states)
        is_label = (pos % 2) == 1
        lab = torch.where(is_label, targets[tb.begin, torch.clamp((pos - 1) // 2, min=0)], 0)
        prev_lab = torch.where(
            is_label & (pos >= 3), targets[tb.begin, torch.clamp((pos - 3) // 2, min=0)], -1
        )
        can_skip = is_label & (pos >= 3) & (lab != prev_lab)
        src = pos[:, None]
        dst = pos[None, :]
        allowed = (src == dst) | (src + 1 == dst) | ((src + 2 == dst) & can_skip[None, :])
        alpha = torch.where(pos < 2, log_probs[0, tb.begin, lab], float("-inf"))
        for t in tc.grid(1, n_t):
            cand = torch.where(allowed, alpha[:, None], float("-inf"))
            # torch.logsumexp of an all -inf column (a state not reachable yet) gives NaN in
            # the kernel (-inf in torch and ref mode): the max is kept finite by hand
            top = torch.amax(cand, dim=0)
            top = torch.where(top == float("-inf"), 0.0, top)
            lse = top + torch.log(torch.sum(torch.exp(cand - top[None, :]), dim=0))
            alpha = lse + log_probs[t, tb.begin, lab]
        last = (pos == 2 * n_s) | (pos == 2 * n_s - 1)
        nll[tb.begin] = -torch.logsumexp(torch.where(last, alpha, float("-inf")), dim=0)
    return nll


def _ctc_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, B, C, S)``: log_softmax of normal logits [T, B, C] fp32, targets int64
    [B, S] in [1, C) (padding past each length is random labels too), target lengths in
    [1, S] (the first S) and input lengths in [2 S_b + 1, T] (the first T): every sample
    feasible, repeated labels included."""
    t, b, c, s = shape
    g = gen(seed)
    logits = randn((t, b, c), torch.float32, device, g)
    if device == "meta":
        lens = torch.empty((b,), dtype=torch.int64, device=device)
        return logits, torch.empty((b, s), dtype=torch.int64, device=device), lens, lens
    targets = torch.randint(1, c, (b, s), generator=g)
    target_lengths = torch.randint(1, s + 1, (b,), generator=g)
    target_lengths[0] = s
    low = 2 * target_lengths + 1
    input_lengths = low + (torch.rand(b, generator=g) * (t - low + 1).float()).long()
    input_lengths[0] = t
    return (
        torch.log_softmax(logits, dim=-1),
        targets.to(device),
        input_lengths.to(device),
        target_lengths.to(device),
    )


def ctc_loss_forward_reference(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    return torch.nn.functional.ctc_loss(
        log_probs, targets, input_lengths, target_lengths, blank=0, reduction="none"
    )


# --------------------------------------------------------------------------- T5 relative bias attention


def _t5_bucket(rel: torch.Tensor) -> torch.Tensor:
    """T5's bidirectional bucket of ``rel = key - query`` (int32 tile): half the buckets per
    direction, the first 8 distances exact, then log-spaced up to T5_MAX_DISTANCE."""
    half = T5_BUCKETS // 2
    max_exact = half // 2
    dist = torch.abs(rel)
    scaled = torch.log(dist.to(torch.float32) / max_exact) / math.log(T5_MAX_DISTANCE / max_exact)
    large = max_exact + (scaled * (half - max_exact)).to(torch.int32)
    large = torch.clamp(large, max=half - 1)
    return torch.where(rel > 0, half, 0) + torch.where(dist < max_exact, dist, large)


@tc.kernel(static_shapes=True)
def t5_relative_bias_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias_table: torch.Tensor
) -> torch.Tensor:
    """Non-causal attention with T5's relative position bias. q, k, v [B, H, S, D] bf16,
    bias_table [T5_BUCKETS, H] fp32: score(i, j) = q_i . k_j / sqrt(D) + bias_table[bucket(j -
    i), h], the bucket computed per score in the kernel. One program per (batch, head, query
    tile), an online softmax (fp32) over key tiles. Returns bf16 [B, H, S, D]."""
    b, h, s, d = q.size()
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, th, tm in tc.tile([b, h, s], block_size=[1, 1, None]):
        qt = q[tb.begin, th.begin, tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        acc = tc.zeros([tm, d], dtype=torch.float32)
        for tn in tc.tile(s):
            sc = tc.dot(qt, k[tb.begin, th.begin, tn, :].t(), out_dtype=torch.float32) * scale
            rel = tn.index[None, :] - tm.index[:, None]
            sc = sc + bias_table[_t5_bucket(rel), th.begin]
            m_new = torch.maximum(m_i, torch.amax(sc, dim=-1))
            p = torch.exp(sc - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            acc = tc.dot(p.to(v.dtype), v[tb.begin, th.begin, tn, :], acc=acc * alpha[:, None])
            m_i = m_new
        out[tb.begin, th.begin, tm, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


def _t5_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S, D)``: q, k, v bf16 and a [T5_BUCKETS, H] fp32 bias table (normal)."""
    b, h, s, d = shape
    g = gen(seed)
    q, k, v = (randn((b, h, s, d), torch.bfloat16, device, g) for _ in range(3))
    return q, k, v, randn((T5_BUCKETS, h), torch.float32, device, g)


def t5_relative_bias_attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias_table: torch.Tensor
) -> torch.Tensor:
    """HF T5's ``_relative_position_bucket(bidirectional=True)`` in int64, the bias added to the
    scaled scores, SDPA in fp32."""
    s = q.shape[2]
    pos = torch.arange(s, device=q.device)
    rel = pos[None, :] - pos[:, None]  # memory - context
    half = T5_BUCKETS // 2
    buckets = (rel > 0).long() * half
    rel = rel.abs()
    max_exact = half // 2
    large = max_exact + (
        torch.log(rel.float() / max_exact)
        / math.log(T5_MAX_DISTANCE / max_exact)
        * (half - max_exact)
    ).to(torch.long)
    large = torch.min(large, torch.full_like(large, half - 1))
    buckets += torch.where(rel < max_exact, rel, large)
    bias = bias_table[buckets].permute(2, 0, 1)  # [H, S, S]
    o = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=bias[None]
    )
    return o.to(q.dtype)


# --------------------------------------------------------------------------- LayerNorm backward (atomics)


@tc.kernel(static_shapes=True)
def layer_norm_bwd_atomic(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LayerNorm backward in one kernel. grad_out, x [M, N] bf16, mean / rstd [M] fp32 (from the
    forward), weight [N] bf16. Each program owns a block of rows: an inner loop over them writes
    dx (bf16) and sums dy * x_hat and dy per column in fp32 registers; the program then adds its
    [N] partials to dw / db (fp32, zeroed on the host) with tc.atomic_add. Returns
    (dx bf16 [M, N], dw fp32 [N], db fp32 [N])."""
    m = x.size(0)
    n = tc.specialize(x.size(1))
    rows_per_program = tc.register_block_size(m)
    grad_x = torch.empty_like(x)
    dw = torch.zeros([n], dtype=torch.float32, device=x.device)
    db = torch.zeros([n], dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows_per_program):
        dw_acc = tc.zeros([n], dtype=torch.float32)
        db_acc = tc.zeros([n], dtype=torch.float32)
        w_row = weight[None, :].to(torch.float32)
        for tm in tc.tile(cta.begin, cta.end):
            r = rstd[tm][:, None]
            x_hat = (x[tm, :].to(torch.float32) - mean[tm][:, None]) * r
            dy = grad_out[tm, :].to(torch.float32)
            dw_acc = dw_acc + torch.sum(dy * x_hat, dim=0)
            db_acc = db_acc + torch.sum(dy, dim=0)
            g = dy * w_row
            c1 = torch.sum(g * x_hat, dim=-1)[:, None] / n
            c2 = torch.sum(g, dim=-1)[:, None] / n
            grad_x[tm, :] = ((g - x_hat * c1 - c2) * r).to(grad_x.dtype)
        tc.atomic_add(dw, [slice(None)], dw_acc)
        tc.atomic_add(db, [slice(None)], db_acc)
    return grad_x, dw, db


def _ln_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: grad_out and x bf16 (x = 2 randn + 0.5), the forward's mean and rstd
    (eps 1e-5) in fp32, weight bf16 near 1."""
    m, n = shape
    g = gen(seed)
    grad_out = randn((m, n), torch.bfloat16, device, g)
    x = (randn((m, n), torch.float32, device, g) * 2 + 0.5).to(torch.bfloat16)
    weight = (1.0 + 0.5 * randn((n,), torch.float32, device, g)).to(torch.bfloat16)
    mean = x.float().mean(-1)
    rstd = torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5)
    return grad_out, x, mean, rstd, weight


def layer_norm_bwd_atomic_reference(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Autograd through ``torch.nn.functional.layer_norm`` in fp32 (mean / rstd are what it
    recomputes)."""
    xf = x.float().requires_grad_(True)
    wf = weight.float().requires_grad_(True)
    bf = torch.zeros_like(wf, requires_grad=True)
    out = torch.nn.functional.layer_norm(xf, xf.shape[-1:], wf, bf, 1e-5)
    dx, dw, db = torch.autograd.grad(out, (xf, wf, bf), grad_out.float())
    return dx.to(x.dtype), dw, db


# --------------------------------------------------------------------------- logcumsumexp


def _logaddexp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """log(exp(a) + exp(b)) for finite a or b (max plus log1p of the smaller exp)."""
    hi = torch.maximum(a, b)
    return hi + torch.log1p(torch.exp(-torch.abs(a - b)))


@tc.kernel(static_shapes=True)
def logcumsumexp_rows(x: torch.Tensor) -> torch.Tensor:
    """torch.logcumsumexp(x, dim=1) of fp32 x [M, N]. Each program walks its rows chunk by chunk:
    an inclusive tc.associative_scan with a logaddexp combine within the chunk, combined with the
    running logsumexp of the chunks before it (carried, -inf at first), which then takes in the
    chunk's own logsumexp. Returns fp32 [M, N]."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        running = tc.full([tm], float("-inf"), dtype=torch.float32)
        for tn in tc.tile(n):
            v = x[tm, tn].to(torch.float32)
            scanned = tc.associative_scan(_logaddexp, v, dim=1)
            out[tm, tn] = _logaddexp(scanned, running[:, None]).to(out.dtype)
            running = _logaddexp(running, torch.logsumexp(v, dim=1))
    return out


def _rows_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: fp32 normal values times 3 (some large gaps)."""
    return (randn(shape, torch.float32, device, gen(seed)) * 3,)


def logcumsumexp_rows_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.logcumsumexp(x, dim=1)


# --------------------------------------------------------------------------- segment max


@tc.kernel(static_shapes=True)
def segment_max_atomic(
    values: torch.Tensor, segment_ids: torch.Tensor, num_segments: int
) -> torch.Tensor:
    """out[s, :] = max of values[i, :] over rows i with segment_ids[i] == s (values fp32 [N, D],
    segment_ids int64 [N] in [0, num_segments), any order): out starts at -inf, one program per
    (row tile, column tile) adds its rows with tc.atomic_max at their segment's row; a second
    device loop turns segments that got no row back into 0, so the result is
    torch.zeros(S, D).scatter_reduce(0, ids, values, "amax", include_self=False). Returns fp32
    [num_segments, D]."""
    n, d = values.size()
    out = torch.full([num_segments, d], float("-inf"), dtype=torch.float32, device=values.device)
    for tn, td in tc.tile([n, d]):
        tc.atomic_max(out, [segment_ids[tn], td], values[tn, td].to(torch.float32))
    for ts, td in tc.tile([num_segments, d]):
        got = out[ts, td]
        out[ts, td] = torch.where(got == float("-inf"), 0.0, got)
    return out


def _segment_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, D, S)``: values fp32 [N, D] (normal), segment ids int64 [N] drawn
    uniformly from [0, S) in random order (some segments empty when S is near N), and an
    [S, D] tensor shaped like the output, which carries S (known on meta tensors too)."""
    n, d, s = shape
    g = gen(seed)
    values = randn((n, d), torch.float32, device, g)
    out_like = randn((s, d), torch.float32, device, g)
    if device == "meta":
        return values, torch.empty((n,), dtype=torch.int64, device=device), out_like
    ids = torch.randint(0, s, (n,), generator=g)
    ids[0] = s - 1
    return values, ids.to(device), out_like


def segment_max_atomic_reference(
    values: torch.Tensor, segment_ids: torch.Tensor, out_like: torch.Tensor | None = None
) -> torch.Tensor:
    s = int(segment_ids.max()) + 1 if out_like is None else out_like.shape[0]
    out = torch.zeros(s, values.shape[1], dtype=torch.float32, device=values.device)
    idx = segment_ids[:, None].expand(-1, values.shape[1])
    return out.scatter_reduce(0, idx, values.float(), "amax", include_self=False)


# --------------------------------------------------------------------------- 5x5 Gaussian blur


@tc.kernel(static_shapes=True)
def gaussian_blur5x5(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x [N, C, H, W] fp32 convolved with the same 5x5 weight (fp32 [5, 5]) on every channel:
    torch.nn.functional.conv2d(x, weight.expand(C, 1, 5, 5), padding=2, groups=C). One program
    per (map, row tile, column tile), the 25 taps unrolled, each a shifted load masked to zero
    outside the map. Returns fp32 [N, C, H, W]."""
    n, c, h, w = x.size()
    out = torch.empty_like(x)
    maps = x.view(n * c, h, w)
    out_maps = out.view(n * c, h, w)
    for tp, ty, tx in tc.tile([n * c, h, w], block_size=[1, None, None]):
        acc = tc.zeros([ty, tx], dtype=torch.float32)
        for dy in tc.static_range(5):
            for dx in tc.static_range(5):
                iy = ty.index + (dy - 2)
                ix = tx.index + (dx - 2)
                inside = ((iy >= 0) & (iy < h))[:, None] & ((ix >= 0) & (ix < w))[None, :]
                tap = tc.load(maps, [tp.begin, iy[:, None], ix[None, :]], extra_mask=inside)
                acc = acc + tap * weight[dy, dx]
        out_maps[tp.begin, ty, tx] = acc
    return out


def _blur_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C, H, W)``: fp32 maps and the normalized 5x5 Gaussian (sigma 1.0)."""
    x = randn(shape, torch.float32, device, gen(seed))
    r = torch.arange(5, dtype=torch.float32) - 2
    g1 = torch.exp(-(r**2) / 2)
    kernel = g1[:, None] * g1[None, :]
    return x, (kernel / kernel.sum()).to(device)


def gaussian_blur5x5_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    c = x.shape[1]
    return torch.nn.functional.conv2d(x, weight.expand(c, 1, 5, 5), padding=2, groups=c)


# --------------------------------------------------------------------------- fp8 blockwise dequant


@tc.kernel(static_shapes=True)
def fp8_block_dequant(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """q [M, N] float8_e4m3fn with one fp32 scale per 128 x 128 block (scales [ceil(M / 128),
    ceil(N / 128)], DeepSeek-V3's weight format): out = (q * scale of its block) in fp32,
    rounded to bf16 [M, N]."""
    m, n = q.size()
    out = torch.empty([m, n], dtype=torch.bfloat16, device=q.device)
    for tm, tn in tc.tile([m, n]):
        s = scales[(tm.index // FP8_BLOCK)[:, None], (tn.index // FP8_BLOCK)[None, :]]
        out[tm, tn] = (q[tm, tn].to(torch.float32) * s).to(torch.bfloat16)
    return out


def _fp8_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: a normal weight scaled by 1 / sqrt(N), quantized per 128 x 128
    block (scale = block absmax / 448), fp8 e4m3fn values and fp32 scales."""
    m, n = shape
    bm, bn = -(-m // FP8_BLOCK), -(-n // FP8_BLOCK)
    if device == "meta":
        return (
            torch.empty((m, n), dtype=torch.float8_e4m3fn, device=device),
            torch.empty((bm, bn), dtype=torch.float32, device=device),
        )
    w = randn((m, n), torch.float32, "cpu", gen(seed)) / n**0.5
    padded = torch.zeros(bm * FP8_BLOCK, bn * FP8_BLOCK)
    padded[:m, :n] = w
    blocks = padded.view(bm, FP8_BLOCK, bn, FP8_BLOCK)
    scales = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / 448.0
    qv = (blocks / scales[:, None, :, None]).view(bm * FP8_BLOCK, bn * FP8_BLOCK)[:m, :n]
    return qv.to(torch.float8_e4m3fn).to(device), scales.to(device)


def fp8_block_dequant_reference(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    m, n = q.shape
    s = scales.repeat_interleave(FP8_BLOCK, 0).repeat_interleave(FP8_BLOCK, 1)[:m, :n]
    return (q.float() * s).to(torch.bfloat16)


# --------------------------------------------------------------------------- linear weight + bias grad


@tc.kernel(static_shapes=True)
def linear_wgrad_bias(grad_out: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A linear layer's parameter gradients in one kernel: grad_out dY [M, N] bf16, x [M, K]
    bf16; dW = dY^T @ X [N, K] and db = dY.sum(0) [N], both accumulated in fp32 over one M
    loop (the dY tile the dot reads is also summed), returned in bf16. Every program along K
    sums its dY columns, the first one (tk.id == 0) stores db."""
    m, n = grad_out.size()
    k = x.size(1)
    dw = torch.empty([n, k], dtype=torch.bfloat16, device=x.device)
    db = torch.empty([n], dtype=torch.bfloat16, device=x.device)
    for tn, tk in tc.tile([n, k]):
        acc = tc.zeros([tn, tk], dtype=torch.float32)
        bias_acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            dy = grad_out[tm, tn]
            acc = tc.dot(dy.t(), x[tm, tk], acc=acc)
            bias_acc = bias_acc + torch.sum(dy.to(torch.float32), dim=0)
        dw[tn, tk] = acc.to(dw.dtype)
        if tk.id == 0:
            db[tn] = bias_acc.to(db.dtype)
    return dw, db


def _wgrad_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N, K)``: dY [M, N] and X [M, K] bf16, both scaled by M ** -0.25 so the
    fp32 sums over M stay near 1."""
    m, n, k = shape
    g = gen(seed)
    s = m**-0.25
    dy = (randn((m, n), torch.float32, device, g) * s).to(torch.bfloat16)
    x = (randn((m, k), torch.float32, device, g) * s).to(torch.bfloat16)
    return dy, x


def linear_wgrad_bias_reference(
    grad_out: torch.Tensor, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    dw = grad_out.float().t() @ x.float()
    return dw.to(torch.bfloat16), grad_out.float().sum(0).to(torch.bfloat16)


CASES = [
    one_kernel_case(
        "ctc_loss_forward_nll",
        ctc_loss_forward,
        _ctc_inputs,
        ctc_loss_forward_reference,
        ((1000, 64, 32, 120),),
        ((13, 3, 7, 4), (9, 2, 5, 3)),
        1e-3,
    ),
    one_kernel_case(
        "t5_relative_bias_attention",
        t5_relative_bias_attention,
        _t5_inputs,
        t5_relative_bias_attention_reference,
        ((4, 16, 2048, 64), (2, 32, 4096, 64)),
        ((1, 2, 150, 16), (2, 1, 37, 32)),
        2e-2,
    ),
    one_kernel_case(
        "layer_norm_bwd_atomic_dwdb",
        layer_norm_bwd_atomic,
        _ln_bwd_inputs,
        layer_norm_bwd_atomic_reference,
        ((16384, 4096), (4096, 8192)),
        ((37, 100), (5, 77)),
        # dx bf16 (one ulp allowed besides); dw / db fp32 sums over rows in another order
        2e-2,
    ),
    one_kernel_case(
        "logcumsumexp_rows_scan",
        logcumsumexp_rows,
        _rows_inputs,
        logcumsumexp_rows_reference,
        ((4096, 8192), (64, 131072)),
        ((7, 37), (3, 300)),
        1e-4,
    ),
    Case(
        name="segment_max_atomic_unsorted",
        kernels=(segment_max_atomic,),
        make_inputs=_segment_inputs,
        reference=segment_max_atomic_reference,
        run=lambda k, inp: k["segment_max_atomic"](inp[0], inp[1], inp[2].shape[0]),
        gpu_shapes=((262144, 128, 4096),),
        cpu_shapes=((37, 20, 9), (50, 33, 70)),
        atol=1e-6,
    ),
    one_kernel_case(
        "gaussian_blur5x5_nchw",
        gaussian_blur5x5,
        _blur_inputs,
        gaussian_blur5x5_reference,
        ((16, 64, 256, 256), (8, 3, 2048, 2048)),
        ((2, 3, 7, 9), (1, 2, 13, 5)),
        1e-5,
    ),
    one_kernel_case(
        "fp8_block_dequant_bf16",
        fp8_block_dequant,
        _fp8_inputs,
        fp8_block_dequant_reference,
        ((7168, 18432), (8192, 8192)),
        ((77, 300), (130, 45)),
        # bf16 out: one ulp of values up to ~0.05
        1e-3,
    ),
    one_kernel_case(
        "linear_wgrad_bias_fused",
        linear_wgrad_bias,
        _wgrad_inputs,
        linear_wgrad_bias_reference,
        ((16384, 4096, 4096), (8192, 14336, 4096)),
        ((77, 40, 50), (50, 21, 33)),
        2e-2,
    ),
]

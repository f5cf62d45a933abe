"""Held-out kernels written from the docs only, session 39a (see :mod:`.heldout_rows` for why
held-out kernels exist): resampling, sorting, RLHF, quantized inference, attention variants and
optimizer / fp8 state updates. A 1-D linear resampler (``F.interpolate(mode="linear")``,
align_corners=False, any output length); the count pass of an LSD radix sort (an 8-bit digit
histogram per block of keys with ``tl.histogram`` through ``tc.triton_call``, then each
(block, digit)'s global scatter offset); PPO reward shaping (a per-token KL penalty, the
sequence score added at its last token, whitened over the valid tokens of the batch); a BitNet
b1.58 GEMM for decode (per-token absmax int8 activations times ternary weights packed four to a
byte, int8 x int8 dots into int32); causal stick-breaking attention (log-space weights from a
reversed cumulative sum over the keys); Transformer Engine's delayed-scaling fp8 cast (e4m3
with the current scale, the tensor's amax pushed into the amax history and the scale recomputed,
in place); FBGEMM's row-wise Adagrad on the embedding rows a batch touched (in place); and causal
differential attention (two softmaxes subtracted, per-head RMSNorm). Each comes with its eager
reference (see :mod:`.case`).

Notes: all eight match at every CPU shape (seeds 0 and 1) with the autotuner on an empty cache,
with ``TILECRAFT_NO_AUTOTUNE=1``, in ref mode and with the ``SMALL_CONFIGS`` below
(/work/fuzz39a/verify.py), and with strided and permuted inputs and torch.compile(fullgraph=True)
(eager and inductor backends; variants.py); static_shapes=False works for five (the radix
count, BitNet GEMM, row-wise Adagrad and stick-breaking kernels and the resampler; the PPO
kernel's ``tc.arange(t)`` beside ``x[tb, :]`` failed to broadcast and tc.arange baked a run-time
size, repro_1, fixed in session 39; the fp8 cast's ``torch.roll`` and differential attention's ``[:d]`` slices need
static sizes, as their errors say). Max errors: 0 for the radix count, BitNet, fp8 cast;
2.4e-7 resampler and Adagrad, 3.6e-7 PPO whitening, 2.9e-5 stick-breaking (a total minus a
running prefix), one bf16 ulp (4.9e-4) differential attention. Defaults cross-compile for
cuda:90 and hip:gfx942 at the CPU and GPU shapes. Stick-breaking attention is the key-blocked
form: the natural whole-row form (:func:`stick_breaking_attention`, kept for reference) has no
config that fits shared memory at S = 1024 (repro_2). See /work/fuzz39a/REPORT.md.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

import tilecraft as tc
from benchmarks.gen_kernels.case import (
    Case,
    Inputs,
    copy_state,
    gen,
    meta_tensors,
    one_kernel_case,
    randint,
    randn,
    with_args,
)

F32 = torch.float32
BF16 = torch.bfloat16
I32 = torch.int32
I64 = torch.int64
E4M3 = torch.float8_e4m3fn


# --------------------------------------------------------------------------- 1-D linear resampling


@tc.kernel(static_shapes=True)
def linear_resample_1d(x: torch.Tensor, out_len: int) -> torch.Tensor:
    """x [B, C, L_in] fp32 -> [B, C, out_len], as F.interpolate(mode="linear",
    align_corners=False): source position (i + 0.5) * L_in / out_len - 0.5, clamped at 0."""
    b, c, l_in = x.size()
    rows = b * c
    xr = x.reshape(rows, l_in)
    out = torch.empty([rows, out_len], dtype=x.dtype, device=x.device)
    scale = l_in / out_len
    for tr, to in tc.tile([rows, out_len]):
        src = (to.index.to(torch.float32) + 0.5) * scale - 0.5
        src = torch.clamp(src, min=0.0)
        i0 = src.to(torch.int64)
        i1 = torch.clamp(i0 + 1, max=l_in - 1)
        lam = src - i0.to(torch.float32)
        x0 = xr[tr, i0]
        x1 = xr[tr, i1]
        out[tr, to] = x0 * (1.0 - lam)[None, :] + x1 * lam[None, :]
    return out.view(b, c, out_len)


def _resample_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, L_in, L_out)``: x only (the case appends L_out as an int)."""
    b, c, l_in, _ = shape
    if device == "meta":
        return meta_tensors((b, c, l_in))
    return (randn((b, c, l_in), F32, device, gen(seed)),)


def linear_resample_1d_reference(x, out_len):
    return torch.nn.functional.interpolate(x, size=out_len, mode="linear", align_corners=False)


# --------------------------------------------------------------------------- radix sort count pass

RADIX_BLOCK = 1024  # keys per block of the radix sort


@triton.jit
def _digit_histogram(digits, valid):
    return tl.histogram(digits, 256, mask=valid)


@tc.kernel(static_shapes=True)
def radix_count_offsets(keys: torch.Tensor, shift: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSD radix-sort pass's count step over int32 keys [N] (non-negative): the 8-bit digit
    (key >> shift) & 255 of each key, hist [nblocks, 256] int32 per block of RADIX_BLOCK keys,
    and offsets [nblocks, 256] int32, where block b's keys of digit d go in the sorted output
    (all keys of smaller digits, then those of digit d in earlier blocks)."""
    n = keys.size(0)
    nblocks = (n + RADIX_BLOCK - 1) // RADIX_BLOCK
    hist = torch.empty([nblocks, 256], dtype=torch.int32, device=keys.device)
    for tk in tc.tile(n, block_size=RADIX_BLOCK):
        digits = (keys[tk] >> shift) & 255
        valid = tk.index < n
        hist[tk.id, :] = tc.triton_call(
            _digit_histogram,
            digits,
            valid,
            out_shape=[256],
            out_dtype=torch.int32,
            ref=lambda d, v: torch.bincount(d[v].long(), minlength=256),
        )
    totals = hist.sum(dim=0)
    digit_base = torch.cumsum(totals, dim=0) - totals
    offsets = torch.empty_like(hist)
    for td in tc.tile(256):
        h = hist[:, td]
        before = torch.cumsum(h, dim=0) - h
        offsets[:, td] = (before + digit_base[td][None, :]).to(torch.int32)
    return hist, offsets


def _radix_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: int32 keys in [0, 2**31)."""
    (n,) = shape
    if device == "meta":
        return (torch.empty((n,), dtype=I32, device="meta"),)
    return (randint(0, 2**31 - 1, (n,), device, gen(seed)).to(I32),)


RADIX_SHIFT = 8


def radix_count_offsets_reference(keys, shift):
    n = keys.numel()
    nblocks = (n + RADIX_BLOCK - 1) // RADIX_BLOCK
    digits = ((keys.long() >> shift) & 255).cpu()
    hist = torch.zeros(nblocks, 256, dtype=I64)
    blk = torch.arange(n) // RADIX_BLOCK
    hist.index_put_((blk, digits), torch.ones(n, dtype=I64), accumulate=True)
    totals = hist.sum(0)
    base = torch.cumsum(totals, 0) - totals
    offsets = torch.cumsum(hist, 0) - hist + base[None, :]
    return hist.to(I32).to(keys.device), offsets.to(I32).to(keys.device)


# --------------------------------------------------------------------------- PPO reward shaping

KL_COEF = 0.05


@tc.kernel(static_shapes=True)
def kl_rewards_whiten(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    lengths: torch.Tensor,
    scores: torch.Tensor,
    kl_coef: float,
) -> torch.Tensor:
    """PPO (TRL-style) reward shaping: logprobs / ref_logprobs [B, T] fp32 of the response
    tokens, lengths [B] int64 (>= 1) the valid tokens of each response, scores [B] the reward
    model's score. reward = -kl_coef * (logprobs - ref_logprobs), plus the score at the last
    valid token; then whitened over all valid tokens of the batch (mean 0, unbiased variance 1,
    eps 1e-8); 0 past each length."""
    b, t = logprobs.size()
    rewards = torch.empty_like(logprobs)
    row_sum = torch.empty([b], dtype=torch.float32, device=logprobs.device)
    for tb in tc.tile(b):
        n = lengths[tb]
        pos = tc.arange(t)
        valid = pos[None, :] < n[:, None]
        r = -kl_coef * (logprobs[tb, :] - ref_logprobs[tb, :])
        r = r + torch.where(pos[None, :] == (n - 1)[:, None], scores[tb][:, None], 0.0)
        r = torch.where(valid, r, 0.0)
        rewards[tb, :] = r
        row_sum[tb] = torch.sum(r, dim=1)
    count = lengths.sum().to(torch.float32)
    mean = row_sum.sum() / count
    row_sq = torch.empty([b], dtype=torch.float32, device=logprobs.device)
    for tb in tc.tile(b):
        n = lengths[tb]
        valid = tc.arange(t)[None, :] < n[:, None]
        dev = torch.where(valid, rewards[tb, :] - mean, 0.0)
        row_sq[tb] = torch.sum(dev * dev, dim=1)
    var = row_sq.sum() / (count - 1.0)
    inv_std = torch.rsqrt(var + 1e-8)
    out = torch.empty_like(logprobs)
    for tb in tc.tile(b):
        n = lengths[tb]
        valid = tc.arange(t)[None, :] < n[:, None]
        out[tb, :] = torch.where(valid, (rewards[tb, :] - mean) * inv_std, 0.0)
    return out


def _kl_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T)``: log-probs around -2, lengths in [1, T]."""
    b, t = shape
    if device == "meta":
        return (
            *meta_tensors((b, t), (b, t)),
            torch.empty((b,), dtype=I64, device="meta"),
            *meta_tensors((b,)),
        )
    g = gen(seed)
    lp = -2.0 + randn((b, t), F32, device, g)
    ref = lp + 0.3 * randn((b, t), F32, device, g)
    lengths = randint(1, t + 1, (b,), device, g)
    scores = randn((b,), F32, device, g)
    return lp, ref, lengths, scores


def kl_rewards_whiten_reference(logprobs, ref_logprobs, lengths, scores, kl_coef=KL_COEF):
    b, t = logprobs.shape
    mask = (torch.arange(t, device=logprobs.device)[None, :] < lengths[:, None]).float()
    rewards = -kl_coef * (logprobs - ref_logprobs)
    rewards = rewards.clone()
    rewards[torch.arange(b, device=logprobs.device), lengths - 1] += scores
    rewards = rewards * mask
    mean = (rewards * mask).sum() / mask.sum()
    var = (((rewards - mean) * mask) ** 2).sum() / (mask.sum() - 1)
    return (rewards - mean) * torch.rsqrt(var + 1e-8) * mask


# --------------------------------------------------------------------------- BitNet b1.58 GEMM


@tc.kernel(static_shapes=True)
def bitnet_ternary_gemm(
    x: torch.Tensor, w_packed: torch.Tensor, w_scale: torch.Tensor
) -> torch.Tensor:
    """BitNet b1.58 linear for decode: x [M, K] bf16 activations quantized per token to int8
    (absmax scaled to 127, rounded), w_packed [N, K / 4] uint8 ternary weights, four 2-bit
    codes a byte (code = w + 1, weight k = 4 * byte + j in bits 2j..2j+1), w_scale [1] fp32.
    y = (xq @ w.T) * absmax / 127 * w_scale, bf16 [M, N]."""
    m, k = x.size()
    n = w_packed.size(0)
    xq = torch.empty([m, k], dtype=torch.int8, device=x.device)
    x_scale = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        amax = torch.clamp(torch.amax(torch.abs(xt), dim=1), min=1e-5)
        s = 127.0 / amax
        xq[tm, :] = torch.clamp(torch.round(xt * s[:, None]), -128, 127).to(torch.int8)
        x_scale[tm] = amax / 127.0
    xq4 = xq.view(m, k // 4, 4)
    out = torch.empty([m, n], dtype=torch.bfloat16, device=x.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.int32)
        for tk in tc.tile(k // 4):
            wb = w_packed[tn, tk].to(torch.int32)
            for j in tc.static_range(4):
                wj = (((wb >> (2 * j)) & 3) - 1).to(torch.int8)
                acc = tc.dot(xq4[tm, tk, j], wj.t(), acc=acc)
        y = acc.to(torch.float32) * x_scale[tm][:, None] * w_scale[0]
        out[tm, tn] = y.to(torch.bfloat16)
    return out


def _bitnet_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K, N)``: ternary weights uniform over {-1, 0, 1}, packed."""
    m, k, n = shape
    if device == "meta":
        return (
            *meta_tensors((m, k), dtype=BF16),
            torch.empty((n, k // 4), dtype=torch.uint8, device="meta"),
            *meta_tensors((1,)),
        )
    g = gen(seed)
    x = randn((m, k), BF16, device, g)
    codes = torch.randint(0, 3, (n, k // 4, 4), generator=g)
    packed = codes[..., 0] | (codes[..., 1] << 2) | (codes[..., 2] << 4) | (codes[..., 3] << 6)
    w_scale = torch.tensor([0.02], dtype=F32)
    return x, packed.to(torch.uint8).to(device), w_scale.to(device)


def bitnet_ternary_gemm_reference(x, w_packed, w_scale):
    xf = x.float()
    amax = xf.abs().amax(dim=1, keepdim=True).clamp(min=1e-5)
    xq = torch.clamp(torch.round(xf * (127.0 / amax)), -128, 127)
    p = w_packed.long()
    codes = torch.stack([(p >> (2 * j)) & 3 for j in range(4)], dim=-1)  # [N, K/4, 4]
    w = (codes - 1).reshape(p.size(0), -1).float()
    y = (xq @ w.t()) * (amax / 127.0) * w_scale[0]
    return y.to(torch.bfloat16)


# --------------------------------------------------------------------------- stick-breaking attention


@tc.kernel(static_shapes=True)
def stick_breaking_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The natural whole-row version, NOT in CASES: at the GPU shape (S = 1024, D = 64) no config
    fits a GPU's shared memory (repro_2.py); :func:`stick_breaking_attention_blocked` is the case.
    Causal stick-breaking attention (Tan et al. 2024) over q, k, v [B, H, S, D] fp32:
    z = q k^T / sqrt(D), beta = sigmoid(z), and query i gives key j <= i the weight
    beta_ij * prod_{j < l <= i} (1 - beta_il), in log space: logsigmoid(z_ij) plus the sum of
    logsigmoid(-z_il) over the later keys l (a reversed cumulative sum). No softmax."""
    b, h, s, d = q.size()
    qf = q.reshape(b * h, s, d)
    kf = k.reshape(b * h, s, d)
    vf = v.reshape(b * h, s, d)
    out = torch.empty([b * h, s, d], dtype=q.dtype, device=q.device)
    for tbh, tq in tc.tile([b * h, s], block_size=[1, None]):
        z = (qf[tbh.begin, tq, :] @ kf[tbh.begin, :, :].t()) / math.sqrt(d)
        keys = tc.arange(s)
        causal = keys[None, :] <= tq.index[:, None]
        log_rest = torch.where(causal, torch.nn.functional.logsigmoid(-z), 0.0)
        later = torch.flip(torch.cumsum(torch.flip(log_rest, [1]), dim=1), [1]) - log_rest
        log_w = torch.nn.functional.logsigmoid(z) + later
        w = torch.where(causal, torch.exp(log_w), 0.0)
        out[tbh.begin, tq, :] = w @ vf[tbh.begin, :, :]
    return out.view(b, h, s, d)


@tc.kernel(static_shapes=True)
def stick_breaking_attention_blocked(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """The same attention over key blocks (for long sequences: the whole-row version holds all
    S keys and values of a head in shared memory, 512 KB at S = 1024, D = 64, more than any GPU
    has). A first pass sums logsigmoid(-z) over each query's keys; the second walks the key
    blocks forward, and the sum over the later keys is that total minus the running inclusive
    prefix. Both passes stop at the query tile's diagonal."""
    b, h, s, d = q.size()
    qf = q.reshape(b * h, s, d)
    kf = k.reshape(b * h, s, d)
    vf = v.reshape(b * h, s, d)
    out = torch.empty([b * h, s, d], dtype=q.dtype, device=q.device)
    for tbh, tq in tc.tile([b * h, s], block_size=[1, None]):
        qt = qf[tbh.begin, tq, :] / math.sqrt(d)
        total = tc.zeros([tq], dtype=torch.float32)
        for tk in tc.tile(tq.end):
            z = qt @ kf[tbh.begin, tk, :].t()
            causal = tk.index[None, :] <= tq.index[:, None]
            rest = torch.where(causal, torch.nn.functional.logsigmoid(-z), 0.0)
            total = total + torch.sum(rest, dim=1)
        prefix = tc.zeros([tq], dtype=torch.float32)
        acc = tc.zeros([tq, d], dtype=torch.float32)
        for tk in tc.tile(tq.end):
            z = qt @ kf[tbh.begin, tk, :].t()
            causal = tk.index[None, :] <= tq.index[:, None]
            rest = torch.where(causal, torch.nn.functional.logsigmoid(-z), 0.0)
            later = total[:, None] - (prefix[:, None] + torch.cumsum(rest, dim=1))
            w = torch.where(causal, torch.exp(torch.nn.functional.logsigmoid(z) + later), 0.0)
            acc = acc + w @ vf[tbh.begin, tk, :]
            prefix = prefix + torch.sum(rest, dim=1)
        out[tbh.begin, tq, :] = acc
    return out.view(b, h, s, d)


def _sb_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S, D)``."""
    b, h, s, d = shape
    if device == "meta":
        return meta_tensors((b, h, s, d), (b, h, s, d), (b, h, s, d))
    g = gen(seed)
    return tuple(randn((b, h, s, d), F32, device, g) for _ in range(3))


def stick_breaking_attention_reference(q, k, v):
    s, d = q.size(2), q.size(3)
    z = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    causal = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    log_rest = torch.where(causal, torch.nn.functional.logsigmoid(-z), 0.0)
    # sum over l in (j, i]: reversed exclusive cumsum along the keys
    later = torch.flip(torch.cumsum(torch.flip(log_rest, [-1]), -1), [-1]) - log_rest
    w = torch.where(causal, torch.exp(torch.nn.functional.logsigmoid(z) + later), 0.0)
    return w @ v


# --------------------------------------------------------------------------- fp8 delayed scaling

FP8_MAX = 448.0


@tc.kernel(static_shapes=True)
def fp8_delayed_scaling_cast(
    x: torch.Tensor, amax_history: torch.Tensor, scale: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Transformer Engine's delayed scaling: x [M, K] bf16 cast to e4m3 with the current scale
    [1] (x * scale, saturated at +-448); then the history [H] fp32 rolls one left, its last entry
    becomes x's absmax, and scale = 448 / max(history), both in place."""
    m, k = x.size()
    hist_len = amax_history.size(0)
    out = torch.empty([m, k], dtype=torch.float8_e4m3fn, device=x.device)
    amax = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tm, tk in tc.tile([m, k]):
        xt = x[tm, tk].to(torch.float32)
        y = torch.clamp(xt * scale[0], -FP8_MAX, FP8_MAX)
        out[tm, tk] = y.to(torch.float8_e4m3fn)
        tc.atomic_max(amax, [0], torch.amax(torch.abs(xt)))
    for _ in tc.tile(1, block_size=1):
        hist = amax_history[:]
        idx = tc.arange(hist_len)
        rolled = torch.roll(hist, -1, 0)
        new_hist = torch.where(idx == hist_len - 1, amax[0], rolled)
        amax_history[:] = new_hist
        scale[0] = FP8_MAX / torch.amax(new_hist)
    return out, amax_history, scale


def _fp8_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K, H)``: x ~ 3 N(0, 1); a history of earlier absmaxes in [2, 12]."""
    m, k, hist = shape
    if device == "meta":
        return (*meta_tensors((m, k), dtype=BF16), *meta_tensors((hist,), (1,)))
    g = gen(seed)
    x = (3.0 * randn((m, k), F32, device, g)).to(BF16)
    history = 2.0 + 10.0 * torch.rand(hist, generator=g)
    scale = FP8_MAX / history.max().reshape(1)
    return x, history.to(device), scale.to(device)


def fp8_delayed_scaling_cast_reference(x, amax_history, scale):
    y = torch.clamp(x.float() * scale[0], -FP8_MAX, FP8_MAX).to(E4M3)
    new_hist = torch.roll(amax_history, -1, 0).clone()
    new_hist[-1] = x.float().abs().max()
    return y, new_hist, (FP8_MAX / new_hist.max()).reshape(1)


# --------------------------------------------------------------------------- row-wise Adagrad

ADAGRAD_LR = 0.05
ADAGRAD_EPS = 1e-8


@tc.kernel(static_shapes=True)
def rowwise_adagrad_(
    table: torch.Tensor,
    state: torch.Tensor,
    indices: torch.Tensor,
    grads: torch.Tensor,
    lr: float,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FBGEMM's row-wise Adagrad on an embedding table [V, D] fp32 with one accumulator per row
    (state [V] fp32): for each of the U unique rows indices [U] int64 with gradient grads
    [U, D], state[r] += mean(g^2), table[r] -= lr * g / (sqrt(state[r]) + eps), in place."""
    u = indices.size(0)
    for tu in tc.tile(u):
        rows = indices[tu]
        g = grads[tu, :]
        acc = state[rows] + torch.mean(g * g, dim=1)
        state[rows] = acc
        table[rows, :] = table[rows, :] - lr * g / (torch.sqrt(acc)[:, None] + eps)
    return table, state


def _adagrad_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (V, D, U)``: U distinct rows, a state of earlier squares in [0.1, 1.1)."""
    v, d, u = shape
    if device == "meta":
        return (
            *meta_tensors((v, d), (v,)),
            torch.empty((u,), dtype=I64, device="meta"),
            *meta_tensors((u, d)),
        )
    g = gen(seed)
    table = randn((v, d), F32, device, g)
    state = (0.1 + torch.rand(v, generator=g)).to(device)
    indices = torch.randperm(v, generator=g)[:u].to(device)
    grads = randn((u, d), F32, device, g)
    return table, state, indices, grads


def rowwise_adagrad_reference(table, state, indices, grads, lr=ADAGRAD_LR, eps=ADAGRAD_EPS):
    table, state = table.clone(), state.clone()
    acc = state[indices] + grads.pow(2).mean(dim=1)
    state[indices] = acc
    table[indices] -= lr * grads / (acc.sqrt()[:, None] + eps)
    return table, state


# --------------------------------------------------------------------------- differential attention

DIFF_LAMBDA_INIT = 0.8


@tc.kernel(static_shapes=True)
def diff_attention_causal(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lam: torch.Tensor, lambda_init: float
) -> torch.Tensor:
    """Causal differential attention (Differential Transformer): q, k [B, H, S, 2d] bf16 hold
    the two query / key halves, v [B, H, S, 2d]; lam [H] fp32 each head's lambda.
    out = (softmax(q1 k1^T / sqrt d) - lam softmax(q2 k2^T / sqrt d)) v, RMS-normalized over 2d
    (eps 1e-5, no affine) and times (1 - lambda_init); bf16 [B, H, S, 2d]."""
    b, h, s, d2 = q.size()
    d = d2 // 2
    qf = q.reshape(b * h, s, d2)
    kf = k.reshape(b * h, s, d2)
    vf = v.reshape(b * h, s, d2)
    out = torch.empty([b * h, s, d2], dtype=q.dtype, device=q.device)
    sm_scale = 1.0 / math.sqrt(d)
    for tbh, tq in tc.tile([b * h, s], block_size=[1, None]):
        lam_h = lam[tbh.begin % h]
        q1 = qf[tbh.begin, tq, :d].to(torch.float32) * sm_scale
        q2 = qf[tbh.begin, tq, d:].to(torch.float32) * sm_scale
        m1 = tc.full([tq], float("-inf"), dtype=torch.float32)
        m2 = tc.full([tq], float("-inf"), dtype=torch.float32)
        l1 = tc.zeros([tq], dtype=torch.float32)
        l2 = tc.zeros([tq], dtype=torch.float32)
        acc1 = tc.zeros([tq, d2], dtype=torch.float32)
        acc2 = tc.zeros([tq, d2], dtype=torch.float32)
        for tk in tc.tile(s):
            k1 = kf[tbh.begin, tk, :d].to(torch.float32)
            k2 = kf[tbh.begin, tk, d:].to(torch.float32)
            vt = vf[tbh.begin, tk, :].to(torch.float32)
            causal = tk.index[None, :] <= tq.index[:, None]
            s1 = torch.where(causal, tc.dot(q1, k1.t()), float("-inf"))
            s2 = torch.where(causal, tc.dot(q2, k2.t()), float("-inf"))
            n1 = torch.maximum(m1, torch.amax(s1, dim=1))
            n2 = torch.maximum(m2, torch.amax(s2, dim=1))
            safe1 = torch.where(n1 == float("-inf"), 0.0, n1)
            safe2 = torch.where(n2 == float("-inf"), 0.0, n2)
            p1 = torch.exp(s1 - safe1[:, None])
            p2 = torch.exp(s2 - safe2[:, None])
            a1 = torch.exp(m1 - safe1)
            a2 = torch.exp(m2 - safe2)
            l1 = l1 * a1 + torch.sum(p1, dim=1)
            l2 = l2 * a2 + torch.sum(p2, dim=1)
            acc1 = acc1 * a1[:, None] + tc.dot(p1, vt)
            acc2 = acc2 * a2[:, None] + tc.dot(p2, vt)
            m1 = n1
            m2 = n2
        o = acc1 / l1[:, None] - lam_h * (acc2 / l2[:, None])
        o = o * torch.rsqrt(torch.mean(o * o, dim=1) + 1e-5)[:, None]
        out[tbh.begin, tq, :] = (o * (1.0 - lambda_init)).to(out.dtype)
    return out.view(b, h, s, d2)


def _diff_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S, d)``: q / k / v carry 2d features; lambdas in [0.2, 0.6]."""
    b, h, s, d = shape
    if device == "meta":
        return (
            *meta_tensors((b, h, s, 2 * d), (b, h, s, 2 * d), (b, h, s, 2 * d), dtype=BF16),
            *meta_tensors((h,)),
        )
    g = gen(seed)
    q, k, v = (randn((b, h, s, 2 * d), BF16, device, g) for _ in range(3))
    lam = (0.2 + 0.4 * torch.rand(h, generator=g)).to(device)
    return q, k, v, lam


def diff_attention_causal_reference(q, k, v, lam, lambda_init=DIFF_LAMBDA_INIT):
    d = q.size(-1) // 2
    s = q.size(2)
    qf, kf, vf = q.float(), k.float(), v.float()
    causal = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()

    def attn(qq, kk):
        sc = (qq @ kk.transpose(-1, -2)) / math.sqrt(d)
        return torch.softmax(sc.masked_fill(~causal, float("-inf")), dim=-1)

    a = attn(qf[..., :d], kf[..., :d]) - lam[None, :, None, None] * attn(qf[..., d:], kf[..., d:])
    o = a @ vf
    o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5)
    return (o * (1.0 - lambda_init)).to(torch.bfloat16)


# --------------------------------------------------------------------------- cases


def _resample_case_inputs(shape, device, seed):
    return (*_resample_inputs(shape, device, seed), shape[3])


CASES: list[Case] = [
    Case(
        name="linear_resample_1d_ncl",
        kernels=(linear_resample_1d,),
        make_inputs=_resample_case_inputs,
        reference=linear_resample_1d_reference,
        run=lambda ks, inp: ks["linear_resample_1d"](*inp),
        gpu_shapes=((16, 256, 4000, 16000),),  # 4x upsampling of 256-channel features
        cpu_shapes=((2, 3, 50, 80), (1, 4, 37, 21), (3, 2, 64, 128)),
        atol=1e-5,
    ),
    Case(
        name="radix_digit_count_offsets",
        kernels=(radix_count_offsets,),
        make_inputs=lambda sh, dev, seed: (*_radix_inputs(sh, dev, seed), RADIX_SHIFT),
        reference=radix_count_offsets_reference,
        run=lambda ks, inp: ks["radix_count_offsets"](*inp),
        gpu_shapes=((1 << 24,),),  # 16M keys, one pass
        cpu_shapes=((3000,), (1024,), (5000,)),
        atol=0.5,  # integers: exact
    ),
    Case(
        name="ppo_kl_rewards_whiten",
        kernels=(kl_rewards_whiten,),
        make_inputs=_kl_inputs,
        reference=kl_rewards_whiten_reference,
        run=with_args("kl_rewards_whiten", KL_COEF),
        gpu_shapes=((512, 2048),),  # PPO rollout batch of 512 responses of up to 2k tokens
        cpu_shapes=((4, 50), (7, 33), (1, 128)),
        atol=1e-4,
    ),
    one_kernel_case(
        "bitnet_ternary_gemm_decode",
        bitnet_ternary_gemm,
        _bitnet_inputs,
        bitnet_ternary_gemm_reference,
        ((16, 4096, 11008),),  # BitNet 3B-like MLP up projection, 16 decode tokens
        ((4, 128, 48), (1, 256, 32), (9, 128, 40)),
        2.0**-6,  # bf16 out, |y| < 2
    ),
    one_kernel_case(
        "stick_breaking_attention_causal",
        stick_breaking_attention_blocked,
        _sb_inputs,
        stick_breaking_attention_reference,
        ((4, 16, 1024, 64),),
        ((1, 2, 16, 16), (2, 1, 40, 16), (1, 1, 64, 32)),
        1e-4,
    ),
    Case(
        name="fp8_delayed_scaling_cast",
        kernels=(fp8_delayed_scaling_cast,),
        make_inputs=_fp8_inputs,
        reference=fp8_delayed_scaling_cast_reference,
        run=copy_state("fp8_delayed_scaling_cast", (1, 2)),
        gpu_shapes=((8192, 8192, 1024),),  # one activation, TE's default history of 1024
        cpu_shapes=((16, 48, 16), (7, 33, 4), (33, 100, 1024)),
        atol=1e-6,  # fp8 casts bit for bit; the scale exact
    ),
    Case(
        name="rowwise_adagrad_sparse",
        kernels=(rowwise_adagrad_,),
        make_inputs=_adagrad_inputs,
        reference=rowwise_adagrad_reference,
        run=with_args("rowwise_adagrad_", ADAGRAD_LR, ADAGRAD_EPS, mutated=(0, 1)),
        gpu_shapes=((1 << 19, 128, 65536),),  # 512k-row table, 64k touched rows
        cpu_shapes=((100, 16, 30), (37, 24, 37), (500, 64, 3)),
        atol=1e-6,
    ),
    Case(
        name="diff_attention_causal",
        kernels=(diff_attention_causal,),
        make_inputs=_diff_inputs,
        reference=diff_attention_causal_reference,
        run=with_args("diff_attention_causal", DIFF_LAMBDA_INIT),
        gpu_shapes=((2, 16, 2048, 64),),  # Diff Transformer 3B-like, 2k context
        cpu_shapes=((1, 2, 40, 16), (2, 1, 33, 16), (1, 1, 64, 32)),
        atol=2.0**-6,  # bf16 out, |y| < 4
    ),
]

# Explicit small configs each case was also checked with (verify.py configs).
SMALL_CONFIGS: dict[str, list[tc.Config]] = {
    "linear_resample_1d_ncl": [
        tc.Config(block_sizes=[1, 16], num_warps=1),
        tc.Config(block_sizes=[4, 32], num_warps=2, pid_type="persistent_interleaved"),
        tc.Config(block_sizes=[2, 8], num_warps=4, indexing="block_ptr"),
    ],
    "radix_digit_count_offsets": [
        tc.Config(block_sizes=[16], num_warps=1),
        tc.Config(block_sizes=[256], num_warps=8, pid_type="persistent_blocked"),
        tc.Config(block_sizes=[64], num_warps=2, indexing="block_ptr"),
    ],
    "ppo_kl_rewards_whiten": [
        tc.Config(block_sizes=[1, 1, 1], num_warps=1),
        tc.Config(block_sizes=[8, 2, 16], num_warps=8, reduction_loops=[16, 16, 16]),
        tc.Config(block_sizes=[2, 4, 8], num_warps=2, indexing="block_ptr"),
    ],
    "bitnet_ternary_gemm_decode": [
        tc.Config(block_sizes=[1, 16, 16, 32], num_warps=1),
        tc.Config(block_sizes=[2, 16, 32, 32], num_warps=2, reduction_loops=[32]),
        tc.Config(block_sizes=[8, 32, 16, 64], num_warps=8, pid_type="xyz"),
    ],
    "stick_breaking_attention_causal": [
        tc.Config(block_sizes=[16, 16, 16], num_warps=1),
        tc.Config(block_sizes=[32, 16, 32], num_warps=8, pid_type="persistent_interleaved"),
        tc.Config(block_sizes=[64, 32, 16], num_warps=4, num_stages=2),
    ],
    "fp8_delayed_scaling_cast": [
        tc.Config(block_sizes=[1, 16], num_warps=1),
        tc.Config(block_sizes=[32, 128], num_warps=8, pid_type="persistent_blocked"),
        tc.Config(block_sizes=[4, 32], num_warps=2, indexing="block_ptr"),
    ],
    "rowwise_adagrad_sparse": [
        tc.Config(block_sizes=[1], num_warps=1),
        tc.Config(block_sizes=[64], num_warps=8, reduction_loops=[16]),
        tc.Config(block_sizes=[4], num_warps=2, indexing="block_ptr"),
    ],
    "diff_attention_causal": [
        tc.Config(block_sizes=[16, 16], num_warps=1),
        tc.Config(
            block_sizes=[64, 32], num_warps=8, num_stages=2, pid_type="persistent_interleaved"
        ),
        tc.Config(block_sizes=[16, 32], num_warps=2, diagonal_splits=True),
    ],
}

"""Held-out kernels written from the docs only, session 28 (see :mod:`.heldout_rows` for why
held-out kernels exist): BatchNorm1d's training backward over an [N, C] batch (two device loops
in one kernel: a column walk down the rows for the per-channel sums of dy and dy * xhat, which
are also dbias and dweight, then an elementwise pass over [N, C] tiles for dx); a permute of
[B, S, H, D] queries to [B, H, S, D] with the softmax scale folded in; a bf16 outer product of
two fp32 vectors plus a per-column bias (store-bound); RoPE as a complex multiply of interleaved
(re, im) pairs by a per-position complex table in the same layout (the tensors viewed with a last
dim of 2, as ``docs/patterns.md`` shows); a softmax over very short rows ([R, 32] fp32, millions
of rows); the mean and biased variance of each row's first ``lens[m]`` elements (two outputs);
and reflect padding along the last dim of [B, C, L] (the source position of each output column
computed from its index, then a gather-style load). Each comes with its eager reference (see
:mod:`.case`).

Notes: nothing the kernels use was unsupported. ``masked_row_mean_var`` divides by the loaded
length in every lane of its row tile, the padded lanes past M included (they load 0, so the
interpreter warns of an invalid divide, 0 / 0); the stores leave those lanes out.
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randint, randn

BN_EPS = 1e-5  # batchnorm_bwd_nc: the forward's eps (the saved rstd is 1 / sqrt(var + eps))
HEAD_DIM = 128  # heads_permute_scale: the query scale is 1 / sqrt(HEAD_DIM)
PAD = 64  # reflect_pad_1d: elements added on either side of the last dim


# --------------------------------------------------------------------------- BatchNorm1d backward


@tc.kernel(static_shapes=True)
def batchnorm_bwd_nc(
    dy: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BatchNorm1d backward in training mode: dy, x [N, C] bf16 (C contiguous), the forward's
    saved per-channel mean and rstd [C] fp32 and the weight [C] fp32. With xhat = (x - mean) *
    rstd: dbias = sum_n dy, dweight = sum_n dy * xhat, and dx = (dy - dbias / N - xhat *
    dweight / N) * rstd * weight, fp32 math. First device loop: one program per channel tile
    walks the rows for the two sums; second: dx over [N, C] tiles from the stored sums.
    Returns (dx bf16 [N, C], dweight fp32 [C], dbias fp32 [C])."""
    n, c = x.size()
    dx = torch.empty_like(x)
    dweight = torch.empty([c], dtype=torch.float32, device=x.device)
    dbias = torch.empty([c], dtype=torch.float32, device=x.device)
    for tch in tc.tile(c):
        mu = mean[tch]
        r = rstd[tch]
        sum_dy = tc.zeros([tch], dtype=torch.float32)
        sum_dy_xhat = tc.zeros([tch], dtype=torch.float32)
        for tn in tc.tile(n):
            g = dy[tn, tch].to(torch.float32)
            xhat = (x[tn, tch].to(torch.float32) - mu[None, :]) * r[None, :]
            sum_dy = sum_dy + torch.sum(g, dim=0)
            sum_dy_xhat = sum_dy_xhat + torch.sum(g * xhat, dim=0)
        dbias[tch] = sum_dy
        dweight[tch] = sum_dy_xhat
    for tn, tch in tc.tile([n, c]):
        mu = mean[tch][None, :]
        r = rstd[tch][None, :]
        mean_dy = dbias[tch][None, :] / n
        mean_dy_xhat = dweight[tch][None, :] / n
        g = dy[tn, tch].to(torch.float32)
        xhat = (x[tn, tch].to(torch.float32) - mu) * r
        dxv = (g - mean_dy - xhat * mean_dy_xhat) * r * weight[tch][None, :]
        dx[tn, tch] = dxv.to(dx.dtype)
    return dx, dweight, dbias


def _bn_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C)``: activations with a per-channel offset and spread, their batch
    statistics as the forward saved them (mean, rstd = 1 / sqrt(biased var + eps)), an fp32
    weight around 1 and an upstream gradient with a per-channel offset (so the mean of dy is
    not ~0)."""
    c = shape[1]
    g = gen(seed)
    spread = 0.5 + randn((c,), torch.float32, device, g).abs()
    x = randn(shape, torch.float32, device, g) * spread + randn((c,), torch.float32, device, g)
    x = x.to(torch.bfloat16)
    xf = x.float()
    mean = xf.mean(dim=0)
    rstd = torch.rsqrt(xf.var(dim=0, unbiased=False) + BN_EPS)
    weight = 1 + 0.2 * randn((c,), torch.float32, device, g)
    dy = randn(shape, torch.float32, device, g) + 0.3 * randn((c,), torch.float32, device, g)
    return dy.to(torch.bfloat16), x, mean, rstd, weight


def batchnorm_bwd_nc_reference(
    dy: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = dy.float()
    xhat = (x.float() - mean) * rstd
    dbias = g.sum(dim=0)
    dweight = (g * xhat).sum(dim=0)
    n = x.shape[0]
    dx = (g - dbias / n - xhat * (dweight / n)) * (rstd * weight)
    return dx.to(x.dtype), dweight, dbias


# --------------------------------------------------------------------------- heads permute + scale


@tc.kernel(static_shapes=True)
def heads_permute_scale(q: torch.Tensor, scale: float) -> torch.Tensor:
    """q [B, S, H, D] bf16 (as a QKV projection's view leaves it) to [B, H, S, D] bf16, times
    ``scale`` (attention's 1 / sqrt(D) folded into q), fp32 math. One program per (batch,
    head, block of positions): rows of D contiguous elements, read H * D apart, written
    contiguously."""
    b, s, h, d = q.size()
    out = torch.empty([b, h, s, d], dtype=q.dtype, device=q.device)
    for tb, th, ts in tc.tile([b, h, s], block_size=[1, 1, None]):
        rows = q[tb.begin, ts, th.begin, :].to(torch.float32)
        out[tb.begin, th.begin, ts, :] = (rows * scale).to(out.dtype)
    return out


def _permute_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, S, H, D)``: bf16 queries, 2 randn."""
    return ((randn(shape, torch.float32, device, gen(seed)) * 2).to(torch.bfloat16),)


def heads_permute_scale_reference(q: torch.Tensor, scale: float) -> torch.Tensor:
    return (q.float() * scale).permute(0, 2, 1, 3).contiguous().to(q.dtype)


# --------------------------------------------------------------------------- outer product + bias


@tc.kernel(static_shapes=True)
def outer_product_bias(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """out[i, j] = a[i] * b[j] + bias[j] for fp32 vectors a [M], b [N], bias [N] (a rank-1
    update, e.g. a gating score times a direction, plus a bias), stored as bf16 [M, N]: almost
    all of the traffic is the store."""
    (m,) = a.size()
    (n,) = b.size()
    out = torch.empty([m, n], dtype=torch.bfloat16, device=a.device)
    for tm, tn in tc.tile([m, n]):
        val = a[tm][:, None] * b[tn][None, :] + bias[tn][None, :]
        out[tm, tn] = val.to(out.dtype)
    return out


def _outer_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: a, b randn fp32; bias 0.5 randn fp32."""
    m, n = shape
    g = gen(seed)
    a = randn((m,), torch.float32, device, g)
    b = randn((n,), torch.float32, device, g)
    return a, b, 0.5 * randn((n,), torch.float32, device, g)


def outer_product_bias_reference(
    a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    return (a[:, None] * b[None, :] + bias[None, :]).to(torch.bfloat16)


# --------------------------------------------------------------------------- complex multiply


@tc.kernel(static_shapes=True)
def complex_mul_interleaved(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """RoPE as a complex multiply (Llama's ``apply_rotary_emb``): x [T, D] bf16 holds D / 2
    complex numbers per row as interleaved (re, im) pairs, freqs [T, D] bf16 the unit complex
    rotation of each position and pair in the same layout; out = x * freqs (complex), fp32 math,
    bf16 [T, D]. Both are viewed as [T, D / 2, 2] and indexed with 0 and 1 (docs/patterns.md,
    "Interleaved pairs")."""
    t, d = x.size()
    xc = x.view(t, d // 2, 2)
    fc = freqs.view(t, d // 2, 2)
    out = torch.empty([t, d // 2, 2], dtype=x.dtype, device=x.device)
    for tt, tp in tc.tile([t, d // 2]):
        re = xc[tt, tp, 0].to(torch.float32)
        im = xc[tt, tp, 1].to(torch.float32)
        fr = fc[tt, tp, 0].to(torch.float32)
        fi = fc[tt, tp, 1].to(torch.float32)
        out[tt, tp, 0] = (re * fr - im * fi).to(out.dtype)
        out[tt, tp, 1] = (re * fi + im * fr).to(out.dtype)
    return out.view(t, d)


def _complex_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, D)``: x 2 randn bf16; freqs = (cos, sin) of position * inv_freq (base
    10000 over the D / 2 pairs), interleaved and cast to bf16, as a model caches its table."""
    t, d = shape
    x = (randn(shape, torch.float32, device, gen(seed)) * 2).to(torch.bfloat16)
    if device == "meta":
        return x, torch.empty(shape, dtype=torch.bfloat16, device=device)
    inv_freq = 10000.0 ** (-torch.arange(0, d // 2, dtype=torch.float32) * 2 / d)
    angles = torch.arange(t, dtype=torch.float32)[:, None] * inv_freq[None, :]
    freqs = torch.stack([angles.cos(), angles.sin()], dim=-1).reshape(t, d)
    return x, freqs.to(device=device, dtype=torch.bfloat16)


def complex_mul_interleaved_reference(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    t, d = x.shape
    xc = torch.view_as_complex(x.float().reshape(t, d // 2, 2))
    fc = torch.view_as_complex(freqs.float().reshape(t, d // 2, 2))
    return torch.view_as_real(xc * fc).reshape(t, d).to(x.dtype)


# --------------------------------------------------------------------------- short-row softmax


@tc.kernel(static_shapes=True)
def short_rows_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of x [R, 32] fp32 (e.g. attention over a few slots, or MoE
    router logits), with millions of rows: each program takes a block of whole rows."""
    r, _ = x.size()
    out = torch.empty_like(x)
    for tr in tc.tile(r):
        out[tr, :] = torch.softmax(x[tr, :], dim=-1)
    return out


def _short_softmax_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (R, W)``: fp32 logits, 3 randn."""
    return (randn(shape, torch.float32, device, gen(seed)) * 3,)


def short_rows_softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


# --------------------------------------------------------------------------- masked row mean / var


@tc.kernel(static_shapes=True)
def masked_row_mean_var(x: torch.Tensor, lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of x [M, N] bf16, the mean and the biased variance (1 / len) of its first
    lens[m] elements (lens int32 [M], each in [1, N]): the statistics of a padded sequence of
    features. fp32 math, two passes over the row held in registers (the mean, then the
    squared deviations from it). Returns (mean fp32 [M], var fp32 [M])."""
    m, n = x.size()
    mean = torch.empty([m], dtype=torch.float32, device=x.device)
    var = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        length = lens[tm]
        count = length.to(torch.float32)
        valid = tc.arange(n)[None, :] < length[:, None]
        xt = torch.where(valid, x[tm, :].to(torch.float32), 0.0)
        mu = torch.sum(xt, dim=-1) / count
        diff = torch.where(valid, xt - mu[:, None], 0.0)
        mean[tm] = mu
        var[tm] = torch.sum(diff * diff, dim=-1) / count
    return mean, var


def _mean_var_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: bf16 x with a per-row offset and spread; lens int32 uniform in
    [1, N] with one full row and one of length 1."""
    m, n = shape
    g = gen(seed)
    spread = 0.5 + randn((m, 1), torch.float32, device, g).abs()
    x = randn(shape, torch.float32, device, g) * spread + randn((m, 1), torch.float32, device, g)
    lens = randint(1, n + 1, (m,), device, g).to(torch.int32)
    if device != "meta":
        lens[0] = n
        lens[-1] = 1
    return x.to(torch.bfloat16), lens


def masked_row_mean_var_reference(
    x: torch.Tensor, lens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    pos = torch.arange(x.shape[1], device=x.device)
    mask = pos[None, :] < lens[:, None]
    count = lens.float()
    xf = torch.where(mask, x.float(), 0.0)
    mean = xf.sum(dim=1) / count
    diff = torch.where(mask, xf - mean[:, None], 0.0)
    return mean, (diff * diff).sum(dim=1) / count


# --------------------------------------------------------------------------- reflect pad 1-D


@tc.kernel(static_shapes=True)
def reflect_pad_1d(x: torch.Tensor, pad: int) -> torch.Tensor:
    """F.pad(x, (pad, pad), mode="reflect") of x [B, C, L] bf16 (pad < L): out [B, C, L + 2 pad]
    with out[..., j] = x[..., i] for i = |j - pad| reflected again at L - 1 (2 (L - 1) - i
    where i >= L), the edge elements not repeated. The rows are flattened to [B * C, L]; each
    program computes the source column of each output column and loads them."""
    b, c, length = x.size()
    rows = x.reshape(b * c, length)
    out = torch.empty([b * c, length + 2 * pad], dtype=x.dtype, device=x.device)
    for tr, tj in tc.tile([b * c, length + 2 * pad]):
        src = torch.abs(tj.index - pad)
        src = torch.where(src >= length, 2 * (length - 1) - src, src)
        out[tr, tj] = rows[tr, src]
    return out.view(b, c, length + 2 * pad)


def _pad_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, L)``: bf16 signals, randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def reflect_pad_1d_reference(x: torch.Tensor, pad: int) -> torch.Tensor:
    return torch.nn.functional.pad(x, (pad, pad), mode="reflect")


CASES = [
    one_kernel_case(
        "batchnorm_bwd_nc",
        batchnorm_bwd_nc,
        _bn_bwd_inputs,
        batchnorm_bwd_nc_reference,
        ((65536, 1024),),
        ((300, 40), (37, 100)),
        0.07,  # dx in bf16, |dx| < 16: one ulp (0.0625) where fp32 sums in another order round
        # otherwise; dweight / dbias are fp32 sums (errors ~1e-5)
    ),
    Case(
        name="heads_permute_scale",
        kernels=(heads_permute_scale,),
        make_inputs=_permute_inputs,
        reference=lambda q: heads_permute_scale_reference(q, 1 / math.sqrt(HEAD_DIM)),
        run=lambda k, inp: k["heads_permute_scale"](*inp, 1 / math.sqrt(HEAD_DIM)),
        gpu_shapes=((8, 4096, 32, HEAD_DIM),),
        cpu_shapes=((2, 37, 3, 16), (1, 5, 4, 24)),
        atol=1e-6,  # the same fp32 product rounded to bf16: exact
    ),
    one_kernel_case(
        "outer_product_bias",
        outer_product_bias,
        _outer_inputs,
        outer_product_bias_reference,
        ((8192, 8192),),
        ((37, 100), (300, 7)),
        0.07,  # a fused multiply-add may round to the other bf16 neighbour (ulp <= 0.0625)
    ),
    one_kernel_case(
        "complex_mul_interleaved",
        complex_mul_interleaved,
        _complex_inputs,
        complex_mul_interleaved_reference,
        ((16384, 4096),),
        ((37, 64), (5, 200)),
        0.07,  # bf16 out of |x| <= ~10: one ulp where a fused multiply-add rounds otherwise
    ),
    one_kernel_case(
        "short_rows_softmax",
        short_rows_softmax,
        _short_softmax_inputs,
        short_rows_softmax_reference,
        ((4 * 1024 * 1024, 32),),
        ((1000, 32), (37, 32)),
        1e-5,
    ),
    one_kernel_case(
        "masked_row_mean_var",
        masked_row_mean_var,
        _mean_var_inputs,
        masked_row_mean_var_reference,
        ((8192, 8192),),
        ((37, 100), (300, 7)),
        1e-4,
    ),
    Case(
        name="reflect_pad_1d",
        kernels=(reflect_pad_1d,),
        make_inputs=_pad_inputs,
        reference=lambda x: reflect_pad_1d_reference(x, PAD),
        run=lambda k, inp: k["reflect_pad_1d"](*inp, PAD),
        gpu_shapes=((16, 256, 8192),),
        cpu_shapes=((2, 3, 100), (1, 5, 65)),
        atol=1e-6,  # a copy: exact
    ),
]

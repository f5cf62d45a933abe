"""Held-out kernels written from the docs only, session 26 (see :mod:`.heldout_rows` for why
held-out kernels exist): a Huber (smooth-L1 style) loss with the mean reduction over a [N, D]
bf16 pair, 2-D tiles summed into one fp32 scalar with ``tc.atomic_add``; an in-place EMA update
of fp32 shadow parameters from bf16 model weights over a flat tensor; the max and argmax over
dim 0 of a [M, N] matrix (a running max over row tiles per column tile, first index on ties as
``torch.max``); a LayerNorm without affine of each column of a [D, N] tensor (the transposed
layout: the reduction runs down the leading dim); ``torch.bucketize`` of a large fp32 tensor
against a few hundred sorted boundaries (the boundaries loaded whole, a count of compares per
value); a GEGLU forward (the value and gate halves of the last dim, erf GELU on the gate);
sigmoid attention (Apple's ``sigmoid(q k^T / sqrt(d) - log L) v``: no normalizer, no running
max) over a (batch, head, query tile) grid; and the backward of the Mish activation. Each comes
with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randint, randn

HUBER_DELTA = 0.5  # huber_loss_mean: quadratic below, linear above
EMA_DECAY = 0.9999  # ema_update_inplace: a typical diffusion / SSL teacher decay


# --------------------------------------------------------------------------- Huber loss, mean


@tc.kernel(static_shapes=True)
def huber_loss_mean(
    pred: torch.Tensor, target: torch.Tensor, delta: float = HUBER_DELTA
) -> torch.Tensor:
    """torch.nn.functional.huber_loss(pred, target, delta=HUBER_DELTA) with the mean reduction:
    pred, target [N, D] bf16 (e.g. box or value regression), fp32 math. Each (row, column)
    tile adds its loss sum into one fp32 scalar with tc.atomic_add; the kernel's host code
    divides by N * D. Returns a 0-d fp32 tensor."""
    n, d = pred.size()
    total = torch.zeros([1], dtype=torch.float32, device=pred.device)
    for tn, td in tc.tile([n, d]):
        diff = pred[tn, td].to(torch.float32) - target[tn, td].to(torch.float32)
        ad = torch.abs(diff)
        loss = torch.where(ad < delta, 0.5 * diff * diff, delta * (ad - 0.5 * delta))
        tc.atomic_add(total, [0], torch.sum(loss))
    return total[0] / (n * d)


def _huber_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, D)``: bf16 predictions (randn) and targets (predictions plus 0.7 randn
    noise, so both the quadratic and the linear branch are common)."""
    g = gen(seed)
    pred = randn(shape, torch.float32, device, g)
    target = pred + 0.7 * randn(shape, torch.float32, device, g)
    return pred.to(torch.bfloat16), target.to(torch.bfloat16)


def huber_loss_mean_reference(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.huber_loss(pred.float(), target.float(), delta=HUBER_DELTA)


# --------------------------------------------------------------------------- EMA update, in place


@tc.kernel(static_shapes=True)
def ema_update(ema: torch.Tensor, model: torch.Tensor, decay: float = EMA_DECAY) -> None:
    """EMA of model weights, in place (timm's ModelEmaV3 / a diffusion model's EMA, all params
    flattened into one buffer): ema [N] fp32, model [N] bf16 (the trained weights).
    ema = decay * ema + (1 - decay) * model. Nothing is returned: ema is updated."""
    (n,) = ema.size()
    for tn in tc.tile(n):
        ema[tn] = decay * ema[tn] + (1.0 - decay) * model[tn].to(torch.float32)


def _ema_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: fp32 EMA weights (0.02 randn) and bf16 model weights (the EMA plus
    0.001 randn of drift)."""
    g = gen(seed)
    ema = randn(shape, torch.float32, device, g) * 0.02
    model = (ema + randn(shape, torch.float32, device, g) * 0.001).to(torch.bfloat16)
    return ema, model


def ema_update_reference(ema: torch.Tensor, model: torch.Tensor) -> torch.Tensor:
    """On a copy (the case's run copies the state before the in-place kernel)."""
    return ema.clone().mul_(EMA_DECAY).add_(model.float(), alpha=1.0 - EMA_DECAY)


def _run_ema(kernels: Mapping[str, Callable[..., Any]], inputs: Inputs) -> torch.Tensor:
    """The kernel updates in place: copy the EMA first, so the inputs stay as they were."""
    ema, model = inputs
    out = ema.clone()
    kernels["ema_update"](out, model)
    return out


# --------------------------------------------------------------------------- column max / argmax


@tc.kernel(static_shapes=True)
def column_max_argmax(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.max(x, dim=0) of x [M, N] bf16: the largest value of each column and the row where
    it first occurs (the smallest row index on ties, as torch). Each program owns a column tile
    and walks the row tiles in order, keeping the running max and its row; a later tile wins
    only with a strictly larger value. Returns (values bf16 [N], indices int64 [N])."""
    m, n = x.size()
    values = torch.empty([n], dtype=x.dtype, device=x.device)
    indices = torch.empty([n], dtype=torch.int64, device=x.device)
    for tn in tc.tile(n):
        best = tc.full([tn], float("-inf"), dtype=torch.float32)
        best_idx = tc.zeros([tn], dtype=torch.int64)
        for tm in tc.tile(m):
            v, i = torch.max(x[tm, tn].to(torch.float32), dim=0)
            better = v > best
            best_idx = torch.where(better, i.to(torch.int64) + tm.begin, best_idx)
            best = torch.where(better, v, best)
        values[tn] = best.to(values.dtype)
        indices[tn] = best_idx
    return values, indices


def _colmax_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: bf16 scores rounded to multiples of 0.25 (randn times 2), so a
    column's max often occurs more than once and the first-index rule matters."""
    x = randn(shape, torch.float32, device, gen(seed)) * 2
    return ((x * 4).round().div(4).to(torch.bfloat16),)


def column_max_argmax_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.max(x.float(), dim=0)
    return values.to(x.dtype), indices


# --------------------------------------------------------------------------- LayerNorm of columns


@tc.kernel(static_shapes=True)
def layer_norm_columns(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm without affine of the transposed input: x [D, N] bf16 contiguous (features
    first, e.g. an activation kept as [hidden, tokens]), each column of D normalized:
    torch.layer_norm(x.t(), (D,)).t(), fp32 math, biased variance. Each program owns a tile of
    columns with the whole D dim. Returns bf16 [D, N]."""
    _, n = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        xt = x[:, tn].to(torch.float32)
        mean = torch.mean(xt, dim=0)
        centered = xt - mean[None, :]
        var = torch.mean(centered * centered, dim=0)
        out[:, tn] = (centered * torch.rsqrt(var + eps)[None, :]).to(out.dtype)
    return out


def _ln_columns_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (D, N)``: bf16, 1.5 randn + 0.3."""
    x = randn(shape, torch.float32, device, gen(seed)) * 1.5 + 0.3
    return (x.to(torch.bfloat16),)


def layer_norm_columns_reference(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[0]
    return torch.nn.functional.layer_norm(x.float().t(), (d,), eps=1e-5).t().to(x.dtype)


# --------------------------------------------------------------------------- bucketize


@tc.kernel(static_shapes=True)
def bucketize_values(values: torch.Tensor, boundaries: torch.Tensor) -> torch.Tensor:
    """torch.bucketize(values, boundaries) (right=False): values [N] fp32, boundaries [B]
    sorted fp32. The bucket of v is the number of boundaries strictly below it (v equal to a
    boundary goes to that boundary's index). Each program loads a tile of values and all the
    boundaries and counts the compares. Returns int64 [N]."""
    (n,) = values.size()
    out = torch.empty([n], dtype=torch.int64, device=values.device)
    for tn in tc.tile(n):
        v = values[tn]
        below = boundaries[None, :] < v[:, None]
        out[tn] = torch.sum(below.to(torch.int64), dim=1)
    return out


def _bucketize_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, B)``: fp32 values (randn) and B sorted boundaries (1.2 randn, sorted, as
    quantile bins); every 7th value is set to a boundary exactly (ties)."""
    n, b = shape
    g = gen(seed)
    vals = randn((n,), torch.float32, device, g)
    bounds = randn((b,), torch.float32, device, g) * 1.2
    if device == "meta":
        return vals, bounds
    bounds = torch.sort(bounds).values
    pick = randint(0, b, (n,), device, g)
    tie = torch.arange(n, device=device) % 7 == 0
    vals = torch.where(tie, bounds[pick], vals)
    return vals, bounds


def bucketize_values_reference(values: torch.Tensor, boundaries: torch.Tensor) -> torch.Tensor:
    return torch.bucketize(values, boundaries)


# --------------------------------------------------------------------------- GEGLU


@tc.kernel(static_shapes=True)
def geglu_forward(x: torch.Tensor) -> torch.Tensor:
    """GEGLU (diffusers' / T5 v1.1's feed-forward gate): x [T, 2H] bf16, the output of the up
    projection; value, gate = x.chunk(2, dim=-1); out = value * gelu(gate) with the exact
    (erf) GELU, fp32 math. Returns bf16 [T, H]."""
    t, h2 = x.size()
    h = h2 // 2
    x3 = x.view(t, 2, h)
    out = torch.empty([t, h], dtype=x.dtype, device=x.device)
    for tt, th in tc.tile([t, h]):
        value = x3[tt, 0, th].to(torch.float32)
        gate = x3[tt, 1, th].to(torch.float32)
        out[tt, th] = (value * torch.nn.functional.gelu(gate)).to(out.dtype)
    return out


def _geglu_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, 2H)``: bf16 projections, 1.5 randn."""
    return ((randn(shape, torch.float32, device, gen(seed)) * 1.5).to(torch.bfloat16),)


def geglu_forward_reference(x: torch.Tensor) -> torch.Tensor:
    value, gate = x.float().chunk(2, dim=-1)
    return (value * torch.nn.functional.gelu(gate)).to(x.dtype)


# --------------------------------------------------------------------------- sigmoid attention


@tc.kernel(static_shapes=True)
def sigmoid_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Sigmoid attention (Ramapuram et al. 2024, FlashSigmoid): q, k, v [B, H, L, D] bf16,
    non-causal; p = sigmoid(q k^T / sqrt(D) + bias) with bias = -log(L), out = p @ v. No
    row normalizer, so the key loop just accumulates p @ v in fp32. Grid over (batch, head,
    query tile). Returns bf16 [B, H, L, D]."""
    b, h, seq, d = q.size()
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    bias = -math.log(seq)
    out = torch.empty_like(q)
    for tb, th, tq in tc.tile([b, h, seq], block_size=[1, 1, None]):
        qt = q[tb.begin, th.begin, tq, :]
        acc = tc.zeros([tq, d], dtype=torch.float32)
        for tk in tc.tile(seq):
            scores = (qt @ k[tb.begin, th.begin, tk, :].t()).to(torch.float32) * scale + bias
            p = torch.sigmoid(scores)
            acc = acc + p.to(v.dtype) @ v[tb.begin, th.begin, tk, :]
        out[tb.begin, th.begin, tq, :] = acc.to(out.dtype)
    return out


def _sigmoid_attn_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, L, D)``: q, k, v bf16 normal."""
    g = gen(seed)
    return tuple(randn(shape, torch.bfloat16, device, g) for _ in range(3))


def sigmoid_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    seq, d = q.shape[-2], q.shape[-1]
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d) - math.log(seq)
    return (torch.sigmoid(scores) @ v.float()).to(q.dtype)


# --------------------------------------------------------------------------- Mish backward


@tc.kernel(static_shapes=True)
def mish_bwd(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Backward of mish(x) = x * tanh(softplus(x)) for grad_out, x [B, S, D] bf16 (the
    forward's input saved): with t = tanh(softplus(x)), d mish / dx = t + x * sigmoid(x) *
    (1 - t^2); fp32 math. Rows are the flattened (B, S). Returns bf16 grad_in [B, S, D]."""
    b, s, d = x.size()
    x2 = x.reshape(b * s, d)
    dy2 = grad_out.reshape(b * s, d)
    grad_in = torch.empty([b * s, d], dtype=x.dtype, device=x.device)
    for tr, td in tc.tile([b * s, d]):
        xt = x2[tr, td].to(torch.float32)
        t = torch.tanh(torch.nn.functional.softplus(xt))
        dmish = t + xt * torch.sigmoid(xt) * (1.0 - t * t)
        grad_in[tr, td] = (dy2[tr, td].to(torch.float32) * dmish).to(grad_in.dtype)
    return grad_in.view(b, s, d)


def _mish_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, S, D)``: bf16 grad_out (randn) and x (3 randn: both tails of mish)."""
    g = gen(seed)
    grad_out = randn(shape, torch.bfloat16, device, g)
    x = (randn(shape, torch.float32, device, g) * 3).to(torch.bfloat16)
    return grad_out, x


def mish_bwd_reference(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    xf = x.float().requires_grad_(True)
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(torch.nn.functional.mish(xf), xf, grad_out.float())
    return grad.to(x.dtype)


CASES = [
    one_kernel_case(
        "huber_loss_mean",
        huber_loss_mean,
        _huber_inputs,
        huber_loss_mean_reference,
        ((16384, 4096), (8192, 8192)),
        ((37, 100), (5, 333)),
        1e-4,
    ),
    Case(
        name="ema_update_inplace",
        kernels=(ema_update,),
        make_inputs=_ema_inputs,
        reference=ema_update_reference,
        run=_run_ema,
        gpu_shapes=((67108864,), (25165827,)),
        cpu_shapes=((1000,), (77,)),
        atol=1e-7,
        timed_run=lambda k, inputs: k["ema_update"](*inputs),
        timed_reference=lambda ema, model: ema.mul_(EMA_DECAY).add_(
            model.float(), alpha=1.0 - EMA_DECAY
        ),
    ),
    one_kernel_case(
        "column_max_argmax",
        column_max_argmax,
        _colmax_inputs,
        column_max_argmax_reference,
        ((32768, 4096), (4096, 32000)),
        ((37, 100), (300, 7)),
        0.5,  # indices are integers: any mismatch fails; values are exact
    ),
    one_kernel_case(
        "layer_norm_columns",
        layer_norm_columns,
        _ln_columns_inputs,
        layer_norm_columns_reference,
        ((4096, 16384), (1024, 65536)),
        ((100, 37), (7, 50)),
        3e-2,
    ),
    one_kernel_case(
        "bucketize_values",
        bucketize_values,
        _bucketize_inputs,
        bucketize_values_reference,
        ((16777216, 256), (4194304, 1024)),
        ((1000, 64), (77, 5)),
        0.5,  # integers: any mismatch fails
    ),
    one_kernel_case(
        "geglu_forward",
        geglu_forward,
        _geglu_inputs,
        geglu_forward_reference,
        ((16384, 8192), (4096, 28672)),
        ((37, 100), (3, 18)),
        3e-2,
    ),
    one_kernel_case(
        "sigmoid_attention",
        sigmoid_attention,
        _sigmoid_attn_inputs,
        sigmoid_attention_reference,
        ((8, 16, 4096, 128), (4, 32, 2048, 64)),
        ((1, 2, 33, 16), (2, 1, 20, 32)),
        2e-2,
    ),
    one_kernel_case(
        "mish_bwd",
        mish_bwd,
        _mish_bwd_inputs,
        mish_bwd_reference,
        ((8, 4096, 4096), (16, 2048, 5120)),
        ((2, 37, 50), (1, 3, 130)),
        3e-2,
    ),
]

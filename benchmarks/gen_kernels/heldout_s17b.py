"""Held-out kernels written from the docs only, session 17, second set (see :mod:`.heldout_rows`
for why held-out kernels exist): the SwiGLU backward (both input gradients, silu' written out
with sigmoid), a row softmax followed by dropout from ``tc.rand``, instance norm over a
channels-last NHWC image, the embedding backward scattering rows into an fp32 gradient by atomic
adds, a mean-squared-error loss to one scalar by atomic adds, a running maximum along each row by
a chunked ``tc.associative_scan`` carrying the maximum across chunks, per-tensor int8
quantization (a global absmax by atomic max, then the rounding kernel), and the input gradient of
an RMSNorm over a residual sum. Each comes with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

DROPOUT_SEED = 2024
DROPOUT_P = 0.1
INT8_MAX = 127.0


# --------------------------------------------------------------------------- SwiGLU backward


@tc.kernel(static_shapes=True)
def swiglu_bwd(
    a: torch.Tensor, b: torch.Tensor, dout: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """a (gate), b (up), dout [T, F] bf16, for out = silu(a) * b: da = dout * b * silu'(a) with
    silu'(a) = sigmoid(a) * (1 + a * (1 - sigmoid(a))), and db = dout * silu(a); fp32 math, bf16
    out."""
    t, f = a.size()
    da = torch.empty_like(a)
    db = torch.empty_like(b)
    for tt, tf in tc.tile([t, f]):
        av = a[tt, tf].to(torch.float32)
        bv = b[tt, tf].to(torch.float32)
        g = dout[tt, tf].to(torch.float32)
        sig = torch.sigmoid(av)
        dsilu = sig * (1.0 + av * (1.0 - sig))
        da[tt, tf] = (g * bv * dsilu).to(da.dtype)
        db[tt, tf] = (g * av * sig).to(db.dtype)
    return da, db


def _swiglu_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, F)``: the gate and up projections and the upstream gradient."""
    g = gen(seed)
    return tuple(randn(shape, torch.bfloat16, device, g) for _ in range(3))


def swiglu_bwd_reference(
    a: torch.Tensor, b: torch.Tensor, dout: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    af, bf, gf = a.float(), b.float(), dout.float()
    sig = torch.sigmoid(af)
    da = gf * bf * (sig + af * sig * (1 - sig))
    db = gf * torch.nn.functional.silu(af)
    return da.to(a.dtype), db.to(b.dtype)


# --------------------------------------------------------------------------- softmax + dropout


@tc.kernel(static_shapes=True)
def softmax_dropout_rows(logits: torch.Tensor, seed: int, p: float) -> torch.Tensor:
    """logits [R, C] bf16: softmax over each row in fp32, then dropout (keep where
    ``tc.rand >= p``, kept values scaled by 1 / (1 - p)), as on attention probabilities.
    Returns bf16 [R, C]."""
    r, c = logits.size()
    out = torch.empty_like(logits)
    scale = 1.0 / (1.0 - p)
    for tr in tc.tile(r):
        probs = torch.softmax(logits[tr, :].to(torch.float32), dim=-1)
        keep = tc.rand([tr, c], seed) >= p
        out[tr, :] = torch.where(keep, probs * scale, 0.0).to(out.dtype)
    return out


def _softmax_dropout_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (R, C)``: bf16 attention scores."""
    return (randn(shape, torch.bfloat16, device, gen(seed)) * 2,)


def softmax_dropout_rows_reference(
    logits: torch.Tensor, seed: int = DROPOUT_SEED, p: float = DROPOUT_P
) -> torch.Tensor:
    # the same Philox numbers the kernel draws: tc.rand on the host numbers elements row-major
    keep = tc.rand(tuple(logits.shape), seed, device=logits.device) >= p
    probs = torch.softmax(logits.float(), dim=-1)
    return torch.where(keep, probs / (1.0 - p), 0.0).to(logits.dtype)


# --------------------------------------------------------------------------- instance norm NHWC


@tc.kernel(static_shapes=True)
def instance_norm_nhwc(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """x [N, H, W, C] bf16 (channels last, C contiguous), weight / bias [C] bf16: InstanceNorm,
    the mean and biased variance per (n, c) over H * W in fp32 (two passes), then
    (x - mean) * rstd * weight + bias in a third pass. Returns bf16 [N, H, W, C]."""
    n, h, w, c = x.size()
    hw = h * w
    xv = x.view(n, hw, c)
    out = torch.empty_like(xv)
    for tn, tch in tc.tile([n, c]):
        total = tc.zeros([tn, tch], dtype=torch.float32)
        for ts in tc.tile(hw):
            total = total + torch.sum(xv[tn, ts, tch].to(torch.float32), dim=1)
        mean = total / hw
        sq = tc.zeros([tn, tch], dtype=torch.float32)
        for ts in tc.tile(hw):
            diff = xv[tn, ts, tch].to(torch.float32) - mean[:, None, :]
            sq = sq + torch.sum(diff * diff, dim=1)
        rstd = torch.rsqrt(sq / hw + eps)
        wt = weight[tch].to(torch.float32)
        bt = bias[tch].to(torch.float32)
        for ts in tc.tile(hw):
            xhat = (xv[tn, ts, tch].to(torch.float32) - mean[:, None, :]) * rstd[:, None, :]
            out[tn, ts, tch] = (xhat * wt[None, None, :] + bt[None, None, :]).to(out.dtype)
    return out.view(n, h, w, c)


def _instance_norm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, H, W, C)``: activations with a per-channel offset, and the affine."""
    c = shape[3]
    g = gen(seed)
    x = randn(shape, torch.float32, device, g) * 1.5 + randn((c,), torch.float32, device, g)
    w = (1 + 0.2 * randn((c,), torch.float32, device, g)).to(torch.bfloat16)
    b = (0.2 * randn((c,), torch.float32, device, g)).to(torch.bfloat16)
    return x.to(torch.bfloat16), w, b


def instance_norm_nhwc_reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    xf = x.float().permute(0, 3, 1, 2)  # NCHW view of the channels-last data
    y = torch.nn.functional.instance_norm(xf, weight=weight.float(), bias=bias.float(), eps=eps)
    return y.permute(0, 2, 3, 1).to(x.dtype)


# --------------------------------------------------------------------------- embedding backward


@tc.kernel(static_shapes=True)
def embedding_bwd_atomic(
    ids: torch.Tensor, grad_out: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    """ids [T] int64, grad_out [T, D] bf16, weight [V, D] bf16 (the embedding table, only its
    shape is used): grad_weight [V, D] fp32, zeroed on the host, with each token's gradient row
    added into row ids[t] by atomic adds (tokens repeat)."""
    t, d = grad_out.size()
    v = weight.size(0)
    grad_weight = torch.zeros([v, d], dtype=torch.float32, device=grad_out.device)
    for tt, td in tc.tile([t, d]):
        rows = ids[tt]
        tc.atomic_add(grad_weight, [rows, td], grad_out[tt, td].to(torch.float32))
    return grad_weight


def _embedding_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, D, V)``: token ids (with repeats), the upstream gradient and the table."""
    t, d, v = shape
    g = gen(seed)
    ids = torch.randint(0, v, (t,), generator=g).to(device)
    grad_out = randn((t, d), torch.bfloat16, device, g)
    weight = randn((v, d), torch.bfloat16, device, g)
    return ids, grad_out, weight


def embedding_bwd_atomic_reference(
    ids: torch.Tensor, grad_out: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=grad_out.device)
    return grad_weight.index_add_(0, ids, grad_out.float())


# --------------------------------------------------------------------------- MSE loss


@tc.kernel(static_shapes=True)
def mse_loss_mean(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """pred, target [N, D] bf16: mean((pred - target) ** 2) as one fp32 scalar. Each tile adds
    its sum of squared errors into a one-element fp32 accumulator atomically; the division by
    N * D happens on the host."""
    n, d = pred.size()
    total = torch.zeros([1], dtype=torch.float32, device=pred.device)
    for tn, td in tc.tile([n, d]):
        diff = pred[tn, td].to(torch.float32) - target[tn, td].to(torch.float32)
        tc.atomic_add(total, [0], torch.sum(diff * diff))
    return total[0] / (n * d)


def _mse_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, D)``: predictions and targets near them."""
    g = gen(seed)
    target = randn(shape, torch.bfloat16, device, g)
    pred = (target.float() + 0.5 * randn(shape, torch.float32, device, g)).to(torch.bfloat16)
    return pred, target


def mse_loss_mean_reference(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.mse_loss(pred.float(), target.float())


# --------------------------------------------------------------------------- running max


def _running_max(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.maximum(a, b)


@tc.kernel(static_shapes=True)
def cummax_rows(x: torch.Tensor) -> torch.Tensor:
    """x [R, C] bf16: the running maximum along each row (cummax's values), chunk by chunk: an
    inclusive max scan of each chunk with ``tc.associative_scan``, combined with the maximum
    carried over from the chunks before it."""
    r, c = x.size()
    out = torch.empty_like(x)
    for tr in tc.tile(r):
        carry = tc.full([tr], float("-inf"), dtype=torch.float32)
        for tcol in tc.tile(c):
            v = x[tr, tcol].to(torch.float32)
            run = tc.associative_scan(_running_max, v, 1)
            out[tr, tcol] = torch.maximum(run, carry[:, None]).to(out.dtype)
            carry = torch.maximum(carry, torch.amax(v, dim=1))
    return out


def _cummax_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (R, C)``: bf16 values."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def cummax_rows_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cummax(x.float(), dim=1).values.to(x.dtype)


# --------------------------------------------------------------------------- int8 per tensor


@tc.kernel(static_shapes=True)
def int8_absmax(x: torch.Tensor) -> torch.Tensor:
    """x [N, D] bf16: max |x| over the whole tensor into a one-element fp32 buffer (zeroed on the
    host: |x| >= 0), one atomic max per tile."""
    n, d = x.size()
    amax = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tn, td in tc.tile([n, d]):
        tc.atomic_max(amax, [0], torch.amax(torch.abs(x[tn, td].to(torch.float32))))
    return amax


@tc.kernel(static_shapes=True)
def int8_quantize(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [N, D] bf16, scale [1] fp32: q = clamp(round(x / scale), -127, 127) as int8 (round half
    to even, as torch.round)."""
    n, d = x.size()
    q = torch.empty([n, d], dtype=torch.int8, device=x.device)
    for tn, td in tc.tile([n, d]):
        s = scale[0]
        y = torch.round(x[tn, td].to(torch.float32) / s)
        q[tn, td] = torch.clamp(y, -INT8_MAX, INT8_MAX).to(torch.int8)
    return q


def _run_int8(kernels: Mapping[str, Any], inputs: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
    (x,) = inputs
    scale = kernels["int8_absmax"](x) / INT8_MAX
    return kernels["int8_quantize"](x, scale), scale


def _int8_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, D)``: bf16 activations."""
    return (randn(shape, torch.bfloat16, device, gen(seed)) * 3,)


def int8_quant_per_tensor_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    scale = (xf.abs().amax() / INT8_MAX).reshape(1)
    q = torch.round(xf / scale).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


# --------------------------------------------------------------------------- RMSNorm backward


@tc.kernel(static_shapes=True)
def rms_norm_residual_bwd(
    h: torch.Tensor, w: torch.Tensor, dy: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    """For y = rmsnorm(x + r) * w: h = x + r [T, D] bf16 (saved), w [D] bf16, dy [T, D] bf16,
    rstd [T] fp32 (saved): the gradient of h (the same for x and r),
    dh = rstd * (dy * w - h * rstd^2 * mean(dy * w * h)), fp32 math, bf16 out."""
    t, d = h.size()
    dh = torch.empty_like(h)
    for tt in tc.tile(t):
        hv = h[tt, :].to(torch.float32)
        g = dy[tt, :].to(torch.float32) * w[None, :].to(torch.float32)
        r = rstd[tt]
        c = torch.mean(g * hv, dim=-1)
        dh[tt, :] = (r[:, None] * (g - hv * (r * r * c)[:, None])).to(dh.dtype)
    return dh


def _rms_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, D)``: the residual sum, the weight, the upstream gradient and the rstd the
    forward saved (computed from h)."""
    d = shape[1]
    g = gen(seed)
    h = randn(shape, torch.bfloat16, device, g) * 2
    w = (1 + 0.2 * randn((d,), torch.float32, device, g)).to(torch.bfloat16)
    dy = randn(shape, torch.bfloat16, device, g)
    rstd = torch.rsqrt(h.float().pow(2).mean(-1) + 1e-6)
    return h, w, dy, rstd


def rms_norm_residual_bwd_reference(
    h: torch.Tensor, w: torch.Tensor, dy: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    hf, g = h.float(), dy.float() * w.float()
    r = rstd[:, None]
    dh = r * g - hf * r**3 * (g * hf).mean(-1, keepdim=True)
    return dh.to(h.dtype)


CASES = [
    one_kernel_case(
        "swiglu_bwd",
        swiglu_bwd,
        _swiglu_bwd_inputs,
        swiglu_bwd_reference,
        ((8192, 14336),),
        ((37, 100), (5, 77)),
        # one bf16 ulp of gradients up to 16 (the interpreter truncates fp32 -> bf16)
        6.25e-2,
    ),
    Case(
        name="softmax_dropout_rows",
        kernels=(softmax_dropout_rows,),
        make_inputs=_softmax_dropout_inputs,
        reference=softmax_dropout_rows_reference,
        run=lambda k, inp: k["softmax_dropout_rows"](*inp, DROPOUT_SEED, DROPOUT_P),
        gpu_shapes=((16384, 4096),),
        cpu_shapes=((37, 100), (9, 333)),
        atol=2e-2,
    ),
    one_kernel_case(
        "instance_norm_nhwc",
        instance_norm_nhwc,
        _instance_norm_inputs,
        instance_norm_nhwc_reference,
        ((16, 64, 64, 512),),
        ((2, 5, 7, 37), (3, 9, 11, 20)),
        6.25e-2,
    ),
    one_kernel_case(
        "embedding_bwd_atomic",
        embedding_bwd_atomic,
        _embedding_bwd_inputs,
        embedding_bwd_atomic_reference,
        ((16384, 4096, 32000),),
        ((77, 37, 20), (50, 100, 9)),
        1e-3,
    ),
    one_kernel_case(
        "mse_loss_mean",
        mse_loss_mean,
        _mse_inputs,
        mse_loss_mean_reference,
        ((16384, 8192),),
        ((37, 100), (70, 33)),
        1e-4,
    ),
    one_kernel_case(
        "cummax_rows",
        cummax_rows,
        _cummax_inputs,
        cummax_rows_reference,
        ((4096, 16384),),
        ((37, 100), (5, 777)),
        1e-6,  # a running max copies values: exact
    ),
    Case(
        name="int8_quant_per_tensor",
        kernels=(int8_absmax, int8_quantize),
        make_inputs=_int8_inputs,
        reference=int8_quant_per_tensor_reference,
        run=_run_int8,
        gpu_shapes=((8192, 8192),),
        cpu_shapes=((37, 100), (70, 33)),
        atol=1.0,  # q: at most one step apart where x / scale sits at a rounding boundary
    ),
    one_kernel_case(
        "rms_norm_residual_bwd",
        rms_norm_residual_bwd,
        _rms_bwd_inputs,
        rms_norm_residual_bwd_reference,
        ((16384, 8192),),
        ((37, 100), (9, 333)),
        6.25e-2,
    ),
]

"""Held-out kernels written from the docs only, session 28, second batch (see :mod:`.heldout_rows`
for why held-out kernels exist): depth-to-space (``F.pixel_shuffle`` with r = 2) through views of
the input and output that expose the 2 x 2 sub-pixel offsets as dims indexed with constants;
fp8 training's transpose-quantize (x.T times the inverse of a per-tensor scale, clamped to the
e4m3 range, stored as float8_e4m3fn); a running max down the rows of a matrix (``torch.cummax``
on row chunks plus a carried max, as ``examples/cumsum.py`` carries its sum); a causal box
filter over time (a sum of K shifted, masked loads); an ALiBi bias table generated from the
per-head slopes (store-bound); the mean subtracted from each group of 16 elements; and the row
sums of an int8 matrix in int32 (the zero-point correction of an int8 GEMM). Each comes with its
eager reference (see :mod:`.case`).

Notes: nothing the kernels use was unsupported. ``column_cummax`` takes only the values of
``torch.cummax`` (``vals, _ = ...``), yet the compiled scan still carries the int64 indices
beside them (a two-value ``tl.associative_scan``): the sm_90 default at the benchmark shape
(blocks [16, 512], 8 warps) compiles to 190 registers a thread, against 126 for the same loop
with a values-only ``tc.associative_scan(torch.maximum, v, 0)``; the resource model predicts 85
for both.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randint, randn

FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
WINDOW = 4  # sliding_window_sum: taps of the causal box filter
GROUP = 16  # group_mean_subtract: elements per group


# --------------------------------------------------------------------------- pixel shuffle


@tc.kernel(static_shapes=True)
def pixel_shuffle_2x(x: torch.Tensor) -> torch.Tensor:
    """F.pixel_shuffle(x, 2) of x [B, 4 C, H, W] bf16: out [B, C, 2 H, 2 W] with
    out[b, c, 2 h + i, 2 w + j] = x[b, 4 c + 2 i + j, h, w]. The input is viewed as
    [B C, 2, 2, H, W] and the output as [B C, H, 2, W, 2] (the offsets i, j as dims of 2,
    indexed with constants); each program copies one (b, c) plane's block of (h, w)."""
    b, c4, h, w = x.size()
    c = c4 // 4
    xv = x.view(b * c, 2, 2, h, w)
    out = torch.empty([b * c, h, 2, w, 2], dtype=x.dtype, device=x.device)
    for tbc, th, tw in tc.tile([b * c, h, w], block_size=[1, None, None]):
        out[tbc.begin, th, 0, tw, 0] = xv[tbc.begin, 0, 0, th, tw]
        out[tbc.begin, th, 0, tw, 1] = xv[tbc.begin, 0, 1, th, tw]
        out[tbc.begin, th, 1, tw, 0] = xv[tbc.begin, 1, 0, th, tw]
        out[tbc.begin, th, 1, tw, 1] = xv[tbc.begin, 1, 1, th, tw]
    return out.view(b, c, 2 * h, 2 * w)


def _pixel_shuffle_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, H, W)`` of the output's channels and the input's rows and columns: x
    [B, 4 C, H, W] bf16 randn."""
    b, c, h, w = shape
    return (randn((b, 4 * c, h, w), torch.bfloat16, device, gen(seed)),)


def pixel_shuffle_2x_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pixel_shuffle(x, 2)


# --------------------------------------------------------------------------- fp8 transpose-quantize


@tc.kernel(static_shapes=True)
def fp8_transpose_quant(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """fp8 training's transpose-quantize: x [M, N] bf16 and a per-tensor fp32 scale [1] (delayed
    scaling: x ~ q * scale) give q = clamp(x.T * (1 / scale), -448, 448) as float8_e4m3fn
    [N, M] (the operand layout of the weight-gradient GEMM). fp32 math; each program loads an
    [M, N] tile and stores its transpose."""
    m, n = x.size()
    q = torch.empty([n, m], dtype=torch.float8_e4m3fn, device=x.device)
    for tm, tn in tc.tile([m, n]):
        inv_scale = 1.0 / scale[0]
        v = x[tm, tn].to(torch.float32) * inv_scale
        q[tn, tm] = torch.clamp(v, -FP8_MAX, FP8_MAX).t().to(q.dtype)
    return q


def _fp8_transpose_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: bf16 activations (2 randn) and the scale delayed scaling would hold:
    the amax of an earlier step (0.8 of this one's, so the largest values clamp at 448) / 448."""
    x = (randn(shape, torch.float32, device, gen(seed)) * 2).to(torch.bfloat16)
    if device == "meta":
        return x, torch.empty([1], dtype=torch.float32, device=device)
    scale = (0.8 * x.float().abs().amax() / FP8_MAX).reshape(1)
    return x, scale


def fp8_transpose_quant_reference(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    q = (x.float() * (1.0 / scale)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.t().contiguous()


# --------------------------------------------------------------------------- column cummax


@tc.kernel(static_shapes=True)
def column_cummax(x: torch.Tensor) -> torch.Tensor:
    """torch.cummax(x, dim=0).values of x [M, N] fp32: the running max down each column. One
    program per block of columns walks the rows in chunks: torch.cummax within the chunk, then
    the max of the rows before it (carried across chunks) applied."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        running = tc.full([tn], float("-inf"), dtype=torch.float32)
        for tm in tc.tile(m):
            v = x[tm, tn]
            vals, _ = torch.cummax(v, dim=0)
            out[tm, tn] = torch.maximum(vals, running[None, :])
            running = torch.maximum(running, torch.amax(v, dim=0))
    return out


def _cummax_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: fp32 randn plus a slow upward drift down the rows (so the running max
    keeps changing past the first rows, not only near the top)."""
    m = shape[0]
    x = randn(shape, torch.float32, device, gen(seed))
    drift = torch.linspace(0.0, 4.0, m, device=device)[:, None] if device != "meta" else 0.0
    return (x + drift,)


def column_cummax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cummax(x, dim=0).values


# --------------------------------------------------------------------------- sliding window sum


@tc.kernel(static_shapes=True)
def sliding_window_sum(x: torch.Tensor, window: int) -> torch.Tensor:
    """A causal box filter over time: y[b, t, c] = sum_{k < window} x[b, t - k, c] (x is 0
    before t = 0) for x [B, T, C] bf16, fp32 sums, bf16 out. Each tap is a load shifted back by
    k, masked where t - k < 0."""
    b, t, c = x.size()
    window = tc.specialize(window)
    out = torch.empty_like(x)
    for tb, tt, tch in tc.tile([b, t, c], block_size=[1, None, None]):
        acc = tc.zeros([tt, tch], dtype=torch.float32)
        for k in tc.static_range(window):
            src = tt.index - k
            xv = tc.load(x, [tb.begin, src, tch], extra_mask=(src >= 0)[:, None])
            acc = acc + xv.to(torch.float32)
        out[tb.begin, tt, tch] = acc.to(out.dtype)
    return out


def _window_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, C)``: bf16 randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def sliding_window_sum_reference(x: torch.Tensor, window: int) -> torch.Tensor:
    length = x.shape[1]
    xf = x.float()
    acc = torch.zeros_like(xf)
    for k in range(window):
        acc = acc + torch.nn.functional.pad(xf, (0, 0, k, 0))[:, :length]  # x[b, t - k, c]
    return acc.to(x.dtype)


# --------------------------------------------------------------------------- ALiBi bias


@tc.kernel(static_shapes=True)
def alibi_bias_fill(slopes: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The causal ALiBi bias table of H heads: out[h, i, j] = slopes[h] * (j - i) where j <= i,
    else -inf, bf16 [H, S, S] from fp32 slopes [H]. Reads almost nothing: the store is all of
    the traffic."""
    (h,) = slopes.size()
    out = torch.empty([h, seq_len, seq_len], dtype=torch.bfloat16, device=slopes.device)
    for th, ti, tj in tc.tile([h, seq_len, seq_len], block_size=[1, None, None]):
        rel = tj.index[None, :] - ti.index[:, None]
        bias = slopes[th.begin] * rel.to(torch.float32)
        out[th.begin, ti, tj] = torch.where(rel <= 0, bias, float("-inf")).to(out.dtype)
    return out


def _alibi_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (H, S)``: the geometric ALiBi slopes 2^(-8 (h + 1) / H), each moved by up to
    ~5% at random (slopes trained from that start), and the position ids 0..S-1 int32, which
    carry S (on meta tensors too): the kernel takes S as an int."""
    h, s = shape
    g = gen(seed)
    jitter = 1 + 0.05 * randn((h,), torch.float32, device, g)
    positions = torch.arange(s, dtype=torch.int32, device=device)
    if device == "meta":
        return jitter, positions
    base = 2.0 ** (-8.0 * torch.arange(1, h + 1, dtype=torch.float32) / h)
    return base.to(device) * jitter, positions


def alibi_bias_fill_reference(slopes: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    pos = positions.long()
    rel = pos[None, :] - pos[:, None]
    bias = slopes[:, None, None] * rel.float()
    return torch.where(rel <= 0, bias, float("-inf")).to(torch.bfloat16)


# --------------------------------------------------------------------------- group mean subtract


@tc.kernel(static_shapes=True)
def group_mean_subtract(x: torch.Tensor) -> torch.Tensor:
    """x [M, G, K] bf16 with small groups (K = 16): each group minus its own mean, fp32 math,
    bf16 out. Each program takes a block of (row, group) pairs with their whole K."""
    m, g, _ = x.size()
    out = torch.empty_like(x)
    for tm, tg in tc.tile([m, g]):
        v = x[tm, tg, :].to(torch.float32)
        mu = torch.mean(v, dim=-1, keepdim=True)
        out[tm, tg, :] = (v - mu).to(out.dtype)
    return out


def _group_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, G, K)``: randn plus a per-group offset (2 randn), so the means are not ~0."""
    m, g_, _ = shape
    g = gen(seed)
    x = randn(shape, torch.float32, device, g) + 2 * randn((m, g_, 1), torch.float32, device, g)
    return (x.to(torch.bfloat16),)


def group_mean_subtract_reference(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf - xf.mean(dim=-1, keepdim=True)).to(x.dtype)


# --------------------------------------------------------------------------- int8 row sum


@tc.kernel(static_shapes=True)
def int8_row_sum(x: torch.Tensor) -> torch.Tensor:
    """The row sums of an int8 matrix x [M, N] in int32 (the zero-point correction term of an
    int8 GEMM: sum_k a[m, k] times the weight's zero point). Each program sums a block of whole
    rows."""
    m, _ = x.size()
    out = torch.empty([m], dtype=torch.int32, device=x.device)
    for tm in tc.tile(m):
        out[tm] = torch.sum(x[tm, :], dim=-1, dtype=torch.int32)
    return out


def _int8_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: int8 uniform in [-128, 127] plus a per-row offset in [-20, 20] (kept
    in range), so the row sums are far from 0 and need more than 16 bits."""
    m, _ = shape
    g = gen(seed)
    x = randint(-128, 128, shape, device, g) + randint(-20, 21, (m, 1), device, g)
    return (x.clamp(-128, 127).to(torch.int8),)


def int8_row_sum_reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=1, dtype=torch.int32)


CASES = [
    one_kernel_case(
        "pixel_shuffle_2x",
        pixel_shuffle_2x,
        _pixel_shuffle_inputs,
        pixel_shuffle_2x_reference,
        ((8, 64, 128, 128),),
        ((2, 3, 7, 9), (1, 5, 13, 33)),
        1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "fp8_transpose_quant",
        fp8_transpose_quant,
        _fp8_transpose_inputs,
        fp8_transpose_quant_reference,
        ((8192, 8192),),
        ((37, 100), (300, 7)),
        # fp8 casts round as torch does: bit for bit here; on a GPU the kernel's 1 / scale is
        # div.full.f32 (within 2 ulp), so a product next to a midpoint may move one fp8 step
        1e-6,
    ),
    one_kernel_case(
        "column_cummax",
        column_cummax,
        _cummax_inputs,
        column_cummax_reference,
        ((4096, 8192),),
        ((300, 37), (1000, 5)),
        1e-6,  # a max selects one of the inputs: exact
    ),
    Case(
        name="sliding_window_sum",
        kernels=(sliding_window_sum,),
        make_inputs=_window_inputs,
        reference=lambda x: sliding_window_sum_reference(x, WINDOW),
        run=lambda k, inp: k["sliding_window_sum"](*inp, WINDOW),
        gpu_shapes=((8, 4096, 2048),),
        cpu_shapes=((2, 37, 100), (1, 3, 65)),
        atol=0.07,  # bf16 out of |y| < 16: one ulp where an fp32 sum rounds otherwise
    ),
    Case(
        name="alibi_bias_fill",
        kernels=(alibi_bias_fill,),
        make_inputs=_alibi_inputs,
        reference=alibi_bias_fill_reference,
        run=lambda k, inp: k["alibi_bias_fill"](inp[0], inp[1].shape[0]),
        gpu_shapes=((32, 2048),),
        cpu_shapes=((3, 37), (5, 70)),
        atol=1e-6,  # one fp32 product rounded to bf16: exact
    ),
    one_kernel_case(
        "group_mean_subtract",
        group_mean_subtract,
        _group_inputs,
        group_mean_subtract_reference,
        ((16384, 256, GROUP),),
        ((37, 5, GROUP), (3, 100, GROUP)),
        0.07,  # bf16 out of |out| < 16: one ulp where the fp32 mean rounds otherwise
    ),
    one_kernel_case(
        "int8_row_sum",
        int8_row_sum,
        _int8_inputs,
        int8_row_sum_reference,
        ((16384, 8192),),
        ((37, 300), (300, 7)),
        0.5,  # integers: exact
    ),
]

"""Held-out kernels written from the docs only, session 32 (see :mod:`.heldout_rows` for why
held-out kernels exist): quantization, normalization, position encoding, pooling, convolution
backward and sampling pieces. RMSNorm fused with per-token int8 quantization (W8A8 inputs); a
"same" max pool of window 5 along the last dim written as five shifted loads; Dynamic Tanh
(DyT), the normalization-free LayerNorm replacement; rotary embedding on interleaved pairs read
and written as ``x[..., 0::2]`` / ``x[..., 1::2]``; the input gradient of a causal depthwise
conv1d (flipped taps, dy read ahead); the log-softmax backward over a vocabulary; DeepSeek-V3
style fp8 quantization in 128 x 128 blocks with one scale a block; and grid_sample's bilinear
interpolation of channels-last maps at loaded points (deformable attention's sampling). Each
comes with its eager reference (see :mod:`.case`).

Notes: all eight compile and match at every CPU shape as first written (max errors 0 but for
the fp32 bilinear sums, 1e-6); no tilecraft bug found. Forms tried as experiments, not as the
kernels: the max pool's taps as plain ``x[tr, tw.index + k - 2]`` with the padding applied by a
``torch.where`` afterwards is right (compiled loads read 0 outside) but ref mode reports
``IndexOutOfBoundsError: ... index item 1 ... is out of range and no extra_mask covers it: -2 is
not in [0, 37)`` with a clear extra_mask / clamp hint (a RuntimeWarning that the accuracy
baseline failed), hence ``tc.load(..., extra_mask=)``. ``benchmarks.generalize --device cpu``
under TRITON_INTERPRET=1 fails every row (these and older ones, e.g. grpo_advantages) with
``RuntimeError: 0 active drivers ([]). There should only be one.`` from
``triton.testing.do_bench`` after the first call: the CPU-only Triton here has no driver to
time with; with the timing stubbed out the first calls all match (max_err as above).

Cross-compiled for sm_90 at the GPU shapes (default configs, meta tensors, not timed: no GPU).
``max_pool1d_k5_same`` [16, 256, 8192] bf16: [32 rows, 128 positions] at 4 warps, 56
registers, no spill, but only the unshifted tap is 16-byte loads (4 ``ld.global.v4``): the
taps shifted by one element are 64 scalar ``ld.global.b16`` a thread and those shifted by two
32 ``ld.global.b32`` (alignment unknown, so no vectors; a halo tile shifted in registers would
be one vector load). ``causal_dwconv1d_bwd_dx`` [8, 4096, 2048]: the same pattern, [32
channels, 128 positions] at 4 warps, 48 registers, tap 0 vectorized (4 ``ld.global.v4``), taps
+1 and +3 64 ``ld.global.b16``, tap +2 16 ``ld.global.b32``. ``fp8_block_quant_128`` [4096,
8192]: one block a program at 8 warps, 98 registers (64 fp32 a thread), no spill, 8
``ld.global.v4`` and 4 fp8 ``st.global.v4``; the 2-D amax costs 47 ``shfl.sync.bfly`` and 20
``st/ld.shared.b32``, the scale one scalar store. ``rms_norm_int8_quant`` [8192, 4096]: 2 rows a
program at 8 warps, 59 registers, 16-byte loads (6) and int8 stores (2); the two row reductions
27 shuffles and 15 ``bar.sync``. ``dyt_norm`` [16384, 4096]: [32, 128] at 4 warps, 48
registers, x and y 16-byte (4 each); weight and bias one ``ld.global.b16`` each spread through
shared memory (16 ``ld.shared.b16``, 3 ``bar.sync``), alpha one ``ld.global.b32``.
``bilinear_grid_sample_nhwc`` [8 maps of 64 x 64 x 256, 8192 points]: [32 points, 128
channels] at 4 warps, 56 registers, the four corner gathers 16-byte (16 ``ld.global.v4``), the
(x, y) pairs one ``ld.global.v2`` each, fp32 out 8 ``st.global.v4``, a layout change through
shared memory (8 ``st/ld.shared.v4``, 7 ``bar.sync``). ``rope_interleaved_pairs`` [4, 4096, 32,
128]: [4 positions, 8 heads, 128] at 4 warps, 46 registers; the ``0::2`` / ``1::2`` loads and
stores merge into 16-byte vectors (4 ``ld.global.v4``, 4 ``st.global.v4``), cos and sin
``ld.global.v2``. ``log_softmax_bwd`` [1024, 32000]: one row a program in chunks of 8192 at 16
warps (two passes: the sum of g, then g and y again), 34 registers, all loads 16-byte with
evict_last (12), 2 ``st.global.v4``, 9 shuffles; nothing to fix.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

F32 = torch.float32
BF16 = torch.bfloat16
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # float8_e4m3fn's largest finite value
INT8_MAX = 127.0
RMS_EPS = 1e-6  # rms_norm_int8_quant
POOL_K = 5  # max_pool1d_k5_same: window (stride 1, padding 2)
CONV_K = 4  # causal_dwconv1d_bwd_dx: taps (Mamba's d_conv)
QBLOCK = 128  # fp8_block_quant_128: square block of one scale


# --------------------------------------------------------------------------- RMSNorm + int8 quant


@tc.kernel(static_shapes=True)
def rms_norm_int8_quant(
    x: torch.Tensor, weight: torch.Tensor, eps: float = RMS_EPS
) -> tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm then per-token dynamic int8 quantization (SmoothQuant-style W8A8 input): x [T, D]
    bf16, weight [D] bf16, y = x * rsqrt(mean(x^2) + eps) * weight in fp32; scale = max|y| /
    127 [T] fp32 and q = round(y / scale) clamped to [-128, 127] as int8 [T, D]. Each program
    takes a block of whole rows."""
    t, d = x.size()
    q = torch.empty([t, d], dtype=torch.int8, device=x.device)
    scales = torch.empty([t], dtype=F32, device=x.device)
    for tt in tc.tile(t):
        xt = x[tt, :].to(F32)
        inv = torch.rsqrt(torch.mean(xt * xt, dim=1) + eps)
        y = xt * inv[:, None] * weight[None, :].to(F32)
        scale = torch.clamp(torch.amax(torch.abs(y), dim=1) / INT8_MAX, min=1e-10)
        scales[tt] = scale
        q[tt, :] = torch.clamp(torch.round(y / scale[:, None]), -128, 127).to(torch.int8)
    return q, scales


def _rms_int8_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, D)``: bf16 hidden states and a bf16 RMSNorm weight near 1."""
    g = gen(seed)
    x = randn(shape, BF16, device, g)
    w = randn((shape[1],), F32, device, g)
    return x, (1.0 + 0.1 * w).to(BF16)


def rms_norm_int8_quant_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float = RMS_EPS
) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    scale = (y.abs().amax(-1) / INT8_MAX).clamp(min=1e-10)
    q = torch.round(y / scale[:, None]).clamp(-128, 127).to(torch.int8)
    return q, scale


# --------------------------------------------------------------------------- max pool k5 "same"


@tc.kernel(static_shapes=True)
def max_pool1d_k5_same(x: torch.Tensor) -> torch.Tensor:
    """F.max_pool1d(x, 5, stride=1, padding=2) over the last dim of x [N, C, L] bf16 (a local
    max, e.g. peak picking on a spectrogram or keypoint NMS along a line): [N, C, L] bf16. Each
    program takes a block of rows (N C merged) and a block of positions; tap k reads x at
    position + k - 2, masked outside [0, L)."""
    n, c, length = x.size()
    rows = x.view(n * c, length)
    out = torch.empty([n * c, length], dtype=x.dtype, device=x.device)
    for tr, tw in tc.tile([n * c, length]):
        acc = tc.full([tr, tw], float("-inf"), dtype=F32)
        for k in tc.static_range(POOL_K):
            src = tw.index + (k - POOL_K // 2)
            inside = (src >= 0) & (src < length)
            v = tc.load(rows, [tr, src], extra_mask=inside[None, :])
            acc = torch.maximum(acc, torch.where(inside[None, :], v.to(F32), float("-inf")))
        out[tr, tw] = acc.to(out.dtype)
    return out.view(n, c, length)


def _pool_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C, L)``: bf16 randn."""
    return (randn(shape, BF16, device, gen(seed)),)


def max_pool1d_k5_same_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.max_pool1d(x.float(), POOL_K, 1, POOL_K // 2).to(x.dtype)


# --------------------------------------------------------------------------- dynamic tanh


@tc.kernel(static_shapes=True)
def dyt_norm(
    x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """Dynamic Tanh (DyT, "Transformers without Normalization"), the LayerNorm replacement:
    y = weight * tanh(alpha * x) + bias for x [T, D] bf16, a learnt scalar alpha [1] fp32 and
    weight, bias [D] bf16: [T, D] bf16, computed in fp32. Each program takes a [rows, columns]
    block (no reduction, so nothing needs the row whole)."""
    t, d = x.size()
    out = torch.empty_like(x)
    for tt, td in tc.tile([t, d]):
        a = alpha[0]
        y = torch.tanh(a * x[tt, td].to(F32))
        out[tt, td] = (weight[td].to(F32)[None, :] * y + bias[td].to(F32)[None, :]).to(out.dtype)
    return out


def _dyt_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, D)``: x bf16 randn times 2, alpha 0.5 (the paper's init), weight near 1,
    bias small."""
    g = gen(seed)
    x = randn(shape, F32, device, g) * 2
    d = shape[1]
    alpha = torch.full((1,), 0.5, dtype=F32, device=device)
    w = randn((d,), F32, device, g)
    b = randn((d,), F32, device, g)
    return x.to(BF16), alpha, (1.0 + 0.1 * w).to(BF16), (0.1 * b).to(BF16)


def dyt_norm_reference(
    x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    y = weight.float() * torch.tanh(alpha * x.float()) + bias.float()
    return y.to(x.dtype)


# --------------------------------------------------------------------------- interleaved RoPE


@tc.kernel(static_shapes=True)
def rope_interleaved_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """GPT-J / Llama-reference style rotary embedding on interleaved pairs: x [B, S, H, D] bf16,
    cos, sin [S, D / 2] fp32; pair i of a head is (x[..., 2i], x[..., 2i + 1]) rotated by the
    angle of position s and frequency i: out[..., 0::2] = x0 cos - x1 sin, out[..., 1::2] =
    x0 sin + x1 cos, [B, S, H, D] bf16. Each program takes one batch, a block of positions and a
    block of heads, with the head dim whole."""
    b, s, h, d = x.size()
    out = torch.empty_like(x)
    for tb, ts, th in tc.tile([b, s, h], block_size=[1, None, None]):
        x0 = x[tb.begin, ts, th, 0::2].to(F32)
        x1 = x[tb.begin, ts, th, 1::2].to(F32)
        c = cos[ts, :][:, None, :]
        sn = sin[ts, :][:, None, :]
        out[tb.begin, ts, th, 0::2] = (x0 * c - x1 * sn).to(out.dtype)
        out[tb.begin, ts, th, 1::2] = (x0 * sn + x1 * c).to(out.dtype)
    return out


def _rope_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, S, H, D)``: x bf16 randn and the cos / sin tables of base 10000 for the
    positions of a decode step past a prompt of 7 tokens (position 0 alone would make a sin
    table of zeros at S = 1)."""
    b, s, h, d = shape
    x = randn(shape, BF16, device, gen(seed))
    if device == "meta":
        return (
            x,
            torch.empty((s, d // 2), dtype=F32, device=device),
            torch.empty((s, d // 2), dtype=F32, device=device),
        )
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, d, 2, dtype=F32) / d)
    angles = torch.arange(7, 7 + s, dtype=F32)[:, None] * inv_freq[None, :]
    return x, torch.cos(angles).to(device), torch.sin(angles).to(device)


def rope_interleaved_pairs_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rot = torch.polar(torch.ones_like(cos), torch.atan2(sin, cos))  # cos + i sin
    y = torch.view_as_real(xc * rot[None, :, None, :]).reshape(x.shape)
    return y.to(x.dtype)


# --------------------------------------------------------------------------- causal conv1d dx


@tc.kernel(static_shapes=True)
def causal_dwconv1d_bwd_dx(dy: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The input gradient of a causal depthwise conv1d (Mamba's short conv, K = 4 taps): the
    forward is y[b, c, t] = sum_j w[c, j] x[b, c, t - 3 + j], so dx[b, c, s] = sum_j w[c, j]
    dy[b, c, s + 3 - j] (the taps flipped, dy read ahead, 0 past the end). dy [B, C, L] bf16,
    weight [C, 4] fp32: dx [B, C, L] bf16, summed in fp32. Each program takes one batch, a block
    of channels and a block of positions."""
    b, c, length = dy.size()
    dx = torch.empty_like(dy)
    for tb, tch, tl in tc.tile([b, c, length], block_size=[1, None, None]):
        acc = tc.zeros([tch, tl], dtype=F32)
        for j in tc.static_range(CONV_K):
            src = tl.index + j
            g = tc.load(dy, [tb.begin, tch, src], extra_mask=(src < length)[None, :])
            acc = acc + g.to(F32) * weight[tch, CONV_K - 1 - j][:, None]
        dx[tb.begin, tch, tl] = acc.to(dx.dtype)
    return dx


def _conv_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, L)``: dy bf16 randn and an fp32 [C, 4] filter scaled by 1 / 2."""
    g = gen(seed)
    dy = randn(shape, BF16, device, g)
    return dy, randn((shape[1], CONV_K), F32, device, g) * 0.5


def causal_dwconv1d_bwd_dx_reference(dy: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    c, k = weight.shape
    padded = torch.nn.functional.pad(dy.float(), (0, k - 1))
    dx = torch.nn.functional.conv1d(padded, weight.flip(-1)[:, None, :], groups=c)
    return dx.to(dy.dtype)


# --------------------------------------------------------------------------- log-softmax backward


@tc.kernel(static_shapes=True)
def log_softmax_bwd(grad_out: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The backward of y = log_softmax(z, dim=-1): dz = g - exp(y) * sum(g) per row, for g and y
    [T, V] bf16 (the vocabulary dim of an LM head's loss), in fp32, dz [T, V] bf16. Each program
    takes a block of whole rows."""
    t, v = out.size()
    grad_in = torch.empty_like(out)
    for tt in tc.tile(t):
        g = grad_out[tt, :].to(F32)
        total = torch.sum(g, dim=1)
        dz = g - torch.exp(out[tt, :].to(F32)) * total[:, None]
        grad_in[tt, :] = dz.to(grad_in.dtype)
    return grad_in


def _lsm_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, V)``: g bf16 randn / V (a mean loss's scale does not matter) and y the
    log_softmax of randn logits times 2, rounded to bf16."""
    g = gen(seed)
    grad = randn(shape, F32, device, g)
    logits = randn(shape, F32, device, g)
    if device == "meta":
        return grad.to(BF16), logits.to(BF16)
    return grad.to(BF16), torch.log_softmax(2 * logits, dim=-1).to(BF16)


def log_softmax_bwd_reference(grad_out: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    g = grad_out.float()
    dz = torch._log_softmax_backward_data(g, out.float(), -1, torch.float32)
    return dz.to(out.dtype)


# --------------------------------------------------------------------------- fp8 128x128 blocks


@tc.kernel(static_shapes=True)
def fp8_block_quant_128(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V3 style block-wise fp8 quantization of a weight: w [M, N] bf16 in 128 x 128
    blocks, each with scale = max|w_block| / 448 (at least 1e-12) [ceil(M / 128), ceil(N /
    128)] fp32 and q = w / scale as float8_e4m3fn [M, N]. Each program takes one block."""
    m, n = w.size()
    q = torch.empty([m, n], dtype=FP8, device=w.device)
    scales = torch.empty([tc.cdiv(m, QBLOCK), tc.cdiv(n, QBLOCK)], dtype=F32, device=w.device)
    for tm, tn in tc.tile([m, n], block_size=[QBLOCK, QBLOCK]):
        v = w[tm, tn].to(F32)
        scale = torch.clamp(torch.amax(torch.abs(v)) / FP8_MAX, min=1e-12)
        scales[tm.id, tn.id] = scale
        q[tm, tn] = torch.clamp(v / scale, -FP8_MAX, FP8_MAX).to(FP8)
    return q, scales


def _fp8_block_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: a bf16 randn weight / 30 (a trained weight's range)."""
    g = gen(seed)
    return ((randn(shape, F32, device, g) / 30).to(BF16),)


def fp8_block_quant_128_reference(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = w.shape
    bm, bn = -(-m // QBLOCK), -(-n // QBLOCK)
    padded = torch.nn.functional.pad(w.float(), (0, bn * QBLOCK - n, 0, bm * QBLOCK - m))
    blocks = padded.view(bm, QBLOCK, bn, QBLOCK)
    scale = (blocks.abs().amax(dim=(1, 3)) / FP8_MAX).clamp(min=1e-12)
    full = scale.repeat_interleave(QBLOCK, 0).repeat_interleave(QBLOCK, 1)[:m, :n]
    q = (w.float() / full).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, scale


# --------------------------------------------------------------------------- bilinear grid sample


@tc.kernel(static_shapes=True)
def bilinear_grid_sample_nhwc(x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """F.grid_sample(bilinear, zeros padding, align_corners=False) at P points a batch, as
    deformable attention samples its value maps: x [B, H, W, C] bf16 (channels last), grid
    [B, P, 2] fp32 normalized (x, y) in about [-1, 1]: out [B, P, C] fp32. The source pixel is
    ix = ((gx + 1) W - 1) / 2 (iy likewise); the four neighbours are gathered as rows of C and
    weighted, a neighbour outside the map counts 0. Each program takes one batch, a block of
    points and a block of channels."""
    b, h, w, c = x.size()
    p = grid.size(1)
    out = torch.empty([b, p, c], dtype=F32, device=x.device)
    for tb, tp, tch in tc.tile([b, p, c], block_size=[1, None, None]):
        gx = grid[tb.begin, tp, 0]
        gy = grid[tb.begin, tp, 1]
        ix = ((gx + 1.0) * w - 1.0) / 2.0
        iy = ((gy + 1.0) * h - 1.0) / 2.0
        x0 = torch.floor(ix)
        y0 = torch.floor(iy)
        fx = ix - x0
        fy = iy - y0
        xi = x0.to(torch.int32)
        yi = y0.to(torch.int32)
        acc = tc.zeros([tp, tch], dtype=F32)
        for dy in tc.static_range(2):
            for dx in tc.static_range(2):
                xs = xi + dx
                ys = yi + dy
                inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
                wt = (fx if dx == 1 else 1.0 - fx) * (fy if dy == 1 else 1.0 - fy)
                v = tc.load(x, [tb.begin, ys, xs, tch], extra_mask=inside[:, None])
                acc = acc + torch.where(inside, wt, 0.0)[:, None] * v.to(F32)
        out[tb.begin, tp, tch] = acc
    return out


def _grid_sample_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, W, C, P)``: value maps bf16 randn, P sample points a batch uniform in
    [-1.1, 1.1]^2 (some fall partly or wholly outside the map)."""
    b, h, w, c, p = shape
    g = gen(seed)
    x = randn((b, h, w, c), BF16, device, g)
    if device == "meta":
        return x, torch.empty((b, p, 2), dtype=F32, device=device)
    pts = (torch.rand((b, p, 2), generator=g) * 2.2 - 1.1).to(device)
    return x, pts


def bilinear_grid_sample_nhwc_reference(x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.grid_sample(
        x.permute(0, 3, 1, 2).float(),
        grid[:, :, None, :],
        mode="bilinear",
        padding_mode="zeros",
        align_corners=False,
    )  # [B, C, P, 1]
    return y[..., 0].permute(0, 2, 1).contiguous()


CASES: list[Case] = [
    one_kernel_case(
        "rms_norm_int8_quant",
        rms_norm_int8_quant,
        _rms_int8_inputs,
        rms_norm_int8_quant_reference,
        ((8192, 4096),),  # 67 MB bf16 read, 34 MB int8 written
        ((37, 300), (1, 37)),
        1e-6,  # int8 exact; fp32 scales
    ),
    one_kernel_case(
        "max_pool1d_k5_same",
        max_pool1d_k5_same,
        _pool_inputs,
        max_pool1d_k5_same_reference,
        ((16, 256, 8192),),  # 67 MB each way
        ((3, 5, 37), (1, 1, 3)),
        1e-6,  # a max: exact
    ),
    one_kernel_case(
        "dyt_norm",
        dyt_norm,
        _dyt_inputs,
        dyt_norm_reference,
        ((16384, 4096),),  # 134 MB each way
        ((37, 300), (1, 37)),
        2.0**-7,  # bf16 out, |y| < 1.3: one ulp where tanh's fp32 rounds the other way
    ),
    one_kernel_case(
        "rope_interleaved_pairs",
        rope_interleaved_pairs,
        _rope_inputs,
        rope_interleaved_pairs_reference,
        ((4, 4096, 32, 128),),  # 134 MB each way
        ((2, 37, 3, 16), (1, 1, 5, 2)),
        2.0**-6,  # bf16 out, |y| < 6
    ),
    one_kernel_case(
        "causal_dwconv1d_bwd_dx",
        causal_dwconv1d_bwd_dx,
        _conv_bwd_inputs,
        causal_dwconv1d_bwd_dx_reference,
        ((8, 4096, 2048),),  # 134 MB each way
        ((2, 5, 37), (1, 3, 2)),
        2.0**-6,  # bf16 out of fp32 sums in another order, |dx| < 8
    ),
    one_kernel_case(
        "log_softmax_bwd",
        log_softmax_bwd,
        _lsm_bwd_inputs,
        log_softmax_bwd_reference,
        ((1024, 32000),),  # 2 x 66 MB read, 66 MB written
        ((37, 300), (1, 37)),
        2.0**-6,  # bf16 out of an fp32 row sum in another order
    ),
    one_kernel_case(
        "fp8_block_quant_128",
        fp8_block_quant_128,
        _fp8_block_inputs,
        fp8_block_quant_128_reference,
        ((4096, 8192),),  # 67 MB bf16 read, 34 MB fp8 written
        ((300, 37), (1, 129)),
        1e-6,  # fp8 values and fp32 scales: exact
    ),
    one_kernel_case(
        "bilinear_grid_sample_nhwc",
        bilinear_grid_sample_nhwc,
        _grid_sample_inputs,
        bilinear_grid_sample_nhwc_reference,
        ((8, 64, 64, 256, 8192),),  # 17 MB of maps, 4 x 34 MB gathered, 67 MB written
        ((2, 5, 7, 37, 23), (1, 1, 1, 3, 5)),
        1e-5,  # fp32 weighted sums of four bf16 values
    ),
]

"""Held-out kernels written from the docs only, session 29, second batch (see :mod:`.heldout_rows`
for why held-out kernels exist), all on higher-rank tensors with operations over middle or
several dims: a video clip's frames averaged over time (a reduction over dim 1 of
[B, T, C, H, W]); instance norm of each [H, W] plane of NCHW maps (mean and variance over two
dims); softmax over the sequence dim -2 of [B, H, S, D] (a reduction over a strided dim); a
per-channel affine of 5-D NCDHW volumes; the ReLU of a broadcast pairwise sum (a [B, N] and a
[B, M] to [B, N, M]); a sum over dims 0 and 2 of a 3-D tensor; and a 1-D max pool with kernel 3
and stride 2 over the last dim. Each comes with its eager reference (see :mod:`.case`).

Notes: everything was supported as first written (a softmax over the middle ``:`` of a 4-D
tile, a mean over two whole dims ``dim=[2, 3]``, ``x[:, tb, :]`` summed over ``dim=[0, 2]``).
Cross-compiled for sm_90 at the benchmark shapes, the defaults, none spilling:
``video_temporal_mean`` blocks [8, 32] of (clip, pixel) with all 32 frames, 8 warps, 30
registers, 16-byte loads, the [8, 32] means stored one scalar ``st.global.b16`` a thread (6272
programs); ``norm_over_hw`` [1, 2] planes at 8 warps, each 56 x 56 plane padded to 64 x 64 (77%
of the lanes live), 48 registers, 16-byte loads and stores; ``softmax_over_seq_dim`` [1, 1, 16]
features with all 1024 positions at 4 warps, 163 registers (128 values a thread), 16-byte loads
and stores, 1024 programs at 3 an SM (2.6 waves). ``channel_affine_ncdhw`` (``block_size=[1, 1,
None]``, the channel's scale and shift scalars) gets blocks [128] of voxels at 4 warps: one
element a thread, so scalar ``ld.global.b16`` / ``st.global.b16`` and 262144 programs of 256
bytes, 14 registers; the same kernel tiled over all three dims (``scale[tch][None, :, None]``)
defaults to [4, 16, 128] at 8 warps, and viewed as [N C, D H W] (``scale[tp.index % C]``) to
[32, 128]: both 16-byte loads and stores, about 40 registers. ``broadcast_pair_relu`` [2, 32,
128] at 8 warps, 30 registers, 16-byte stores (the a and c rows as five scalar 2-byte loads);
``sum_dims_0_2`` blocks [1] of B with A chunked by 16 and C whole (a [16, 1, 512] tile, the
A-sum deferred), 8 warps, 36 registers, 16-byte loads, 1024 programs at 6 an SM (1.3 waves, no
split reduction); ``max_pool1d_k3s2`` [8, 8, 128] at 8 warps, 118 registers (2 programs an SM),
the three stride-2 window loads as scalar ``ld.global.b16`` (96 a thread) and scalar stores (32
a thread: rows of 4095 outputs are not 16-byte aligned); ``docs/patterns.md``'s pairs view (x as
[B, C, L / 2, 2], L even) merges the window's first two loads into 4-byte ones (102 registers),
the third stays scalar.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Inputs, gen, one_kernel_case, randn

IN_EPS = 1e-5  # norm_over_hw: nn.InstanceNorm2d's eps
POOL_K, POOL_S = 3, 2  # max_pool1d_k3s2: window and stride


# --------------------------------------------------------------------------- video temporal mean


@tc.kernel(static_shapes=True)
def video_temporal_mean(x: torch.Tensor) -> torch.Tensor:
    """A video clip's frames averaged over time (temporal average pooling before a frame-level
    head): x [B, T, C, H, W] bf16 gives [B, C, H, W] bf16, summed in fp32. The clip is viewed
    as [B, T, C H W]; each program takes a block of clips and pixels with all T frames (the
    `:` makes T the reduced dim)."""
    b, t, c, h, w = x.size()
    xv = x.view(b, t, c * h * w)
    out = torch.empty([b, c * h * w], dtype=x.dtype, device=x.device)
    for tb, tp in tc.tile([b, c * h * w]):
        out[tb, tp] = torch.mean(xv[tb, :, tp].to(torch.float32), dim=1).to(out.dtype)
    return out.view(b, c, h, w)


def _video_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, C, H, W)``: bf16 features, randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def video_temporal_mean_reference(x: torch.Tensor) -> torch.Tensor:
    return x.float().mean(dim=1).to(x.dtype)


# --------------------------------------------------------------------------- instance norm


@tc.kernel(static_shapes=True)
def norm_over_hw(x: torch.Tensor) -> torch.Tensor:
    """Instance norm without affine (nn.InstanceNorm2d's default): each [H, W] plane of x
    [N, C, H, W] bf16 minus its mean, divided by sqrt(its biased variance + 1e-5), fp32 math,
    bf16 out. Each program takes a block of (sample, channel) pairs with their whole planes,
    reduced over the last two dims."""
    n, c, h, w = x.size()
    out = torch.empty_like(x)
    for tn, tch in tc.tile([n, c]):
        xt = x[tn, tch, :, :].to(torch.float32)
        mean = torch.mean(xt, dim=[2, 3], keepdim=True)
        diff = xt - mean
        var = torch.mean(diff * diff, dim=[2, 3], keepdim=True)
        out[tn, tch, :, :] = (diff * torch.rsqrt(var + IN_EPS)).to(out.dtype)
    return out


def _norm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C, H, W)``: conv activations, bf16, each channel with its own offset
    (randn) and scale (exp(0.5 randn)) so that the per-plane statistics matter."""
    n, c, h, w = shape
    g = gen(seed)
    x = randn(shape, torch.float32, device, g)
    scale = torch.exp(0.5 * randn((1, c, 1, 1), torch.float32, device, g))
    shift = randn((1, c, 1, 1), torch.float32, device, g)
    return ((x * scale + shift).to(torch.bfloat16),)


def norm_over_hw_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.instance_norm(x.float(), eps=IN_EPS).to(x.dtype)


# --------------------------------------------------------------------------- softmax over dim -2


@tc.kernel(static_shapes=True)
def softmax_over_seq_dim(x: torch.Tensor) -> torch.Tensor:
    """torch.softmax(x, dim=-2) of x [B, H, S, D] fp32: for each (batch, head, feature) a
    softmax over the S positions (attention pooling over the sequence per feature). Each
    program takes a block of batches, heads and features with all S positions; the reduced dim
    is strided (D elements apart)."""
    b, h, _, d = x.size()
    out = torch.empty_like(x)
    for tb, th, td in tc.tile([b, h, d]):
        out[tb, th, :, td] = torch.softmax(x[tb, th, :, td], dim=2)
    return out


def _softmax_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S, D)``: fp32 scores, 2 randn."""
    return (2 * randn(shape, torch.float32, device, gen(seed)),)


def softmax_over_seq_dim_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-2)


# --------------------------------------------------------------------------- NCDHW channel affine


@tc.kernel(static_shapes=True)
def channel_affine_ncdhw(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """y = x * scale[c] + shift[c] for 5-D volumes x [N, C, D, H, W] bf16 (a 3-D batch norm in
    eval mode, folded into a scale and a shift, fp32 [C]); fp32 math, bf16 out. The volume is
    viewed as [N, C, D H W]; each program takes a block of one (sample, channel)'s voxels, the
    channel's scale and shift loaded as scalars."""
    n, c, d, h, w = x.size()
    xv = x.view(n, c, d * h * w)
    out = torch.empty([n, c, d * h * w], dtype=x.dtype, device=x.device)
    for tn, tch, tv in tc.tile([n, c, d * h * w], block_size=[1, 1, None]):
        v = xv[tn.begin, tch.begin, tv].to(torch.float32)
        y = v * scale[tch.begin] + shift[tch.begin]
        out[tn.begin, tch.begin, tv] = y.to(out.dtype)
    return out.view(n, c, d, h, w)


def _affine_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C, D, H, W)``: x bf16 randn, scale 1 + 0.2 randn and shift 0.1 randn
    (fp32 [C], a trained norm's folded statistics)."""
    c = shape[1]
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g)
    scale = 1 + 0.2 * randn((c,), torch.float32, device, g)
    return x, scale, 0.1 * randn((c,), torch.float32, device, g)


def channel_affine_ncdhw_reference(
    x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor
) -> torch.Tensor:
    y = x.float() * scale.view(1, -1, 1, 1, 1) + shift.view(1, -1, 1, 1, 1)
    return y.to(x.dtype)


# --------------------------------------------------------------------------- broadcast pair ReLU


@tc.kernel(static_shapes=True)
def broadcast_pair_relu(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """out[b, i, j] = relu(a[b, i] + c[b, j]) for a [B, N] and c [B, M] bf16 (the hidden layer
    of additive attention over every (query, key) pair, with its projections done): [B, N, M]
    bf16. Each program takes a block of batches, rows and columns; the two inputs broadcast
    against each other."""
    b, n = a.size()
    m = c.size(1)
    out = torch.empty([b, n, m], dtype=a.dtype, device=a.device)
    for tb, ti, tj in tc.tile([b, n, m]):
        out[tb, ti, tj] = torch.relu(a[tb, ti][:, :, None] + c[tb, tj][:, None, :])
    return out


def _pair_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, N, M)``: a [B, N] and c [B, M] bf16 randn."""
    b, n, m = shape
    g = gen(seed)
    return randn((b, n), torch.bfloat16, device, g), randn((b, m), torch.bfloat16, device, g)


def broadcast_pair_relu_reference(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.relu(a[:, :, None] + c[:, None, :])


# --------------------------------------------------------------------------- sum over dims 0, 2


@tc.kernel(static_shapes=True)
def sum_dims_0_2(x: torch.Tensor) -> torch.Tensor:
    """x.sum(dim=(0, 2)) of x [A, B, C] fp32: [B] fp32 (e.g. a per-channel gradient of a bias
    applied to [batch, channel, length] activations). Each program takes a block of the middle
    dim with the whole first and last dims, summed over both."""
    _, b, _ = x.size()
    out = torch.empty([b], dtype=torch.float32, device=x.device)
    for tb in tc.tile(b):
        out[tb] = torch.sum(x[:, tb, :], dim=[0, 2])
    return out


def _sum_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (A, B, C)``: fp32 randn plus a per-B offset 0.5 randn (biased gradients)."""
    g = gen(seed)
    x = randn(shape, torch.float32, device, g)
    return (x + 0.5 * randn((1, shape[1], 1), torch.float32, device, g),)


def sum_dims_0_2_reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=(0, 2))


# --------------------------------------------------------------------------- max pool 1d


@tc.kernel(static_shapes=True)
def max_pool1d_k3s2(x: torch.Tensor) -> torch.Tensor:
    """F.max_pool1d(x, 3, 2) of x [B, C, L] bf16 (no padding): [B, C, (L - 3) // 2 + 1] bf16,
    out[..., o] the max of x[..., 2 o], x[..., 2 o + 1] and x[..., 2 o + 2]. Each program takes
    a block of batches, channels and outputs and loads the window's three columns."""
    b, c, length = x.size()
    lo = (length - POOL_K) // POOL_S + 1
    out = torch.empty([b, c, lo], dtype=x.dtype, device=x.device)
    for tb, tch, to in tc.tile([b, c, lo]):
        best = x[tb, tch, POOL_S * to.index]
        for k in tc.static_range(1, POOL_K):
            best = torch.maximum(best, x[tb, tch, POOL_S * to.index + k])
        out[tb, tch, to] = best
    return out


def _pool_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, L)``: bf16 features, randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def max_pool1d_k3s2_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.max_pool1d(x, POOL_K, POOL_S)


CASES = [
    one_kernel_case(
        "video_temporal_mean",
        video_temporal_mean,
        _video_inputs,
        video_temporal_mean_reference,
        ((8, 32, 64, 56, 56),),  # 103 MB read
        ((2, 5, 3, 7, 9), (1, 7, 5, 6, 11)),
        2.0**-6,  # bf16 means below 2 at these shapes: one ulp (2^-7) where an fp32 sum in
        # another order rounds to the other neighbour
    ),
    one_kernel_case(
        "norm_over_hw",
        norm_over_hw,
        _norm_inputs,
        norm_over_hw_reference,
        ((64, 256, 56, 56),),  # 103 MB each way
        ((2, 3, 7, 9), (3, 5, 14, 6)),
        2.0**-5,  # bf16 out, |y| < 4 here (randn planes): one ulp (2^-6 in [2, 4)) where fp32
        # statistics summed in another order round to the other neighbour, with margin
    ),
    one_kernel_case(
        "softmax_over_seq_dim",
        softmax_over_seq_dim,
        _softmax_inputs,
        softmax_over_seq_dim_reference,
        ((16, 16, 1024, 64),),  # 67 MB each way
        ((2, 3, 37, 5), (1, 2, 100, 24)),
        1e-6,  # probabilities below 1: a few fp32 ulp (exp and a divide within 2 ulp)
    ),
    one_kernel_case(
        "channel_affine_ncdhw",
        channel_affine_ncdhw,
        _affine_inputs,
        channel_affine_ncdhw_reference,
        ((4, 64, 32, 64, 64),),  # 67 MB each way
        ((2, 3, 5, 7, 9), (1, 6, 3, 10, 11)),
        0.04,  # bf16 out, |y| < 8: one ulp (2^-5) where a fused multiply-add rounds the fp32
        # result to the other bf16 neighbour
    ),
    one_kernel_case(
        "broadcast_pair_relu",
        broadcast_pair_relu,
        _pair_inputs,
        broadcast_pair_relu_reference,
        ((64, 1024, 1024),),  # 134 MB written
        ((3, 37, 50), (2, 100, 7)),
        1e-6,  # one bf16 add (exact in fp32, rounded once) and a ReLU: exact
    ),
    one_kernel_case(
        "sum_dims_0_2",
        sum_dims_0_2,
        _sum_inputs,
        sum_dims_0_2_reference,
        ((64, 1024, 512),),  # 134 MB read
        ((7, 37, 11), (13, 5, 60)),
        1e-3,  # |sum| up to ~1000 (780 values with a per-B offset): fp32 ulp there 6e-5 to
        # 1.2e-4, a few ulp for a sum in another order
    ),
    one_kernel_case(
        "max_pool1d_k3s2",
        max_pool1d_k3s2,
        _pool_inputs,
        max_pool1d_k3s2_reference,
        ((32, 256, 8192),),  # 134 MB read, 67 MB written
        ((2, 3, 37), (3, 5, 100)),
        1e-6,  # a max of loaded values: exact
    ),
]

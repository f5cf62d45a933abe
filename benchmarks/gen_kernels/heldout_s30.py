"""Held-out kernels written from the docs only, session 30 (see :mod:`.heldout_rows` for why
held-out kernels exist): encoding, gathering, repeating, scanning and broadcasting data
movement. A one-hot encoding of class ids (a compare against the tile's column indices);
``torch.take_along_dim`` along the last dim; ``repeat_interleave`` of rows (output row i reads
input row i // R); a running product along rows; the symmetric part of a square matrix (a
tile and its mirror block, transposed); one Sinkhorn step (row sums, then column sums: two
device loops in one kernel); a hardswish with a per-column scale, a shift and a clamp; and a
layer-scaled residual over the middle (channel) dim of [B, C, L]. Each comes with its eager
reference (see :mod:`.case`).

Notes: ``torch.nn.functional.relu6`` was not supported in device code (``UnsupportedOpError``
at the user's line; docs/ops.md listed ``F.hardswish`` and ``F.hardsigmoid`` but not relu6;
``F.relu6`` and ``F.hardtanh`` lower since session 30, the kernel keeps its clamp as written):
``hardswish_clamp_scale`` writes it as ``torch.clamp(x + 3, 0, 6)`` (``F.hardswish`` compiles
alike, 44 registers). Everything else was supported as first written (``torch.take_along_dim`` of
a row tile, ``tr.index // R`` rows, ``torch.cumprod`` of whole rows, ``x[tj, ti].t()``, two
device loops in one kernel, the second reading what the first stored; a length tile named
``tl`` does not clash with ``triton.language`` in the generated code). Cross-compiled for sm_90
at the benchmark shapes, the defaults: ``one_hot_encode`` blocks [32, 128] at 4 warps (the 1000
classes padded to 1024, 32768 programs), 38 registers, the ids as 8-byte loads and 16-byte
masked stores; ``take_along_last_dim`` blocks [2, 32] of (rows, indices) with the whole 4096
row at 8 warps (262144 programs, each loading its two 8 KB rows to pick 64 elements: x is read
32 times over, from L2), and the ``tl.gather`` lowers to 16384 warp shuffles: 255 registers
and 2648 bytes a thread spilled where the model predicts 35, the idx tile loaded replicated
(64 ``ld.global.v2.b64`` a thread) and one scalar ``st.global.b16``. The same gather written
as a memory gather, ``x[tb.index[:, None], idx[tb, tk]]``, defaults to [32, 128] at 4 warps,
108 registers, no spill, 16-byte idx loads and the picked x elements as scalar
``ld.global.b16`` (32 a thread). ``repeat_interleave_rows`` [32, 128] of output rows at 4
warps, 32 registers, 16-byte loads (each program's 32 rows read 8 input rows, each 4 times)
and stores; ``cumprod_rows`` one whole 4096 row a program at 4 warps (8192 programs), 48
registers (80 predicted), 16-byte loads and stores, the scan across warps through 128 bytes of
shared memory; ``symmetrize`` [32, 128] at 4 warps, 32 registers (64 predicted), both blocks
loaded with 16-byte vectors (the mirrored [128, 32] one in 64-byte row segments) and the
transpose through 8 KB of shared memory (``ldmatrix.trans``), 16-byte stores.
``sinkhorn_row_col_step``: the row loop [2, 4] of (batch, rows) with the whole 1024 row at 16
warps (2048 programs), 32 registers; the column loop [1, 16] of (batch, columns) at 16 warps
with the 1024 rows rolled in chunks of 512 (a deferred [512, 16] sum, then a second pass
re-reading the column block to divide: the matrix is read twice), 46 registers, 16-byte
(64-byte row segment) loads and stores, 1024 programs; held whole ([1, 8] at 8 warps) the
column loop compiles to 48 registers with one read. ``hardswish_clamp_scale`` [32, 128] at 4
warps, 44 registers (112 predicted), 16-byte loads and stores, the scale row one scalar
``ld.global.b16`` a thread; ``layer_scale_residual_blc`` [8, 8, 128] of (batch, channel,
position) at 8 warps (4096 programs), 44 registers (113 predicted), 16-byte loads and stores,
gamma as four scalar ``ld.global.b16`` a thread. In the interpreter the Sinkhorn loops warn of
0 / 0 in padded lanes (never stored).

Timed on the H200 (heldout_s30.md) after ``frontend/gather_loads.py`` landed (a gather from a
plain load reads memory at the positions: ``take_along_last_dim`` compiles as the memory-gather
form above, [32, 128] at 4 warps); the register-gather default above ran 208 ms
(gather_loads_ab_s30.md), the memory gather 0.122 ms, 0.676x torch.compile.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randint, randn

NUM_CLASSES = 1000  # one_hot_encode: ImageNet's classes
REPEATS = 4  # repeat_interleave_rows: copies of each row
HS_SHIFT, HS_CLAMP = 0.25, 4.0  # hardswish_clamp_scale: the shift and the clamp bound


# --------------------------------------------------------------------------- one-hot encode


@tc.kernel(static_shapes=True)
def one_hot_encode(ids: torch.Tensor, num_classes: int) -> torch.Tensor:
    """F.one_hot(ids, num_classes) as bf16 for class ids [N] int64 (targets for a soft-label
    or distillation loss): [N, C] bf16, 1 where the column is the row's class. Each program
    takes a block of rows and classes and compares the rows' ids with the column indices."""
    (n,) = ids.size()
    out = torch.empty([n, num_classes], dtype=torch.bfloat16, device=ids.device)
    for tn, tcl in tc.tile([n, num_classes]):
        hit = ids[tn][:, None] == tcl.index[None, :]
        out[tn, tcl] = hit.to(torch.bfloat16)
    return out


def _ids_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: class ids uniform in [0, NUM_CLASSES), int64."""
    return (randint(0, NUM_CLASSES, shape, device, gen(seed)),)


def one_hot_encode_reference(ids: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.one_hot(ids, NUM_CLASSES).to(torch.bfloat16)


# --------------------------------------------------------------------------- take along last dim


@tc.kernel(static_shapes=True)
def take_along_last_dim(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """torch.take_along_dim(x, idx, dim=1) of x [B, N] bf16 and idx [B, K] int64 (picking K
    candidates of each row: the sampled tokens' logits, a top-k's values by index): [B, K]
    bf16. Each program takes a block of rows with their whole N and a block of K indices,
    and gathers from the row tile."""
    b, _ = x.size()
    k = idx.size(1)
    out = torch.empty([b, k], dtype=x.dtype, device=x.device)
    for tb, tk in tc.tile([b, k]):
        out[tb, tk] = torch.take_along_dim(x[tb, :], idx[tb, tk], dim=1)
    return out


def _take_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, N, K)``: x [B, N] bf16 randn, idx [B, K] int64 uniform in [0, N)."""
    b, n, k = shape
    g = gen(seed)
    return randn((b, n), torch.bfloat16, device, g), randint(0, n, (b, k), device, g)


def take_along_last_dim_reference(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.take_along_dim(x, idx, dim=1)


# --------------------------------------------------------------------------- repeat interleave


@tc.kernel(static_shapes=True)
def repeat_interleave_rows(x: torch.Tensor, repeats: int) -> torch.Tensor:
    """x.repeat_interleave(repeats, dim=0) of x [N, D] bf16 (each token's features copied for
    each of its beams or samples): [N R, D] bf16. Each program stores a block of output rows
    and columns, output row i reading input row i // R (docs/patterns.md's group index)."""
    n, d = x.size()
    out = torch.empty([n * repeats, d], dtype=x.dtype, device=x.device)
    for tr, td in tc.tile([n * repeats, d]):
        out[tr, td] = x[tr.index // repeats, td]
    return out


def _rows_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, D)``: bf16 randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def repeat_interleave_rows_reference(x: torch.Tensor) -> torch.Tensor:
    return x.repeat_interleave(REPEATS, dim=0)


# --------------------------------------------------------------------------- cumprod rows


@tc.kernel(static_shapes=True)
def cumprod_rows(x: torch.Tensor) -> torch.Tensor:
    """torch.cumprod(x, dim=-1) of x [B, L] fp32 (running survival probabilities, or a
    discount product over time): [B, L] fp32. Each program takes a block of whole rows."""
    b, _ = x.size()
    out = torch.empty_like(x)
    for tb in tc.tile(b):
        out[tb, :] = torch.cumprod(x[tb, :], dim=1)
    return out


def _cumprod_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, L)``: fp32 factors 1 + 0.01 randn (products stay near 1)."""
    return (1 + 0.01 * randn(shape, torch.float32, device, gen(seed)),)


def cumprod_rows_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cumprod(x, dim=-1)


# --------------------------------------------------------------------------- symmetrize


@tc.kernel(static_shapes=True)
def symmetrize(x: torch.Tensor) -> torch.Tensor:
    """(x + x.T) / 2 of a square x [N, N] bf16 (a symmetrized kernel or Hessian estimate):
    [N, N] bf16. Each program takes a block (i, j) and adds the mirrored block (j, i),
    transposed."""
    n, _ = x.size()
    out = torch.empty_like(x)
    for ti, tj in tc.tile([n, n]):
        out[ti, tj] = (x[ti, tj] + x[tj, ti].t()) / 2
    return out


def symmetrize_reference(x: torch.Tensor) -> torch.Tensor:
    return (x + x.T) / 2


# --------------------------------------------------------------------------- Sinkhorn step


@tc.kernel(static_shapes=True)
def sinkhorn_row_col_step(p: torch.Tensor) -> torch.Tensor:
    """One Sinkhorn-Knopp step on positive matrices p [B, N, N] fp32 (optimal transport, or
    a doubly stochastic attention): each row divided by its sum, then each column of the
    result by its sum. Two device loops: the first takes blocks of whole rows, the second
    (launched after it) blocks of whole columns of the row-normalized matrices."""
    b, n, m = p.size()
    rows = torch.empty_like(p)
    out = torch.empty_like(p)
    for tb, ti in tc.tile([b, n]):
        pt = p[tb, ti, :]
        rows[tb, ti, :] = pt / torch.sum(pt, dim=2, keepdim=True)
    for tb, tj in tc.tile([b, m]):
        ct = rows[tb, :, tj]
        out[tb, :, tj] = ct / torch.sum(ct, dim=1, keepdim=True)
    return out


def _sinkhorn_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, N)``: p [B, N, N] fp32 exp(randn) (a Gibbs kernel exp(-cost / eps))."""
    b, n = shape
    return (torch.exp(randn((b, n, n), torch.float32, device, gen(seed))),)


def sinkhorn_row_col_step_reference(p: torch.Tensor) -> torch.Tensor:
    p = p / p.sum(dim=-1, keepdim=True)
    return p / p.sum(dim=-2, keepdim=True)


# --------------------------------------------------------------------------- hardswish epilogue


@tc.kernel(static_shapes=True)
def hardswish_clamp_scale(
    x: torch.Tensor, scale: torch.Tensor, shift: float, bound: float
) -> torch.Tensor:
    """clamp(hardswish(x) * scale[col] + shift, -bound, bound) of x [M, N] bf16 with a
    per-column scale [N] bf16 (a MobileNetV3 block's activation with its folded scale, clipped
    for int8 quantization next), hardswish written out as x * relu6(x + 3) / 6; fp32 math,
    bf16 out. Each program takes a block of rows and columns."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        xf = x[tm, tn].to(torch.float32)
        hs = xf * torch.clamp(xf + 3.0, 0.0, 6.0) / 6.0  # F.relu6 (unsupported when written)
        y = hs * scale[tn].to(torch.float32)[None, :] + shift
        out[tm, tn] = torch.clamp(y, -bound, bound).to(out.dtype)
    return out


def _hardswish_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: x 2 randn bf16 (most values in hardswish's curved range [-3, 3]),
    scale 1 + 0.5 randn bf16."""
    m, n = shape
    g = gen(seed)
    x = (2 * randn((m, n), torch.float32, device, g)).to(torch.bfloat16)
    scale = (1 + 0.5 * randn((n,), torch.float32, device, g)).to(torch.bfloat16)
    return x, scale


def hardswish_clamp_scale_reference(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    y = xf * torch.nn.functional.relu6(xf + 3) / 6 * scale.float() + HS_SHIFT
    return torch.clamp(y, -HS_CLAMP, HS_CLAMP).to(x.dtype)


# --------------------------------------------------------------------------- layer scale, [B, C, L]


@tc.kernel(static_shapes=True)
def layer_scale_residual_blc(
    x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor
) -> torch.Tensor:
    """residual + gamma[c] * x for x, residual [B, C, L] bf16 and a per-channel layer scale
    gamma [C] bf16 (a 1-D ConvNeXt block's output in channels-first layout); fp32 math, bf16
    out. Each program takes a block of batches, channels and positions; gamma broadcasts over
    the middle dim."""
    b, c, length = x.size()
    out = torch.empty_like(x)
    for tb, tch, tl in tc.tile([b, c, length]):
        g = gamma[tch].to(torch.float32)[None, :, None]
        y = residual[tb, tch, tl].to(torch.float32) + g * x[tb, tch, tl].to(torch.float32)
        out[tb, tch, tl] = y.to(out.dtype)
    return out


def _layer_scale_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, L)``: x and residual bf16 randn, gamma 0.1 + 0.05 randn bf16 (a
    trained layer scale, initialized small)."""
    b, c, length = shape
    g = gen(seed)
    x = randn((b, c, length), torch.bfloat16, device, g)
    residual = randn((b, c, length), torch.bfloat16, device, g)
    gamma = (0.1 + 0.05 * randn((c,), torch.float32, device, g)).to(torch.bfloat16)
    return x, residual, gamma


def layer_scale_residual_blc_reference(
    x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor
) -> torch.Tensor:
    y = residual.float() + gamma.float()[:, None] * x.float()
    return y.to(x.dtype)


CASES = [
    Case(
        name="one_hot_encode",
        kernels=(one_hot_encode,),
        make_inputs=_ids_inputs,
        reference=one_hot_encode_reference,
        run=lambda ks, inp: ks["one_hot_encode"](*inp, NUM_CLASSES),
        gpu_shapes=((131072,),),  # 262 MB written
        cpu_shapes=((37,), (5,)),
        atol=1e-6,  # zeros and ones: exact
    ),
    one_kernel_case(
        "take_along_last_dim",
        take_along_last_dim,
        _take_inputs,
        take_along_last_dim_reference,
        ((16384, 4096, 1024),),  # x 134 MB, idx 134 MB read, 34 MB written
        ((37, 100, 20), (5, 64, 70)),
        1e-6,  # a copy: exact
    ),
    Case(
        name="repeat_interleave_rows",
        kernels=(repeat_interleave_rows,),
        make_inputs=_rows_inputs,
        reference=repeat_interleave_rows_reference,
        run=lambda ks, inp: ks["repeat_interleave_rows"](*inp, REPEATS),
        gpu_shapes=((16384, 2048),),  # 67 MB read, 268 MB written
        cpu_shapes=((37, 100), (5, 13)),
        atol=1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "cumprod_rows",
        cumprod_rows,
        _cumprod_inputs,
        cumprod_rows_reference,
        ((8192, 4096),),  # 134 MB each way
        ((37, 100), (5, 300)),
        1e-5,  # products near 1 (|log| < 0.5 at L = 300) in another order: a few fp32 ulp
    ),
    one_kernel_case(
        "symmetrize",
        symmetrize,
        _rows_inputs,
        symmetrize_reference,
        ((8192, 8192),),  # 134 MB each way (each element read twice)
        ((37, 37), (100, 100)),
        1e-6,  # one bf16 add (rounded as torch rounds it) and an exact halving
    ),
    one_kernel_case(
        "sinkhorn_row_col_step",
        sinkhorn_row_col_step,
        _sinkhorn_inputs,
        sinkhorn_row_col_step_reference,
        ((16, 1024),),  # 67 MB a tensor: each loop reads and writes 67 MB
        ((3, 37), (2, 100)),
        1e-6,  # entries below 1: fp32 sums in another order, a few ulp
    ),
    Case(
        name="hardswish_clamp_scale",
        kernels=(hardswish_clamp_scale,),
        make_inputs=_hardswish_inputs,
        reference=hardswish_clamp_scale_reference,
        run=lambda ks, inp: ks["hardswish_clamp_scale"](*inp, HS_SHIFT, HS_CLAMP),
        gpu_shapes=((16384, 4096),),  # 134 MB each way
        cpu_shapes=((37, 100), (5, 130)),
        atol=2.0**-5,  # bf16 out, |y| <= 4: one ulp (2^-6 in [2, 4)) where a fused
        # multiply-add rounds the fp32 result to the other neighbour, with margin
    ),
    one_kernel_case(
        "layer_scale_residual_blc",
        layer_scale_residual_blc,
        _layer_scale_inputs,
        layer_scale_residual_blc_reference,
        ((16, 512, 4096),),  # 134 MB read, 67 MB written
        ((2, 3, 37), (3, 5, 100)),
        0.04,  # bf16 out, |y| < 8: one ulp (2^-5) where a fused multiply-add rounds the fp32
        # result to the other bf16 neighbour
    ),
]

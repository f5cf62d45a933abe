"""Held-out kernels written from the docs only, session 27 (see :mod:`.heldout_rows` for why
held-out kernels exist): reductions down the leading (non-contiguous) dim of a row-major [M, N]
tensor, and other per-column statistics. The per-channel absolute max of a bf16 activation (the
scale of a per-channel fp8 quantization) written twice: as an explicit walk over row tiles with a
running fp32 max, and as one ``torch.amax`` over the whole column (``x[:, tn]``); the argmin of
each column of an fp32 matrix (a running min and its row, first index on ties as
``torch.argmin``); the range (max minus min) of each column of a bf16 tensor (two running
values); a per-column "any inf or NaN" flag of a bf16 tensor (a running int32 max of the
non-finite indicator, stored as bool); and the column sums of ``exp(x - rowmax)`` (two device
loops in one kernel: the row maxima first, then a walk down the rows per column tile). Each
comes with its eager reference (see :mod:`.case`).

Notes: ``column_any_nonfinite``'s inputs plant only +inf and -inf, no NaN: the generalization
test's never-zero check (``t.float().abs().amax() > 0``) is NaN for an input holding a NaN, so
it would fail; the kernel's ``torch.isfinite`` flags NaN the same way (``x == x``). Nothing the
kernels use was unsupported.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Inputs, gen, one_kernel_case, randint, randn

# --------------------------------------------------------------------------- per-channel absmax


@tc.kernel(static_shapes=True)
def channel_absmax(x: torch.Tensor) -> torch.Tensor:
    """Per-channel absolute max for fp8 scaling: x [M, N] bf16 (tokens x channels), the max of
    |x| over the M tokens of each channel, in fp32. Each program owns a column tile and walks
    the row tiles, keeping a running max (|x| >= 0, so it starts at 0). Returns fp32 [N]."""
    m, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.full([tn], 0.0, dtype=torch.float32)
        for tm in tc.tile(m):
            acc = torch.maximum(acc, torch.amax(x[tm, tn].abs().to(torch.float32), dim=0))
        out[tn] = acc
    return out


@tc.kernel(static_shapes=True)
def channel_absmax_whole(x: torch.Tensor) -> torch.Tensor:
    """The same per-channel absolute max of x [M, N] bf16 without an inner loop: each program
    takes whole columns (``x[:, tn]``) and reduces them with one torch.amax. Returns fp32 [N]."""
    _, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        out[tn] = torch.amax(x[:, tn].to(torch.float32).abs(), dim=0)
    return out


def _absmax_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: bf16 activations, randn with a per-channel scale in [0.1, 4) (some
    channels carry outliers, as LLM activations do)."""
    m, n = shape
    g = gen(seed)
    x = randn(shape, torch.float32, device, g)
    scale = 0.1 + 3.9 * randn((1, n), torch.float32, device, g).abs().clamp(max=1.0)
    return ((x * scale).to(torch.bfloat16),)


def channel_absmax_reference(x: torch.Tensor) -> torch.Tensor:
    return x.float().abs().amax(dim=0)


# --------------------------------------------------------------------------- column argmin


@tc.kernel(static_shapes=True)
def column_argmin(x: torch.Tensor) -> torch.Tensor:
    """torch.argmin(x, dim=0) of x [M, N] fp32: the row of each column's smallest value, the
    first such row on ties (as torch). Each program owns a column tile and walks the row tiles
    in order with torch.min(tile, dim=0), keeping the running min and its row; a later tile
    wins only with a strictly smaller value. Returns int64 [N]."""
    m, n = x.size()
    out = torch.empty([n], dtype=torch.int64, device=x.device)
    for tn in tc.tile(n):
        best = tc.full([tn], float("inf"), dtype=torch.float32)
        best_idx = tc.zeros([tn], dtype=torch.int64)
        for tm in tc.tile(m):
            v, i = torch.min(x[tm, tn], dim=0)
            better = v < best
            best_idx = torch.where(better, i.to(torch.int64) + tm.begin, best_idx)
            best = torch.where(better, v, best)
        out[tn] = best_idx
    return out


def _argmin_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: fp32, 2 randn rounded to multiples of 0.25, so a column's min often
    occurs more than once and the first-index rule matters."""
    x = randn(shape, torch.float32, device, gen(seed)) * 2
    return ((x * 4).round() / 4,)


def column_argmin_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.argmin(x, dim=0)


# --------------------------------------------------------------------------- column range


@tc.kernel(static_shapes=True)
def column_range(x: torch.Tensor) -> torch.Tensor:
    """Per-column range, max minus min over the M rows of x [M, N] bf16 (e.g. for an asymmetric
    per-channel quantization's scale), fp32 math. Each program owns a column tile and walks the
    row tiles with a running max and a running min. Returns fp32 [N]."""
    m, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        hi = tc.full([tn], float("-inf"), dtype=torch.float32)
        lo = tc.full([tn], float("inf"), dtype=torch.float32)
        for tm in tc.tile(m):
            t = x[tm, tn].to(torch.float32)
            hi = torch.maximum(hi, torch.amax(t, dim=0))
            lo = torch.minimum(lo, torch.amin(t, dim=0))
        out[tn] = hi - lo
    return out


def _range_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: bf16, 1.5 randn + 0.5."""
    x = randn(shape, torch.float32, device, gen(seed)) * 1.5 + 0.5
    return (x.to(torch.bfloat16),)


def column_range_reference(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return xf.amax(dim=0) - xf.amin(dim=0)


# --------------------------------------------------------------------------- any non-finite


@tc.kernel(static_shapes=True)
def column_any_nonfinite(x: torch.Tensor) -> torch.Tensor:
    """Whether each column of x [M, N] bf16 holds an inf or a NaN (a per-channel overflow check
    before a reduced-precision cast, as grad scalers do per tensor). Each program owns a column
    tile and walks the row tiles with a running int32 "any" (the max of the 0/1 indicator).
    Returns bool [N]."""
    m, n = x.size()
    out = torch.empty([n], dtype=torch.bool, device=x.device)
    for tn in tc.tile(n):
        found = tc.zeros([tn], dtype=torch.int32)
        for tm in tc.tile(m):
            bad = ~torch.isfinite(x[tm, tn])
            found = torch.maximum(found, torch.amax(bad.to(torch.int32), dim=0))
        out[tn] = found > 0
    return out


def _nonfinite_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: bf16 randn with max(2, M N / 100000) elements set to +inf or -inf
    (alternating) at positions drawn from the seed; no NaN (see the module docstring)."""
    m, n = shape
    g = gen(seed)
    x = randn(shape, torch.float32, device, g)
    if device == "meta":
        return (x.to(torch.bfloat16),)
    count = max(2, m * n // 100000)
    where = randint(0, m * n, (count,), device, g)
    sign = torch.where(torch.arange(count, device=device) % 2 == 0, 1.0, -1.0)
    x.view(-1)[where] = sign * float("inf")
    return (x.to(torch.bfloat16),)


def column_any_nonfinite_reference(x: torch.Tensor) -> torch.Tensor:
    return (~torch.isfinite(x)).any(dim=0)


# --------------------------------------------------------------------------- exp(x - rowmax) sums


@tc.kernel(static_shapes=True)
def row_max_then_column_sum(x: torch.Tensor) -> torch.Tensor:
    """Column sums of the unnormalized softmax numerators: x [M, N] bf16 scores; rowmax = the
    max of each row, out[j] = sum_i exp(x[i, j] - rowmax[i]), fp32 math. Two device loops: the
    row maxima into an fp32 [M] buffer, then per column tile a walk down the row tiles summing
    exp(x - rowmax). Returns fp32 [N]."""
    m, n = x.size()
    row_max = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        row_max[tm] = torch.amax(x[tm, :].to(torch.float32), dim=1)
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            p = torch.exp(x[tm, tn].to(torch.float32) - row_max[tm][:, None])
            acc = acc + torch.sum(p, dim=0)
        out[tn] = acc
    return out


def _rowmax_colsum_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: bf16 scores, 2 randn."""
    return ((randn(shape, torch.float32, device, gen(seed)) * 2).to(torch.bfloat16),)


def row_max_then_column_sum_reference(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return torch.exp(xf - xf.amax(dim=1, keepdim=True)).sum(dim=0)


CASES = [
    one_kernel_case(
        "channel_absmax",
        channel_absmax,
        _absmax_inputs,
        channel_absmax_reference,
        ((32768, 4096), (8192, 14336)),
        ((37, 100), (300, 7)),
        1e-6,  # a max of bf16 values upcast: exact
    ),
    one_kernel_case(
        "channel_absmax_whole",
        channel_absmax_whole,
        _absmax_inputs,
        channel_absmax_reference,
        ((32768, 4096), (8192, 14336)),
        ((37, 100), (300, 7)),
        1e-6,
    ),
    one_kernel_case(
        "column_argmin",
        column_argmin,
        _argmin_inputs,
        column_argmin_reference,
        ((16384, 8192), (4096, 50000)),
        ((37, 100), (300, 7)),
        0.5,  # indices are integers: any mismatch fails
    ),
    one_kernel_case(
        "column_range",
        column_range,
        _range_inputs,
        column_range_reference,
        ((32768, 4096),),
        ((37, 100), (300, 7)),
        1e-6,  # max and min of bf16 values, their difference in fp32: exact
    ),
    one_kernel_case(
        "column_any_nonfinite",
        column_any_nonfinite,
        _nonfinite_inputs,
        column_any_nonfinite_reference,
        ((32768, 8192),),
        ((37, 100), (300, 7)),
        0.5,  # flags: any mismatch fails
    ),
    one_kernel_case(
        "row_max_then_column_sum",
        row_max_then_column_sum,
        _rowmax_colsum_inputs,
        row_max_then_column_sum_reference,
        ((8192, 8192),),
        ((37, 100), (300, 7)),
        1e-4,
    ),
]

"""Triton combine functions that generated kernels import (stage: runtime; used by the code that
``codegen/reduce.py`` emits).

PyTorch's max/min reductions propagate NaN (``amax([1, nan]) == nan``; ``argmax`` gives the first
NaN's index); ``tl.max``/``tl.argmax`` do not, so float reductions combine through these instead. (No annotations: Triton resolves the
names a jitted function mentions, ``Any`` included, as kernel globals.)
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def max_nan(a, b):  # type: ignore[no-untyped-def]
    # one max.NaN instruction on sm_80+ (a select on the comparison was four per element: 11%
    # of an attention forward on the H200, benchmarks/results/fastmax_s7.md)
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def min_nan(a, b):  # type: ignore[no-untyped-def]
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def argmax_nan(a, ia, b, ib):  # type: ignore[no-untyped-def]
    a_nan = a != a
    b_nan = b != b
    tie = ((a == b) | (a_nan & b_nan)) & (ia < ib)
    pick = (a > b) | (a_nan & ~b_nan) | tie
    return tl.where(pick, a, b), tl.where(pick, ia, ib)


@triton.jit
def argmin_nan(a, ia, b, ib):  # type: ignore[no-untyped-def]
    a_nan = a != a
    b_nan = b != b
    tie = ((a == b) | (a_nan & b_nan)) & (ia < ib)
    pick = (a < b) | (a_nan & ~b_nan) | tie
    return tl.where(pick, a, b), tl.where(pick, ia, ib)


# Triton's interpreter runs a tl.reduce combine in Python once per element pair (an argmax over
# 4096 lanes: 4095 calls of the four-op combine above; a CI test's top-8 of a 4100-wide row took
# 18 s a call). There, the same results come from NumPy's own reductions: these, which
# codegen emits for the interpreter only.


@triton.jit
def _best_ignoring_nan(values, nan, axis: tl.constexpr, keep: tl.constexpr, largest: tl.constexpr):  # type: ignore[no-untyped-def]
    if largest:
        return tl.max(tl.where(nan, -float("inf"), values), axis, keep_dims=keep)
    return tl.min(tl.where(nan, float("inf"), values), axis, keep_dims=keep)


@triton.jit
def _first_nan_or(values, nan, number, axis: tl.constexpr, keep: tl.constexpr):  # type: ignore[no-untyped-def]
    """``number`` (reduced along ``axis``), or a NaN where ``values`` has one: the NaN itself,
    summed with -0.0 (x + -0.0 is x for every x, -0.0 included)."""
    any_nan = tl.max(nan.to(tl.int32), axis, keep_dims=keep) > 0
    first_nan = tl.sum(tl.where(nan, values, -0.0), axis, keep_dims=keep).to(values.dtype)
    return tl.where(any_nan, first_nan, number.to(values.dtype))


@triton.jit
def best_interpreted(values, axis: tl.constexpr, keep: tl.constexpr, largest: tl.constexpr):  # type: ignore[no-untyped-def]
    """max_nan / min_nan reduced along ``axis``: NaN if any element is NaN."""
    nan = values != values
    best = _best_ignoring_nan(values, nan, axis, keep, largest)
    return _first_nan_or(values, nan, best, axis, keep)


@triton.jit
def arg_best_interpreted(
    values, indices, axis: tl.constexpr, keep: tl.constexpr, largest: tl.constexpr
):  # type: ignore[no-untyped-def]
    """argmax_nan / argmin_nan reduced along ``axis``: (best value, its least index), a NaN
    the best (the first NaN's index)."""
    nan = values != values
    any_nan = tl.max(nan.to(tl.int32), axis, keep_dims=True) > 0
    best = _best_ignoring_nan(values, nan, axis, True, largest)
    chosen = tl.where(any_nan, nan, values == best)
    top = tl.max(indices, axis, keep_dims=True)
    first = tl.min(tl.where(chosen, indices, top), axis, keep_dims=True)
    # the picked number by a max over it alone (a sum lost -0.0's sign)
    picked = chosen & (indices == first)
    number = tl.max(tl.where(picked, values, -float("inf")), axis, keep_dims=keep)
    value = _first_nan_or(values, nan, number, axis, keep)
    if keep:
        return value, first
    return value, tl.min(first, axis)


@triton.jit
def pow_float(x, y):  # type: ignore[no-untyped-def]
    """torch.pow of floats: |x| ** y, negative bases to integer powers signed by the power's
    parity (NaN for others), and 1 wherever y == 0 or x == 1 (NaN or inf on the other side)."""
    # both may be Python numbers in the interpreter (a constant base, a float argument): as
    # fp32 scalars, which also gives the result's dtype (operands come in fp32 or fp64); times
    # one, not plus zero, which makes -0.0 positive
    x = x * tl.full([], 1.0, tl.float32)
    y = y * tl.full([], 1.0, tl.float32)
    # 0 ** y apart (0, inf, or 1 below): log2(0) made the interpreter warn of a divide by zero
    zero = x == 0
    # in fp64 (the interpreter's pow; GPUs call libdevice's): fp32's log2 and exp2 were 36 ulp off
    dtype = (x * 0 + y * 0).dtype
    r = tl.exp2(tl.log2(tl.where(zero, 1.0, tl.abs(x)).to(tl.float64)) * y).to(dtype)
    # y neither > 0 nor < 0 is 0 (1, as below) or NaN (NaN: y + 1.0 keeps it)
    r = tl.where(zero, tl.where(y > 0, 0.0, tl.where(y < 0, float("inf"), y + 1.0)), r)
    # nested selects, not & of a scalar y's tests with x's (the interpreter's & refuses that)
    # r * -1.0, not -r: Triton negates as 0 - r, and (-0.0) ** 3 is -0.0
    odd = tl.where(tl.floor(y * 0.5) * 2.0 != y, r * -1.0, r)
    # (-inf) ** 2.5 is inf as C's pow, not NaN; (-1) ** +-inf is 1
    r = tl.where(
        x < 0, tl.where(tl.floor(y) == y, odd, tl.where(x == -float("inf"), r, float("nan"))), r
    )
    # -0.0 to an odd integer power keeps its sign (C's pow: (-0.0) ** -1 is -inf)
    negative_zero = zero & (1.0 / tl.where(zero, x, 1.0) < 0)
    r = tl.where(negative_zero, tl.where(tl.floor(y) == y, odd, r), r)
    r = tl.where(x == -1.0, tl.where(tl.abs(y) == float("inf"), 1.0, r), r)
    return tl.where(y == 0, 1.0, tl.where(x == 1.0, 1.0, r))


@triton.jit
def pow_int(x, y):  # type: ignore[no-untyped-def]
    """torch.pow of integers: exact, wrapping as the dtype does, by squaring and multiplying
    over the exponent's bits; a negative exponent gives 0 (1 and -1 to the +-1 they give)."""
    result = x * 0 + y * 0 + 1
    base = x + y * 0
    e = y + x * 0
    odd = (e & 1) != 0
    for _ in tl.static_range(64):
        result = tl.where((e & 1) != 0, result * base, result)
        e = e >> 1
        base = base * base
    unit = tl.where(base * 0 + x == -1, tl.where(odd, -1, 1), tl.where(x == 1, 1, 0))
    return tl.where(y + x * 0 < 0, unit, result)


@triton.jit
def floordiv_float(a, b, mod):  # type: ignore[no-untyped-def]
    """torch's floor division of floats from ``mod``, C's fmod(a, b), as torch's kernels (exact
    for large quotients; inf and NaN as torch gives them)."""
    # exactly: fp32 ``/`` is div.full.f32 on GPUs, 2 ulp (256 at 3e9); div_rn has no fp64 form
    if a.dtype == tl.float32:  # noqa: SIM108  (a compile-time branch: one form is traced)
        div = tl.math.div_rn(a - mod, b)
    else:
        div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    signed_zero = tl.where(a / b < 0, -0.0, 0.0)
    return tl.where(b == 0, a / b, tl.where(div != 0, fl, signed_zero))


@triton.jit
def sign_bit(x):  # type: ignore[no-untyped-def]
    """torch.signbit of a float tile: its sign bit, a NaN's too (``x < 0`` cannot see it; x86's
    default NaN from inf - inf has it). fp64 and fp16 in their own bits (fp16 widened on a GPU
    loses a NaN's sign), bf16 widened (exact) to fp32's."""
    if x.dtype == tl.float64:
        bits = x.to(tl.int64, bitcast=True)
    elif x.dtype == tl.float16:
        bits = x.to(tl.int16, bitcast=True)
    else:
        bits = x.to(tl.float32).to(tl.int32, bitcast=True)
    return bits < 0


@triton.jit
def copy_sign(x, y):  # type: ignore[no-untyped-def]
    """torch.copysign of float tiles of one dtype: ``x``'s magnitude with ``y``'s sign bit, by
    bits (a NaN's sign too, and -0.0: Triton's ``-v`` is ``0 - v``)."""
    if x.dtype == tl.float64:
        sign = (y.to(tl.int64, bitcast=True) >> 63) << 63
        out = (tl.abs(x).to(tl.int64, bitcast=True) | sign).to(tl.float64, bitcast=True)
    elif x.dtype == tl.float16:
        sign = (y.to(tl.int16, bitcast=True) >> 15) << 15
        out = ((x.to(tl.int16, bitcast=True) & 0x7FFF) | sign).to(tl.float16, bitcast=True)
    else:
        sign = (y.to(tl.float32).to(tl.int32, bitcast=True) >> 31) << 31
        magnitude = tl.abs(x.to(tl.float32)).to(tl.int32, bitcast=True)
        out = (magnitude | sign).to(tl.float32, bitcast=True)
    return out


@triton.jit
def bitcast(x, DTYPE: tl.constexpr):  # type: ignore[no-untyped-def]
    """``x``'s bits as ``DTYPE`` (``Tensor.view(dtype)`` of a tile)."""
    return x.to(DTYPE, bitcast=True)


@triton.jit
def fmod_exact(a, b):  # type: ignore[no-untyped-def]
    """C's fmod of fp32 / fp64 on GPUs, exact (libdevice / ocml); Triton's float ``%`` there is
    LLVM's frem, x - y * trunc(x / y) on NVPTX. Not for the interpreter: it has no libdevice
    (and its ``%`` is numpy's exact fmod)."""
    return libdevice.fmod(a, b)


def interpreter_index(x):  # type: ignore[no-untyped-def]
    """A ``tl.range`` bound as a Python int, for code generated for Triton's interpreter only:
    there a scalar computed in the kernel (or an int argument) is a one-element array, and
    ``range()`` converting it is deprecated by NumPy (an error from NumPy 2.3)."""
    data = getattr(getattr(x, "handle", None), "data", None)
    return int(data.reshape(-1)[0]) if data is not None else x


# fp8 casts with PyTorch's rounding and overflow rules: round to nearest even (subnormals
# included); float8_e5m2 overflows to +-inf; NaN stays NaN. float8_e4m3fn has no infinity, and
# PyTorch itself differs by device there: its CPU copy saturates (|x| past 448, inf included,
# becomes +-448) while its CUDA/ROCm conversion (c10's fp8e4m3fn_from_fp32_value) makes what
# rounds past 448 (|x| > 464) and inf NaN. Kernels follow torch on their device (the interpreter: CPU), so a kernel and its
# ref mode agree (measured on an H200: the saturating cast differed from torch.cuda's in 808 of
# 4051 edge values). (Hardware conversions differ again: NVIDIA's satfinite saturates e5m2 too,
# and Triton's interpreter rounds ties away and has no e4m3fn subnormals.)
@triton.jit
def _fp8_bits(x, MANT: tl.constexpr, BIAS: tl.constexpr, TOP: tl.constexpr, OVER: tl.constexpr):  # type: ignore[no-untyped-def]
    """The fp8 bit pattern (uint8) of fp32 ``x``; a rounded magnitude past ``TOP`` (the largest
    finite pattern) becomes ``OVER`` (TOP: saturate, inf's or NaN's pattern)."""
    u = x.to(tl.uint32, bitcast=True)
    a = u & 0x7FFFFFFF
    shift: tl.constexpr = 23 - MANT
    # normal results: round fp32's mantissa to MANT bits (half to even), then re-bias the exponent
    rounded = a + ((1 << (shift - 1)) - 1) + ((a >> shift) & 1)
    normal = (rounded >> shift) - ((127 - BIAS) << MANT)
    # below the smallest normal 2**(1 - BIAS): a multiple of the subnormal step, rounded to even
    # by fp32's adder (the scaling by a power of two is exact)
    small = a < ((128 - BIAS) << 23)
    capped = tl.minimum(a, (128 - BIAS) << 23).to(tl.float32, bitcast=True)
    scaled = capped * (2.0 ** (BIAS - 1 + MANT))
    sub = ((scaled + 12582912.0) - 12582912.0).to(tl.uint32)
    mag = tl.where(small, sub, normal)
    mag = tl.where(mag > TOP, OVER, mag)
    mag = tl.where(a > 0x7F800000, 0x7F, mag)
    return (((u >> 31) << 7) | mag).to(tl.uint8)


@triton.jit
def to_fp8e4nv(x):  # type: ignore[no-untyped-def]
    """float8_e4m3fn as torch's CPU copy makes it (saturating)."""
    return _fp8_bits(x.to(tl.float32), 3, 7, 0x7E, 0x7E).to(tl.float8e4nv, bitcast=True)


@triton.jit
def to_fp8e4nv_gpu(x):  # type: ignore[no-untyped-def]
    """float8_e4m3fn as torch on CUDA/ROCm makes it: what rounds past 448, and inf, is NaN."""
    return _fp8_bits(x.to(tl.float32), 3, 7, 0x7E, 0x7F).to(tl.float8e4nv, bitcast=True)


@triton.jit
def to_fp8e5(x):  # type: ignore[no-untyped-def]
    return _fp8_bits(x.to(tl.float32), 2, 15, 0x7C, 0x7C).to(tl.float8e5, bitcast=True)


# The same two casts by the hardware's conversion (NVIDIA sm_89+: cvt.rn.satfinite, round to
# nearest even as torch does). It saturates what overflows (inf included) to the largest finite
# pattern, where torch.cuda gives the next pattern up (e4m3fn's NaN, e5m2's inf): one added bit.
# The bit arithmetic above costs ~25 integer ops an element: an fp8 row quantization on the H200
# ran at the SM's integer throughput, not at memory speed.
@triton.jit
def _fp8_cvt(x, dtype: tl.constexpr, OVER: tl.constexpr, TIE_UP: tl.constexpr):  # type: ignore[no-untyped-def]
    """``OVER``: the magnitude past which (from which, if ``TIE_UP``) torch's result is the
    pattern above the largest finite one."""
    f = x.to(tl.float32)
    over = (tl.abs(f) >= OVER) if TIE_UP else (tl.abs(f) > OVER)
    bits = f.to(dtype).to(tl.uint8, bitcast=True) + over.to(tl.uint8)
    return bits.to(dtype, bitcast=True)


@triton.jit
def to_fp8e4nv_cvt(x):  # type: ignore[no-untyped-def]
    """:func:`to_fp8e4nv_gpu` by the hardware conversion: past 464 (464 itself rounds to even,
    448) torch.cuda gives NaN (0x7F) where the hardware saturates (0x7E)."""
    return _fp8_cvt(x, tl.float8e4nv, 464.0, False)


@triton.jit
def to_fp8e5_cvt(x):  # type: ignore[no-untyped-def]
    """:func:`to_fp8e5` by the hardware conversion: from 61440 (the tie rounds to even: up)
    torch gives inf (0x7C) where the hardware saturates to 57344 (0x7B)."""
    return _fp8_cvt(x, tl.float8e5, 61440.0, True)


@triton.jit
def from_fp8_interpreted(x, INF: tl.constexpr):  # type: ignore[no-untyped-def]
    """fp8 -> fp32 in Triton's interpreter, which decodes NaN (and e5m2's inf) as numbers.
    ``INF``: the format's infinity pattern (0x7C for e5m2), or 0 for a format without one."""
    raw = x.to(tl.uint8, bitcast=True)
    bits = raw & 0x7F
    value = x.to(tl.float32)
    special = bits >= (INF if INF else 0x7F)
    negative = (raw & 0x80) != 0
    inf = tl.where(negative, -float("inf"), float("inf"))
    nan = tl.where(negative, -float("nan"), float("nan"))  # the sign kept, as torch keeps it
    return tl.where(special, tl.where(bits == INF, inf, nan), value)


@triton.jit
def from_bf16_interpreted(x):  # type: ignore[no-untyped-def]
    """fp32 of a bfloat16 ``x`` from its bits: Triton 3.6's interpreter widened subnormals wrong
    (1e-40 became 0.0, 1e-39 4.4e-39; GPUs shift the bits, exactly)."""
    return (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)


# Triton 3.6's interpreter casts to bfloat16 by dropping the low 16 bits of the fp32 value
# (whatever ``fp_downcast_rounding`` says), where torch and every GPU round to nearest even: an
# interpreter run was a bf16 ulp off the eager reference, two where the cast fed a dot.
@triton.jit
def to_bf16_interpreted(x):  # type: ignore[no-untyped-def]
    """bfloat16 of ``x`` rounded to nearest even, as torch rounds (NaN stays NaN)."""
    f = x.to(tl.float32)
    bits = f.to(tl.uint32, bitcast=True)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    kept = tl.where(f != f, bits | 0x400000, rounded)  # a NaN's payload stays quiet and NaN
    return (kept >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)

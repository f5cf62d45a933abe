"""Sorting along a tile's last dim with the positions (stage: runtime; called by the code that
``codegen/extern.py`` emits for ``torch.sort`` / ``torch.topk`` / ``torch.argsort``).

``tl.sort`` / ``tl.topk`` sort values only. Each element becomes one 64-bit key: 32 bits whose
unsigned order is the wanted order of its value (floats by their sign-flipped bits, NaN above
+inf and -0.0 as 0.0, as torch orders them; ints by their offset bits), then 32 bits of its
position, earlier positions first among equals (a stable sort, as ``stable=True``), shifted up one
bit for the sign of a zero (a sort permutes: -0.0 stays -0.0; that bit never orders, positions
differ). Padded
positions past the dim's length sort last. Always sorted descending: an ascending order flips
the value bits. (No annotations: Triton resolves the names a jitted function mentions as kernel
globals.)
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _packed(x, pos, n, ASCENDING: tl.constexpr):  # type: ignore[no-untyped-def]
    """The uint64 key of each element (larger: earlier in the output)."""
    negative_zero = tl.zeros_like(pos).to(tl.uint32)
    if x.dtype.is_floating():
        f = x.to(tl.float32)
        negative_zero = tl.where(f == 0, f.to(tl.uint32, bitcast=True) >> 31, 0)
        f = tl.where(f != f, float("nan"), tl.where(f == 0, 0.0, f))  # one NaN, one zero
        u = f.to(tl.uint32, bitcast=True)
        key = tl.where((u >> 31) != 0, u ^ 0xFFFFFFFF, u | 0x80000000)
    else:
        key = x.to(tl.int32).to(tl.uint32, bitcast=True) ^ 0x80000000
    if ASCENDING:
        key = key ^ 0xFFFFFFFF
    key = tl.where(pos < n, key, 0)
    tie = ((pos.to(tl.uint32, bitcast=True) ^ 0xFFFFFFFF) << 1) | negative_zero
    return (key.to(tl.uint64) << 32) | tie.to(tl.uint64)


@triton.jit
def sorted_keys(x, pos, n, ASCENDING: tl.constexpr):  # type: ignore[no-untyped-def]
    """The keys of ``x`` (positions ``pos``, ``n`` of them valid) in sorted order, as int64."""
    keys = tl.sort(_packed(x, pos, n, ASCENDING), descending=True)
    return keys.to(tl.int64, bitcast=True)


@triton.jit
def top_keys(x, pos, n, ASCENDING: tl.constexpr, K: tl.constexpr):  # type: ignore[no-untyped-def]
    """The first ``K`` (a power of two) of :func:`sorted_keys`: a partial bitonic sort."""
    keys = tl.topk(_packed(x, pos, n, ASCENDING), K)
    return keys.to(tl.int64, bitcast=True)


@triton.jit
def _value_bits(keys, ASCENDING: tl.constexpr):  # type: ignore[no-untyped-def]
    """The value half of each key as a signed int64 in [-2**31, 2**31), the complement undone
    for an ascending order (int64 arithmetic: gfx942's LLVM crashed selecting the same steps on
    uint32 vectors)."""
    hi = keys >> 32
    return -1 - hi if ASCENDING else hi


@triton.jit
def key_floats(keys, ASCENDING: tl.constexpr):  # type: ignore[no-untyped-def]
    """The fp32 values the keys of floats were made from (a zero with its sign)."""
    hi = _value_bits(keys, ASCENDING)
    bits = tl.where(hi < 0, hi & 0x7FFFFFFF, -1 - hi)
    bits = tl.where((keys & 1) != 0, -2147483648, bits)  # -0.0
    return bits.to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def key_ints(keys, ASCENDING: tl.constexpr):  # type: ignore[no-untyped-def]
    """The int32 values the keys of ints were made from."""
    return (_value_bits(keys, ASCENDING) ^ -2147483648).to(tl.int32)


@triton.jit
def key_positions(keys):  # type: ignore[no-untyped-def]
    """The positions the keys were made from, as int64 (torch's indices)."""
    tie = (keys.to(tl.uint64, bitcast=True) & 0xFFFFFFFF).to(tl.uint32)
    return ((tie >> 1) ^ 0x7FFFFFFF).to(tl.int64)

"""Index width of a tensor access (stage: ir; in: a tensor's sizes and strides; out: whether its
element offsets need 64-bit arithmetic).

Offsets are computed in int32 unless some element of some tensor a kernel touches lies 2^31 or
more elements from its base pointer; then every offset is int64. Decided from the actual extents
and strides of each call, so it is part of the specialization key with dynamic shapes too.
"""

from __future__ import annotations

from collections.abc import Sequence

INT32_LIMIT = 2**31 - 1  # the largest offset int32 arithmetic holds


def max_offset(shape: Sequence[int], stride: Sequence[int]) -> int:
    """The farthest element offset from the base pointer (0 for an empty tensor)."""
    if any(s == 0 for s in shape):
        return 0
    return sum((s - 1) * abs(st) for s, st in zip(shape, stride, strict=True))


def needs_int64(shape: Sequence[int], stride: Sequence[int]) -> bool:
    return max_offset(shape, stride) >= INT32_LIMIT

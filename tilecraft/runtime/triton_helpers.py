"""Triton combine functions that generated kernels import (stage: runtime; used by the code that
``codegen/reduce.py`` emits).

PyTorch's max/min reductions propagate NaN (``amax([1, nan]) == nan``; ``argmax`` gives the first
NaN's index); ``tl.max``/``tl.argmax`` do not, so float reductions combine through these instead. (No annotations: Triton resolves the
names a jitted function mentions, ``Any`` included, as kernel globals.)
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def max_nan(a, b):  # type: ignore[no-untyped-def]
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def min_nan(a, b):  # type: ignore[no-untyped-def]
    return tl.where((a < b) | (a != a), a, b)


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


def interpreter_index(x):  # type: ignore[no-untyped-def]
    """A ``tl.range`` bound as a Python int, for code generated for Triton's interpreter only:
    there a scalar computed in the kernel (or an int argument) is a one-element array, and
    ``range()`` converting it is deprecated by NumPy (an error from NumPy 2.3)."""
    data = getattr(getattr(x, "handle", None), "data", None)
    return int(data.reshape(-1)[0]) if data is not None else x

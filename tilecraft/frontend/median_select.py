"""``Tensor.median`` along a whole dim by radix selection (stage: frontend; in: the tracer, a
tile and its axis; out: IR nodes of counts, compares and one scan).

A sort of the line (``frontend/sorting.py``) costs ``n log^2 n`` compare-exchanges of 64-bit
(value, position) keys through shared memory; the median needs one element. Each value maps to
a 32-bit int whose signed order is the values' order, and the median's key is built bit by bit
from the top: 32 rounds of "how many keys lie at or below this threshold", each a compare and a
sum over the line held in registers (on the H100 a [512, 4096] fp32 median-of-deviations took
0.68 ms through the sort, torch 0.14). The index is the stable sort's: of the keys equal to the
median, the ``j``-th in line order, ``j`` = the middle position less the keys below it (one
scan, dead code when only ``.values`` is used). A line with NaN gives NaN at its first NaN's
index, as the sort did and torch does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.frontend import views
from tilecraft.frontend.rdims import along
from tilecraft.frontend.scans import cumulative
from tilecraft.ir.nodes import Node, Op, Sym

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue

_BITS = 32
_SIGN = -(1 << 31)  # int32's sign bit: the threshold's top bit flipped maps unsigned to signed
_MAGNITUDE = (1 << 31) - 1


def _signed(unsigned: int) -> int:
    """A 32-bit pattern as the int32 that holds it."""
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned


def _order_keys(t: Tracer, x: Any, is_float: bool) -> TileValue:
    """int32 keys whose signed order is the values' order: ints as they are; a float's bits
    with the magnitude flipped where the sign is set (-0.0 first made +0.0: torch ties them)."""
    if not is_float:
        return t.to_dtype(x, torch.int32)
    wide = t.to_dtype(x, torch.float32)
    canonical = t.where(t.pointwise("eq", wide, 0.0), 0.0, wide)
    return _flip_negatives(t, views.bitcast(t, canonical, torch.int32))


def _flip_negatives(t: Tracer, bits: Any) -> TileValue:
    """``bits`` with the magnitude flipped where the sign is set: float bits to an order key
    and back (the map is its own inverse)."""
    flip = t.pointwise("bitwise_and", t.pointwise("rshift", bits, 31), _MAGNITUDE)
    return t.pointwise("bitwise_xor", bits, flip)


def _count(t: Tracer, hit: Any, axis: int) -> TileValue:
    """How many of a line's lanes hold True (fp32 sums count exactly to 2^24)."""
    return t.reduce("sum", t.to_dtype(hit, torch.float32), axis, keepdim=True)


def _select_key(t: Tracer, keys: TileValue, axis: int, rank: Any) -> TileValue:
    """The key of rank ``rank`` (0-based, ascending; an int or a run-time value) of each
    line: the smallest threshold at or below which more than ``rank`` keys lie, its bits
    decided from the top."""
    prefix: Any = t.full([1] * keys.node.ndim, 0, torch.int32)  # unsigned bits, as int32
    for bit in reversed(range(_BITS)):
        below_bit = (1 << bit) - 1
        threshold = t.pointwise("bitwise_xor", t.pointwise("bitwise_or", prefix, below_bit), _SIGN)
        enough = t.pointwise("gt", _count(t, t.pointwise("le", keys, threshold), axis), rank)
        prefix = t.where(enough, prefix, t.pointwise("bitwise_or", prefix, _signed(1 << bit)))
    return t.pointwise("bitwise_xor", prefix, _SIGN)


def _key_value(t: Tracer, key: Any, dtype: torch.dtype) -> TileValue:
    """The value a key stands for, in ``dtype``."""
    if not dtype.is_floating_point:
        return t.to_dtype(key, dtype)
    return t.to_dtype(views.bitcast(t, _flip_negatives(t, key), torch.float32), dtype)


def select_median(t: Tracer, src: Node, axis: int) -> tuple[TileValue, TileValue]:
    """(values, int64 indices) of the lower median of each line of ``src`` along ``axis`` (a
    whole dim, of a length known at compile or at run time), keeping that dim as size 1."""
    d = src.shape[axis]
    assert isinstance(d, Sym)  # a dim of one is its own median
    x = t.wrap(src)
    is_float = src.dtype.is_floating_point
    n = t.extent_value(d)
    mid = (
        (n - 1) // 2 if isinstance(n, int) else t.pointwise("floordiv", t.pointwise("sub", n, 1), 2)
    )
    keys = _order_keys(t, x, is_float)
    if is_float:  # NaN ranks last: the lines holding one are answered below
        keys = t.where(t.pointwise("isnan", x), _MAGNITUDE, keys)
    key = _select_key(t, keys, axis, mid)
    values = _key_value(t, key, src.dtype)
    positions = along(t, t.to_dtype(t.tile_leaf(d, Op.TILE_INDEX), torch.int64), src.shape, axis)
    occurrence = t.pointwise("sub", mid, _count(t, t.pointwise("lt", keys, key), axis))
    equal = t.pointwise("eq", keys, key)
    seen = cumulative(t, "sum", t.to_dtype(equal, torch.float32), axis)
    hit = t.pointwise("and", equal, t.pointwise("eq", seen, t.pointwise("add", occurrence, 1)))
    indices = t.reduce("max", t.where(hit, positions, -1), axis, keepdim=True)
    if is_float:
        nan = t.pointwise("isnan", x)
        any_nan = t.pointwise("gt", _count(t, nan, axis), 0)
        first_nan = t.reduce("min", t.where(nan, positions, n), axis, keepdim=True)
        values = t.where(any_nan, t.full([1] * src.ndim, float("nan"), src.dtype), values)
        indices = t.where(any_nan, first_nan, indices)
    return t.to_dtype(values, src.dtype), t.to_dtype(indices, torch.int64)

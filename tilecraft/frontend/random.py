"""Random numbers on tiles: ``tc.rand(shape, seed, offset)`` (stage: frontend; in: the call on
traced tiles; out: a ``philox_rand`` pointwise node).

Each element's Philox counter is its *global* row-major element number in the loop space the shape
names (a tile dim counts its loop's indices up to the loop's end, a whole extent its ``0..n-1``)
plus ``offset``, so the numbers are the same for every config (block sizes, chunked reductions) and
in ref mode, which computes the same Philox stream in eager PyTorch (:mod:`tilecraft.ir.philox`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError
from tilecraft.ir.nodes import Dim, Op, Sym, SymKind

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue

INT32_LIMIT = 2**31


def _row_length(t: Tracer, d: Sym) -> Any:
    """How many numbers one step along ``d`` spans: its loop's end (or the whole extent)."""
    if d.kind is SymKind.RDIM:
        return t.extent_value(d)
    if isinstance(d.extent, int):
        return d.extent
    return t.wrap(d.extent)


def _dims(t: Tracer, shape: Any) -> tuple[Dim, ...]:
    used: list[Sym] = []
    out: list[Dim] = []
    for d in shape if isinstance(shape, (list, tuple)) else [shape]:
        dim = t.size_dim(d, used)
        if isinstance(dim, Sym):
            used.append(dim)
        out.append(dim)
    return tuple(out)


def rand(t: Tracer, shape: Any, seed: Any, offset: Any = 0) -> TileValue:
    dims = _dims(t, shape)
    seed_node = t.value_node(seed)
    if seed_node.dtype.is_floating_point or seed_node.ndim:
        raise DeviceCodeError("tc.rand: seed must be an int (a scalar), not a tile or a float")
    total = 1
    for d in dims:
        if isinstance(d, Sym) and isinstance(d.extent, int):
            total *= d.extent
    index_dtype = torch.int64 if total >= INT32_LIMIT else torch.int32
    number: Any = offset
    stride: Any = 1
    for pos in reversed(range(len(dims))):
        d = dims[pos]
        if not isinstance(d, Sym):
            continue
        idx = t.wrap(t.cast(t.tile_leaf(d, Op.TILE_INDEX).node, index_dtype))
        if not d.scalar:
            spec = tuple(slice(None) if i == pos else None for i in range(len(dims)))
            idx = t.view(idx, spec)
        term = idx if isinstance(stride, int) and stride == 1 else t.pointwise("mul", idx, stride)
        zero = isinstance(number, int) and number == 0
        number = term if zero else t.pointwise("add", number, term)
        length = _row_length(t, d)
        both_ints = isinstance(stride, int) and isinstance(length, int)
        stride = stride * length if both_ints else t.pointwise("mul", stride, length)
    number_node = t.value_node(number)
    if number_node.shape != tuple(dims):
        number_node = t.value_node(t.pointwise("add", t.full(list(shape), 0, index_dtype), number))
    out = t.emit(Op.BINARY, [seed_node, number_node], tuple(dims), torch.float32, fn="philox_rand")
    return t.wrap(out)

"""Subscripts of tiles (stage: frontend; in: ``v[...]`` of a traced tile; out: a VIEW node, after
a slice's register gather (:mod:`~.tile_shifts`) or an element's pick (:mod:`~.tile_gather`)
where the subscript needs one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError, ShapeError, UnsupportedOpError
from tilecraft.frontend import indexing, tile_gather, tile_shifts
from tilecraft.frontend.values import TileProxy, TileValue
from tilecraft.ir.nodes import Dim, Op, shape_str, tile_block
from tilecraft.language.tunables import DynamicInt

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


def subscript(t: Tracer, x: TileValue, index: Any) -> TileValue:
    """``x[index]`` of a tile: ``[:, None]``-style views, constant slices (a register gather),
    a tile's first or last element, one element of a whole static dim, a run-time int's."""
    node = x.node
    if node.op is Op.ARG:  # ``y[t]`` with ``y`` a number the caller passed for a tensor
        raise DeviceCodeError(
            f"'{node.attrs['name']}' is a host {'float' if node.dtype.is_floating_point else 'int'}"
            " (an argument or a host value), not a tensor: device code indexes tensors",
            t.loc,
            hint=f"pass a tensor for '{node.attrs['name']}', or use the number as it is",
        )
    items = index if isinstance(index, tuple) else (index,)
    items = indexing.without_ellipsis(items, node.ndim, "a tile", t.loc)
    spec: list[Any] = []
    shape: list[Dim] = []
    src = 0
    for item in items:
        run_time = _run_time_int(item)
        edge = type(item) is int and item in (0, -1)  # a first or a last element
        if item is None:
            spec.append(None)
            shape.append(1)
        elif isinstance(item, slice):
            if src >= node.ndim:
                raise ShapeError(
                    f"too many indices for a {node.ndim}-D tile",
                    t.loc,
                    hint="a tc.grid index, a block_size=1 tile's index and anything "
                    "computed from them are scalars (0-D): use them as they are, or add a "
                    "dim with [None]",
                )
            if not all(b is None for b in (item.start, item.stop, item.step)):
                # constant bounds: a register gather (tile_shifts.py)
                x = tile_shifts.slice_dim(t, x, src, _int_slice(item, t.loc))
                node = x.node
            spec.append(":")
            shape.append(node.shape[src])
            src += 1
        elif (run_time or edge) and src < node.ndim and node.shape[src] == 1:
            src += 1  # a dim of one: any valid index reads its element
            spec.append(0)
        elif edge and src < node.ndim and tile_block(dim := node.shape[src]):
            # a tile's first or last valid element: lane begin / end - 1 whatever the block
            at = t.tile_leaf(dim, Op.TILE_BEGIN if item == 0 else Op.TILE_END)
            at = at if item == 0 else t.pointwise("sub", at, 1)
            x = tile_gather.pick_position(t, node, src, at)
            node = x.node
            src += 1
            spec.append(0)
        elif run_time and src < node.ndim:
            x = tile_gather.pick_run_time(t, node, src, item)
            node = x.node
            src += 1
            spec.append(0)
        elif isinstance(item, int) and not isinstance(item, bool) and src < node.ndim:
            # one element of a whole static dim: the slice [k:k+1], its size-1 dim dropped
            n = tile_gather.static_whole(t, node, src, "indexing a tile")
            if not -n <= item < n:
                raise ShapeError(f"index {item} is out of range for a tile dim of {n}", t.loc)
            k = item % n
            x = tile_shifts.slice_dim(t, x, src, slice(k, k + 1))
            node = x.node
            src += 1
            spec.append(0)
        elif isinstance(item, TileProxy):
            raise UnsupportedOpError(
                "indexing a tile value with a loop's tile: a value made in device code "
                "(torch.zeros(n), a computed tile) lives in registers, not in memory",
                hint="allocate a tensor in host code before the loop (acc = torch.zeros(n, "
                "device=x.device)) and index that, or make the value the tile's shape "
                "(tc.zeros([t]))",
            )
        else:
            what = (
                f"a tile ({str(item.dtype).removeprefix('torch.')}, shape {shape_str(item.shape)})"
                if isinstance(item, TileValue)
                else repr(item)
            )
            raise UnsupportedOpError(
                f"indexing a tile with {what}",
                hint="tiles take [:, None]-style views and constant slices (x[1:], "
                "x[:, ::2]); torch.gather reads other positions (the index expanded to "
                "the result's shape); index host tensors to load data",
            )
    while src < node.ndim:
        spec.append(":")
        shape.append(node.shape[src])
        src += 1
    return t.wrap(t.emit(Op.VIEW, [node], tuple(shape), node.dtype, spec=tuple(spec)))


def _int_slice(item: slice, loc: Any) -> slice:
    """A slice of a tile with Python int bounds (a device value cannot size a register tile)."""
    parts = (item.start, item.stop, item.step)
    for p in parts:
        # tc.specialize's ints are baked in; a run-time int (DynamicInt) or a bool is not
        if p is not None and (not isinstance(p, int) or isinstance(p, (bool, DynamicInt))):
            what = "a run-time int" if isinstance(p, DynamicInt) else type(p).__name__
            raise UnsupportedOpError(
                f"slicing a tile with [{_bound(item.start)}:{_bound(item.stop)}"
                f"{'' if item.step is None else ':' + _bound(item.step)}]: {p!r} is {what}, "
                "and a tile slice's bounds must be ints known when the kernel compiles",
                loc,
                hint="a slice's length sizes a register tile: use a static bound "
                "(static_shapes=True, or tc.specialize(n)), or mask with torch.where instead",
            )
    return slice(*(None if p is None else int(p) for p in parts))


def _bound(p: Any) -> str:
    return "" if p is None else repr(p)


def _run_time_int(item: Any) -> bool:
    """Whether a subscript item is an int known only at run time (a size under
    ``static_shapes=False``, a loaded scalar)."""
    if isinstance(item, DynamicInt):
        return True
    return (
        isinstance(item, TileValue)
        and item.node.ndim == 0
        and not item.node.dtype.is_floating_point
        and item.node.dtype != torch.bool
    )

"""Concatenation of tiles of any sizes along a whole dim (stage: frontend; in: ``torch.cat`` /
``torch.concat`` / ``torch.stack`` of traced tiles; out: ``GATHER`` / ``VIEW`` / ``where``
nodes).

``torch.cat([x[:, :3], y], dim=-1)`` builds a register tile whose dim along ``dim`` holds each
piece at its offset. Two or four... pieces of one power-of-two size are a ``tl.join`` and a
merge of dims (:func:`tilecraft.frontend.views.cat`: a layout change). Any other sizes are, per
piece, a register gather of ``position - offset`` (clamped into the piece, as the shifts of
:mod:`~tilecraft.frontend.tile_shifts` read) into a new whole dim of the total length, and a
select of the piece where the position lies at or past its offset; a piece of one element is
a broadcast, no gather, so ``torch.stack`` of any number of tiles (each given a dim of 1 there)
is selects only. The dim must be a whole static dim (``:``, ``tc.arange``, a slice): a tile
loop's block holds a config-dependent part of the line, so its pieces cannot be placed.
Registered in :mod:`~tilecraft.frontend.lowerings`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilecraft.errors import UnsupportedOpError
from tilecraft.frontend import rdims, views
from tilecraft.frontend.rdims import along
from tilecraft.frontend.regroup import pow2, static_size
from tilecraft.frontend.tile_shifts import gathered
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Dim, Node, Op, Sym, SymKind, shape_str

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue

_STORE_PIECES = (
    "store each piece with its own slice of the output instead "
    "(out[t, :3] = a; out[t, 3:] = b), or load that dim whole with `:`"
)


def cat(t: Tracer, tensors: Any, dim: int = 0, *, axis: Any = None, out: Any = None) -> TileValue:
    """Tiles of any sizes along a whole static ``dim`` (not a tile loop's), other dims equal,
    dtypes promoted as torch does; pieces of one power-of-two size are a ``tl.join`` and a
    reshape, others register gathers and selects."""
    nodes = _pieces(t, "torch.cat", tensors, out)
    axis = t._axis(nodes[0], dim if axis is None else axis)  # (torch.concatenate's name)
    nodes = _conformed(t, "torch.cat", nodes, axis)
    if len(nodes) == 1:
        return t.wrap(nodes[0])
    sizes = [static_length(t, "torch.cat", n, axis, _STORE_PIECES) for n in nodes]
    if pow2(len(nodes)) and pow2(sizes[0]) and _one_shape(nodes):
        return views.cat(t, [t.wrap(n) for n in nodes], axis)
    return _placed(t, nodes, axis, sizes)


def stack(t: Tracer, tensors: Any, dim: int = 0, *, out: Any = None) -> TileValue:
    """Any number of tiles of one shape (broadcast as a join does) stacked in a new ``dim``:
    2, 4, 8... are joins (``tl.join``), others selects of broadcasts."""
    nodes = _pieces(t, "torch.stack", tensors, out)
    if len(nodes) > 1 and pow2(len(nodes)):
        return views.stack(t, [t.wrap(n) for n in nodes], dim)
    nodes = rdims.conform_all(t, nodes)
    shape = t.broadcast_shapes(*(n.shape for n in nodes))
    rank = len(shape) + 1
    if not -rank <= int(dim) < rank:
        raise UnsupportedOpError(
            f"torch.stack: dim={dim} is out of range for {len(shape)}-D tiles", t.loc
        )
    axis = int(dim) % rank
    wide = [views.expand(t, t.wrap(n), *shape) if n.shape != shape else t.wrap(n) for n in nodes]
    return cat(t, [views.unsqueeze(t, w, axis) for w in wide], axis)


def _pieces(t: Tracer, op: str, tensors: Any, out: Any) -> list[Node]:
    """The tiles of a list or tuple, cast to the dtype torch's promotion gives them all."""
    if out is not None:
        raise UnsupportedOpError(f"{op} with out= in device code", t.loc, hint="assign the result")
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise UnsupportedOpError(
            f"{op} of {type(tensors).__name__} {tensors!r}: it takes a non-empty list of tiles",
            t.loc,
        )
    nodes = [t.value_node(x) for x in tensors]
    result = dtypes.promote(*(n.dtype for n in nodes))
    return [t.cast(n, result) for n in nodes]


def _conformed(t: Tracer, op: str, nodes: list[Node], axis: int) -> list[Node]:
    """Each piece with the first's names for its dims other than ``axis`` (whole dims of equal
    extent interchange); an error where a piece's rank or another dim differs (torch's rule)."""
    first = nodes[0]
    out = [first]
    for k, node in enumerate(nodes[1:], start=1):
        if node.ndim != first.ndim:
            raise UnsupportedOpError(
                f"{op}: tile {k} is {node.ndim}-D {shape_str(node.shape)}, tile 0 is "
                f"{first.ndim}-D {shape_str(first.shape)}: every tile needs the same rank",
                t.loc,
                hint="add the missing dims with [:, None] or unsqueeze first",
            )
        node = rdims.conform(t, node, _wanted(t, node, first, axis))
        for i, (have, need) in enumerate(zip(node.shape, first.shape, strict=True)):
            if i != axis and have is not need and have != need:
                raise UnsupportedOpError(
                    f"{op} along dim {axis}: tile {k} {shape_str(node.shape)} differs from tile "
                    f"0 {shape_str(first.shape)} in dim {i} (torch needs every other dim equal)",
                    t.loc,
                    hint="expand the pieces to one shape first (x.expand_as(y))",
                )
        out.append(node)
    return out


def _wanted(t: Tracer, node: Node, first: Node, axis: int) -> tuple[Dim, ...]:
    """The names ``node`` takes: ``first``'s, except along ``axis`` where the lengths differ;
    there its own, or a fresh whole dim where ``first`` names another dim so (a transposed
    square piece)."""
    want = list(first.shape)
    here = node.shape[axis]
    if static_size(here) == static_size(want[axis]) and static_size(here) is not None:
        return tuple(want)
    others = [d for i, d in enumerate(want) if i != axis and isinstance(d, Sym)]
    size = static_size(here)
    if any(here is d for d in others) and size is not None:
        here = t.size_dim(size, others)
    want[axis] = here
    return tuple(want)


def static_length(t: Tracer, op: str, node: Node, axis: int, otherwise: str) -> int:
    """A tile's static length along ``axis``; an error for a tile loop's block or a run-time
    size (no register tile can place pieces along them) that says to do ``otherwise``."""
    d = node.shape[axis]
    size = static_size(d)
    if size is not None:
        return size
    assert isinstance(d, Sym)
    if d.kind is SymKind.BLOCK:
        what = f"a tile loop's block ({d.name}), whose length and positions depend on the config"
    else:
        what = "a whole dim whose size is known only at run time (static_shapes=False)"
    raise UnsupportedOpError(
        f"{op} along dim {axis} of {shape_str(node.shape)}: the dim is {what}",
        t.loc,
        hint=otherwise
        if d.kind is SymKind.BLOCK
        else "compile with static_shapes=True, or " + otherwise,
    )


def _one_shape(nodes: list[Node]) -> bool:
    return all(n.shape == nodes[0].shape for n in nodes)


def _placed(t: Tracer, nodes: list[Node], axis: int, sizes: list[int]) -> TileValue:
    """The pieces at their offsets along a new whole dim of ``sum(sizes)``: each piece read at
    ``position - offset`` (a gather, or a broadcast of a piece of one element), selected
    where the position lies at or past its offset."""
    total = sum(sizes)
    others = [d for i, d in enumerate(nodes[0].shape) if i != axis and isinstance(d, Sym)]
    new = t.size_dim(total, others)
    assert isinstance(new, Sym)  # total > 1: at least two pieces of one element or more
    shape = tuple(new if i == axis else d for i, d in enumerate(nodes[0].shape))
    position = t.tile_leaf(new, Op.TILE_INDEX)
    result: TileValue | None = None
    offset = 0
    for node, size in zip(nodes, sizes, strict=True):
        piece = _at_offset(t, node, axis, shape, position, offset, size)
        if result is None:
            result = piece
        else:
            past = along(t, t.pointwise("ge", position, offset), shape, axis, broadcast=False)
            result = t.where(past, piece, result)
        offset += size
    assert result is not None
    return result


def _at_offset(
    t: Tracer,
    node: Node,
    axis: int,
    shape: tuple[Dim, ...],
    position: TileValue,
    offset: int,
    size: int,
) -> TileValue:
    """``node`` read at ``position - offset`` along ``axis`` into ``shape`` (positions outside
    the piece read its nearest end; the select leaves them out)."""
    if isinstance(node.shape[axis], int):  # one element: a broadcast, no gather
        return t.wrap(t.emit(Op.VIEW, [node], shape, node.dtype, expand=True))
    wanted = t.pointwise("sub", position, offset) if offset else position
    return gathered(t, t.wrap(node), axis, wanted, size)

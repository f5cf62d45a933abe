"""Gathers along a long line of a computed tile recompute it there (stage: frontend; in: a
gather along a whole dim of more than a warp's lanes, of a tile computed elementwise from
loads; out: that computation repeated at the gathered positions, its loads reading memory
there; None where the tile is not such a computation).

A moving window over a computed row (``F.pad(m, (2, 2), mode="reflect").unfold(1, 5, 1)`` of
a despiked signal, ``torch.diff`` of a pre-emphasized one) gathers a register tile along its
whole row. ``tl.gather`` of a 2048-row beside a reduction failed Triton 3.6's
OptimizeThreadLocality pass (its warp-local gather layout assertion, sm_90 and gfx942); of a
16000-row, ptxas ran past 18 GB. Where the row is a function of loads that a gather can
re-read (:mod:`~tilecraft.frontend.gather_loads`), the same values come from evaluating that
function at the gathered positions: its loads read memory there (L1 / L2 hits: the row was
just read), its elementwise ops run once per gathered element, and no value crosses lanes.

The walk follows elementwise ops, casts, selects, broadcasting views, reductions over other
dims (an ``unbind`` pick, a window's median) and gathers along the same line (their positions
compose). Values that do not vary along the line (a row's mean, a scalar argument) are kept
and broadcast. It is built in the gather's own rank plus one trailing dim per reduced or
squeezed dim met on the way (``space`` below: each node's dims map to those axes), at positions
that vary only where the gather's index does (a slice's index broadcast over other dims is
taken unbroadcast: a row norm kept as ``[n, 1]`` is recomputed as ``[k, 1]``, not ``[k, c]``).
A walk that cannot finish leaves what it built unused (dead code, dropped after tracing).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tilecraft.errors import ShapeError
from tilecraft.frontend import indexing
from tilecraft.frontend.gather_loads import load_at, plain_load, unwritten
from tilecraft.ir.nodes import ELEMENTWISE_OPS, Node, Op, Sym

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue

# an expression past these sizes stays a register gather: it is recomputed per gathered element
_MOST_NODES = 96
_MOST_LOADS = 16

_VIEW_ITEMS = (":", None, 0)


@dataclasses.dataclass
class _Walk:
    """One gather's walk: the line's axis in the result, and what it visited."""

    t: Tracer
    line: int
    memo: dict[tuple[int, tuple[int, ...], int], Node | None] = dataclasses.field(
        default_factory=dict
    )
    extended: dict[tuple[int, int], Node] = dataclasses.field(default_factory=dict)
    nodes: int = 0
    loads: int = 0


def recomputed(t: Tracer, src: Node, idx: Node, axis: int) -> TileValue | None:
    """``src`` gathered at ``idx`` along ``axis``, recomputed at those positions, or None."""
    w = _Walk(t, axis)
    out = _at(w, src, tuple(range(src.ndim)), _unbroadcast(idx))
    if out is None or w.loads > _MOST_LOADS or out.dtype != src.dtype:
        return None
    if out.shape != idx.shape:
        try:
            fits = t.broadcast_shapes(out.shape, idx.shape) == idx.shape
        except ShapeError:  # the walk's own shapes: leave the gather as it was
            fits = False
        if not fits:
            return None
        out = t.emit(Op.VIEW, [out], idx.shape, out.dtype, expand=True)
    return t.wrap(out)


def _unbroadcast(idx: Node) -> Node:
    """The index before its broadcast over the other dims (``rdims.along``'s expand)."""
    while idx.op is Op.VIEW and set(idx.attrs) == {"expand"}:
        idx = idx.inputs[0]
    return idx


def _at(w: _Walk, node: Node, space: tuple[int, ...], q: Node) -> Node | None:
    """``node`` (whose dim ``k`` is axis ``space[k]`` of ``q``) at the positions ``q`` along the
    line, or None where the walk cannot follow."""
    key = (node.id, space, q.id)
    if key not in w.memo:
        w.nodes += 1
        w.memo[key] = None if w.nodes > _MOST_NODES else _visit(w, node, space, q)
    return w.memo[key]


def _visit(w: _Walk, node: Node, space: tuple[int, ...], q: Node) -> Node | None:
    if node.ndim and node.ndim != len(space):
        return None
    if node.ndim == 0 or w.line not in space or node.shape[space.index(w.line)] == 1:
        return _lifted(w, node, space, q)  # the same all along the line
    if node.op is Op.TILE_INDEX:
        return _line_positions(w, node, q)
    if node.op is Op.LOAD:
        return _load(w, node, space, q)
    if node.op in ELEMENTWISE_OPS:
        operands = [o for i in node.inputs if (o := _at(w, i, space, q)) is not None]
        if len(operands) != len(node.inputs):
            return None
        shape = w.t.broadcast_shapes(*[o.shape for o in operands])
        return w.t.emit(node.op, operands, shape, node.dtype, **node.attrs)
    if node.op is Op.GATHER and space[node.attrs["axis"]] == w.line:
        positions = _at(w, node.inputs[1], space, q)  # the line's positions it reads
        return None if positions is None else _at(w, node.inputs[0], space, positions)
    if node.op is Op.REDUCE:
        return _reduced(w, node, space, q)
    if node.op is Op.VIEW:
        return _viewed(w, node, space, q)
    return None


def _lifted(w: _Walk, node: Node, space: tuple[int, ...], q: Node) -> Node | None:
    """A node constant along the line, its dims placed at their axes of ``q``'s rank (in
    order: a view places dims, it does not permute them)."""
    if list(space) != sorted(space):
        return None
    if node.ndim == 0 or space == tuple(range(q.ndim)):
        return node
    spec = tuple(":" if axis in space else None for axis in range(q.ndim))
    shape = tuple(node.shape[space.index(a)] if a in space else 1 for a in range(q.ndim))
    return w.t.emit(Op.VIEW, [node], shape, node.dtype, spec=spec)


def _line_positions(w: _Walk, node: Node, q: Node) -> Node | None:
    """The line's own positions (``tc.arange``-style index tiles): ``q`` itself."""
    sym = node.attrs["sym"]
    if not isinstance(sym, Sym) or not isinstance(sym.begin, int):
        return None
    return q if sym.begin == 0 else w.t.pointwise("add", w.t.wrap(q), sym.begin).node


def _load(w: _Walk, node: Node, space: tuple[int, ...], q: Node) -> Node | None:
    """A load of a tensor the kernel has not written: a plain one read at ``q``, one at computed
    indices (a slice of a long loaded line re-read, a gather of a load) read at its indices
    recomputed at ``q``."""
    w.loads += 1
    if plain_load(w.t, node):
        return load_at(w.t, node, q, space, w.line).node
    items = node.attrs["index"]
    if set(node.attrs) - {"tensor", "index", "positions"} or not unwritten(w.t, node):
        return None
    if any(item[0] not in ("value", "int", "none") for item in items):
        return None
    indices = [i for n in node.inputs if (i := _at(w, n, space, q)) is not None]
    if len(indices) != len(node.inputs):
        return None
    index = [
        w.t.wrap(indices[item[1]])
        if item[0] == "value"
        else (item[1] if item[0] == "int" else None)
        for item in items
    ]
    return indexing.load(w.t, node.attrs["tensor"], tuple(index)).node


def _reduced(w: _Walk, node: Node, space: tuple[int, ...], q: Node) -> Node | None:
    """A reduction over a dim other than the line's: its input walked with that dim at a new
    last axis (``q`` given one more dim of 1), then reduced over it. A kept dim of 1 must stay
    one: positions varying along it would recompute the reduction once per position."""
    axis, keepdim = node.attrs["axis"], node.attrs["keepdim"]
    if keepdim and q.shape[space[axis]] != 1:
        return None
    kept = [a for k, a in enumerate(space) if not (keepdim and k == axis)]
    inner = (*kept[:axis], q.ndim, *kept[axis:])
    source = _at(w, node.inputs[0], inner, _extend(w, q, 1))
    if source is None:
        return None
    shape = source.shape[:-1]
    attrs = {**node.attrs, "axis": len(shape), "keepdim": False}
    return w.t.emit(Op.REDUCE, [source], shape, node.dtype, **attrs)


def _viewed(w: _Walk, node: Node, space: tuple[int, ...], q: Node) -> Node | None:
    """A broadcast (``expand``) or an index-style view (``:`` keeps an input dim, ``None`` adds
    a dim of 1, ``0`` drops a dim of 1: that dim walks at a new last axis, dropped after)."""
    attrs = node.attrs
    if set(attrs) == {"expand"}:
        return _at(w, node.inputs[0], space, q)
    spec = attrs.get("spec") or ()
    if set(attrs) != {"spec"} or not all(item in _VIEW_ITEMS for item in spec):
        return None
    inner: list[int] = []
    out_dim = dropped = 0
    for item in spec:
        if item == ":":
            inner.append(space[out_dim])
        elif item == 0:
            inner.append(q.ndim + dropped)
            dropped += 1
        out_dim += item != 0
    source = _at(w, node.inputs[0], tuple(inner), _extend(w, q, dropped))
    if source is None or not dropped:
        return source
    keep = (":",) * q.ndim + (0,) * dropped
    return w.t.emit(Op.VIEW, [source], source.shape[: q.ndim], source.dtype, spec=keep)


def _extend(w: _Walk, q: Node, count: int) -> Node:
    """``q`` with ``count`` more trailing dims of 1 (the axes a reduced or dropped dim takes)."""
    if not count:
        return q
    key = (q.id, count)
    if key not in w.extended:
        spec = (":",) * q.ndim + (None,) * count
        shape = (*q.shape, *(1,) * count)
        w.extended[key] = w.t.emit(Op.VIEW, [q], shape, q.dtype, spec=spec)
    return w.extended[key]

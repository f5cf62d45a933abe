"""Launch-boundary facts about what a device loop indexes (stage: frontend; in: a host tensor
access and the loop's syms; out: a ``ShapeError`` at trace time, or guards the launcher checks).

A tile loop over ``[begin, end)`` indexes every tensor it subscripts with that tile along one dim;
the tensor must be at least ``end`` long there, or the kernel reads or writes out of bounds (the
loop's mask is built from the loop's extent, not the tensor's).
"""

from __future__ import annotations

from typing import Any

from tilecraft.errors import ShapeError, SourceLoc
from tilecraft.ir.nodes import Node, Op, Sym, upstream
from tilecraft.ir.tile_work import bound_value


def known_int(value: Any) -> int | None:
    """An extent's value when the tracer knows it: an int, or a runtime argument's traced value."""
    if isinstance(value, int):
        return value
    if isinstance(value, Node) and value.op is Op.ARG and isinstance(value.attrs.get("value"), int):
        return int(value.attrs["value"])
    return None


def check_tile_covers(
    name: str, shape: tuple[int, ...], dim: int, sym: Sym, loc: SourceLoc | None
) -> None:
    """``name`` indexed with tile ``sym`` along ``dim``: its extent must reach the loop's end,
    and the loop must not begin before the tensor (``tc.tile(-3, n)`` read before it)."""
    begin, end = _span(sym)
    if begin is not None and begin < 0:
        raise ShapeError(
            f"the tile loop indexing dim {dim} of tensor '{name}' begins at {begin}, before the "
            "tensor's first element",
            loc,
            hint="begin the loop at 0 or later (a negative index counts from the end only in "
            "Python's own indexing)",
        )
    if end is None or shape[dim] >= end:
        return
    span = f"[{begin}, {end})" if begin is not None else f"up to {end}"
    raise ShapeError(
        f"tensor '{name}' has size {shape[dim]} along dim {dim} (shape {list(shape)}), but the "
        f"tile loop indexing that dim covers {span}",
        loc,
        hint=f"pass '{name}' with at least {end} elements along dim {dim}, or loop over its own size",
    )


def tile_covers(shape: tuple[int, ...], dim: int, sym: Sym) -> bool:
    """Whether a tensor of ``shape`` holds every position tile ``sym`` reaches along ``dim``
    (as far as the trace knows: an unknown end counts as covered)."""
    begin, end = _span(sym)
    return (begin is None or begin >= 0) and (end is None or shape[dim] >= end)


def _span(sym: Sym) -> tuple[int | None, int | None]:
    """The first position tile ``sym`` reaches and the end of the last, where the trace knows
    them (an end computed from an enclosing tile: its last tile's, :func:`largest_end`)."""
    end = known_int(sym.extent)
    return known_int(sym.begin), end if end is not None else largest_end(sym.extent)


def largest_end(bound: Any) -> int | None:
    """A value a loop bound computed from an enclosing tile takes at that loop's last tile,
    whose end is the loop's extent (``tm.end``; ``min(tm.end + w, n)``): some program reaches
    it, so a tensor shorter than it is read past. None where the bound needs more than the last
    tile's end (its begin depends on the config). A causal ``tc.tile(tm.end)`` over a tensor
    narrower than ``tm``'s loop read past it."""
    if not isinstance(bound, Node):
        return None
    syms = {n.attrs.get("sym") for n in upstream([bound]) if n.op is Op.TILE_END}
    if len(syms) != 1:
        return None
    (grid,) = syms
    if not isinstance(grid, Sym) or grid.scalar or (extent := known_int(grid.extent)) is None:
        return None
    return bound_value(bound, grid, (None, extent, None))

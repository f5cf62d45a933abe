"""Launch-boundary facts about what a device loop indexes (stage: frontend; in: a host tensor
access and the loop's syms; out: a ``ShapeError`` at trace time, or guards the launcher checks).

A tile loop over ``[begin, end)`` indexes every tensor it subscripts with that tile along one dim;
the tensor must be at least ``end`` long there, or the kernel reads or writes out of bounds (the
loop's mask is built from the loop's extent, not the tensor's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilecraft.errors import ShapeError, SourceLoc
from tilecraft.ir.nodes import Node, Op, Sym


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
    begin = known_int(sym.begin)
    if begin is not None and begin < 0:
        raise ShapeError(
            f"the tile loop indexing dim {dim} of tensor '{name}' begins at {begin}, before the "
            "tensor's first element",
            loc,
            hint="begin the loop at 0 or later (a negative index counts from the end only in "
            "Python's own indexing)",
        )
    end = known_int(sym.extent)
    if end is None:
        end = largest_end(sym.extent)
    if end is None or shape[dim] >= end:
        return
    span = f"[{begin}, {end})" if begin is not None else f"up to {end}"
    raise ShapeError(
        f"tensor '{name}' has size {shape[dim]} along dim {dim} (shape {list(shape)}), but the "
        f"tile loop indexing that dim covers {span}",
        loc,
        hint=f"pass '{name}' with at least {end} elements along dim {dim}, or loop over its own size",
    )


def largest_end(bound: Any) -> int | None:
    """The largest value a loop bound computed from enclosing tiles takes over the grid, where
    it is one that some tile reaches: ``tm.end`` (the last tile's end is its loop's extent) and
    sums, minima and maxima of such ends and constants (each grows with the tile). None for
    anything else (a begin's last value depends on the config; a difference need not grow).
    A causal ``tc.tile(tm.end)`` over a tensor narrower than ``tm``'s loop read past it."""
    if isinstance(bound, int):
        return bound
    if not isinstance(bound, Node):
        return None
    if bound.op is Op.CONST and isinstance(bound.attrs.get("value"), int):
        return int(bound.attrs["value"])
    if bound.op is Op.TILE_END:
        sym = bound.attrs.get("sym")
        return known_int(sym.extent) if isinstance(sym, Sym) and not sym.scalar else None
    combine: dict[str, Callable[[int, int], int]] = {
        "add": lambda a, b: a + b,
        "minimum": min,
        "maximum": max,
    }
    if bound.op is Op.BINARY and bound.attrs.get("fn") in combine and len(bound.inputs) == 2:
        a, b = (largest_end(i) for i in bound.inputs)
        if a is not None and b is not None:
            return int(combine[bound.attrs["fn"]](a, b))
    return None

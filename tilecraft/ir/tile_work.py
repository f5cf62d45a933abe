"""How much inner-loop work each tile of a device loop does (stage: ir; in: a DeviceLoop and a
tile of one grid dim; out: the trip extent of each inner loop at that tile, and the grid dims
along which the work grows).

A causal attention walks the keys up to its query block: ``for tn in tc.tile(tm.begin)``. Its
last query tile does ``s / block`` times the work of its first. Programs launch in tile order and
the hardware hands the next waiting program to the first SM that frees up, so walking such a dim
in descending order (longest first) leaves only short programs for the tail; walking it in
ascending order leaves the longest programs for last, most SMs idle while they run. Codegen
reverses the dims :func:`growing_dims` names; the pipeline cost model takes the per-tile work
of any dim with unequal tiles (:func:`work_trends`: an attention backward's key blocks shrink)
from :func:`inner_trips` to price a static (persistent) assignment against the hardware's.

Bounds are evaluated from the IR: integers, ``tile.begin`` / ``tile.end`` / ``tile.id`` of the
grid dim, and ``+ - * // min max`` of those. Anything else (a runtime argument, another grid
dim's tile) makes the work unknown, and nothing is reordered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, walk

_ARITH: dict[str, Callable[[int, int], int | None]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b if b else None,
    "minimum": min,
    "maximum": max,
}
_FAR = 1 << 20  # an offset far into a dim of unknown extent, for the growth check


def bound_value(
    bound: Any, grid: Sym, tile: tuple[int | None, int | None, int | None]
) -> int | None:
    """A loop bound's value at one tile ``(begin, end, id)`` of grid dim ``grid`` (None: it
    depends on something else, or on a part of the tile given as None)."""
    if isinstance(bound, int):
        return bound
    if not isinstance(bound, Node):
        return None
    if bound.op is Op.CONST and isinstance(bound.attrs.get("value"), int):
        return int(bound.attrs["value"])
    if bound.op in (Op.TILE_BEGIN, Op.TILE_END, Op.TILE_ID):
        if bound.attrs.get("sym") is not grid:
            return None
        return tile[(Op.TILE_BEGIN, Op.TILE_END, Op.TILE_ID).index(bound.op)]
    if bound.op is Op.BINARY and bound.attrs.get("fn") in _ARITH and len(bound.inputs) == 2:
        a, b = (bound_value(x, grid, tile) for x in bound.inputs)
        if a is None or b is None:
            return None
        value = _ARITH[bound.attrs["fn"]](a, b)
        return int(value) if value is not None else None
    return None


def inner_loops(loop: DeviceLoop) -> list[Node]:
    """The loops a device loop's body runs directly (in branches too), not those nested in them."""
    nested = {id(m) for n in walk(loop.body) if n.op is Op.LOOP for m in walk(n.body or [])}
    return [n for n in walk(loop.body) if n.op is Op.LOOP and id(n) not in nested]


def inner_trips(loop: DeviceLoop, dim: int, tile: tuple[int, int, int]) -> list[int | None]:
    """Each inner loop's trip extent (elements) at one tile of grid dim ``dim``; a loop whose
    bounds do not depend on that dim but are not constants is None."""
    grid = loop.grid_syms[dim]
    trips: list[int | None] = []
    for node in inner_loops(loop):
        sym = node.attrs["sym"]
        begin, end = bound_value(sym.begin, grid, tile), bound_value(sym.extent, grid, tile)
        trips.append(max(end - begin, 0) if begin is not None and end is not None else None)
    return trips


def _tile(sym: Sym, index: int, block: int, extent: int | None) -> tuple[int, int, int]:
    begin = (sym.begin if isinstance(sym.begin, int) else 0) + index * block
    end = begin + block if extent is None else min(begin + block, extent)
    return begin, end, index


def work_trends(loop: DeviceLoop) -> dict[int, int]:
    """Grid dims whose tiles run inner loops of different lengths: +1 where later tiles run
    longer, -1 where they run shorter (a far tile's work against the first's), every inner
    loop's work known at both."""
    out = {}
    for d, sym in enumerate(loop.grid_syms):
        if not isinstance(sym.begin, int):
            continue
        extent = sym.extent if isinstance(sym.extent, int) else None
        last = (extent - sym.begin - 1) if extent is not None else _FAR
        if last < 1:
            continue
        first = _total(inner_trips(loop, d, _tile(sym, 0, 1, extent)))
        later = _total(inner_trips(loop, d, _tile(sym, last, 1, extent)))
        if first is not None and later is not None and first != later:
            out[d] = 1 if later > first else -1
    return out


def _total(trips: list[int | None]) -> int | None:
    """The inner loops' trips added up (None: one is unknown)."""
    known = [t for t in trips if t is not None]
    return sum(known) if len(known) == len(trips) else None


def growing_dims(loop: DeviceLoop) -> list[int]:
    """Grid dims whose later tiles run longer inner loops (:func:`work_trends`)."""
    return [d for d, trend in work_trends(loop).items() if trend > 0]


def tile_trips(loop: DeviceLoop, dim: int, block: int) -> list[list[int | None]] | None:
    """Inner loop trips of every tile of a static grid dim (None: the dim is not static)."""
    sym = loop.grid_syms[dim]
    if not (isinstance(sym.begin, int) and isinstance(sym.extent, int)):
        return None
    count = max(-(-(sym.extent - sym.begin) // block), 1)
    return [inner_trips(loop, dim, _tile(sym, i, block, sym.extent)) for i in range(count)]


__all__ = ["bound_value", "growing_dims", "inner_loops", "inner_trips", "tile_trips", "work_trends"]

"""Row loops that can run column chunks outer (stage: ir analysis; in: a device loop, its rolled
width dim and the carried homes on it; out: the row loops that may be interchanged, or why not).

A LayerNorm backward written with ``[n]`` accumulators carried across a nested row loop
(``for mb in tc.tile(cta.begin, cta.end): dw += (xhat * dy).sum(0); c1 = (...).sum(-1)``) keeps
those accumulators in memory once the width is chunked (``ir/carried_homes.py``): every row step
reads, adds to and writes back the whole ``[n]`` row, more bytes than the row step itself loads.
The same loop can run as two passes instead (the ``chunk_outer`` knob, ``codegen/chunk_outer.py``):

* pass A walks the rows once and computes only the row statistics, the reductions over the width
  (``c1``, ``c2``), storing each row's results into a small per-program scratch row;
* pass B walks column chunks outer and rows inner: each chunk's accumulators are registers, every
  row step loads its statistics back and computes its chunk of everything else (``dx`` and the
  accumulator updates), and the chunk of each accumulator is written to its home once.

Bytes moved: the row inputs twice and the outputs once, as before, but the accumulators once per
program instead of once per row step. Legal when (checked here, else refused with why):

* every value the row loop carries is one of those homed ``[n]`` accumulators;
* its body is straight-line code (no nested loop, branch, atomic, print, scan, dot or extern);
* every reduction over the width has no dim besides the row loop's own (``[mb]`` or a scalar),
  so one value per row goes to the scratch row;
* no tensor is both read and written in the body (the two passes reorder its accesses);
* the row loop spans a static number of rows: a static range, or an outer tile's ``begin`` to
  ``end`` (one tile of rows per program), and the grid is static (the scratch rows' shape).
"""

from __future__ import annotations

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, walk
from tilecraft.ir.phases import rolled_reduce

_NOT_STRAIGHT = (
    Op.LOOP,
    Op.IF,
    Op.WHILE,
    Op.ATOMIC,
    Op.PRINT,
    Op.SCAN,
    Op.GATHER,
    Op.DOT,
    Op.EXTERN,
)


def statistics(owner: Node, sym: Sym) -> list[Node]:
    """The row loop's reductions over the width ``sym``: what pass A computes and stores."""
    return [n for n in owner.body or [] if rolled_reduce(n, sym)]


def chunk_outer_refusal(loop: DeviceLoop, owner: Node, sym: Sym) -> str:
    """'' when the homed row loop ``owner`` can run column chunks outer (see the module
    docstring), else why not."""
    row: Sym = owner.attrs["sym"]
    for carry in owner.attrs.get("carried", []):
        if carry.shape != (sym,):
            return f"it also carries '{carry.hint}', which is not a [{sym.name}] accumulator"
    body = list(walk(owner.body or []))
    for node in body:
        if node.op in _NOT_STRAIGHT:
            return f"its body has a {node.op.value}"
    for stat in statistics(owner, sym):
        if any(d is not row for d in stat.shape if d != 1):
            return f"the reduction '{stat.hint}' keeps a dim besides the row loop's"
    read = {n.attrs["tensor"].name for n in body if n.op is Op.LOAD}
    written = {n.attrs["tensor"].name for n in body if n.op is Op.STORE}
    if read & written:
        return f"its body both reads and writes {sorted(read & written)[0]}"
    if not all(isinstance(g.extent, int) and isinstance(g.begin, int) for g in loop.grid_syms):
        return "the scratch rows of its statistics need a static grid"
    if static_span(row) is None:
        return "its rows are not a static range or one outer tile"
    return ""


def static_span(row: Sym) -> Sym | int | None:
    """How many rows the loop spans at most in one program: an int, the outer tile whose
    ``begin``..``end`` it walks (its block, known per config), or None (not static)."""
    if isinstance(row.begin, int) and isinstance(row.extent, int):
        return max(row.extent - row.begin, 1)
    begin, end = row.begin, row.extent
    if not (isinstance(begin, Node) and isinstance(end, Node)):
        return None
    if begin.op is not Op.TILE_BEGIN or end.op is not Op.TILE_END:
        return None
    outer = begin.attrs.get("sym")
    if outer is not end.attrs.get("sym") or not isinstance(outer, Sym) or outer.scalar:
        return None
    return outer


def homed_loops(loop: DeviceLoop, slots: set[int]) -> list[Node]:
    """The top-level row loops of ``loop`` whose ``range_slot`` is in ``slots`` (the loops that
    carry homed accumulators)."""
    return [n for n in loop.body if n.op is Op.LOOP and n.attrs.get("range_slot") in slots]


def can_chunk_outer(loop: DeviceLoop, sym: Sym, loop_slots: set[int]) -> bool:
    """Whether every row loop carrying homed accumulators on ``sym`` can run chunks outer."""
    owners = homed_loops(loop, loop_slots)
    return bool(owners) and all(not chunk_outer_refusal(loop, o, sym) for o in owners)


__all__ = ["can_chunk_outer", "chunk_outer_refusal", "homed_loops", "static_span", "statistics"]

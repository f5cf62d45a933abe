"""Register gathers along long lines of computed tiles, through memory (stage: codegen; in: a
``GATHER`` node the frontend marked ``through_memory`` and a scratch row per program; out: a
store of the source tile, a barrier and a load at the gathered positions).

A gather whose source is neither a load (re-read at the positions, ``frontend/gather_loads.py``)
nor a value the frontend can recompute there (``frontend/recompute.py``) - a cumulative sum, a
dot's output - stays a ``tl.gather``. Along a line of more than a warp's lanes Triton lowers it
to shuffles per element for every element a thread holds: a [1, 4096] fp32 cumsum gathered at
586 positions did not finish compiling for sm_90 in 600 s (and ran past the tuner's 60 s limit
on an H100, so no config worked). Through memory it is one store and one load an element: each
program writes its source tile (padded, row-major) to its own row of a scratch buffer, a
barrier makes every thread's values visible, and the gathered positions are read back; a
barrier before the store keeps a loop's next iteration from overwriting values other threads
are still reading.

Rows exist where the grid is static and launched without a split (one row per grid tile, the
launch's linear program id picks it; persistent programs reuse theirs tile after tile) and the
source has no looped reduction dim; elsewhere the gather stays in registers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tilecraft.config.plan import Plan
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext

BARRIER = "tl.debug_barrier()"


def gathers_through_memory(loop: DeviceLoop, plan: Plan) -> list[tuple[Node, int]]:
    """The marked gathers of ``loop`` that get a scratch row, with the row's width (the source
    tile's padded elements)."""
    if any(not isinstance(g.extent, int) or not isinstance(g.begin, int) for g in loop.grid_syms):
        return []
    found = []
    for node in loop.walk():
        if node.op is not Op.GATHER or not node.attrs.get("through_memory"):
            continue
        src = node.inputs[0]
        if any(isinstance(d, Sym) and plan.looped(d) for d in (*src.shape, *node.shape)):
            continue
        width = math.prod(plan.block(d) if isinstance(d, Sym) else int(d) for d in src.shape)
        found.append((node, width))
    return found


def emit_through_memory(ctx: EmitContext, node: Node, rows: Any) -> None:
    """``node`` (a gather along ``axis``) as a store of its source into this program's row of
    ``rows``, a barrier, and a load at the gathered positions."""
    src, index = node.inputs
    axis = node.attrs["axis"]
    ctx.tensors[rows.name] = rows  # a parameter the launcher allocates (homes.py)
    base = _stored_row(ctx, src, rows)
    at = ctx.block_offsets(src.shape, node.shape, lambda i: ctx.expr(index) if i == axis else None)
    ctx.bind(node, f"tl.load({base} + {at})")


def _stored_row(ctx: EmitContext, src: Node, rows: Any) -> str:
    """This program's row of ``rows`` holding ``src``: stored once where the scope that stored
    it is still open (a binary search's dozen gathers of one CDF share its store)."""
    key = ("gather_row", src.id)
    if (stored := ctx.shared(key)) is not None:
        return stored
    base = ctx.w.fresh("gather_row")
    ctx.w.line(f"{base} = {rows.name} + ({_linear_program_id()}).to(tl.int64) * {rows.shape[-1]}")
    ctx.w.line(BARRIER)  # a previous iteration's readers are done with the row
    ctx.w.line(f"tl.store({base} + {ctx.block_offsets(src.shape)}, {ctx.expr(src)})")
    ctx.w.line(BARRIER)  # every thread's part of the tile is in the row
    ctx.share(key, base)
    return base


def _linear_program_id() -> str:
    """The program's number among every program of a (up to 3-D) launch grid."""
    return (
        "tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)"
        " + tl.program_id(2) * tl.num_programs(0) * tl.num_programs(1)"
    )


__all__ = ["emit_through_memory", "gathers_through_memory"]

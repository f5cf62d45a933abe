"""Emit the Triton device function of one device loop (stage: codegen; in: DeviceLoop + Plan;
out: an :class:`EmitContext` holding the kernel body's lines and what its launcher needs).

This is the driver: it sets up the reduction dims and the grid, then emits the loop body. Each IR
node becomes one assignment, written by the node's op's function in the registry
(:data:`~tilecraft.codegen.registry.EMISSIONS`), which the family modules imported here fill.
A reduction dim is either whole (one power-of-two block with a mask) or, when
``reduction_loops`` chunks it, *rolled*: values on that dim exist only inside
``for roffset in tl.range(...)`` loops, so each phase of the computation that needs them gets its
own loop and recomputes (re-loads) what it needs (``schedule.py``).
"""

from __future__ import annotations

# every family of emissions registers itself on import: the table is full once these are loaded
from tilecraft.codegen import (
    branches,
    dots,
    extern,
    grid,
    homes,
    loops,
    memory,
    pointwise,
    reduce,
    scans,
    views,
)
from tilecraft.codegen.context import EmitContext, SymState
from tilecraft.codegen.registry import EMISSIONS
from tilecraft.codegen.split import SplitPass
from tilecraft.config.plan import Plan
from tilecraft.ir.nodes import DeviceLoop, SymKind

FAMILIES = (branches, dots, extern, homes, loops, memory, pointwise, reduce, scans, views)


def setup_rdims(ctx: EmitContext) -> None:
    """Indices and masks of the whole reduction dims (a rolled one's come with its chunk loops)."""
    for sym in ctx.loop.syms:
        if sym.kind is not SymKind.RDIM:
            continue
        st = SymState(block=ctx.block_expr(sym))
        ctx.syms[id(sym)] = st
        st.index = f"rindex_{sym.index}"
        st.offset = "0"
        ctx.w.reserve(st.index)
        st.end = ctx.expr(sym.extent_args[0]) if sym.extent_args else str(sym.extent)
        extent = 0 if sym.extent_args else int(sym.extent)
        # an empty whole dim (n == 0) is masked too: its block still has lanes
        needs_mask = bool(sym.extent_args) or extent == 0 or extent % ctx.block_value(sym) != 0
        st.mask = f"rmask_{sym.index}" if needs_mask else None
        if st.mask:
            ctx.w.reserve(st.mask)
        if sym is not ctx.looped:
            ctx.w.line(f"{st.index} = tl.arange(0, {st.block})")
            if st.mask:
                ctx.w.line(f"{st.mask} = {st.index} < {st.end}")


def emit_device_loop(
    loop: DeviceLoop, plan: Plan, int64: bool, interpret: bool, split: SplitPass | None = None
) -> tuple[EmitContext, grid.GridLayout]:
    """The kernel body of ``loop`` under ``plan``, and its grid (for the launcher); ``split``:
    one of the two kernels of a split inner loop or reduction dim (``codegen/split.py``)."""
    assert EMISSIONS, "the emission families were not imported"
    ctx = EmitContext(loop, plan, int64, interpret)
    ctx.split = split
    extern.add_functions(ctx)  # users' Triton functions, their names kept free of temporaries
    ctx.w.src_comment(loop.loc)
    setup_rdims(ctx)
    ctx.descriptor_mark = len(ctx.w.lines)  # tensor descriptors are created here, before any loop
    tiles = grid.layout(ctx)
    grid.emit_program_loop(ctx, tiles)
    return ctx, tiles

"""A row loop run as a statistics pass, then column chunks outer (stage: codegen; in: a ``LOOP``
node whose ``[n]`` accumulators live in memory and the plan's ``chunk_outer`` scratch rows; out:
its two passes in Triton). Why and when: ``ir/chunk_outer.py``.

Pass A is the row loop with only the reductions over the width (phase by phase, as any rolled row
loop); after them each row's results go to this program's scratch row. Pass B::

    for roffset in tl.range(0, n, RBLOCK):      # column chunks outer
        dw = <initial value, this chunk>         # the accumulators: registers
        for offset in tl.range(begin, end, B):   # rows inner
            c1 = tl.load(<scratch row>)          # the row statistics of pass A
            <the body's stores on the width; dw = dw + ...>
        tl.store(<dw's home, this chunk>, dw)

Barriers separate the passes (pass B reads statistics other threads stored) and follow pass B
(code after the loop reads the homes chunk by chunk).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.codegen.homes import BARRIER, ScratchRows
from tilecraft.codegen.loop_header import tile_loop
from tilecraft.codegen.schedule import chunk_loop, emit_block
from tilecraft.ir.nodes import Node, Op, Sym, on_dim

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext, SymState


def emit_chunk_outer(ctx: EmitContext, loop: Node) -> bool:
    """Emit ``loop`` as the two passes when the plan runs it chunks outer (else False)."""
    stats = ctx.homes.chunk_outer.get(loop.id)
    width = ctx.looped
    if stats is None or width is None:
        return False
    carries = loop.attrs.get("carried", [])
    names = ", ".join(c.hint for c in carries)
    ctx.w.line(f"# carried {names}: row statistics, then column chunks outer (chunk_outer)")
    statistics_pass = [n for n in loop.body or [] if not _width_store(n, width)]
    if stats or any(n.op is Op.STORE for n in statistics_pass):  # else pass A does nothing
        with tile_loop(ctx, loop) as row:
            emit_block(ctx, statistics_pass)
            for stat, rows in stats:
                value = ctx.expr(stat)
                if stat.ndim > 1:  # keepdim: [rows, 1]
                    value = f"tl.reshape({value}, [{row.block}])"
                mask = f", {row.mask}" if row.mask else ""
                ctx.w.line(f"tl.store({rows.name} + {_at(ctx, rows, row)}, {value}{mask})")
        ctx.w.line(BARRIER)
    with chunk_loop(ctx, width):
        for carry in carries:
            name = ctx.w.fresh(carry.hint)
            ctx.w.line(f"{name} = {ctx.expr(carry.inputs[0])}")
            ctx.scopes[-1][carry.id] = name
        with tile_loop(ctx, loop) as row:
            for stat, rows in stats:
                ctx.bind(stat, _load(ctx, stat, rows, row))
            for node in loop.body or []:
                if _width_store(node, width):
                    ctx.ensure(node)
            updates = [(c, ctx.expr(c.attrs["next"])) for c in carries if c.attrs.get("next")]
            for carry, value in updates:
                ctx.w.line(f"{ctx.lookup(carry)} = {value}")
        for carry in carries:
            ctx.ensure(ctx.homes.home_store(carry, carry))
    ctx.w.line(BARRIER)
    for _, rows in stats:  # kernel parameters the launcher allocates (after the user's tensors:
        ctx.tensors[rows.name] = rows  # the launcher takes the device of the first)
    return True


def _width_store(node: Node, width: Sym) -> bool:
    return node.op is Op.STORE and on_dim(node, width)


def _at(ctx: EmitContext, rows: ScratchRows, row: SymState) -> str:
    """A row's (or a block of rows') offset in this program's scratch row."""
    grid = ctx.loop.grid_syms
    program = " + ".join(
        f"{ctx.state(g).tile_id} * {stride}" for g, stride in zip(grid, rows.stride, strict=False)
    )
    local = f"({row.index} - {row.begin})"
    return f"{program} + {local}" if program else local


def _load(ctx: EmitContext, stat: Node, rows: ScratchRows, row: SymState) -> str:
    mask = f", {row.mask}, other=0" if row.mask else ""
    text = f"tl.load({rows.name} + {_at(ctx, rows, row)}{mask})"
    if stat.ndim > 1:
        dims = ctx.shape_expr(stat.shape)
        text = f"tl.reshape({text}, [{dims}])"
    return text

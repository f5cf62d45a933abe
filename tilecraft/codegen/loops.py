"""Device loops inside a kernel (stage: codegen; in: a ``LOOP`` node with its body and carried
values; out: a ``for ... in tl.range(...)`` loop).

Carried values are initialized before the loop and reassigned at the end of its body; the loop's
dim gets its offset, indices and (when the extent is not a multiple of the block) mask inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.codegen import deferred_sums, homes
from tilecraft.codegen.context import SymState
from tilecraft.codegen.registry import emits
from tilecraft.codegen.schedule import emit_block
from tilecraft.codegen.split import COMBINE, SplitPass
from tilecraft.config.space import outer_tile
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op, Sym

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


def init_carried(ctx: EmitContext, node: Node, split: SplitPass | None = None) -> None:
    """A variable per carried value, assigned its value from before the loop (or branch)."""
    for carry in node.attrs.get("carried", []):
        if ctx.homes.homed(carry):
            continue  # kept in its output row: homes.emit_init
        init = carry.inputs[0]
        text = ctx.expr(init)
        if init.op is Op.CONST or init.ndim == 0 and init.op in (Op.ARG,):
            # a Python number would not be a tensor the loop can reassign
            text = f"tl.full([], {text}, {dtypes.triton_dtype(carry.dtype)})"
        if split is not None and split.phase == COMBINE:
            split.combine(ctx, text, carry)  # the loop ran in the partials kernel
            continue
        if split is not None:
            text = split.carry_init(ctx, carry)
        name = ctx.w.fresh(carry.hint)
        ctx.w.line(f"{name} = {text}")
        ctx.scopes[-1][carry.id] = name


@emits(Op.LOOP)
def emit_loop(ctx: EmitContext, node: Node) -> None:
    split = ctx.split if ctx.split is not None and ctx.split.is_site(node) else None
    homes.emit_init(ctx, node)
    init_carried(ctx, node, split)
    if split is not None and split.phase == COMBINE:
        return
    sym: Sym = node.attrs["sym"]
    st = SymState(block=ctx.block_expr(sym))
    ctx.syms[id(sym)] = st
    st.begin, st.end = ctx.bound_expr(sym.begin), ctx.bound_expr(sym.extent)
    st.offset = ctx.w.fresh(f"offset_{sym.index}")
    step = "" if sym.scalar else f", {st.block}"
    ctx.w.src_comment(node.loc)
    knobs = ctx.plan.range(node.attrs.get("range_slot", -1)).kwargs()
    begin, end = st.begin, st.end
    if split is not None:  # this program's share of the iterations
        begin, end = split.bounds(ctx, sym, begin, end, "1" if sym.scalar else st.block)
    begin, end = ctx.range_bound(begin), ctx.range_bound(end)
    deferred = deferred_sums.open_rows(ctx, deferred_sums.deferred_sums(ctx, node))
    skipped = {id(d.carry) for d in deferred}
    ctx.w.line(f"for {st.offset} in tl.range({begin}, {end}{step}{knobs}):")
    with ctx.w.indented():
        ctx.scopes.append({})
        st.tile_id = f"(({st.offset} - {st.begin}) // {st.block})"
        if sym.scalar:
            st.index = st.offset
        else:
            st.index = ctx.w.fresh(f"indices_{sym.index}")
            ctx.w.line(f"{st.index} = {st.offset} + tl.arange(0, {st.block})")
            bound = _mask_bound(ctx, sym, st.end) if split is None else st.end
            if bound is not None:
                st.mask = ctx.w.fresh(f"mask_{sym.index}")
                ctx.w.line(f"{st.mask} = {st.index} < {bound}")
        deferred_nodes = {id(n) for d in deferred for n in (d.reduce, d.update)}
        emit_block(
            ctx, [n for n in homes.body_with_updates(ctx, node) if id(n) not in deferred_nodes]
        )
        deferred_sums.add_rows(ctx, deferred)
        for carry in node.attrs.get("carry_updates", []):
            nxt = carry.attrs.get("next")
            kept = nxt is None or nxt is carry or ctx.homes.homed(carry) or id(carry) in skipped
            if not kept:
                ctx.w.line(f"{ctx.lookup(carry)} = {ctx.expr(nxt)}")
        homes.end_of_iteration(ctx, node)
        ctx.scopes.pop()
    deferred_sums.close_rows(ctx, deferred)
    if split is not None:
        split.store_partials(ctx)


def _mask_bound(ctx: EmitContext, sym: Sym, end: str) -> str | None:
    """What a nested tile's indices are masked against: nothing when every block is full (a
    static range its block divides; or a loop over an outer tile's ``begin``/``end`` whose block
    divides the outer block, as in causal attention's ``tc.tile(tm.begin)`` and
    ``tc.tile(tm.begin, tm.end)``: then only the outer dim's own end can cut a block), else the
    loop's end."""
    block = ctx.block_value(sym)
    if isinstance(sym.begin, int) and isinstance(sym.extent, int):
        return end if (sym.extent - sym.begin) % block else None
    outers = {id(o): o for o in (outer_tile(sym.begin), outer_tile(sym.extent)) if o is not None}
    begin_ok = sym.begin == 0 or (
        isinstance(sym.begin, Node) and sym.begin.op is Op.TILE_BEGIN and outer_tile(sym.begin)
    )
    if len(outers) != 1 or not begin_ok or not isinstance(sym.extent, Node):
        return end
    (outer,) = outers.values()
    if outer.begin != 0 or not isinstance(outer.extent, int) or ctx.block_value(outer) % block:
        return end
    if sym.extent.op is Op.TILE_BEGIN:
        return None  # [.., outer.begin): whole blocks
    return str(outer.extent) if outer.extent % block else None  # only the last tile is cut

"""The header of a tile loop inside a kernel (stage: codegen; in: a ``LOOP`` node; out: its
``for ... in tl.range(...)`` line and its dim's offset, indices and mask), shared by plain loops
(``loops.py``) and the two passes of a chunks-outer row loop (``chunk_outer.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from tilecraft.codegen.context import SymState
from tilecraft.config.space import outer_tile
from tilecraft.ir.nodes import Node, Op, Sym

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext
    from tilecraft.codegen.split import SplitPass


@contextlib.contextmanager
def tile_loop(
    ctx: EmitContext,
    node: Node,
    split: SplitPass | None = None,
    part: Callable[[SymState], tuple[str, str]] | None = None,
) -> Iterator[SymState]:
    """The ``for`` line of a LOOP node and, inside it (a new scope), its dim's offset, indices
    and mask; yields the dim's state while the body is emitted. ``part``: the (begin, end) of
    the part of the loop's range this ``for`` runs, from its dim's state (a loop split at a
    diagonal runs as two)."""
    sym: Sym = node.attrs["sym"]
    st = SymState(block=ctx.block_expr(sym))
    ctx.syms[id(sym)] = st
    st.begin, st.end = ctx.bound_expr(sym.begin), ctx.bound_expr(sym.extent)
    st.offset = ctx.w.fresh(f"offset_{sym.index}")
    step = "" if sym.scalar else f", {st.block}"
    ctx.w.src_comment(node.loc)
    knobs = ctx.plan.range(node.attrs.get("range_slot", -1)).kwargs()
    begin, end = part(st) if part is not None else (st.begin, st.end)
    if split is not None:  # this program's share of the iterations
        begin, end = split.bounds(ctx, sym, begin, end, "1" if sym.scalar else st.block)
    begin, end = ctx.range_bound(begin), ctx.range_bound(end)
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
        yield st
        ctx.scopes.pop()


def _mask_bound(ctx: EmitContext, sym: Sym, end: str) -> str | None:
    """What a nested tile's indices are masked against: nothing when every block is full (a
    static range its block divides; or a loop over an outer tile's ``begin``/``end`` whose block
    divides the outer block, as in causal attention's ``tc.tile(tm.begin)`` and
    ``tc.tile(tm.begin, tm.end)``: then only the outer dim's own end can cut a block; or from an
    outer tile's begin to a static end its block divides, as an attention backward's
    ``tc.tile(tn.begin, s)``), else the loop's end."""
    block = ctx.block_value(sym)
    if isinstance(sym.begin, int) and isinstance(sym.extent, int):
        return end if (sym.extent - sym.begin) % block else None
    start = outer_tile(sym.begin)
    if (
        isinstance(sym.extent, int)
        and sym.extent % block == 0
        and start is not None
        and sym.begin.op is Op.TILE_BEGIN
        and start.begin == 0
        and ctx.block_value(start) % block == 0
    ):
        return None  # [outer.begin, n): starts on a block boundary, n a multiple of the block
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

"""Device loops inside a kernel (stage: codegen; in: a ``LOOP`` node with its body and carried
values; out: a ``for ... in tl.range(...)`` loop).

Carried values are initialized before the loop and reassigned at the end of its body; the loop's
dim gets its offset, indices and (when the extent is not a multiple of the block) mask inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.codegen import chunk_outer, deferred_args, deferred_sums, homes
from tilecraft.codegen.diagonal import Diagonal, find_diagonal, ordered, split_point
from tilecraft.codegen.loop_header import tile_loop
from tilecraft.codegen.registry import emits
from tilecraft.codegen.schedule import emit_block
from tilecraft.codegen.split import COMBINE, SplitPass
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext, SymState
    from tilecraft.codegen.deferred_args import OpenArg
    from tilecraft.codegen.deferred_sums import OpenSum

    Deferred = tuple[list[OpenSum], list[OpenArg]]


def init_carried(ctx: EmitContext, node: Node, split: SplitPass | None = None) -> None:
    """A variable per carried value, assigned its value from before the loop (or branch)."""
    carried = [c for c in node.attrs.get("carried", []) if not ctx.homes.homed(c)]
    inits = {c.id: _init_text(ctx, c) for c in carried}  # (homed: homes.emit_init)
    for carry in carried:
        text = inits[carry.id]
        if split is not None and split.phase == COMBINE:
            split.combine(ctx, text, carry, inits)  # the loop ran in the partials kernel
            continue
        if split is not None:
            text = split.carry_init(ctx, carry)
        name = ctx.w.fresh(carry.hint)
        ctx.w.line(f"{name} = {text}")
        ctx.scopes[-1][carry.id] = name


def _init_text(ctx: EmitContext, carry: Node) -> str:
    """The expression of ``carry``'s value before the loop."""
    init = carry.inputs[0]
    text = ctx.expr(init)
    if init.op is Op.CONST or init.ndim == 0 and init.op in (Op.ARG,):
        # a Python number would not be a tensor the loop can reassign
        text = ctx.full_expr("", text, carry.dtype)
    return text


@emits(Op.LOOP)
def emit_loop(ctx: EmitContext, node: Node) -> None:
    if chunk_outer.emit_chunk_outer(ctx, node):
        return  # row statistics, then column chunks outer (codegen/chunk_outer.py)
    # the split loop, a combine's share of a carry-free loop after it, or in a chain's kernel
    # an earlier loop whose partials it combines
    split = ctx.split.for_loop(node) if ctx.split is not None else None
    homes.emit_init(ctx, node)
    init_carried(ctx, node, split)
    if split is not None and split.phase == COMBINE and split.is_site(node):
        return
    deferred = (
        deferred_sums.open_rows(ctx, deferred_sums.deferred_sums(ctx, node)),
        deferred_args.open_lanes(ctx, deferred_args.deferred_args(ctx, node)),
    )
    diagonal = find_diagonal(ctx, node) if split is None else None
    if diagonal is None:
        with tile_loop(ctx, node, split):
            _emit_iteration(ctx, node, deferred)
    else:
        _emit_split_at_diagonal(ctx, node, diagonal, deferred)
    deferred_sums.close_rows(ctx, deferred[0])
    deferred_args.close_lanes(ctx, deferred[1])
    deferred_args.rerun_on_nan(ctx, deferred[1], lambda: _emit_again(ctx, node, diagonal))
    if split is not None and split.is_site(node):
        split.store_partials(ctx)


def _emit_again(ctx: EmitContext, node: Node, diagonal: Diagonal | None) -> None:
    """The loop once more from its carries' initial values, nothing deferred (a deferred
    arg-best's NaN fallback, codegen/deferred_args.py)."""
    for carry in node.attrs.get("carried", []):
        ctx.w.line(f"{ctx.lookup(carry)} = {_init_text(ctx, carry)}")
    if diagonal is None:
        with tile_loop(ctx, node):
            _emit_iteration(ctx, node, ([], []))
    else:
        _emit_split_at_diagonal(ctx, node, diagonal, ([], []))


def _emit_split_at_diagonal(
    ctx: EmitContext, node: Node, diagonal: Diagonal, deferred: Deferred
) -> None:
    """The loop as two ``for`` loops over consecutive parts of its range, the part wholly off
    the diagonal emitted with its indices' order known (codegen/diagonal.py)."""
    cut = ""

    def first(st: SymState) -> tuple[str, str]:
        nonlocal cut
        cut = ctx.w.fresh(f"diagonal_{diagonal.inner.index}")
        ctx.w.line(f"{cut} = {split_point(ctx, diagonal, st)}")
        return st.begin, cut

    for part, bounds in enumerate((first, lambda st: (cut, st.end))):
        with tile_loop(ctx, node, part=bounds), ordered(ctx, diagonal, part):
            _emit_iteration(ctx, node, deferred)


def _emit_iteration(ctx: EmitContext, node: Node, deferred: Deferred) -> None:
    """One iteration of a loop's body: its nodes, deferred sums' row adds and arg-bests' lane
    updates, carry updates."""
    sums, args = deferred
    skipped = {id(d.carry) for d in sums} | {id(c) for d in args for c in d.carries}
    deferred_nodes = {id(n) for d in sums for n in d.skipped}
    deferred_nodes |= {id(n) for d in args for n in d.skipped}
    emit_block(ctx, [n for n in homes.body_with_updates(ctx, node) if id(n) not in deferred_nodes])
    deferred_sums.add_rows(ctx, sums)
    deferred_args.keep_lanes(ctx, args)
    for carry in node.attrs.get("carry_updates", []):
        nxt = carry.attrs.get("next")
        kept = nxt is None or nxt is carry or ctx.homes.homed(carry) or id(carry) in skipped
        if not kept:
            ctx.w.line(f"{ctx.lookup(carry)} = {ctx.expr(nxt)}")
    homes.end_of_iteration(ctx, node)

"""Rolled reductions that reduce each chunk as it comes (stage: codegen; in: a chunk loop's
reductions that ``ir/chunk_reductions.py`` picks; out: row accumulators before the loop, one
combine per chunk inside it, the results bound after it).

Each chunk is reduced across its lanes (``reduce_expr``: NaN wins for max/min) and combined into
an accumulator of the reduction's own shape. An argmax/argmin takes the chunk's (first best, its
index) tuple - shared with a max/min of the same values, the pair ``torch.max(x, dim)`` traces
as - and keeps it where strictly better than the row's best so far (an earlier chunk keeps ties:
torch gives the first index) or NaN over a number.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tilecraft.codegen.reduce import (
    ARG_PICK,
    along_axis,
    best_and_index,
    combine_expr,
    keep_better,
    masked_for_reduce,
    reduce_expr,
)
from tilecraft.ir import dtypes, reduce_pairs
from tilecraft.ir.nodes import Node, Sym

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


@dataclasses.dataclass
class Row:
    acc: str  # the row's best (or sum) so far
    at: str | None  # an arg reduction's index of it
    tupled: bool  # the chunk's (best, index) tuple gives it (an arg reduction or its partner)


def start_rows(ctx: EmitContext, nodes: list[Node]) -> dict[int, Row]:
    """Before the loop: each reduction's row accumulator (and an arg reduction's index)."""
    paired = reduce_pairs.paired_keys(nodes)
    rows: dict[int, Row] = {}
    for n in nodes:
        kind, src = n.attrs["kind"], n.inputs[0]
        dims = ctx.shape_expr(n.shape)
        neutral = dtypes.neutral(kind, src.dtype)
        acc = ctx.w.fresh(f"{n.hint}_row")
        ctx.w.line(f"{acc} = {ctx.full_expr(dims, neutral, src.dtype)}")
        at = None
        if kind in ARG_PICK:
            at = ctx.w.fresh(f"{n.hint}_at")
            index = "tl.int64" if ctx.int64 else "tl.int32"
            ctx.w.line(f"{at} = tl.full([{dims}], 0, {index})")
        tupled = at is not None or (reduce_pairs.pairable(n) and reduce_pairs.pair_key(n) in paired)
        rows[n.id] = Row(acc, at, tupled)
    return rows


def step_row(ctx: EmitContext, n: Node, sym: Sym, row: Row) -> None:
    """Inside the loop: combine this chunk of ``n``'s input into its row accumulator."""
    kind, axis, keep, src = n.attrs["kind"], n.attrs["axis"], n.attrs["keepdim"], n.inputs[0]
    if not row.tupled:
        dims = [ctx.dim_expr(d) for d in src.shape]
        value = masked_for_reduce(ctx, src, axis, kind)
        chunk = reduce_expr(kind, value, axis, keep, src.dtype, dims, ctx.interpret)
        ctx.w.line(f"{row.acc} = {combine_expr(kind, row.acc, chunk, src.dtype)}")
        return
    best = _chunk_best(ctx, n, sym)
    if row.at is None:  # a max/min beside its arg partner: the same chunk tuple's value
        ctx.w.line(f"{row.acc} = {combine_expr(kind, row.acc, f'{best}[0]', src.dtype)}")
        return
    keep_better(ctx, n, f"{best}[0]", f"{best}[1]", (row.acc, row.at))


def finish_row(ctx: EmitContext, n: Node, row: Row) -> None:
    """After the loop: ``n``'s value is its row accumulator (an arg reduction's: the index)."""
    ctx.scopes[-1][n.id] = row.at if row.at is not None else row.acc


def _chunk_best(ctx: EmitContext, n: Node, sym: Sym) -> str:
    """The chunk's (first best value, its index) tuple along ``n``'s axis, emitted once per
    iteration for ``n`` and its value / arg partner."""
    src, axis, keep = n.inputs[0], n.attrs["axis"], n.attrs["keepdim"]
    arg = reduce_pairs.ARG_OF[n.attrs["kind"]]

    def reduction() -> str:
        values = masked_for_reduce(ctx, src, axis, arg)
        dims = ", ".join(ctx.dim_expr(d) for d in src.shape)
        index = f"tl.broadcast_to({along_axis(ctx.state(sym).index, axis, src.ndim)}, [{dims}])"
        return best_and_index(arg, values, index, axis, keep, ctx.interpret)

    return ctx.shared_tuple(("chunk_best", *reduce_pairs.pair_key(n)), "best", reduction)


__all__ = ["Row", "finish_row", "start_rows", "step_row"]

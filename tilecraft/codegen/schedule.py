"""Phases and chunk loops for rolled reductions (stage: codegen; in: a block of IR nodes and the
rolled reduction dim, if any; out: the block's Triton code, phase by phase).

With a reduction dim R processed in chunks, a node's *phase* (``ir/phases.py``) is how many
reductions over R must finish before it can be computed. Values on R of phase p are recomputed
inside chunk loop p; other values of phase p are emitted between chunk loops p-1 and p.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tilecraft.codegen import row_reductions
from tilecraft.codegen.reduce import (
    ARG_PICK,
    along_axis,
    best_and_index,
    combine_expr,
    keep_better,
    masked_for_reduce,
    reduce_expr,
)
from tilecraft.codegen.split import COMBINE
from tilecraft.ir import dtypes, reduce_pairs
from tilecraft.ir.chunk_reductions import reduces_per_chunk
from tilecraft.ir.nodes import Node, Op, Sym, on_dim
from tilecraft.ir.phases import free_inputs, phases, rolled_reduce

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


def emit_block(ctx: EmitContext, nodes: list[Node]) -> None:
    """Emit a block; with a rolled reduction dim, phase by phase (see the module docstring)."""
    looped = ctx.looped
    nodes = ctx.homes.without_final_stores(nodes)
    if looped is None:
        for n in nodes:
            ctx.ensure(n)
        return
    phase, maxp = phases(nodes, looped)
    wanted = _wanted_phases(nodes, looped, phase)
    split = ctx.split if ctx.split is not None and ctx.split.rolled is looped else None
    for p in range(maxp + 1):
        for n in nodes:
            if wanted[n.id] == p and not on_dim(n, looped) and not rolled_reduce(n, looped):
                ctx.ensure(n)
        sinks = [
            n
            for n in nodes
            if (on_dim(n, looped) and n.op in (Op.STORE, Op.ATOMIC) and phase[n.id] == p)
            # (an input from outside the block, e.g. a carried value kept in memory: phase 0)
            or (rolled_reduce(n, looped) and phase.get(n.inputs[0].id, 0) == p)
        ]
        if split is not None and p < split.passes and split.phase == COMBINE:
            split.combine_reductions(ctx, p)  # the partials kernel ran this chunk loop
            continue
        if sinks:
            emit_chunk_loop(ctx, _with_ordered_loads(nodes, sinks, looped, phase, p), looped)
        if split is not None and p == split.passes - 1:
            split.store_partials(ctx)  # the combine kernel runs the rest
            return


def _with_ordered_loads(
    nodes: list[Node], sinks: list[Node], looped: Sym, phase: dict[int, int], p: int
) -> list[Node]:
    """``sinks`` with the chunk loop's loads of the tensors it stores into, in program order:
    on the rolled dim a value is emitted where first used, so ``before = out[t, :]`` used
    after a store to ``out`` read the stored value (every element of a [3, 699] row wrong)."""
    stored = {n.attrs["tensor"].name for n in sinks if n.op in (Op.STORE, Op.ATOMIC)}
    if not stored:
        return sinks
    chosen = {n.id for n in sinks}
    chosen.update(
        n.id
        for n in nodes
        if n.op is Op.LOAD
        and on_dim(n, looped)
        and phase[n.id] == p
        and n.attrs["tensor"].name in stored
    )
    return [n for n in nodes if n.id in chosen]


def _wanted_phases(nodes: list[Node], looped: Sym, phase: dict[int, int]) -> dict[int, int]:
    """The phase before whose chunk loop each value off the rolled dim is emitted: the first
    phase that uses it. A value computed before a chunk loop and used only after it stayed live
    across the loop: an audio filter's 12 shifted [1, 16384] taps held through the loop of its
    ``x[:, :1]`` spilled (0.635 ms, torch 0.037). Side effects, bodies, and loads of tensors the
    block writes (whose order against the stores the phases keep) stay in their own phase."""
    written = {n.attrs["tensor"].name for n in nodes if n.op in (Op.STORE, Op.ATOMIC)}
    wanted = dict(phase)
    in_block = {n.id for n in nodes}
    users: dict[int, list[Node]] = {}
    for n in nodes:  # (a loop's or branch's body reads values from outside it too)
        deps = free_inputs(n) if n.op in (Op.LOOP, Op.IF, Op.WHILE) else n.inputs
        for i in deps:
            if i.id in in_block:
                users.setdefault(i.id, []).append(n)
    for n in reversed(nodes):
        fixed = n.op in (Op.STORE, Op.ATOMIC, Op.LOOP, Op.IF, Op.WHILE) or n.body is not None
        if fixed or (n.op is Op.LOAD and n.attrs["tensor"].name in written):
            continue
        uses = [
            wanted[u.id] if not on_dim(u, looped) and not rolled_reduce(u, looped) else phase[u.id]
            for u in users.get(n.id, ())
        ]
        if uses:
            wanted[n.id] = max(phase[n.id], min(uses))
    return wanted


def emit_chunk_loop(ctx: EmitContext, sinks: list[Node], sym: Sym) -> None:
    """One ``for roffset`` loop over the rolled dim that computes ``sinks`` (stores, atomics and
    reductions over the dim, which accumulate chunk by chunk and finish after the loop)."""
    rows = row_reductions.start_rows(ctx, [n for n in sinks if reduces_per_chunk(n, sym)])
    lanes = [n for n in sinks if n.op is Op.REDUCE and n.id not in rows]
    partners = _arg_partners(lanes)
    accs: dict[int, str] = {}
    indices: dict[int, str] = {}  # arg-reductions: the index of each lane's best so far
    for n in lanes:
        if n.id not in partners:
            accs[n.id], at = _start_lanes(ctx, n)
            if at is not None:
                indices[n.id] = at
    with chunk_loop(ctx, sym):
        for n in sinks:
            if n.id in rows:
                row_reductions.step_row(ctx, n, sym, rows[n.id])
            elif n.id in partners:
                continue  # its argmax / argmin partner's lanes hold its best too
            elif n.op is Op.REDUCE and n.id in indices:
                _arg_step(ctx, n, sym, accs[n.id], indices[n.id])
            elif n.op is Op.REDUCE:
                kind, axis = n.attrs["kind"], n.attrs["axis"]
                value = masked_for_reduce(ctx, n.inputs[0], axis, kind)
                acc = accs[n.id]
                ctx.w.line(f"{acc} = {combine_expr(kind, acc, value, n.inputs[0].dtype)}")
            else:
                ctx.ensure(n)
    for n in sinks:
        if n.id in rows:
            row_reductions.finish_row(ctx, n, rows[n.id])
        elif n.op is Op.REDUCE:
            _finish_lanes(ctx, n, partners.get(n.id, n), accs, indices)


def _arg_partners(lanes: list[Node]) -> dict[int, Node]:
    """Each float max (min) of ``lanes`` whose argmax (argmin) over the same input and axis
    is also there: that one's lanes (best value, index) give both (``torch.max(x, dim)``)."""
    args = {
        reduce_pairs.pair_key(n): n
        for n in lanes
        if n.attrs["kind"] in ARG_PICK and reduce_pairs.pairable(n)
    }
    return {
        n.id: args[reduce_pairs.pair_key(n)]
        for n in lanes
        if n.attrs["kind"] in ("max", "min")
        and reduce_pairs.pairable(n)
        and reduce_pairs.pair_key(n) in args
    }


def _start_lanes(ctx: EmitContext, n: Node) -> tuple[str, str | None]:
    """A chunk-wide accumulator of reduction ``n`` (and an arg reduction's lane indices)."""
    src = n.inputs[0]
    dims = ctx.shape_expr(src.shape)
    acc = ctx.w.fresh(f"{n.hint}_acc")
    neutral = dtypes.neutral(n.attrs["kind"], src.dtype)
    ctx.w.line(f"{acc} = {ctx.full_expr(dims, neutral, src.dtype)}")
    if n.attrs["kind"] not in ARG_PICK:
        return acc, None
    # the first chunk's lane numbers: a row that never beats the neutral gives 0
    axis = n.attrs["axis"]
    lanes = along_axis(f"tl.arange(0, {ctx.dim_expr(src.shape[axis])})", axis, src.ndim)
    at = ctx.w.fresh(f"{n.hint}_at")
    ctx.w.line(f"{at} = tl.broadcast_to({lanes}, [{dims}])")
    return acc, at


def _finish_lanes(
    ctx: EmitContext, n: Node, owner: Node, accs: dict[int, str], indices: dict[int, str]
) -> None:
    """Bind ``n`` to its lanes reduced across the chunk (``owner``: the reduction whose lanes
    hold it, its arg partner's for a paired max / min)."""
    src = n.inputs[0]
    kind, axis, keep = owner.attrs["kind"], n.attrs["axis"], n.attrs["keepdim"]
    acc = accs[owner.id]
    if owner.id not in indices:
        dims = [ctx.dim_expr(d) for d in src.shape]
        ctx.bind(n, reduce_expr(kind, acc, axis, keep, src.dtype, dims, ctx.interpret))
        return
    at = indices[owner.id]  # each lane's (best, index): the row's first best, for both
    best = ctx.shared_tuple(
        ("lanes_best", owner.id),
        "best",
        lambda: best_and_index(kind, acc, at, axis, keep, ctx.interpret),
    )
    ctx.bind(n, f"{best}[{1 if n is owner else 0}]")


def _arg_step(ctx: EmitContext, n: Node, sym: Sym, acc: str, at: str) -> None:
    """One chunk of a rolled argmax/argmin: each lane keeps its best value and its index."""
    src, kind, axis = n.inputs[0], n.attrs["kind"], n.attrs["axis"]
    value = ctx.w.fresh(f"{n.hint}_chunk")
    ctx.w.line(f"{value} = {masked_for_reduce(ctx, src, axis, kind)}")
    index = along_axis(ctx.state(sym).index, axis, src.ndim)  # the chunk's column numbers
    keep_better(ctx, n, value, index, (acc, at))


@contextlib.contextmanager
def chunk_loop(ctx: EmitContext, sym: Sym) -> Iterator[None]:
    """A ``for roffset`` loop over the rolled dim (this program's share of its chunks when the
    loop is split); inside it (a new scope) the chunk's indices and mask."""
    st = ctx.state(sym)
    roffset = ctx.w.fresh(f"roffset_{sym.index}")
    st.offset = roffset
    begin, end = "0", st.end
    if ctx.split is not None and ctx.split.rolled is sym:  # this program's share of the chunks
        begin, end = ctx.split.bounds(ctx, sym, begin, end, st.block)
    begin, end = ctx.range_bound(begin), ctx.range_bound(end)
    ctx.w.line(f"for {roffset} in tl.range({begin}, {end}, {st.block}):")
    with ctx.w.indented():
        ctx.scopes.append({})
        ctx.w.line(f"{st.index} = {ctx.index_cast(roffset)} + tl.arange(0, {st.block})")
        if st.mask:
            ctx.w.line(f"{st.mask} = {st.index} < {st.end}")
        yield
        ctx.scopes.pop()

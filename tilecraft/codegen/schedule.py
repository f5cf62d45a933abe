"""Phases and chunk loops for rolled reductions (stage: codegen; in: a block of IR nodes and the
rolled reduction dim, if any; out: the block's Triton code, phase by phase).

With a reduction dim R processed in chunks, a node's *phase* is how many reductions over R must
finish before it can be computed. Values on R of phase p are recomputed inside chunk loop p; other
values of phase p are emitted between chunk loops p-1 and p.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.codegen.reduce import combine_expr, masked_for_reduce, reduce_expr
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op, Sym, walk

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


def free_inputs(loop: Node) -> list[Node]:
    """Nodes used inside a LOOP's body (or as its bounds / carried inits) defined outside it."""
    inside = {n.id for n in walk(loop.body or [])}
    inside.update(c.id for c in loop.attrs.get("carried", []))
    out: list[Node] = list(loop.inputs)
    for carry in loop.attrs.get("carried", []):
        out.append(carry.inputs[0])
    for n in walk(loop.body or []):
        for i in n.inputs:
            if i.id not in inside:
                out.append(i)
    return out


def phases(nodes: list[Node], sym: Sym) -> tuple[dict[int, int], int]:
    in_block = {n.id for n in nodes}
    phase: dict[int, int] = {}

    def of(n: Node) -> int:
        return phase.get(n.id, 0) if n.id in in_block else 0

    for n in nodes:
        deps = free_inputs(n) if n.op is Op.LOOP else n.inputs
        p = max((of(i) for i in deps), default=0)
        if n.op is Op.REDUCE and n.inputs[0].shape[n.attrs["axis"]] is sym:
            p = of(n.inputs[0]) + 1
        phase[n.id] = p
    return phase, max(phase.values(), default=0)


def emit_block(ctx: EmitContext, nodes: list[Node]) -> None:
    """Emit a block; with a rolled reduction dim, phase by phase (see the module docstring)."""
    looped = ctx.looped
    if looped is None:
        for n in nodes:
            ctx.ensure(n)
        return
    phase, maxp = phases(nodes, looped)
    for p in range(maxp + 1):
        for n in nodes:
            if phase[n.id] == p and not _on(n, looped) and not _rolled_reduce(n, looped):
                ctx.ensure(n)
        sinks = [
            n
            for n in nodes
            if (_on(n, looped) and n.op in (Op.STORE, Op.ATOMIC) and phase[n.id] == p)
            or (_rolled_reduce(n, looped) and phase[n.inputs[0].id] == p)
        ]
        if sinks:
            emit_chunk_loop(ctx, sinks, looped)


def emit_chunk_loop(ctx: EmitContext, sinks: list[Node], sym: Sym) -> None:
    """One ``for roffset`` loop over the rolled dim that computes ``sinks`` (stores, atomics and
    reductions over the dim, which accumulate chunk by chunk and finish after the loop)."""
    st = ctx.state(sym)
    accs: dict[int, str] = {}
    for n in sinks:
        if n.op is Op.REDUCE:
            src = n.inputs[0]
            dims = ", ".join(ctx.dim_expr(d) for d in src.shape)
            acc = ctx.w.fresh(f"{n.hint}_acc")
            neutral = dtypes.neutral(n.attrs["kind"], src.dtype)
            ctx.w.line(f"{acc} = tl.full([{dims}], {neutral}, {dtypes.triton_dtype(src.dtype)})")
            accs[n.id] = acc
    roffset = ctx.w.fresh(f"roffset_{sym.index}")
    st.offset = roffset
    ctx.w.line(f"for {roffset} in tl.range(0, {ctx.range_bound(st.end)}, {st.block}):")
    with ctx.w.indented():
        ctx.scopes.append({})
        ctx.w.line(f"{st.index} = {ctx.index_cast(roffset)} + tl.arange(0, {st.block})")
        if st.mask:
            ctx.w.line(f"{st.mask} = {st.index} < {st.end}")
        for n in sinks:
            if n.op is Op.REDUCE:
                kind, axis = n.attrs["kind"], n.attrs["axis"]
                value = masked_for_reduce(ctx, n.inputs[0], axis, kind)
                acc = accs[n.id]
                ctx.w.line(f"{acc} = {combine_expr(kind, acc, value, n.inputs[0].dtype)}")
            else:
                ctx.ensure(n)
        ctx.scopes.pop()
    for n in sinks:
        if n.op is Op.REDUCE:
            src = n.inputs[0]
            src_dims = [ctx.dim_expr(d) for d in src.shape]
            kind, axis, keep = n.attrs["kind"], n.attrs["axis"], n.attrs["keepdim"]
            ctx.bind(n, reduce_expr(kind, accs[n.id], axis, keep, src.dtype, src_dims))


def _on(node: Node, sym: Sym) -> bool:
    return any(d is sym for d in node.shape)


def _rolled_reduce(node: Node, sym: Sym) -> bool:
    return node.op is Op.REDUCE and node.inputs[0].shape[node.attrs["axis"]] is sym

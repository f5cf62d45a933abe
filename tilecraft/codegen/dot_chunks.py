"""A dot's whole K dim in chunks (stage: codegen; in: a ``DOT`` node the plan runs in K chunks,
``config/fp32_dots.fma_k_chunk``; out: a ``for`` loop accumulating one ``tl.dot`` per chunk).

Inside the loop the K dim's state is the chunk's (its offset, indices, mask and block) and the
values on K bound outside it are hidden (they hold the whole K), so each operand's expression
tree is computed again on the chunk: its loads read that chunk right before the dot. The
operands' values off K (a row's norm) are computed before the loop, once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from tilecraft.codegen.context import SymState
from tilecraft.config.fma_operands import fma_k_chunk
from tilecraft.config.fp32_dots import on_fma_units
from tilecraft.ir.dot_k_chunks import k_dim
from tilecraft.ir.nodes import Node, Sym, on_dim

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext

Operands = Callable[[], tuple[str, str]]  # the operands' texts where they are asked for
Product = Callable[[str, str, str | None], str]  # (a, b, accumulator) -> the dot's text


def k_chunk(ctx: EmitContext, node: Node) -> int | None:
    """The K chunk the plan runs ``node`` in (None: whole)."""
    if not on_fma_units(ctx.plan.target.backend, ctx.plan.dot_precision):
        return None
    return fma_k_chunk(node, ctx.block_value, lambda sym: sym is ctx.looped)


def emit_chunked_dot(
    ctx: EmitContext, node: Node, chunk: int, operands: Operands, product: Product
) -> None:
    """Bind ``node`` to an accumulator summed over its K dim's chunks (module docstring)."""
    k = k_dim(node)
    assert k is not None
    for value in _off_k_inputs(node, k):
        ctx.ensure(value)  # once, before the loop
    acc = ctx.w.fresh(f"{node.hint}_acc")
    if len(node.inputs) == 3:
        init = ctx.expr(node.inputs[2])
    else:
        init = ctx.full_expr(ctx.shape_expr(node.shape), "0.0", node.dtype)
    ctx.w.line(f"{acc} = {init}")
    with k_chunks(ctx, k, chunk):
        a, b = operands()
        ctx.w.line(f"{acc} = {product(a, b, acc)}")
    ctx.scopes[-1][node.id] = acc


def _off_k_inputs(node: Node, k: Sym) -> list[Node]:
    """The values off K the dot's operand trees read (inputs of their values on K)."""
    found: list[Node] = []
    seen: set[int] = set()
    stack = list(node.inputs[:2])
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if on_dim(n, k):
            stack.extend(n.inputs)
        else:
            found.append(n)
    return found


@contextlib.contextmanager
def k_chunks(ctx: EmitContext, k: Sym, chunk: int) -> Iterator[None]:
    """A ``for`` loop over chunks of the whole dim ``k``; inside it (a new scope) ``k`` is the
    chunk: its state, its block, and no value on it from outside."""
    outer = ctx.state(k)
    st = SymState(block=str(chunk), begin="0", end=outer.end)
    st.offset = ctx.w.fresh(f"koffset_{k.index}")
    st.index = ctx.w.fresh(f"kindex_{k.index}")
    exact = not k.extent_args and isinstance(k.extent, int) and k.extent % chunk == 0
    st.mask = None if exact else ctx.w.fresh(f"kmask_{k.index}")
    ctx.w.line(f"for {st.offset} in tl.range(0, {ctx.range_bound(outer.end)}, {chunk}):")
    with ctx.w.indented():
        ctx.scopes.append({})
        ctx.hidden.append((len(ctx.scopes) - 1, k))
        ctx.syms[id(k)], ctx.block_overrides[id(k)] = st, str(chunk)
        try:
            ctx.w.line(f"{st.index} = {ctx.index_cast(st.offset)} + tl.arange(0, {chunk})")
            if st.mask:
                ctx.w.line(f"{st.mask} = {st.index} < {outer.end}")
            yield
        finally:
            ctx.syms[id(k)] = outer
            del ctx.block_overrides[id(k)]
            ctx.hidden.pop()
            ctx.scopes.pop()


__all__ = ["emit_chunked_dot", "k_chunk", "k_chunks"]

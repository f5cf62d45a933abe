"""Scans and custom reductions in Triton (stage: codegen; in: ``SCAN`` nodes and ``REDUCE``
nodes of kind ``combine``; out: ``tl.cumsum`` / ``tl.cumprod`` / ``tl.associative_scan`` /
``tl.reduce`` calls, and one ``@triton.jit`` helper per traced combine function).

The helper is emitted by a second emit context over the combine graph (its parameters are the graph's
``lhs`` / ``rhs`` placeholders), so a combine function may use any pointwise op device code may.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tilecraft.codegen.registry import emits
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext
    from tilecraft.frontend.scans import Combine


def combine_helper(ctx: EmitContext, combine: Combine) -> str:
    """The name of the ``@triton.jit`` helper for ``combine`` (emitted once per kernel)."""
    key = id(combine)
    if key in ctx.helper_names:
        return ctx.helper_names[key]
    # a lambda is named "<lambda>": keep only what an identifier may hold
    label = re.sub(r"\W", "", combine.name) or "fn"
    name = f"_combine_{len(ctx.helper_names)}_{label}"
    sub = ctx.sub_context()
    for n in combine.body:
        sub.ensure(n)
    results = ", ".join(sub.expr(r) for r in combine.results)
    ctx.helper_names[key] = name
    params = ", ".join(combine.params)
    ctx.helpers.append(
        f"@triton.jit\ndef {name}({params}):\n{sub.w.text()}\n    return {results}\n"
    )
    return name


@emits(Op.SCAN)
def emit_scan(ctx: EmitContext, node: Node) -> None:
    src, axis, kind = node.inputs[0], node.attrs["axis"], node.attrs["kind"]
    text = ctx.expr(src)
    if kind == "combine":
        helper = combine_helper(ctx, node.attrs["combine"])
        if len(node.inputs) > 1:  # one of a tuple scan's results
            ctx.bind(node, f"{_tuple_scan(ctx, node, axis, helper)}[{node.attrs['output']}]")
            return
        ctx.bind(node, f"tl.associative_scan({text}, {axis}, {helper})")
        return
    reverse = ", reverse=True" if node.attrs.get("reverse") else ""
    ctx.bind(node, f"tl.{'cumsum' if kind == 'sum' else 'cumprod'}({text}, {axis}{reverse})")


def _tuple_scan(ctx: EmitContext, node: Node, axis: int, helper: str) -> str:
    """The variable holding the tuple that a tuple scan's results index: emitted once, and
    reused by the scan's other results while the scope it was emitted in is open."""
    key = ("scan", id(node.attrs["combine"]), tuple(n.id for n in node.inputs), axis)

    def scan() -> str:
        tiles = ", ".join(ctx.expr(n) for n in node.inputs)
        return f"tl.associative_scan(({tiles}), {axis}, {helper})"

    return ctx.shared_tuple(key, "scanned", scan)


def emit_combine_reduce(ctx: EmitContext, node: Node) -> None:
    """``tl.reduce`` with the user's combine; padded elements hold the user's ``other``, or
    without one they are skipped: each lane carries a valid flag, and the combine of a valid
    and a padded lane is the valid one (exact for any combine: a product's padding of 0 made
    every row 0)."""
    src, axis = node.inputs[0], node.attrs["axis"]
    text = ctx.expr(src)
    mask = ctx.mask_at(src.shape[axis], axis, src.ndim)
    other = node.attrs["other"]
    helper = combine_helper(ctx, node.attrs["combine"])
    keep = ", keep_dims=True" if node.attrs["keepdim"] else ""
    if mask is not None and other is None:
        zero = "0.0" if src.dtype.is_floating_point else "0"
        valid = f"({mask}) | tl.zeros({_shape_of(ctx, src)}, tl.int1)"
        pair = f"(tl.where({mask}, {text}, {zero}), {valid})"
        skipping = _skipping_helper(ctx, node.attrs["combine"], helper)
        ctx.bind(node, f"tl.reduce({pair}, {axis}, {skipping}{keep})[0]")
        return
    if mask is not None:
        lit = dtypes.float_literal(float(other)) if src.dtype.is_floating_point else str(other)
        text = f"tl.where({mask}, {text}, {lit})"
    ctx.bind(node, f"tl.reduce({text}, {axis}, {helper}{keep})")


def _shape_of(ctx: EmitContext, node: Node) -> str:
    return f"[{', '.join(ctx.dim_expr(d) for d in node.shape)}]"


def _skipping_helper(ctx: EmitContext, combine: Combine, helper: str) -> str:
    """A combine of (value, valid) pairs that skips padded lanes around ``helper``."""
    key = ("skipping", id(combine))
    if key not in ctx.helper_names:
        name = f"{helper}_valid"
        ctx.helper_names[key] = name
        ctx.helpers.append(
            f"@triton.jit\ndef {name}(a, a_valid, b, b_valid):\n"
            f"    both = {helper}(a, b)\n"
            "    return tl.where(a_valid & b_valid, both, tl.where(a_valid, a, b)), "
            "a_valid | b_valid\n"
        )
    return ctx.helper_names[key]

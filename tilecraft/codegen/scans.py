"""Scans and custom reductions in Triton (stage: codegen; in: ``SCAN`` nodes and ``REDUCE``
nodes of kind ``combine``; out: ``tl.cumsum`` / ``tl.cumprod`` / ``tl.associative_scan`` /
``tl.reduce`` calls, and one ``@triton.jit`` helper per traced combine function).

The helper is emitted by a second emitter over the combine graph (its parameters are the graph's
``lhs`` / ``rhs`` placeholders), so a combine function may use any pointwise op device code may.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node

if TYPE_CHECKING:
    from tilecraft.codegen.emitter import Emitter
    from tilecraft.frontend.scans import Combine


def combine_helper(em: Emitter, combine: Combine) -> str:
    """The name of the ``@triton.jit`` helper for ``combine`` (emitted once per kernel)."""
    key = id(combine)
    if key in em.helper_names:
        return em.helper_names[key]
    name = f"_combine_{len(em.helper_names)}_{combine.name}"
    sub = type(em)(em.loop, em.plan, em.int64, em.interpret)
    for n in combine.body:
        sub.ensure(n)
    result = sub.expr(combine.result)
    em.helper_names[key] = name
    em.helpers.append(f"@triton.jit\ndef {name}(lhs, rhs):\n{sub.w.text()}\n    return {result}\n")
    return name


def emit_scan(em: Emitter, node: Node) -> None:
    src, axis, kind = node.inputs[0], node.attrs["axis"], node.attrs["kind"]
    text = em.expr(src)
    if kind == "combine":
        helper = combine_helper(em, node.attrs["combine"])
        em.bind(node, f"tl.associative_scan({text}, {axis}, {helper})")
        return
    em.bind(node, f"tl.{'cumsum' if kind == 'sum' else 'cumprod'}({text}, {axis})")


def emit_combine_reduce(em: Emitter, node: Node) -> None:
    """``tl.reduce`` with the user's combine; padded elements hold the user's ``other``."""
    src, axis = node.inputs[0], node.attrs["axis"]
    text = em.expr(src)
    mask = em.mask_at(src.shape[axis], axis, src.ndim)
    if mask is not None:
        other = node.attrs["other"]
        lit = dtypes.float_literal(float(other)) if src.dtype.is_floating_point else str(other)
        text = f"tl.where({mask}, {text}, {lit})"
    helper = combine_helper(em, node.attrs["combine"])
    keep = ", keep_dims=True" if node.attrs["keepdim"] else ""
    em.bind(node, f"tl.reduce({text}, {axis}, {helper}{keep})")

"""Matrix products (stage: codegen; in: a 2-D or 3-D (batched) ``DOT`` node, ``a @ b`` with an
optional fp32 accumulator; out: a ``tl.dot`` assignment).

Operands that are not loads are zeroed past the K dim's mask (a load already reads 0 there), and
fp32 dots take the plan's ``input_precision``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from tilecraft.codegen.registry import emits
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


@emits(Op.DOT)
def emit_dot(ctx: EmitContext, node: Node) -> None:
    a, b = node.inputs[0], node.inputs[1]
    at, bt = ctx.expr(a), ctx.expr(b)
    k, rank = a.shape[-1], a.ndim  # 2-D, or 3-D with a leading batch dim
    if a.op is not Op.LOAD and (m := ctx.mask_at(k, rank - 1, rank)):
        at = f"tl.where({m}, {at}, 0)"
    if b.op is not Op.LOAD and (m := ctx.mask_at(k, rank - 2, rank)):
        bt = f"tl.where({m}, {bt}, 0)"
    extra = f", input_precision='{ctx.plan.dot_precision}'" if a.dtype == torch.float32 else ""
    if ctx.interpret and a.dtype in dtypes.LOW_PRECISION:
        # the interpreter computes half-precision dots wrongly (numpy has no bf16); products
        # of bf16/fp16 values are exact in fp32, so upcasting changes nothing numerically
        at, bt, extra = (
            f"{at}.to(tl.float32)",
            f"{bt}.to(tl.float32)",
            ", input_precision='ieee'",
        )
    if len(node.inputs) == 3:
        ctx.bind(node, f"tl.dot({at}, {bt}, acc={ctx.expr(node.inputs[2])}{extra})")
    else:
        ctx.bind(node, f"tl.dot({at}, {bt}, out_dtype=tl.float32{extra})")

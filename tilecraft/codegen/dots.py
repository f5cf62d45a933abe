"""Matrix products (stage: codegen; in: a 2-D or 3-D (batched) ``DOT`` node, ``a @ b`` with an
optional fp32 accumulator; out: ``tl.dot`` assignments).

Operands that are not loads are zeroed past the K dim's mask (a load already reads 0 there), and
fp32 dots take the plan's ``input_precision``. A node with ``split_fp32`` multiplies an fp32
operand by a bf16 one (an exact upcast, ``frontend/dots.py``): under "ieee" precision the fp32
operand is split into three bf16 parts ``hi + mid + lo`` (8 significant bits each, together all
24 of fp32) and the three products, each exact, accumulate in fp32 on the tensor cores - the
precision of an fp32 dot at bf16 tensor-core speed (three MMAs instead of FMA loops). Under
"tf32"/"tf32x3" the bf16 operand is widened and Triton's precision applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from tilecraft.codegen import dot_chunks
from tilecraft.codegen.registry import emits
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


@emits(Op.DOT)
def emit_dot(ctx: EmitContext, node: Node) -> None:
    rank = node.inputs[0].ndim  # 2-D, or 3-D with a leading batch dim
    chunk = dot_chunks.k_chunk(ctx, node)
    if chunk is not None:  # an fp32 FMA dot over a whole K, in chunks of K
        dot_chunks.emit_chunked_dot(
            ctx,
            node,
            chunk,
            lambda: _operands(ctx, node),
            lambda at, bt, acc: _dot_call(ctx, at, bt, torch.float32, acc, rank),
        )
        return
    at, bt = _operands(ctx, node)
    acc = ctx.expr(node.inputs[2]) if len(node.inputs) == 3 else None
    split = node.attrs.get("split_fp32")
    if split is None:
        ctx.bind(node, _dot_call(ctx, at, bt, node.inputs[0].dtype, acc, rank))
    elif ctx.plan.dot_precision != "ieee":
        widened = [f"{t}.to(tl.float32)" if i != split else t for i, t in enumerate((at, bt))]
        ctx.bind(node, _dot_call(ctx, widened[0], widened[1], torch.float32, acc))
    else:
        ctx.bind(node, _split_dot(ctx, (at, bt), split, acc))


def _operands(ctx: EmitContext, node: Node) -> tuple[str, str]:
    """The texts of the dot's operands, zeroed past K's mask where not loads."""
    a, b = node.inputs[0], node.inputs[1]
    at, bt = ctx.expr(a), ctx.expr(b)
    k, rank = a.shape[-1], a.ndim
    if not _loaded(a) and (m := ctx.mask_at(k, rank - 1, rank)):
        at = f"tl.where({m}, {at}, 0)"
    if not _loaded(b) and (m := ctx.mask_at(k, rank - 2, rank)):
        bt = f"tl.where({m}, {bt}, 0)"
    return at, bt


def _loaded(node: Node) -> bool:
    """Whether ``node`` is a load, transposed or not (a masked load reads 0 past K's end)."""
    while node.op is Op.VIEW and node.attrs.get("perm"):
        node = node.inputs[0]
    return node.op is Op.LOAD


def _dot_call(
    ctx: EmitContext, at: str, bt: str, dtype: torch.dtype, acc: str | None, rank: int = 2
) -> str:
    """One ``tl.dot`` of ``rank``-D operands of ``dtype`` (fp32: the plan's input precision)."""
    if dtype == torch.float64 and ctx.plan.target.backend == "hip":
        # Triton 3.6's AMD backend fails on fp64 tl.dot ("PassManager::run failed", gfx942):
        # the products summed over K instead, still fp64
        batch = ":, " if rank == 3 else ""
        product = f"tl.sum({at}[{batch}:, :, None] * {bt}[{batch}None, :, :], axis=-2)"
        return product if acc is None else f"({acc} + {product})"
    extra = f", input_precision='{ctx.plan.dot_precision}'" if dtype == torch.float32 else ""
    if ctx.interpret and dtype in dtypes.LOW_PRECISION:
        # the interpreter computes half-precision dots wrongly (numpy has no bf16); products
        # of bf16/fp16 values are exact in fp32, so upcasting changes nothing numerically
        at, bt, extra = f"{at}.to(tl.float32)", f"{bt}.to(tl.float32)", ", input_precision='ieee'"
    # int8 products sum in int32, fp64 ones in fp64 (tl.dot's out_dtype must name them)
    out = {torch.int8: "tl.int32", torch.float64: "tl.float64"}.get(dtype, "tl.float32")
    if acc is None:
        return f"tl.dot({at}, {bt}, out_dtype={out}{extra})"
    if dtype in (torch.int8, torch.float64):
        extra += f", out_dtype={out}"
    return f"tl.dot({at}, {bt}, acc={acc}{extra})"


def _split_dot(ctx: EmitContext, operands: tuple[str, str], split: int, acc: str | None) -> str:
    """Three bf16 products of the fp32 operand's parts, smallest first, accumulated in fp32:
    the first two into fresh variables, the last returned for the node's own binding."""
    w = ctx.w
    full = operands[split]
    hi, mid, lo = w.fresh("hi"), w.fresh("mid"), w.fresh("lo")
    rest = w.fresh("rest")
    w.line(f"{hi} = {full}.to(tl.bfloat16)")
    # an infinite value is all in its high part (inf - inf would make the rest NaN)
    w.line(f"{rest} = tl.where({hi}.to(tl.float32) == {full}, 0.0, {full} - {hi}.to(tl.float32))")
    w.line(f"{mid} = {rest}.to(tl.bfloat16)")
    w.line(f"{lo} = ({rest} - {mid}.to(tl.float32)).to(tl.bfloat16)")

    def product(part: str, into: str | None) -> str:
        pair = (part, operands[1]) if split == 0 else (operands[0], part)
        return _dot_call(ctx, pair[0], pair[1], torch.bfloat16, into)

    low = w.fresh("partial")
    w.line(f"{low} = {product(lo, acc)}")
    middle = w.fresh("partial")
    w.line(f"{middle} = {product(mid, low)}")
    return product(hi, middle)

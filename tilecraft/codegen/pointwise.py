"""Elementwise emissions (stage: codegen; in: ``FULL`` / ``CAST`` / ``UNARY`` / ``BINARY`` /
``WHERE`` / ``PRINT`` nodes; out: one Triton assignment or statement each).

Unary and binary ops render the template of :data:`tilecraft.ir.pointwise.POINTWISE` on operands
cast to the op's compute dtype (fp32 for 16-bit floats), then cast back to the node's dtype.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from tilecraft.codegen.registry import emits
from tilecraft.ir import dtypes
from tilecraft.ir.int_ranges import abs_bound, nonnegative
from tilecraft.ir.nodes import Node, Op
from tilecraft.ir.pointwise import POINTWISE

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


@emits(Op.PRINT)
def emit_print(ctx: EmitContext, node: Node) -> None:
    values = "".join(f", {ctx.expr(v)}" for v in node.inputs)
    ctx.w.line(f"tl.device_print({node.attrs['prefix']!r}{values})")
    ctx.scopes[-1][node.id] = "None"


@emits(Op.FULL)
def emit_full(ctx: EmitContext, node: Node) -> None:
    dims = ctx.shape_expr(node.shape)
    lit = dtypes.literal(node.attrs["value"], node.dtype)
    ctx.bind(node, ctx.full_expr(dims, lit, node.dtype))


@emits(Op.CAST)
def emit_cast(ctx: EmitContext, node: Node) -> None:
    src = node.inputs[0]
    if (wide := ctx.wide_arg(src, node.dtype)) is not None:
        ctx.bind(node, wide)
        return
    ctx.bind(node, ctx.cast_expr(ctx.expr(src), src.dtype, node.dtype))


def _operands(
    ctx: EmitContext, node: Node, keep_half: bool, libdevice: bool = False
) -> tuple[list[str], torch.dtype]:
    """The operands' texts in the op's compute dtype (``keep_half``: fp16 stays fp16). An
    fp64 constant is an fp64 0-d tile where Triton's fp32 literal would lose digits, where no
    tile operand types it (``log(3.0)`` of xlogy(x, 3.0)), and for a ``libdevice`` call, which
    has (f64, f64) and (f32, f32) overloads only (``pow(x, 2.5)`` of an fp64 x failed to
    compile)."""
    operand_dtype = node.inputs[0].dtype
    keep = keep_half and operand_dtype == torch.float16
    compute = operand_dtype if keep else dtypes.compute_dtype(operand_dtype)
    texts = []
    typed = libdevice or all(i.op is Op.CONST for i in node.inputs)
    for inp in node.inputs:
        text = ctx.mask_expr(inp) if compute == torch.bool else ctx.expr(inp)
        if (wide := ctx.wide_arg(inp, compute)) is not None:
            text = wide
        elif inp.op is not Op.CONST and inp.dtype != compute:
            text = ctx.cast_expr(text, inp.dtype, compute)
        elif inp.op is Op.CONST and compute == torch.float64 and (typed or _inexact_in_fp32(inp)):
            text = f"tl.full([], {text}, tl.float64)"  # Triton's float literals are fp32
        texts.append(text)
    return texts, compute


@emits(Op.UNARY, Op.BINARY)
def emit_pointwise(ctx: EmitContext, node: Node) -> None:
    op = POINTWISE[node.attrs["fn"]]
    libdevice = bool(op.device_template) and not ctx.interpret
    texts, compute = _operands(ctx, node, op.reads_bits, libdevice)
    template = op.float_template if op.float_template and compute.is_floating_point else op.template
    if op.fp32_template and compute == torch.float32:
        template = op.fp32_template
    if op.nonneg_template and all(nonnegative(i) for i in node.inputs):
        template = op.nonneg_template
    if libdevice and compute.is_floating_point:
        template = op.device_template
    if op.name in ("lshift", "rshift"):
        template = _shift_template(op.name, node.inputs[1], compute, template)
    elif op.name == "add" and compute == torch.bool:
        template = "({0} | {1})"  # True + True is True in torch; i1 addition wraps to False
    text = template.format(*texts)
    if node.dtype != compute and node.dtype != torch.bool:
        text = ctx.cast_expr(text, compute, node.dtype)
    ctx.bind(node, text)


def _shift_template(name: str, amount: Node, compute: torch.dtype, plain: str) -> str:
    """torch's shifts by an amount out of ``[0, bits)``: ``a << b`` is 0 and ``a >> b`` the
    sign fill ``a >> (bits - 1)``; LLVM's are poison there (on an H100 ``x << 32`` of an
    int32 gave garbage). A constant amount in range keeps the plain shift."""
    bits = compute.itemsize * 8
    value = amount.attrs.get("value") if amount.op is Op.CONST else None
    if isinstance(value, int):
        if 0 <= value < bits:
            return plain
        return "({0} * 0)" if name == "lshift" else f"({{0}} >> {bits - 1})"
    bound = abs_bound(amount, {})
    if bound is not None and bound < bits and nonnegative(amount):
        return plain  # a nibble's shift (idx % 8) * 4: in range, no guard
    in_range = f"(({{1}} >= 0) & ({{1}} < {bits}))"
    if name == "lshift":
        return f"tl.where({in_range}, {plain}, {{0}} * 0)"
    return f"tl.where({in_range}, {plain}, {{0}} >> {bits - 1})"


@emits(Op.WHERE)
def emit_where(ctx: EmitContext, node: Node) -> None:
    c, a, b = (_where_operand(ctx, i, node.dtype) for i in node.inputs)
    ctx.bind(node, f"tl.where({c}, {a}, {b})")


def _where_operand(ctx: EmitContext, value: Node, dtype: torch.dtype) -> str:
    """A select's operand; a constant is a 0-d tile of the select's dtype where Triton would
    type its literal otherwise: int64 (``torch.where(c, 100000, 1)`` is int64 in torch, Triton's
    literals int32: a product past 2^31 wrapped), fp64 where fp32 loses digits, and bf16 or fp8
    in the interpreter, whose builder makes no such constants (``torch.where(row < 0, 0.5,
    row)`` of a bf16 row had no working config on the CPU)."""
    text = ctx.expr(value)
    if value.op is not Op.CONST:
        return text
    typed = dtype == torch.int64 or (dtype == torch.float64 and _inexact_in_fp32(value))
    if typed or (ctx.interpret and (dtype == torch.bfloat16 or dtype in dtypes.FP8)):
        return ctx.full_expr("", text, dtype)
    return text


def _inexact_in_fp32(node: Node) -> bool:
    """Whether a float constant loses digits as fp32 (``x_fp64 == 0.1`` compared fp32's 0.1)."""
    value = node.attrs.get("value")
    if not isinstance(value, float) or value != value or value in (float("inf"), -float("inf")):
        return False
    return float(torch.tensor(value, dtype=torch.float32)) != value

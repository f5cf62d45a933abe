"""Gather indices every lane of a tile shares (stage: codegen; in: a load's tensor-valued index
node and the emission context, whose dims know their blocks, masks and starts; out: one scalar
expression of the index, or None).

Group-wise quantized weights are indexed by a tile's index divided by the group size: a w4a16
GEMM's ``scales[(2 * tk.index) // 128, tn]`` with a K block of 64 names one scale row per K
step, yet as a gather it loads that row once per lane of ``tk``. Where the plan makes the
quotient the same in every lane of ``(a * index + b) // c`` (the tile starts at 0 and at
multiples of its block, none of its lanes is masked, and ``c`` and ``b`` are multiples of
``a * block``, so no lane's value crosses a multiple of ``c``), the load reads the one row at
``(a * offset + b) // c`` and broadcasts it (``memory.emit_load``). H200, a w4a16 GEMM
4096x4096x14336: 13.6 -> 10.5 ms, and 8.25 -> 6.85 with its activation loads paired
(benchmarks/results/s22_upsample_w4.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.ir.nodes import Node, Op, Sym

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


def _int_const(node: Node) -> int | None:
    value = node.attrs.get("value") if node.op is Op.CONST else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _affine(node: Node) -> tuple[Sym, int, int] | None:
    """``(sym, a, b)`` where ``node`` is ``a * sym.index + b`` in integers, else None."""
    if node.op is Op.TILE_INDEX and len(node.shape) == 1:
        return node.attrs["sym"], 1, 0
    if node.op is not Op.BINARY or node.attrs.get("fn") not in ("mul", "add"):
        return None
    left, right = node.inputs
    k, other = (
        (_int_const(left), right) if _int_const(left) is not None else (_int_const(right), left)
    )
    inner = _affine(other) if k is not None else None
    if k is None or inner is None:
        return None
    sym, a, b = inner
    return (sym, a * k, b * k) if node.attrs["fn"] == "mul" else (sym, a, b + k)


def uniform_quotient(ctx: EmitContext, node: Node) -> str | None:
    """A scalar expression equal to every lane of ``node`` under the current plan, where
    ``node`` is ``(a * tile.index + b) // c`` and the block keeps each tile inside one
    quotient (see the module docstring); else None."""
    if (
        node.op is not Op.BINARY
        or node.attrs.get("fn") not in ("floordiv", "floordiv_int")
        or node.dtype.is_floating_point
    ):
        return None
    numerator, denominator = node.inputs
    c = _int_const(denominator)
    affine = _affine(numerator)
    if c is None or c <= 0 or affine is None:
        return None
    sym, a, b = affine
    state = ctx.state(sym)
    if a <= 0 or b < 0 or state.mask is not None or state.begin != "0" or not state.offset:
        return None
    step = a * ctx.block_value(sym)
    if c % step or b % step:
        return None
    return ctx.index_cast(f"(({a} * {state.offset} + {b}) // {c})")


__all__ = ["uniform_quotient"]

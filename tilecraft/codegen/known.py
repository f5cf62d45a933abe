"""Values the plan makes constant (stage: codegen; in: a node and the emission context, whose
dims know their blocks and masks; out: the node bound to a constant or to the operand it selects,
or nothing).

Users who come from Triton write their own masks: ``valid = tn.index[None, :] < n``, then
``torch.where(valid, x, 0.0)`` and counts such as ``torch.sum(torch.where(valid, 1.0, 0.0), -1)``.
Where the plan's block divides the tile's static range, every lane's index is in range: the mask
is all true, the select is its operand and the count is the block. Folding them removes the
selects and a cross-warp reduction per chunk (Welford LayerNorm 4096x16384 at 16 warps on the
H200: 0.0835 -> 0.0812 ms, ``benchmarks/results/fastmax_s7.md``). Only values that are the same
in every lane are folded: comparisons of a tile's indices with a constant, selects, casts and
sums/max/min over an unmasked dim of such values; and in the part of a loop split at a diagonal
(``diagonal.py``) that lies wholly off it, comparisons of its indices with the enclosing tile's.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op, Sym
from tilecraft.ir.tile_order import difference_syms, index_sym

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext

Scalar = bool | int | float
_COMPARES = {"lt", "le", "gt", "ge"}
_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
_FOLDED_OPS = (Op.BINARY, Op.WHERE, Op.REDUCE, Op.CAST)


def fold_known(ctx: EmitContext, node: Node) -> bool:
    """Bind ``node`` if the plan makes it a constant (or a select of one operand); whether it
    did. Its inputs are then never emitted (unless something else uses them)."""
    if node.op not in _FOLDED_OPS:
        return False
    memo: dict[int, Scalar | None] = {}
    value = known_value(ctx, node, memo)
    if value is not None:
        dims = ctx.shape_expr(node.shape)
        ctx.bind(node, ctx.full_expr(dims, dtypes.literal(value, node.dtype), node.dtype))
        return True
    if node.op is Op.WHERE:
        cond = known_value(ctx, node.inputs[0], memo)
        if cond is not None:
            chosen = node.inputs[1] if cond else node.inputs[2]
            text = ctx.cast_expr(ctx.expr(chosen), chosen.dtype, node.dtype)
            if chosen.shape != node.shape:
                dims = ctx.shape_expr(node.shape)
                text = f"tl.broadcast_to({text}, [{dims}])"
            ctx.bind(node, text)
            return True
    return False


def known_value(ctx: EmitContext, node: Node, memo: dict[int, Scalar | None]) -> Scalar | None:
    """``node``'s value if it is one constant in every lane under the plan, else None."""
    if node.id not in memo:
        memo[node.id] = _derive(ctx, node, memo)
    return memo[node.id]


def _derive(ctx: EmitContext, node: Node, memo: dict[int, Scalar | None]) -> Scalar | None:
    op = node.op
    if op in (Op.CONST, Op.FULL):
        value = node.attrs.get("value")
        return value if isinstance(value, bool | int | float) else None
    if op is Op.CAST:
        value = known_value(ctx, node.inputs[0], memo)
        return None if value is None else _convert(value, node.dtype)
    if op is Op.WHERE:
        cond = known_value(ctx, node.inputs[0], memo)
        if cond is None:
            return None
        value = known_value(ctx, node.inputs[1] if cond else node.inputs[2], memo)
        return None if value is None else _convert(value, node.dtype)
    if op is Op.BINARY and node.attrs["fn"] in _COMPARES:
        return _compare(ctx, node, memo)
    if op is Op.REDUCE and node.attrs["kind"] in ("sum", "max", "min"):
        return _reduce(ctx, node, memo)
    return None


def _compare(ctx: EmitContext, node: Node, memo: dict[int, Scalar | None]) -> bool | None:
    """A tile's indices against a constant: known when all lanes agree (static range, every
    block full)."""
    fn, (a, b) = node.attrs["fn"], node.inputs
    order = _tile_order(ctx, a, b)
    if order is not None:  # a's indices all below b's (True) or all above (False)
        return order if fn in ("lt", "le") else not order
    span, bound = _span(ctx, a), known_value(ctx, b, memo)
    if span is None:
        fn, span, bound = _FLIPPED[fn], _span(ctx, b), known_value(ctx, a, memo)
    if span is None or bound is None or isinstance(bound, bool):
        return None
    lo, hi = span
    holds = {"lt": hi < bound, "le": hi <= bound, "gt": lo > bound, "ge": lo >= bound}
    fails = {"lt": lo >= bound, "le": lo > bound, "gt": hi <= bound, "ge": hi < bound}
    return True if holds[fn] else False if fails[fn] else None


def _span(ctx: EmitContext, node: Node) -> tuple[float, float] | None:
    """(least, greatest) value of a tile's index (every block full) or of a difference of two
    tiles' indices whose order is known here (integers: at least 1 apart)."""
    span = _index_span(ctx, node)
    pair = difference_syms(node) if span is None else None
    if pair is None:
        return span
    order = _order_of(ctx, *pair)
    return None if order is None else (-math.inf, -1) if order else (1, math.inf)


def _tile_order(ctx: EmitContext, a: Node, b: Node) -> bool | None:
    """Whether every index of tile ``a`` lies below every index of tile ``b`` (True), above
    (False), or either (None), in the part of a loop split at a diagonal being emitted."""
    sa, sb = index_sym(a), index_sym(b)
    return None if sa is None or sb is None else _order_of(ctx, sa, sb)


@contextlib.contextmanager
def known_order(ctx: EmitContext, lower: Sym, upper: Sym) -> Iterator[None]:
    """While code is emitted inside: every index of tile ``lower`` lies below every index of
    ``upper`` (a part of a loop split at a diagonal, a program wholly on one side of one)."""
    key = (id(lower), id(upper))
    added = key not in ctx.ordered
    ctx.ordered.add(key)
    try:
        yield
    finally:
        if added:
            ctx.ordered.discard(key)


def _order_of(ctx: EmitContext, a: Sym, b: Sym) -> bool | None:
    if (id(a), id(b)) in ctx.ordered:
        return True
    return False if (id(b), id(a)) in ctx.ordered else None


def _index_span(ctx: EmitContext, node: Node) -> tuple[float, float] | None:
    """(least, greatest) index of a tile's ``index`` (through views) when no lane is masked."""
    sym = index_sym(node)
    if sym is None:
        return None
    if not (isinstance(sym.begin, int) and isinstance(sym.extent, int)):
        return None
    if not sym.scalar and ctx.state(sym).mask is not None:
        return None
    return sym.begin, sym.extent - 1


def _reduce(ctx: EmitContext, node: Node, memo: dict[int, Scalar | None]) -> Scalar | None:
    src = node.inputs[0]
    value = known_value(ctx, src, memo)
    dim = src.shape[node.attrs["axis"]]
    if value is None:
        return None
    if isinstance(dim, Sym):
        if dim is ctx.looped or ctx.state(dim).mask is not None:
            return None
        count = ctx.block_value(dim)
    else:
        count = int(dim)
    if node.attrs["kind"] != "sum":
        return _convert(value, node.dtype)
    return _convert(value * count, node.dtype)


def _convert(value: Scalar, dtype: torch.dtype) -> Scalar:
    if dtype == torch.bool:
        return bool(value)
    return float(value) if dtype.is_floating_point else int(value)


__all__ = ["fold_known", "known_order", "known_value"]

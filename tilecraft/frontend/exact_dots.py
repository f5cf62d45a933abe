"""Frontend stage, part of tracing a dot: fp32 operands that are exact upcasts of narrower floats.

In: the two fp32 operand nodes of a ``tc.dot`` / ``@``. Out: the operands to give ``tl.dot``
(16-bit where that loses nothing), the dot node's attributes, and the factors to multiply the
product by afterwards.

Products of bf16 or fp16 values are exact in fp32 and ``tl.dot`` accumulates in fp32, so an
fp32 dot of upcast 16-bit tiles (``q.to(torch.float32)``, possibly transposed or expanded after
the cast) is an fp32 dot's result (to accumulation order) while the tensor cores do the work -
an fp32 "ieee" dot on the GPU runs on the FMA units, an order of magnitude slower. fp8 values
widen exactly to either 16-bit format, so an fp8 upcast joins the other operand's. Users scale
an operand as they upcast it (``q.float() * sm_scale``, ``k_fp8.float() * k_scale``, rows
divided by their norms): a factor that is the same along the dot's K dim (a scalar, a per-row
factor of the left operand, a per-column one of the right) is taken off the operand and applied
to the product (``(s a) @ b == s (a @ b)``; the product is rounded once instead of the operand).
The two differ only where ``s`` is infinite or ``s a`` overflows fp32: an infinite factor of a
row holding a zero gives NaN on the operand, inf on the product. A scale made from the row
itself (``127 / amax``, ``1 / norm``) is infinite only for a row of zeros, where both give NaN;
a factor from elsewhere that is infinite beside nonzeros is not followed (fuzz round 55a).
When only one operand is an upcast bf16 (or fp8) tile, the node keeps the other in fp32 with
``split_fp32`` set: codegen splits it into three bf16 parts under "ieee" precision
(``codegen/dots.py``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.ir.dtypes import FP8
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer

NARROW = (torch.bfloat16, torch.float16)


@dataclasses.dataclass(frozen=True)
class Upcast:
    """An fp32 operand that is ``source`` (bf16, fp16 or fp8) cast up, then ``views`` (innermost
    first), times ``scale`` (divided by it where ``divide``) when a factor was peeled off;
    ``perms`` are the transposes that carry the factor to the operand's dims."""

    source: Node
    views: tuple[Node, ...]
    scale: Node | None = None
    perms: tuple[tuple[int, ...], ...] = ()
    divide: bool = False

    def factor(self, t: Tracer) -> Node:
        """The peeled factor placed on the operand's dims."""
        assert self.scale is not None
        node = self.scale
        for perm in self.perms:
            shape = tuple(node.shape[p] for p in perm)
            node = t.emit(Op.VIEW, [node], shape, node.dtype, perm=perm)
        return node

    def rebuilt(self, t: Tracer, dtype: torch.dtype) -> Node:
        """The operand in ``dtype`` (the source widened exactly where it is fp8), unscaled."""
        node = t.cast(self.source, dtype)
        for view in self.views:
            node = t.emit(Op.VIEW, [node], view.shape, dtype, **view.attrs)
        return node


@dataclasses.dataclass(frozen=True)
class ExactOperands:
    """What the dot is built from: its operands, the dot node's attributes, and the peeled
    factors ``(scale, divide)`` its product is multiplied (or divided) by."""

    a: Node
    b: Node
    attrs: dict[str, Any]
    factors: tuple[tuple[Node, bool], ...] = ()

    def rescaled(self, t: Tracer, product: Node) -> Node:
        """``product`` times the peeled factors, in order."""
        for scale, divide in self.factors:
            fn = "truediv" if divide else "mul"
            product = t.pointwise(fn, t.wrap(product), t.wrap(scale)).node
        return product


def exact_operands(t: Tracer, a: Node, b: Node) -> ExactOperands:
    """fp32 operands as their exact narrow sources: both (one 16-bit dtype; fp8 joins the other,
    two fp8 run in bf16); one bf16 or fp8 source: that operand in bf16 and ``split_fp32``
    naming the other (0: a, 1: b); otherwise the operands as given."""
    ua, ub = upcast_of(a, k_axis=-1), upcast_of(b, k_axis=-2)
    if ua is not None and ub is not None and (dtype := _common(ua, ub)) is not None:
        return _built(t, (ua, ub), (dtype, dtype), {})
    bf16 = torch.bfloat16
    if ub is not None and _widens_to(ub, bf16) and (ua is None or not _widens_to(ua, bf16)):
        return _built(t, (None, ub), (None, bf16), {"split_fp32": 0}, plain=(a, b))
    if ua is not None and _widens_to(ua, bf16):
        return _built(t, (ua, None), (bf16, None), {"split_fp32": 1}, plain=(a, b))
    return ExactOperands(a, b, {})


def _built(
    t: Tracer,
    upcasts: tuple[Upcast | None, Upcast | None],
    dtypes: tuple[torch.dtype | None, torch.dtype | None],
    attrs: dict[str, Any],
    plain: tuple[Node, Node] | None = None,
) -> ExactOperands:
    operands, factors = [], []
    for i, (up, dtype) in enumerate(zip(upcasts, dtypes, strict=True)):
        if up is None or dtype is None:
            assert plain is not None
            operands.append(plain[i])
            continue
        operands.append(up.rebuilt(t, dtype))
        if up.scale is not None:
            factors.append((up.factor(t), up.divide))
    return ExactOperands(operands[0], operands[1], attrs, tuple(factors))


def _widens_to(up: Upcast, dtype: torch.dtype) -> bool:
    return up.source.dtype == dtype or up.source.dtype in FP8


def _common(ua: Upcast, ub: Upcast) -> torch.dtype | None:
    """The 16-bit dtype both sources widen to exactly (fp8 to either; bf16 for two fp8)."""
    da, db = ua.source.dtype, ub.source.dtype
    if da in FP8 and db in FP8:
        return torch.bfloat16
    if da in FP8 or db in FP8:
        return db if da in FP8 else da
    return da if da == db else None


def upcast_of(node: Node, k_axis: int) -> Upcast | None:
    """``node`` (an fp32 dot operand whose K dim is ``k_axis``) as an upcast narrow tile, with
    at most one factor that is constant along K peeled off (``x.float() * s``, ``s * x.float()``,
    ``x.float() / s``), or None."""
    base, outer = _strip_views(node)
    if (plain := _cast_source(base)) is not None:
        return Upcast(plain, outer)
    if base.op is not Op.BINARY or base.attrs.get("fn") not in ("mul", "truediv"):
        return None
    divide = base.attrs["fn"] == "truediv"
    orders = [(0, 1)] if divide else [(0, 1), (1, 0)]
    for xi, si in orders:
        if base.inputs[xi].shape != base.shape:  # the factor broadcasts it: no longer the operand
            continue
        inner, views = _strip_views(base.inputs[xi])
        source = _cast_source(inner)
        if source is None:
            continue
        factor = _factor(base.inputs[si], outer, node, k_axis)
        if factor is not None:
            return Upcast(source, views + outer, *factor, divide)
    return None


def _strip_views(node: Node) -> tuple[Node, tuple[Node, ...]]:
    """``node`` under its views, and those views innermost first."""
    views: list[Node] = []
    while node.op is Op.VIEW and len(node.inputs) == 1 and "split" not in node.attrs:
        views.append(node)
        node = node.inputs[0]
    return node, tuple(reversed(views))


def _cast_source(node: Node) -> Node | None:
    """The narrow float tile ``node`` casts to fp32, or None."""
    if node.op is Op.CAST and node.dtype == torch.float32:
        source = node.inputs[0]
        if source.dtype in NARROW or source.dtype in FP8:
            return source
    return None


def _factor(
    scale: Node, views: tuple[Node, ...], operand: Node, k_axis: int
) -> tuple[Node, tuple[tuple[int, ...], ...]] | None:
    """``scale`` as a factor of the dot's product and the transposes that place it, or None
    where it varies along K: a scalar-like factor (through any views), or one through
    transposes only whose dims are 1 or the operand's own, 1 along K."""
    if all(d == 1 for d in scale.shape):
        return (scale, ()) if scale.ndim <= operand.ndim else None
    perms, shape = [], scale.shape
    for view in views:
        perm = view.attrs.get("perm")
        if perm is None or len(view.attrs) != 1:
            return None
        perms.append(tuple(perm))
        shape = tuple(shape[p] for p in perm)
    if len(shape) != operand.ndim or shape[k_axis] != 1:
        return None
    same = all(d == 1 or d is o or d == o for d, o in zip(shape, operand.shape, strict=True))
    return (scale, tuple(perms)) if same else None

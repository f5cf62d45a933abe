"""Deferred sums of an inner loop (stage: codegen; in: a ``LOOP`` node, the plan; out: the
carried sums whose reduction moves after the loop, and their emission).

``acc = acc + x.sum(0)`` in a loop over ``x``'s rows reduces every iteration's tile across the
rows: with the rows spread over warps that is a shared-memory round trip and a barrier per
iteration (a tall column sum ran 0.0641 ms at 8 warps against 0.0542 at 4 with the same tiles on
the H200: the wider the cross-warp reduction, the slower). Deferring it keeps a tile-shaped
accumulator: each iteration adds its (masked) tile element-wise in registers, and one reduction
after the loop folds the rows, ``acc = acc + rows.sum(0)``, as Inductor's looped reductions do.
A running max or min (``top = torch.maximum(top, x.amax(0))``) keeps a tile of its neutral
element and takes the element-wise max (NaN propagating, as torch) instead.

A config knob, ``deferred_sums`` (on where offered, ``config/flags.py``; the search flips it),
for the sums ``ir/deferred_sums.py`` finds legal, where the tile accumulator is small
(``MAX_ELEMS_PER_THREAD`` fp32 values a thread): it lives in registers through the loop. The
result differs from the per-step reduction only in the order of the additions (a max or min:
not at all).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tilecraft.codegen.reduce import combine_expr, reduce_expr
from tilecraft.ir import dtypes
from tilecraft.ir.deferred_sums import MAX_ELEMS_PER_THREAD, DeferredSum, deferred_plan
from tilecraft.ir.nodes import Node

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


@dataclasses.dataclass(frozen=True)
class OpenSum:
    """A deferred sum in the loop being emitted: its plan and its accumulator's variable."""

    plan: DeferredSum
    rows: str

    @property
    def carry(self) -> Node:
        return self.plan.carry

    @property
    def skipped(self) -> tuple[Node, ...]:
        """The IR nodes the loop no longer emits: the chain and the carry's update."""
        return (*self.plan.chain, self.plan.carry.attrs["next"])


def deferred_sums(ctx: EmitContext, loop: Node) -> list[DeferredSum]:
    """The carried sums of ``loop`` that the loop defers (``ir/deferred_sums.deferred_plan``,
    within ``MAX_ELEMS_PER_THREAD`` a thread): where the config asks (``deferred_sums=True``),
    the IR allows (``ir/deferred_sums.py``) and the value is not kept in memory."""
    if not ctx.plan.config.deferred_sums or ctx.looped is not None:
        return []  # (a rolled reduction dim: the body is emitted in phases, codegen/schedule.py)
    threads = (ctx.plan.config.num_warps or 4) * ctx.plan.target.warp_size
    plan = deferred_plan(loop, ctx.numel, MAX_ELEMS_PER_THREAD * threads)
    return [d for d in plan if not ctx.homes.homed(d.carry)]


def open_rows(ctx: EmitContext, plan: list[DeferredSum]) -> list[OpenSum]:
    """Before the loop: a zero accumulator per deferred sum (its loop's dim state must exist)."""
    out = []
    for d in plan:
        rows = ctx.w.fresh(f"{d.carry.hint}_rows")
        shape = ", ".join(ctx.dim_expr(dim) for dim in d.kept)
        dtype = dtypes.triton_dtype(d.root.dtype)
        if d.kind == "sum":
            ctx.w.line(f"{rows} = tl.zeros([{shape}], {dtype})")
        else:  # a running max or min starts at its neutral element
            neutral = dtypes.neutral(d.kind, d.root.dtype)
            ctx.w.line(f"{rows} = {ctx.full_expr(shape, neutral, d.root.dtype)}")
        out.append(OpenSum(d, rows))
    return out


def add_rows(ctx: EmitContext, deferred: list[OpenSum]) -> None:
    """At the end of an iteration: each root tile, padded lanes of every summed dim as zeros,
    summed over the dims summed each step, added to its accumulator."""
    for o in deferred:
        d = o.plan
        text, neutral = ctx.expr(d.root), dtypes.neutral(d.kind, d.root.dtype)
        for axis in d.axes:
            mask = ctx.mask_at(d.root.shape[axis], axis, d.root.ndim)
            text = text if mask is None else f"tl.where({mask}, {text}, {neutral})"
        for axis in sorted(d.step_axes, reverse=True):
            text = reduce_expr(d.kind, text, axis, False, d.root.dtype, [], ctx.interpret)
        ctx.w.line(f"{o.rows} = {combine_expr(d.kind, o.rows, text, d.root.dtype)}")


def close_rows(ctx: EmitContext, deferred: list[OpenSum]) -> None:
    """After the loop: each carried value plus its accumulator's remaining sums."""
    for o in deferred:
        d, name, total = o.plan, ctx.lookup(o.carry), o.rows
        assert name is not None, "a deferred carry is bound before its loop"
        for axis in d.after_axes:
            total = reduce_expr(d.kind, total, axis, False, d.root.dtype, [], ctx.interpret)
        ctx.w.line(f"{name} = {combine_expr(d.kind, name, total, d.root.dtype)}")

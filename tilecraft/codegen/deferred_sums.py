"""Deferred sums of an inner loop (stage: codegen; in: a ``LOOP`` node, the plan; out: the
carried sums whose reduction moves after the loop, and their emission).

``acc = acc + x.sum(0)`` in a loop over ``x``'s rows reduces every iteration's tile across the
rows: with the rows spread over warps that is a shared-memory round trip and a barrier per
iteration (a tall column sum ran 0.0641 ms at 8 warps against 0.0542 at 4 with the same tiles on
the H200: the wider the cross-warp reduction, the slower). Deferring it keeps a tile-shaped
accumulator: each iteration adds its (masked) tile element-wise in registers, and one reduction
after the loop folds the rows, ``acc = acc + rows.sum(0)``, as Inductor's looped reductions do.

A config knob, ``deferred_sums`` (off by default: not yet timed on a GPU; the search tries it),
for the sums ``ir/deferred_sums.py`` finds legal, where the tile accumulator is small
(``MAX_ELEMS_PER_THREAD`` fp32 values a thread): it lives in registers through the loop. The
result differs from the per-step reduction only in the order of the additions.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from tilecraft.codegen.reduce import masked_for_reduce
from tilecraft.ir import dtypes
from tilecraft.ir.deferred_sums import MAX_ELEMS_PER_THREAD, deferrable_sums, summed
from tilecraft.ir.nodes import Node

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


@dataclasses.dataclass(frozen=True)
class DeferredSum:
    carry: Node  # the loop-carried value, unchanged inside the loop
    reduce: Node  # the per-iteration sum the loop no longer emits
    update: Node  # ``carry + reduce``: replaced by one addition after the loop
    rows: str  # the tile-shaped accumulator's variable


def deferred_sums(ctx: EmitContext, loop: Node) -> list[Node]:
    """The carried values of ``loop`` whose sums the loop defers: where the config asks
    (``deferred_sums=True``), the IR allows (``ir/deferred_sums.py``), the value is not kept in
    memory, and its tile fits ``MAX_ELEMS_PER_THREAD`` a thread."""
    if not ctx.plan.config.deferred_sums or ctx.looped is not None:
        return []  # (a rolled reduction dim: the body is emitted in phases, codegen/schedule.py)
    threads = (ctx.plan.config.num_warps or 4) * ctx.plan.target.warp_size
    out = []
    for carry in deferrable_sums(loop):
        src = summed(carry).inputs[0]
        numel = math.prod(d if isinstance(d, int) else ctx.block_value(d) for d in src.shape)
        if not ctx.homes.homed(carry) and numel <= MAX_ELEMS_PER_THREAD * threads:
            out.append(carry)
    return out


def open_rows(ctx: EmitContext, carries: list[Node]) -> list[DeferredSum]:
    """Before the loop: a zero tile per deferred sum (its loop's dim state must exist)."""
    out = []
    for carry in carries:
        reduce = summed(carry)
        src = reduce.inputs[0]
        rows = ctx.w.fresh(f"{carry.hint}_rows")
        shape = ", ".join(ctx.dim_expr(d) for d in src.shape)
        ctx.w.line(f"{rows} = tl.zeros([{shape}], {dtypes.triton_dtype(src.dtype)})")
        out.append(DeferredSum(carry, reduce, carry.attrs["next"], rows))
    return out


def add_rows(ctx: EmitContext, deferred: list[DeferredSum]) -> None:
    """At the end of an iteration: each tile added to its accumulator, padded rows as zeros."""
    for d in deferred:
        axis = d.reduce.attrs["axis"]
        ctx.w.line(
            f"{d.rows} = {d.rows} + {masked_for_reduce(ctx, d.reduce.inputs[0], axis, 'sum')}"
        )


def close_rows(ctx: EmitContext, deferred: list[DeferredSum]) -> None:
    """After the loop: each carried value plus its accumulator's one reduction."""
    for d in deferred:
        name = ctx.lookup(d.carry)
        ctx.w.line(f"{name} = {name} + tl.sum({d.rows}, {d.reduce.attrs['axis']})")

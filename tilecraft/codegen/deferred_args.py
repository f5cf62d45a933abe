"""Deferred running arg-bests of an inner loop (stage: codegen; in: a ``LOOP`` node, the pairs
``ir/deferred_args.py`` finds; out: per-lane bests through the loop, one (value, index)
reduction after it).

``v, i = torch.min(x, dim=1); better = v < best; ...`` reduces each step's tile across its
lanes with a (value, index) combine: shuffles and, for rows spread over warps, a shared-memory
round trip and a barrier a step. Deferred, each lane of the tile keeps the best value it has
seen and that value's index (one compare and two selects an element), and one reduction after
the loop gives each row its least value at its first index, to which the user's update is
applied once. A step whose row holds a NaN is skipped by the user's code (its min is NaN, and
``NaN < best`` is false): a lane that meets a NaN keeps it, and where any lane holds one after
the loop, the tile runs the loop again as written (:func:`rerun_on_nan`), so the result is the
user's in every case and the common one pays a compare an element.

A config knob, ``deferred_args`` (``config/flags.py``; offered where ``ir/deferred_args.py``
finds a pair, on by default, flipped by the search), where the two lane tiles fit
``LANE_VALUES_PER_THREAD`` values a thread and the loop takes at least two steps. The lanes'
positions are int64 where the loop's may be (int64 offsets, bounds read from int64 tensors).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from tilecraft.codegen.reduce import along_axis, best_and_index
from tilecraft.config.plan import loop_steps
from tilecraft.ir import dtypes
from tilecraft.ir.deferred_args import DeferredArg, deferred_args_plan, lane_budget
from tilecraft.ir.nodes import Node, Sym

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext

_KEEP = {"min": "<", "max": ">"}
_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class OpenArg:
    """A deferred arg-best in the loop being emitted: its plan and its lane tiles' names."""

    plan: DeferredArg
    values: str
    indices: str
    index_dtype: torch.dtype  # the lanes' positions: int64 where the loop's may pass int32

    @property
    def carries(self) -> tuple[Node, Node]:
        return (self.plan.best, self.plan.arg)

    @property
    def skipped(self) -> tuple[Node, ...]:
        return self.plan.skipped


def deferred_args(ctx: EmitContext, loop: Node) -> list[DeferredArg]:
    """The arg-bests of ``loop`` that run deferred: where the config asks (``deferred_args``),
    the loop is not emitted in phases, and their lane tiles fit (``ir/deferred_args.py``)."""
    if not ctx.plan.config.deferred_args or ctx.looped is not None or ctx.split is not None:
        return []
    if any(ctx.homes.homed(c) for c in loop.attrs.get("carried", [])):
        return []  # the NaN fallback restarts the carries in registers
    threads = (ctx.plan.config.num_warps or 4) * ctx.plan.target.warp_size
    return deferred_args_plan(loop, ctx.numel, lane_budget(threads), loop_steps(loop, ctx.numel))


def open_lanes(ctx: EmitContext, plan: list[DeferredArg]) -> list[OpenArg]:
    """Before the loop: each pair's lane tiles, the values at the reduction's neutral element
    (a lane never taken loses every comparison) and the indices at 0."""
    out = []
    for d in plan:
        shape = ", ".join(ctx.dim_expr(dim) for dim in d.root.shape)
        values = ctx.w.fresh(f"{d.best.hint}_lanes")
        indices = ctx.w.fresh(f"{d.arg.hint}_lanes")
        neutral = dtypes.neutral(d.kind, d.root.dtype)
        ctx.w.line(f"{values} = {ctx.full_expr(shape, neutral, d.root.dtype)}")
        index_dtype = _position_dtype(ctx, d.sym)
        ctx.w.line(f"{indices} = tl.zeros([{shape}], {dtypes.triton_dtype(index_dtype)})")
        out.append(OpenArg(d, values, indices, index_dtype))
    return out


def _position_dtype(ctx: EmitContext, sym: Sym) -> torch.dtype:
    """int64 where the loop's positions may be: int64 offsets, or a bound read from an int64
    tensor (a segment's ``tc.tile(offsets[b], offsets[b + 1])``: its positions are int64, and
    int32 lanes would change type in the loop)."""
    bounds = (sym.begin, sym.extent)
    wide = ctx.int64 or any(
        isinstance(b, Node) and b.dtype == torch.int64 or isinstance(b, int) and b > _INT32_MAX
        for b in bounds
    )
    return torch.int64 if wide else torch.int32


def keep_lanes(ctx: EmitContext, deferred: list[OpenArg]) -> None:
    """At the end of an iteration: each lane takes its element where strictly better, or a
    NaN, which then stays (nothing compares better than it): a NaN lane after the loop sends
    the tile to :func:`rerun_on_nan`. Padded lanes of the loop's dim never take."""
    for o in deferred:
        d = o.plan
        rank, sym = d.root.ndim, d.sym
        text = ctx.expr(d.root)
        mask = ctx.mask_at(sym, d.axis, rank)
        if mask is not None:
            neutral = dtypes.neutral(d.kind, d.root.dtype)
            text = f"tl.where({mask}, {text}, {neutral})"
        x = ctx.w.fresh(f"{d.best.hint}_step")
        ctx.w.line(f"{x} = {text}")
        take = ctx.w.fresh(f"{d.best.hint}_take")
        ctx.w.line(f"{take} = ({x} {_KEEP[d.kind]} {o.values}) | ({x} != {x})")
        index = along_axis(ctx.state(sym).index, d.axis, rank)
        index = f"({index}).to({dtypes.triton_dtype(o.index_dtype)})"
        ctx.w.line(f"{o.indices} = tl.where({take}, {index}, {o.indices})")
        ctx.w.line(f"{o.values} = tl.where({take}, {x}, {o.values})")


def close_lanes(ctx: EmitContext, deferred: list[OpenArg]) -> None:
    """After the loop: each row's least (greatest) lane value at its first index, then the
    user's update applied once to it."""
    for o in deferred:
        d = o.plan
        best, arg = ctx.lookup(d.best), ctx.lookup(d.arg)
        assert best is not None and arg is not None, "a deferred pair is bound before its loop"
        pair = ctx.w.fresh(f"{d.best.hint}_pair")
        kind = f"arg{d.kind}"
        ctx.w.line(
            f"{pair} = {best_and_index(kind, o.values, o.indices, d.axis, False, ctx.interpret)}"
        )
        better = ctx.w.fresh(f"{d.best.hint}_better")
        ctx.w.line(f"{better} = {pair}[0] {_KEEP[d.kind]} {best}")
        index = ctx.cast_expr(f"{pair}[1]", o.index_dtype, d.arg.dtype)
        ctx.w.line(f"{arg} = tl.where({better}, {index}, {arg})")
        ctx.w.line(f"{best} = tl.where({better}, {pair}[0], {best})")


def rerun_on_nan(ctx: EmitContext, deferred: list[OpenArg], rerun: Callable[[], None]) -> None:
    """After :func:`close_lanes`: where some lane holds a NaN, the user's loop runs again from
    its carries' initial values, each step reduced as written (``rerun``: emits it), so a step
    whose row holds a NaN is skipped exactly as the user's code skips it. The loop stores
    nothing (``ir/deferred_args.py``), so running it twice changes nothing else."""
    if not deferred:
        return
    seen = " | ".join(f"(tl.max(({o.values} != {o.values}).to(tl.int32)) > 0)" for o in deferred)
    ctx.w.line(f"if {seen}:")
    with ctx.w.indented():
        rerun()

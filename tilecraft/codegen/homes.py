"""Loop-carried accumulators kept in their output rows (stage: codegen; in: the plan's
``carried_homes`` and the emit context; out: the Triton code that fills, updates and reads them).

When a reduction dim is looped (``reduction_loops``) and a nested loop carries ``[n]``
accumulators on it (``ir/carried_homes.py`` proved where each may live), codegen renders:

* before the nested loop, one chunk loop that stores each accumulator's initial value into its
  home row, then a barrier;
* in the loop body, the accumulator is a load of its home row's chunk wherever the body's chunk
  loops need it, and its next value is one more store (a sink of the chunk loop of its phase), so
  the row is read, updated and written chunk by chunk with the values that chunk loop loads anyway;
* after each iteration a barrier (the next iteration may read a chunk through other threads than
  the ones that wrote it), and after the loop nothing: the final store is the home itself.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import torch

from tilecraft.codegen.gather_memory import gathers_through_memory
from tilecraft.codegen.memory import access
from tilecraft.codegen.registry import emits
from tilecraft.codegen.schedule import emit_chunk_loop
from tilecraft.config.plan import Plan
from tilecraft.ir.chunk_outer import chunk_outer_refusal, static_span, statistics
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext

BARRIER = "tl.debug_barrier()"


@dataclasses.dataclass(frozen=True)
class ScratchRows:
    """A scratch buffer of homes, ``[tiles of each grid dim..., n]``: what a load or store reads
    of a host tensor (its kernel parameter name, dtype, sizes and strides)."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dynamic: bool = False

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class Homes:
    """The plan's homes, found in the device loop being emitted (by slot: the loop codegen
    renders is traced for the config, so its node ids differ from the spec's)."""

    def __init__(self, plan: Plan, loop: DeviceLoop):
        nodes = loop.walk()
        stores = {n.attrs.get("mem_slot"): n for n in nodes if n.op is Op.STORE}
        self.final: dict[int, Node] = {}  # CARRY id -> the store after its loop (its home)
        self.loops: set[int] = set()
        self.scratch: list[ScratchRows] = []  # buffers the launcher allocates
        dropped: list[Node] = []
        for owner in (n for n in nodes if n.op is Op.LOOP):
            for carry in owner.attrs.get("carried", []):
                home = next((h for h in plan.carried_homes if h.matches(owner, carry)), None)
                if home is None or not (home.scratch or home.store_slot in stores):
                    continue
                if home.scratch:
                    self.final[carry.id] = self._scratch_store(plan, loop, carry)
                else:
                    self.final[carry.id] = stores[home.store_slot]
                    dropped.append(stores[home.store_slot])
                self.loops.add(owner.id)
        self.stores = {n.id for n in dropped}
        # gathers along long lines of computed tiles: a row per program and source tile, which
        # every gather of that tile reads (gather_memory.py)
        self.gathers: dict[int, ScratchRows] = {}
        by_source: dict[int, ScratchRows] = {}
        for node, width in gathers_through_memory(loop, plan):
            src = node.inputs[0]
            if src.id not in by_source:
                by_source[src.id] = self._new_rows("_tc_gather_", node.dtype, plan, loop, width)
            self.gathers[node.id] = by_source[src.id]
        # row loops run as a statistics pass and a chunks-outer pass (codegen/chunk_outer.py):
        # LOOP id -> (each reduction over the width, the scratch row its per-row values go to)
        self.chunk_outer: dict[int, list[tuple[Node, ScratchRows]]] = {}
        if plan.config.chunk_outer and plan.split(loop.grid_slot) <= 1:
            self._plan_chunk_outer(plan, loop, [n for n in nodes if n.id in self.loops])

    def _plan_chunk_outer(self, plan: Plan, loop: DeviceLoop, owners: list[Node]) -> None:
        width = next((s for s in loop.syms if plan.looped(s)), None)
        for owner in owners:
            if width is None or chunk_outer_refusal(loop, owner, width):
                continue
            span = static_span(owner.attrs["sym"])
            assert span is not None  # (chunk_outer_refusal checked it)
            rows = span if isinstance(span, int) else plan.block(span)
            self.chunk_outer[owner.id] = [
                (stat, self._new_rows("_tc_stats_", stat.dtype, plan, loop, rows))
                for stat in statistics(owner, width)
            ]

    def _new_rows(
        self, prefix: str, dtype: torch.dtype, plan: Plan, loop: DeviceLoop, width: int
    ) -> ScratchRows:
        """A new scratch buffer the launcher allocates: a row of ``width`` per grid tile."""
        tiles = [-(-(int(g.extent) - int(g.begin)) // plan.block(g)) for g in loop.grid_syms]
        shape = (*tiles, width)
        stride = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
        rows = ScratchRows(f"{prefix}{len(self.scratch)}", dtype, shape, stride)
        self.scratch.append(rows)
        return rows

    def _scratch_store(self, plan: Plan, loop: DeviceLoop, carry: Node) -> Node:
        """A store of ``carry`` into its program's row of a new scratch buffer (indexed by the
        tile id of every grid dim, then the carry's dim)."""
        (sym,) = carry.shape
        assert isinstance(sym, Sym) and isinstance(sym.extent, int)
        grid = loop.grid_syms
        rows = self._new_rows("_tc_home_", carry.dtype, plan, loop, int(sym.extent))
        ids = [Node(Op.TILE_ID, [], (), torch.int32, {"sym": g}, hint="tile_id") for g in grid]
        index = [("value", i, i) for i in range(len(grid))] + [("rdim", sym, len(grid))]
        attrs = {"tensor": rows, "index": index}
        return Node(Op.STORE, [carry, *ids], carry.shape, carry.dtype, attrs, carry.loc)

    def homed(self, carry: Node) -> bool:
        return carry.id in self.final

    def store_of(self, carry: Node) -> Node:
        return self.final[carry.id]

    def without_final_stores(self, nodes: list[Node]) -> list[Node]:
        """A block without the stores after the loops (the homes already hold those values)."""
        return [n for n in nodes if n.id not in self.stores]

    def home_store(self, carry: Node, value: Node) -> Node:
        """A store of ``value`` (a ``[n]`` value: a chunk inside a chunk loop) into ``carry``'s
        home, at the index of its final store (pointer indexing: not one of the plan's accesses)."""
        final = self.store_of(carry)
        attrs = {k: v for k, v in final.attrs.items() if k != "mem_slot"}
        return Node(
            Op.STORE,
            [value, *final.inputs[1:]],
            final.shape,
            final.dtype,
            attrs,
            final.loc,
            hint=f"{carry.hint}_home",
        )


def emit_init(ctx: EmitContext, loop: Node) -> None:
    """Before a loop: each homed accumulator's initial value, chunk by chunk, into its row."""
    homes = ctx.homes
    carries = [c for c in loop.attrs.get("carried", []) if homes.homed(c)]
    if not carries:
        return
    assert ctx.looped is not None, "homes exist only for a looped reduction dim"
    ctx.w.line(f"# carried {', '.join(c.hint for c in carries)}: kept in rows in memory")
    emit_chunk_loop(ctx, [homes.home_store(c, c.inputs[0]) for c in carries], ctx.looped)
    ctx.w.line(BARRIER)


def body_with_updates(ctx: EmitContext, loop: Node) -> list[Node]:
    """The loop body plus, per homed accumulator, the store of its next value into its row."""
    homes = ctx.homes
    updates = [
        homes.home_store(c, c.attrs["next"])
        for c in loop.attrs.get("carry_updates", [])
        if homes.homed(c) and c.attrs.get("next") is not None and c.attrs["next"] is not c
    ]
    return [*(loop.body or []), *updates]


def end_of_iteration(ctx: EmitContext, loop: Node) -> None:
    """A barrier after each iteration of a loop with homes: the next iteration may read a chunk
    through other threads than the ones that wrote it."""
    if loop.id in ctx.homes.loops:
        ctx.w.line(BARRIER)


@emits(Op.CARRY)
def emit_carry(ctx: EmitContext, carry: Node) -> None:
    """A homed accumulator where a chunk loop needs it: the chunk of its row. (Other carried
    values are bound by their loop and never reach an emission.)"""
    if not ctx.homes.homed(carry):
        raise AssertionError(f"loop-carried {carry.hint} has no value in this scope")
    final = ctx.homes.store_of(carry)
    ptr, mask = access(ctx, final, final.inputs[1:])
    args = f"{ptr}, {mask}, other=0" if mask else ptr
    # the row is read again every row step: ask L2 to keep it over the streamed row tiles
    keep = ctx.plan.target.capabilities.eviction_policies
    policy = ", eviction_policy='evict_last'" if keep else ""
    ctx.bind(carry, f"tl.load({args}{policy})")

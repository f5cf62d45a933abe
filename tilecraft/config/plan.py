"""The Plan: every implementation decision for one (kernel, config, target), made once
(stage: config; in: a Config resolved by ``ConfigSpec.resolve``; out: what codegen, the launcher,
``tilecraft check`` and the autotuner read).

A :class:`Config` is what a user (or the tuner) asks for; a :class:`Plan` is what will be built.
Everything that used to be repaired or re-derived downstream is decided here: block sizes and
reduction chunks, warps and stages, the pid layout, per-access indexing with the reason when a
requested kind falls back to pointers, per-loop ``tl.range`` knobs, the launch options the target
declares, and the predicted resources. Codegen renders a Plan as given and never changes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from tilecraft.config.config import Config
from tilecraft.ir.carried_homes import CarriedHome
from tilecraft.ir.nodes import Node, Op, Sym, SymKind
from tilecraft.ir.paired_slices import SlicePair
from tilecraft.targets.target import Target


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def prev_pow2(n: int) -> int:
    """The largest power of two not above ``n`` (1 for ``n`` <= 1)."""
    return 1 if n <= 1 else 1 << (int(n).bit_length() - 1)


def extent_hint(sym: Sym) -> int:
    """An upper bound of a loop's trip extent: its int extent, or for a loop over another tile's
    ``[begin, end)`` that tile's extent; a run-time extent (``static_shapes=False``) counts as
    ``1 << 16`` (tile sizes stay those of a large call: :func:`traced_extent` is the call's)."""
    if isinstance(sym.extent, int):
        return sym.extent - (sym.begin if isinstance(sym.begin, int) else 0)
    bound = sym.extent
    if isinstance(bound, Node) and "sym" in bound.attrs:
        return extent_hint(bound.attrs["sym"])
    return 1 << 16


def loop_steps(loop: Node, numel: Callable[[tuple[Any, ...]], int]) -> int:
    """Steps a ``LOOP`` node takes in the traced call: its extent over its tile's size under a
    config (``numel`` of a tile of the loop's own dim)."""
    sym = loop.attrs["sym"]
    return -(-traced_extent(sym) // max(numel((sym,)), 1))


def traced_extent(sym: Sym) -> int:
    """A loop's trip extent in the traced call: :func:`extent_hint`, or for a run-time size its
    traced value. A dynamic compile serves one power-of-two bucket of each size
    (``runtime/signature.py``), so grid and split decisions sized for the traced call hold
    within a factor of two for every call it serves."""
    bound = sym.extent
    if isinstance(bound, Node) and "sym" in bound.attrs:
        return traced_extent(bound.attrs["sym"])
    end, begin = _traced_int(bound), _traced_int(sym.begin)
    if isinstance(bound, int) or end is None or begin is None:
        return extent_hint(sym)
    return max(end - begin, 1)


def _traced_int(value: object) -> int | None:
    """An int, or a run-time size argument's value in the traced call."""
    if isinstance(value, int):
        return value
    if isinstance(value, Node) and value.op is Op.ARG and isinstance(value.attrs.get("value"), int):
        return int(value.attrs["value"])
    return None


def sym_block(
    sym: Sym, block_sizes: tuple[int, ...], reduction_loops: tuple[int | None, ...]
) -> int:
    """The block a tile or reduction dim gets: its config block, its fixed block, or for a
    reduction dim the chunk of a looped reduction else the whole extent rounded to a power of 2."""
    if sym.kind is SymKind.RDIM:
        slot = sym.config_slot
        chunk = reduction_loops[slot] if slot is not None and slot < len(reduction_loops) else None
        return int(chunk) if chunk is not None else next_pow2(int(sym.extent))
    if sym.fixed_block is not None:
        return sym.fixed_block
    assert sym.config_slot is not None
    return int(block_sizes[sym.config_slot])


def block_dims(
    shape: tuple[Any, ...], block_sizes: tuple[int, ...], reduction_loops: tuple[int | None, ...]
) -> list[int]:
    """A tile value's dims under a config: each sym's :func:`sym_block`, a literal dim as is."""
    return [
        sym_block(d, block_sizes, reduction_loops) if isinstance(d, Sym) else int(d) for d in shape
    ]


@dataclasses.dataclass(frozen=True)
class AccessPlan:
    """How one load or store (``mem_slot`` order) is emitted."""

    slot: int
    op: str  # "load" or "store"
    indexing: str  # what codegen emits: pointer, block_ptr or tensor_descriptor
    requested: str  # what the config asked for
    fallback_reason: str = ""  # why ``indexing`` differs from ``requested`` ("" if it does not)
    eviction: str = ""  # loads: "", "first" or "last"
    # descriptors: how many leading scalar-indexed dims merge into the next one (a 2-D
    # descriptor over [batch * seq, d] instead of [1, block, d] blocks reshaped in the kernel)
    merged_dims: int = 0


@dataclasses.dataclass(frozen=True)
class RangePlan:
    """The ``tl.range`` keywords of one loop slot (0 / None: leave it to Triton)."""

    unroll_factor: int = 0
    num_stages: int = 0
    multi_buffer: bool | None = None
    flatten: bool | None = None
    warp_specialize: bool | None = None

    @classmethod
    def of(cls, config: Config, slot: int) -> RangePlan:
        """The knobs ``config`` gives loop slot ``slot`` (neutral past the end of its lists)."""

        def at(field: str) -> Any:
            values = getattr(config, field)
            return values[slot] if 0 <= slot < len(values) else None

        return cls(
            unroll_factor=int(at("range_unroll_factors") or 0),
            num_stages=int(at("range_num_stages") or 0),
            multi_buffer=at("range_multi_buffers"),
            flatten=at("range_flattens"),
            warp_specialize=at("range_warp_specializes"),
        )

    def kwargs(self) -> str:
        """The keywords as source text, each preceded by ", " (empty when all are neutral)."""
        parts = []
        if self.unroll_factor:
            parts.append(f"loop_unroll_factor={self.unroll_factor}")
        if self.num_stages:
            parts.append(f"num_stages={self.num_stages}")
        if self.multi_buffer is not None:
            parts.append(f"disallow_acc_multi_buffer={not self.multi_buffer}")
        if self.flatten is not None:
            parts.append(f"flatten={self.flatten}")
        if self.warp_specialize is not None:
            parts.append(f"warp_specialize={self.warp_specialize}")
        return "".join(", " + p for p in parts)


@dataclasses.dataclass(frozen=True)
class Resources:
    """What the static model predicts for this plan (per program unless said otherwise)."""

    largest_tile: int  # elements of the largest tile value
    largest_tile_at: str  # the user's file:line of that value ("" if unknown)
    elems_per_thread: int  # largest tile / threads of a program
    accumulator_registers: int  # per thread, for tl.dot accumulators
    shared_bytes: int  # a lower estimate: pipelined tl.dot operand stages
    programs: tuple[int | None, ...]  # per device loop, for the traced shapes (None: dynamic)
    registers: int = 0  # predicted 32-bit registers per thread (peak of values live at once)
    register_limit: int = 255  # what a thread may use at this block size before ptxas spills
    registers_at: str = ""  # the user's file:line of the value defined at the peak
    loop_registers: tuple[int, ...] = ()  # each device loop's own predicted registers

    @property
    def spills(self) -> bool:
        """Whether the model predicts more live registers than a thread may have."""
        return self.registers > self.register_limit


@dataclasses.dataclass(frozen=True)
class Plan:
    config: Config  # the resolved (normalized) config: what caches and messages show
    target: Target
    block_sizes: tuple[int, ...]
    reduction_loops: tuple[int | None, ...]
    num_warps: int
    num_stages: int
    pid_type: str
    num_sm_multiplier: int
    l2_groupings: tuple[int, ...]  # per device loop
    loop_orders: tuple[tuple[int, ...], ...]  # per device loop
    accesses: tuple[AccessPlan, ...]  # per load/store, in mem_slot order
    ranges: tuple[RangePlan, ...]  # per tl.range slot
    launch_options: tuple[tuple[str, Any], ...]  # only options the target declares
    resources: Resources
    user: tuple[tuple[str, Any], ...] = ()  # user tunables
    dot_precision: str = "ieee"  # tl.dot input_precision for fp32 operands
    repairs: tuple[str, ...] = ()  # what resolving changed in the requested config, and why
    # per device loop: programs its splittable inner loop runs over (1: not split; ir/split.py)
    splits: tuple[int, ...] = ()
    split_atomics: bool = False  # partials added by fp32 atomics into one buffer (opt-in)
    # a split inner loop's partials combined by the last program of each tile to arrive, in the
    # same launch (target.arrival_counters), instead of by a second kernel
    split_one_launch: bool = False
    # loop-carried accumulators on a looped reduction dim, kept in their output rows in memory
    # (the row-does-not-fit schedule: see ir/carried_homes.py)
    carried_homes: tuple[CarriedHome, ...] = ()
    # stride-2 slice accesses emitted as one contiguous access per pair (ir/paired_slices.py)
    slice_pairs: tuple[SlicePair, ...] = ()

    def __post_init__(self) -> None:
        for b in self.block_sizes:
            if b < 1 or b & (b - 1):
                raise ValueError(f"Plan.block_sizes: {b} is not a power of two")
        if self.num_warps < 1 or self.num_warps & (self.num_warps - 1):
            raise ValueError(f"Plan.num_warps: {self.num_warps} is not a power of two")

    @property
    def persistent(self) -> bool:
        return self.pid_type.startswith("persistent")

    @property
    def options(self) -> Mapping[str, Any]:
        return dict(self.launch_options)

    @property
    def user_values(self) -> Mapping[str, Any]:
        return dict(self.user)

    def block(self, sym: Sym) -> int:
        return sym_block(sym, self.block_sizes, self.reduction_loops)

    def looped(self, sym: Sym) -> bool:
        """Whether ``sym`` is a reduction dim processed in chunks (a rolled reduction)."""
        slot = sym.config_slot
        return (
            sym.kind is SymKind.RDIM
            and slot is not None
            and slot < len(self.reduction_loops)
            and self.reduction_loops[slot] is not None
        )

    def split(self, loop_index: int) -> int:
        """How many programs device loop ``loop_index``'s inner loop is split over (1: none)."""
        return self.splits[loop_index] if 0 <= loop_index < len(self.splits) else 1

    def access(self, slot: int) -> AccessPlan:
        if 0 <= slot < len(self.accesses):
            return self.accesses[slot]
        return AccessPlan(slot, "load", "pointer", "pointer")

    def slice_pair(self, slot: int) -> SlicePair | None:
        """The pair that access ``slot`` belongs to (None: emitted on its own)."""
        return next((p for p in self.slice_pairs if slot in p.slots), None)

    def range(self, slot: int) -> RangePlan:
        return self.ranges[slot] if 0 <= slot < len(self.ranges) else RangePlan()

    def key(self) -> str:
        return f"{self.config.key()}@{self.target.key}"

    def describe(self) -> str:
        """A few lines for ``tilecraft check`` and error messages."""
        r = self.resources
        lines = [
            f"{self.config!r} on {self.target.key}",
            f"  launch: {self.options}",
            f"  largest tile {r.largest_tile} elements ({r.elems_per_thread}/thread"
            + (f", at {r.largest_tile_at}" if r.largest_tile_at else "")
            + f"), dot accumulators {r.accumulator_registers} regs/thread, "
            f"shared >= {r.shared_bytes} B, programs {list(r.programs)}",
            f"  predicted registers {r.registers}/thread (limit {r.register_limit}"
            + (f", peak at {r.registers_at}" if r.registers_at else "")
            + (": spills predicted)" if r.spills else ")"),
        ]
        lines += [
            f"  access {a.slot} ({a.op}): {a.indexing}"
            + (f" (asked {a.requested}: {a.fallback_reason})" if a.fallback_reason else "")
            + (f", evict_{a.eviction}" if a.eviction else "")
            for a in self.accesses
            if a.requested != "pointer" or a.indexing != "pointer" or a.eviction
        ]
        lines += [
            f"  split: device loop {i}'s inner loop over {s} programs per tile "
            + (
                "(partials added by atomics, then a second kernel)"
                if self.split_atomics
                else "(partials combined in order by a second kernel)"
            )
            for i, s in enumerate(self.splits)
            if s > 1
        ]
        lines += [f"  chunked width: {h.describe()}" for h in self.carried_homes]
        if self.carried_homes and self.config.chunk_outer:
            lines.append(
                "  chunks outer: row statistics first, then column chunks outer with the rows "
                "inner and those accumulators in registers (written to memory once per chunk)"
            )
        lines += [f"  paired slices: {p.describe()}" for p in self.slice_pairs]
        lines += [f"  repaired: {r}" for r in self.repairs]
        return "\n".join(lines)


__all__ = [
    "AccessPlan",
    "block_dims",
    "Plan",
    "RangePlan",
    "Resources",
    "extent_hint",
    "traced_extent",
    "next_pow2",
    "prev_pow2",
    "sym_block",
]

"""ConfigSpec: what a traced kernel can tune, with legal ranges and a heuristic default
(stage: config; in: the device loops' IR; out: Configs).

``default()`` gives the heuristic config, ``random(rng)`` a random normalized one, and
``normalize(config)`` repairs what it safely can (clamps oversize blocks, fills omitted fields) and
rejects the rest with a :class:`ConfigError` that names the field and the reason.
"""

from __future__ import annotations

import dataclasses
import math
import random as _random
import warnings
from typing import Any

from tilecraft import settings
from tilecraft.config import (
    eviction,
    flags,
    fma_tiles,
    occupancy,
    row_loops,
    shared_atomics,
    split,
    tile_budget,
)
from tilecraft.config.config import Config
from tilecraft.config.dims import MIN_SEGMENT_BYTES, BlockSpec, ReductionSpec, ValueShape, cdiv
from tilecraft.config.grid_order import (
    bulk_store,
    contiguous_index_sym,
    contiguous_item,
    largest_tensor_bytes,
    narrow_run,
)
from tilecraft.config.normalize import normalize_config
from tilecraft.config.pipelines import (
    hopper_default,
    operand_stage_bytes,
    pipelined_load_bytes,
    sort_scratch,
    store_staging_bytes,
)
from tilecraft.config.plan import Plan, traced_extent
from tilecraft.config.plan import extent_hint as _extent_hint
from tilecraft.config.resolve import build_plan, predicted_registers
from tilecraft.config.resources import RegisterEstimate
from tilecraft.config.row_loops import ROW_LOOP_TILE
from tilecraft.config.space import StrategySpace
from tilecraft.errors import ConfigError, UnsupportedOpError, user_stacklevel
from tilecraft.ir.carried_homes import carried_homes
from tilecraft.ir.chunk_outer import can_chunk_outer
from tilecraft.ir.deferred_args import has_deferrable_args
from tilecraft.ir.deferred_sums import has_deferrable_sums
from tilecraft.ir.dtypes import FP8
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, dot_roles, walk
from tilecraft.ir.phases import rdim_loopable
from tilecraft.ir.recurrence import exchanged_states
from tilecraft.ir.tile_order import has_diagonal_selects
from tilecraft.targets.target import Target

REGISTER_BUDGET = 8192  # elements per tile value that the default aims to stay under
RANDOM_ELEMS_PER_THREAD = 256


class ConfigSpec:
    def __init__(
        self,
        loops: list[DeviceLoop],
        n_block_slots: int,
        host_slots: dict[int, int],
        tunables: dict[str, tuple[Any, ...]],
        target: Target | None = None,
        dot_precision: str | None = None,
        host_floors: dict[int, int] | None = None,
    ):
        self.target: Target = target or Target("interpret")
        self.loops = loops
        self.dot_precision = dot_precision  # the kernel's dot_precision= (None: follow torch)
        self.space = StrategySpace(loops, target)
        self._warned: set[str] = set()
        self._plans: dict[str, Plan] = {}  # config key (as given and as resolved) -> plan
        self.normalizations = 0  # how many configs were normalized (each once)
        self._pipeline_default: tuple[str, Config] | None = None  # (plain default's key, it)
        self.blocks: list[BlockSpec] = []
        # per device loop: its tunable grid blocks, and the programs its fixed dims contribute
        self.grid_slots: list[list[int]] = []
        self.loop_slots: list[list[int]] = []  # per device loop: block slots of its inner loops
        self.fixed_programs: list[int] = []
        self.grid_extents: dict[int, int] = {}
        for loop in loops:
            fixed = [s for s in loop.grid_syms if s.config_slot is None]
            self.grid_slots.append(
                [s.config_slot for s in loop.grid_syms if s.config_slot is not None]
            )
            self.fixed_programs.append(
                math.prod(cdiv(traced_extent(s), s.fixed_block or 1) for s in fixed)
            )
            # a run-time grid extent's value in the traced call (static ones: self.blocks)
            for grid_sym in loop.grid_syms:
                slot = grid_sym.config_slot
                if slot is not None and not isinstance(grid_sym.extent, int):
                    self.grid_extents.setdefault(slot, traced_extent(grid_sym))
        self.split_sites = split.sites(loops)  # per device loop: (SplitSite | None, why not)
        # some inner loop adds a sum over its own tile to a carried value (the deferred_sums knob)
        self.deferrable_sums = any(has_deferrable_sums(loop.body) for loop in loops)
        self.deferrable_args = any(has_deferrable_args(loop.body) for loop in loops)
        # some select compares a loop's indices with another tile's (the diagonal_splits knob)
        self.diagonal_selects = any(has_diagonal_selects(loop.body) for loop in loops)
        self.reductions: list[ReductionSpec] = []
        self.values: list[ValueShape] = []
        self.loop_values: list[list[ValueShape]] = []  # per device loop: its values of self.values
        # reduction slots some 2-D+ load reads along its unit stride (a ':' row: lanes run on it)
        self.contiguous_reductions: set[int] = set()
        self.tunables = tunables
        self.has_dot = False
        self.dot_operands: list[tuple[ValueShape, int]] = []  # (tile, bytes per element)
        self.dot_outputs: list[ValueShape] = []  # fp32 accumulators: registers for their lifetime
        # loop-carried tiles a step gathers across lanes (a recurrence's state, e.g. CTC's alpha)
        self.exchanged_states: list[ValueShape] = []
        slots: dict[int, BlockSpec] = {}
        for slot, extent in host_slots.items():
            slots[slot] = BlockSpec(slot, extent, "host", least=(host_floors or {}).get(slot, 1))
        for loop in loops:
            self._collect(loop, slots)
        missing = [s for s in range(n_block_slots) if s not in slots]
        for s in missing:  # registered but never used by a device loop
            slots[s] = BlockSpec(s, 1, "host")
        self.blocks = [slots[s] for s in sorted(slots)]

    def _collect(self, loop: DeviceLoop, slots: dict[int, BlockSpec]) -> None:
        self.loop_slots.append(
            [
                s.config_slot
                for s in loop.syms
                if s.kind is SymKind.BLOCK and s.config_slot is not None and s not in loop.grid_syms
            ]
        )
        whole_dims = any(s.kind is SymKind.RDIM for s in loop.syms)
        for sym in loop.syms:
            if sym.kind is SymKind.BLOCK and sym.config_slot is not None:
                extent = _extent_hint(sym)
                role = "grid" if sym in loop.grid_syms else "loop"
                spec = slots.get(sym.config_slot)
                if spec is None or spec.role == "host" and spec.extent <= 1:
                    slots[sym.config_slot] = BlockSpec(
                        sym.config_slot,
                        max(extent, 1),
                        role,
                        grid_rank=len(loop.grid_syms),
                        innermost=len(loop.grid_syms) > 1 and sym is loop.grid_syms[-1],
                        whole_dims=whole_dims,
                    )
                elif extent:
                    spec.extent = max(spec.extent, extent) if spec.role != "host" else spec.extent
            if sym.kind is SymKind.RDIM:
                ok, why = rdim_loopable(loop, sym)
                homes, no_home = carried_homes(loop, sym) if ok else ((), "")
                outer = can_chunk_outer(loop, sym, {h.loop_slot for h in homes})
                self.reductions.append(
                    ReductionSpec(
                        sym.config_slot or 0, int(sym.extent), not no_home, no_home, homes, outer
                    )
                    if ok
                    else ReductionSpec(sym.config_slot or 0, int(sym.extent), False, why)
                )
        self.exchanged_states += [
            ValueShape(tuple(_dim_ref(d) for d in n.shape), n.loc) for n in exchanged_states(loop)
        ]
        largest = largest_tensor_bytes(walk(loop.body))
        values: list[ValueShape] = []
        for node in walk(loop.body):
            if node.op is Op.DOT:
                self.has_dot = True
                _check_fp8_dot(node, self.target)
                a, b = node.inputs[0], node.inputs[1]
                for operand in (a, b):
                    dims = tuple(_dim_ref(d) for d in operand.shape)
                    self.dot_operands.append((ValueShape(dims, node.loc), operand.dtype.itemsize))
                self.dot_outputs.append(
                    ValueShape(tuple(_dim_ref(d) for d in node.shape), node.loc)
                )
                for d, role in dot_roles(node):
                    if isinstance(d, Sym) and d.kind is SymKind.BLOCK and d.config_slot is not None:
                        slots[d.config_slot].dot_role = role
                        if role == "k" and a.dtype.itemsize == 1:
                            slots[d.config_slot].dot_min = 32
            if node.op is Op.LOAD and (item := contiguous_item(node)) and item[0] == "rdim":
                self.contiguous_reductions.add(item[1].config_slot or 0)
            if node.op in (Op.LOAD, Op.STORE):
                # a bulk access only: a group norm's weight [groups, 16] beside its activations
                # sets no floor
                run = narrow_run(node, MIN_SEGMENT_BYTES) if bulk_store(node, largest) else None
                if run is not None and run[0].config_slot in slots:
                    block = slots[run[0].config_slot]
                    block.run_bytes = min(block.run_bytes or run[1], run[1])
                last = contiguous_index_sym(node, largest)
                if last is not None and last.config_slot in slots:
                    block = slots[last.config_slot]
                    block.contiguous = True
                    size = node.dtype.itemsize
                    if node.op is Op.LOAD:
                        block.load_itemsize = min(block.load_itemsize or size, size)
                    elif bulk_store(node, largest):
                        block.store_itemsize = min(block.store_itemsize or size, size)
            if node.shape and node.op not in (Op.LOOP,):
                values.append(ValueShape(tuple(_dim_ref(d) for d in node.shape), node.loc))
        self.values += values
        self.loop_values.append(values)
        self.reductions.sort(key=lambda r: r.slot)

    # -- sizes ----------------------------------------------------------------------------
    def numel(self, value: ValueShape, config: Config) -> int:
        n = 1
        for d in value.dims:
            if d[0] == "b":
                n *= config.block_sizes[d[1]]
            elif d[0] == "fixed":
                n *= d[1]
            elif d[0] == "r":
                red = self.reductions[d[1]]
                chunk = config.reduction_loops[d[1]] if d[1] < len(config.reduction_loops) else None
                n *= chunk or red.full
        return n

    def largest_value(self, config: Config) -> tuple[int, ValueShape | None]:
        best: tuple[int, ValueShape | None] = (0, None)
        for v in self.values:
            n = self.numel(v, config)
            if n > best[0]:
                best = (n, v)
        return best

    def programs(self, index: int, config: Config) -> int:
        """Programs of device loop ``index``'s grid for the traced shapes (a dynamic grid: for
        the traced call's sizes, ``plan.traced_extent``), before any split."""
        slots = self.grid_slots[index]
        tiles = math.prod(
            cdiv(self.grid_extents.get(s, self.blocks[s].extent), config.block_sizes[s])
            for s in slots
        )
        return self.fixed_programs[index] * tiles

    # -- configs --------------------------------------------------------------------------
    def default(self) -> Config:
        """The heuristic default: :meth:`plain_default`, or on sm_90+ for a dot kernel the best
        legal TMA pipeline of the same tiles (``config/pipelines.py``)."""
        plain = self.plain_default()
        cached = self._pipeline_default
        if cached is None or cached[0] != plain.key():
            cached = self._pipeline_default = (plain.key(), hopper_default(self, plain))
        return cached[1]

    def plain_default(self) -> Config:
        """Tiles, warps, stages and splits from the IR and the resource model, each load's L2
        eviction policy from what reads it again (``config/eviction.py``); otherwise neutral
        strategies (pointer indexing, flat pids)."""
        config = self._default(chunk_rows=False)
        if any(r.homes for r in self.reductions) and self.predicted(config).spills:
            # the whole row and the carried [n] accumulators do not fit even at the most warps:
            # chunk the row, keeping the accumulators in their output rows (ir/carried_homes.py)
            config = row_loops.resident_chunks(
                self, row_loops.streams_per_sm(self, self._default(chunk_rows=True))
            )
        # the grid order that walks memory's rows (config/grid_order.py), unless a rule above
        # chose one; computed once per spec by the strategy space
        orders = self.space.memory_orders
        reordered = any(order != sorted(order) for order in orders)
        if reordered and all(list(o) == sorted(o) for o in config.loop_orders):
            config = self.normalize(config.replace(loop_orders=orders), warn=False)
        policies = eviction.default_policies(self, config)
        if policies:
            config = self.normalize(config.replace(load_eviction_policies=policies), warn=False)
        return config

    def predicted(self, config: Config) -> RegisterEstimate:
        """The resource model's registers for ``config`` at its own warps."""
        return predicted_registers(self, config, config.num_warps or 4)

    def _default(self, chunk_rows: bool) -> Config:
        """The heuristic config; ``chunk_rows``: also loop the reduction dims whose loop-carried
        accumulators need homes in memory (otherwise they stay whole, in registers)."""
        reductions = self.one_looped(
            [row_loops.default_chunk(r, chunk_rows, self.target) for r in self.reductions]
        )
        blocks = [self._preferred_block(b) for b in self.blocks]
        blocks, reductions = row_loops.row_blocks(self, blocks, reductions)
        blocks = row_loops.short_row_blocks(self, blocks, reductions)
        blocks = tile_budget.fill_device(self, blocks)
        # the rules size tiles without deferred arg-bests' lanes (every rule was measured so;
        # lanes that fit the final tile are added after: ir/deferred_args.py)
        config = Config(
            block_sizes=blocks,
            reduction_loops=reductions,
            num_warps=4,
            num_stages=1,
            deferred_args=False,
        )
        # tl.dot accumulators live in MMA fragments across 8 warps: twice the budget fits; a row
        # loop's tile is sized by its own rule (config/row_loops.py)
        budget = REGISTER_BUDGET * (2 if self.has_dot else 1)
        config = tile_budget.shrink_to(
            self, config, max([budget, *row_loops.row_tiles(self, config)])
        )
        config = row_loops.amortize_whole_rows(self, config)
        config = shared_atomics.grow_shared_atomic_tiles(self, config)
        stages = 3 if self.has_dot else 1
        tunables = {name: choices[0] for name, choices in self.tunables.items()}
        config = config.replace(num_stages=stages, **tunables)
        config = occupancy.fit_occupancy(self, config, self._warps_for)
        config = tile_budget.spread_live_values(self, config)
        config = fma_tiles.own_more_outputs(self, config)
        config = row_loops.fit_registers(self, config, self._settle_warps)
        config = occupancy.keep_occupancy(self, config)
        # a grid under one wave of resident programs (by these warps and the registers they
        # need): split its inner loop (config/split.py)
        config = split.with_default_splits(self, config, REGISTER_BUDGET, self._settle_warps)
        config = tile_budget.fill_resident_slots(self, config)
        config = tile_budget.stream_walk_steps(self, config)
        config = occupancy.small_grid_warps(self, config)
        config = occupancy.recurrence_warps(self, config)
        # no rule may leave a dot's dim below tl.dot's least (a default must always compile)
        least = [max(b, blk.lo) for b, blk in zip(config.block_sizes, self.blocks, strict=True)]
        config = config.replace(block_sizes=least, deferred_args=None)
        return self.normalize(self._fit_shared_memory(config), warn=False)

    def _settle_warps(self, config: Config) -> Config:
        """``config`` with the default's warps for its (changed) tiles."""
        return tile_budget.spread_live_values(
            self, config.replace(num_warps=self._warps_for(config))
        )

    def _warps_for(self, config: Config) -> int:
        """The default's warps for ``config``'s tiles: by the largest tile's elements, or for a
        row loop's tile enough that each thread holds a few elements (config/row_loops.py)."""
        largest, value = self.largest_value(config)
        by_tile = 4 if largest <= 4096 else 8 if largest <= 16384 else 16
        warps = max(by_tile, row_loops.row_warps(self, config) or 1)
        return min(warps, self._kept_lane_warps(value, config) or warps)

    def _kept_lane_warps(self, value: ValueShape | None, config: Config) -> int | None:
        """Warps enough for one thread per kept element when ``value`` is reduced over whole
        dims (not looped in chunks) while its contiguous dim (the lanes) is kept: more threads
        would split the reduced dims across warps and combine them through shared memory. (A
        global average pool of a channels_last [256, 2048, 7, 7] bf16 tensor, [4, 32] channel
        tiles: 8 warps 0.0729 ms, 4 warps 0.0319; H200 graph replays,
        graph_replay_avgpool_s14b. A column softmax whose 4096 rows loop in 256-row chunks
        keeps its 8 warps: 4 took 0.0863 ms against 0.0541, default_change_s14.)"""
        if value is None:
            return None
        chunks = config.reduction_loops
        whole = [d[1] for d in value.dims if d[0] == "r"]
        if not whole or any(s < len(chunks) and chunks[s] is not None for s in whole):
            return None
        if self.contiguous_reductions & set(whole):
            return None  # the lanes run along the reduced row, not the kept dims
        kept = [d[1] for d in value.dims if d[0] == "b"]
        if not kept or tile_budget.lanes_slot(self, value) != kept[-1]:
            return None
        elements = math.prod(int(config.block_sizes[s]) for s in kept)
        return max(1, min(self.target.max_warps, elements // self.target.warp_size))

    def _preferred_block(self, b: BlockSpec) -> int:
        """Starting block sizes, measured on an H200 (benchmarks/results/suite_*.md): 128x128
        output tiles with k=64 for tl.dot (64 for a dot dim a loop walks, e.g. attention's keys),
        32x128 tiles for 2-D pointwise grids (contiguous dim last), 256-element steps for
        other inner loops; the register budget and the target's shared memory shrink them."""
        if b.dot_role == "k":
            want = 64
        elif b.dot_role == "mn":
            want = 128 if b.role == "grid" else 64
        elif b.role == "grid" and b.grid_rank == 1 and not b.whole_dims:
            want = 1024
        elif b.role == "grid" and b.innermost and not b.whole_dims:
            want = 128
        elif b.role == "loop":
            want = ROW_LOOP_TILE if b.contiguous else 256
        else:
            want = 32
        return max(b.lo, min(want, b.hi))

    def random(self, rng: _random.Random) -> Config:
        """A random config from the space, normalized (oversize tiles are shrunk)."""
        blocks = [
            1 << rng.randint(b.lo.bit_length() - 1, b.hi.bit_length() - 1) for b in self.blocks
        ]
        reductions: list[int | None] = []
        for r in self.reductions:
            if r.loopable and r.full > 16 and rng.random() < 0.5:
                reductions.append(1 << rng.randint(4, r.full.bit_length() - 2))
            else:
                reductions.append(None)
        warps = rng.choice([1 << k for k in range(self.target.max_warps.bit_length())])
        file = self.target.limits.registers_per_sm // (warps * self.target.warp_size)
        config = Config(
            block_sizes=blocks,
            reduction_loops=reductions,
            num_warps=warps,
            num_stages=rng.choice([1, 2, 3, 4]),
            maxnreg=rng.choice([None, *(r for r in (128, 255) if r <= file)])
            if self.maxnreg_ok
            else None,
            **self.space.random_fields(rng),
            **{name: rng.choice(choices) for name, choices in self.tunables.items()},
        )
        # Very large per-thread tiles make Triton's compiler run for many minutes (seed 000's
        # "hang"): a random config keeps every tile within RANDOM_ELEMS_PER_THREAD per thread.
        budget = min(1 << 16, (config.num_warps or 4) * 32 * RANDOM_ELEMS_PER_THREAD)
        config = self._fit_registers(
            self._fit_shared_memory(tile_budget.shrink_to(self, config, budget))
        )
        if config.pid_type == "flat" and rng.random() < 0.5:
            config = config.replace(split_reductions=split.random_splits(self, config, rng))
        config = config.replace(**flags.random_flags(self, config, rng))
        if (
            config.maxnreg is not None
            and self.accumulator_registers(config) * 3 // 2 > config.maxnreg
        ):
            config = config.replace(maxnreg=None)  # ptxas cannot fit the accumulator under the cap
        return config

    def _fit_registers(self, config: Config) -> Config:
        """tl.dot accumulators stay in registers: keep them (plus half again for operands and the
        epilogue) within one block's register file, whatever the warp count (ptxas otherwise
        fails with "insufficient registers")."""
        register_file = self.target.limits.registers_per_sm
        blocks = list(config.block_sizes)
        while self.dot_outputs:
            current = config.replace(block_sizes=blocks)
            value = max(self.dot_outputs, key=lambda v: self.numel(v, current))
            if self.numel(value, current) * 3 // 2 <= register_file:
                return current
            slots = [
                d[1] for d in value.dims if d[0] == "b" and blocks[d[1]] > self.blocks[d[1]].lo
            ]
            if not slots:
                return current
            biggest = max(slots, key=lambda s: blocks[s])
            blocks[biggest] //= 2
        return config

    def accumulator_registers(self, config: Config) -> int:
        """Registers per thread that tl.dot accumulators need (one fp32 element each)."""
        threads = (config.num_warps or 4) * self.target.warp_size
        return max((self.numel(v, config) // threads for v in self.dot_outputs), default=0)

    def estimated_shared_bytes(self, config: Config) -> int:
        """Shared memory: the tl.dot operand buffers of the loop that needs the most (one per
        stage for operands loaded in the loop), or the other loads of loops given their own
        stages if those need more, plus the staging of descriptor stores that persistent and
        warp-specialized programs keep beside them (``config/pipelines.py``), or the largest
        sort's keys if those need more."""
        staged = max(operand_stage_bytes(self, config), pipelined_load_bytes(self, config))
        staged = max(staged, sort_scratch(self, config)[0])
        return staged + store_staging_bytes(self, config)

    def _fit_shared_memory(self, config: Config) -> Config:
        """Fewer stages, then smaller blocks, until the staged loads fit the target."""
        limit = self.target.limits.max_shared_bytes
        while self.estimated_shared_bytes(config) > limit:
            if any(config.range_num_stages):  # per-loop stages override num_stages: drop them first
                config = config.replace(range_num_stages=[0] * len(config.range_num_stages))
                continue
            if (config.num_stages or 1) > 1:
                config = config.replace(num_stages=(config.num_stages or 1) - 1)
                continue
            largest, value = self.largest_value(config)
            shrunk = tile_budget.shrink_to(self, config, max(largest // 2, 1))
            if shrunk == config:
                return config
            config = shrunk
        return config

    @property
    def maxnreg_ok(self) -> bool:
        return "maxnreg" in self.target.capabilities.launch_options

    def resolve(self, config: Config, warn: bool = True) -> Plan:
        """Every decision for ``config`` on this kernel and target, made once: the config is
        normalized (repaired or rejected with a :class:`ConfigError`), then turned into a
        :class:`Plan` that codegen, the launcher, the checker and the tuner read as given.

        Repairs (a field the target cannot honor, an oversize tile) warn once each per
        specialization (``warn=False``: silently, for the tuner's own configs), or raise in
        strict mode. Resolved plans are cached per config, so a config is normalized once.
        """
        key = config.key()
        plan = self._plans.get(key)
        if plan is None:
            self.normalizations += 1
            normalized, repairs = normalize_config(self, config)
            plan = build_plan(self, normalized, repairs)
            _report(list(plan.repairs), self._warned if warn else None, self._where())
            self._plans[key] = plan
            # the resolved config resolves to the same plan, with nothing left to repair
            self._plans.setdefault(normalized.key(), dataclasses.replace(plan, repairs=()))
        elif warn:
            _report(list(plan.repairs), self._warned, self._where())
        return plan

    def _where(self) -> Any:
        """The user's first device loop: where a repair warning points (not tilecraft's line)."""
        return next((loop.loc for loop in self.loops if loop.loc is not None), None)

    def normalize(self, config: Config, warn: bool = True) -> Config:
        """``config`` repaired for this kernel (the resolved plan's config)."""
        return self.resolve(config, warn).config

    def one_looped(self, chunks: list[int | None]) -> list[int | None]:
        """``chunks`` with only the longest looped reduction dim's chunk kept (a row quantized
        and then packed by pairs has a K dim and a K / 2 dim: the default looped both)."""
        looped = [i for i, c in enumerate(chunks) if c is not None]
        if len(looped) <= 1:
            return chunks
        keep = max(looped, key=lambda i: self.reductions[i].full)
        return [c if i == keep else None for i, c in enumerate(chunks)]

    def __repr__(self) -> str:
        return f"ConfigSpec(blocks={self.blocks}, reductions={self.reductions}, tunables={self.tunables})"


def _report(repairs: list[str], _warned: set[str] | None, where: Any = None) -> None:
    """Repairs warn once each (per kernel specialization; ``None``: silently), attributed to
    ``where`` (the kernel's first loop) when known, or raise in strict mode."""
    for message in repairs:
        if settings.strict():
            raise ConfigError(
                message.rsplit("; ", 1)[0], hint="fix the config (strict mode rejects repairs)"
            )
        if _warned is not None and message not in _warned:
            _warned.add(message)
            if where is None:
                warnings.warn(message, stacklevel=user_stacklevel())
            else:
                warnings.warn_explicit(message, UserWarning, where.filename, where.lineno)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _dim_ref(d: Any) -> tuple[Any, ...]:
    if isinstance(d, int):
        return ("fixed", d)
    if d.kind is SymKind.RDIM:
        return ("r", d.config_slot)
    if d.config_slot is None:
        return ("fixed", d.fixed_block or 1)
    return ("b", d.config_slot)


def _check_fp8_dot(node: Node, target: Target) -> None:
    """fp8 dots only where the target has them (a clear error, not a failed compile)."""
    fp8 = [str(i.dtype) for i in node.inputs[:2] if i.dtype in FP8]
    if fp8 and not target.fp8_dots:
        raise UnsupportedOpError(
            f"a dot of {' and '.join(fp8)} operands on {target.key}: this target has no fp8 "
            "tensor-core dot (NVIDIA needs sm_89 or newer)",
            node.loc,
            hint="cast the operands to torch.bfloat16 first (fp8 values convert exactly), or run "
            "on an sm_89+/sm_90 GPU",
        )

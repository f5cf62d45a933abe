"""Normalized Config -> Plan (stage: config; in: a ConfigSpec and a config it normalized;
out: the frozen :class:`Plan` that everything downstream reads).

The decisions that used to be taken at emit time live here: whether a requested tensor-descriptor
access can really be one with these block sizes (and why not), the eviction policy of each load,
the ``tl.range`` knobs of each loop, the launch options, and the predicted resources.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecraft.config import flags
from tilecraft.config.config import Config
from tilecraft.config.fp32_dots import dot_precision, fma_dots
from tilecraft.config.plan import (
    AccessPlan,
    Plan,
    RangePlan,
    Resources,
    block_dims,
    loop_steps,
    sym_block,
)
from tilecraft.config.resources import (
    BASE_REGISTERS,
    BASE_VGPRS,
    MFMA_ROW_GROUPS,
    MMA_ROW_GROUPS,
    RegisterEstimate,
    predict_registers,
)
from tilecraft.config.space import TMA_MAX_BOX, descriptor_order, outer_tile
from tilecraft.config.warp_specialize import compute_threads, consumer_register_file
from tilecraft.ir.deferred_args import DeferredArg, deferred_args_plan, lane_budget
from tilecraft.ir.deferred_sums import (
    MAX_ELEMS_PER_THREAD,
    DeferredSum,
    deferred_ids,
    deferred_plan,
)
from tilecraft.ir.nodes import Node, Op, Sym, SymKind
from tilecraft.ir.paired_slices import slice_pairs
from tilecraft.targets.target import filter_launch_options

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec


def build_plan(spec: ConfigSpec, config: Config, repairs: list[str]) -> Plan:
    """The plan of ``config``, which ``spec`` has normalized (every per-item list is full)."""
    blocks = tuple(config.block_sizes)
    chunks = tuple(config.reduction_loops)
    warps, stages = int(config.num_warps or 4), int(config.num_stages or 1)
    options, dropped = filter_launch_options(
        spec.target, {"num_warps": warps, "num_stages": stages, "maxnreg": config.maxnreg}
    )
    assert not dropped, dropped  # _normalize dropped what the target lacks
    n_loops = len(spec.grid_slots)
    accesses = tuple(
        _access(node, config, blocks, chunks, spec.space.eviction_choices)
        for node in spec.space.accesses
    )
    ranges = _ranges(spec, config, accesses, repairs)
    homes = tuple(
        home
        for r in spec.reductions
        if r.slot < len(chunks) and chunks[r.slot] is not None
        for home in r.homes
    )
    pairs = slice_pairs(
        spec.loops,
        lambda sym: sym.kind is SymKind.RDIM and reduction_chunk(sym, chunks) is not None,
        [a.slot for a in accesses if a.indexing != "pointer"] + [h.store_slot for h in homes],
    )
    specialized = [r.warp_specialize for r in ranges]
    if list(config.range_warp_specializes) not in ([], specialized):
        config = config.replace(range_warp_specializes=specialized)  # a loop lost it: say so
    return Plan(
        config=config,
        target=spec.target,
        block_sizes=blocks,
        reduction_loops=chunks,
        num_warps=warps,
        num_stages=stages,
        pid_type=config.pid_type,
        num_sm_multiplier=int(config.num_sm_multiplier or 1),
        l2_groupings=tuple(config.l2_groupings) or (1,) * n_loops,
        loop_orders=tuple(tuple(o) for o in config.loop_orders),
        accesses=accesses,
        ranges=ranges,
        launch_options=tuple(options.items()),
        resources=_resources(spec, config, warps),
        user=config.user,
        repairs=tuple(repairs),
        dot_precision=dot_precision(spec.target, spec.dot_precision),
        splits=tuple(config.split_reductions) or (1,) * n_loops,
        split_atomics=config.split_atomics,
        split_one_launch=spec.target.arrival_counters and not config.split_atomics,
        carried_homes=homes,
        slice_pairs=pairs,
    )


def _access(
    node: Node,
    config: Config,
    blocks: tuple[int, ...],
    chunks: tuple[int | None, ...],
    spec_choices: tuple[str, ...],
) -> AccessPlan:
    slot = node.attrs["mem_slot"]
    modes = config.indexing
    requested = modes if isinstance(modes, str) else modes[slot] if slot < len(modes) else "pointer"
    indexing, reason = requested, ""
    if requested == "tensor_descriptor":
        tensor = node.attrs["tensor"]
        box = [sym_block(item[1], blocks, chunks) for item in node.attrs["index"]]
        inner = (descriptor_order(tensor) or (len(box) - 1,))[-1]  # TMA's unit-stride dim
        if max(box) > TMA_MAX_BOX:
            indexing, reason = (
                "pointer",
                f"a tensor-descriptor block dim is over {TMA_MAX_BOX} elements",
            )
        elif box[inner] * tensor.dtype.itemsize < 16:
            indexing, reason = "pointer", "a tensor-descriptor block's inner dim is under 16 bytes"
        elif not getattr(tensor, "aligned", True):
            indexing, reason = (
                "pointer",
                f"'{tensor.name}' starts off a 16-byte boundary (TMA descriptors need one)",
            )
    if indexing in ("tensor_descriptor", "block_ptr") and not _aligned_to_outer(
        node, blocks, chunks
    ):
        # boundary checks stop at the tensor's end, not at the loop's bound: a block pointer's
        # store wrote zeros over the next program's rows (a LayerNorm backward with one-row
        # CTAs walked in 2-row tiles: wrong dx on the H200, right in the interpreter)
        indexing, reason = (
            "pointer",
            "the block of a loop over another tile's bounds does not divide that tile's block "
            f"(a {requested} block would read or write past the loop's bound)",
        )
    eviction = ""
    if node.op is Op.LOAD:
        policies = config.load_eviction_policies
        load = node.attrs["load_slot"]
        eviction = policies[load] if load < len(policies) else ""
        # hl.load(eviction_policy=...) is the user's fixed choice, where the target has policies
        fixed = node.attrs.get("eviction_policy", "")
        if fixed and fixed in spec_choices:
            eviction = fixed
    op = "load" if node.op is Op.LOAD else "store"
    merged = _mergeable_dims(node, blocks, chunks) if indexing == "tensor_descriptor" else 0
    return AccessPlan(slot, op, indexing, requested, reason, eviction, merged)


def _mergeable_dims(node: Node, blocks: tuple[int, ...], chunks: tuple[int | None, ...]) -> int:
    """Leading scalar-indexed dims of a descriptor access that merge into the next dim: the
    tensor is contiguous across them and the next dim's blocks divide its size, so no block of
    the merged dim crosses into the next batch row. (Triton 3.6 does not warp-specialize loops
    that load 3-D blocks reshaped to 2-D; merged, the descriptor is 2-D.)"""
    tensor = node.attrs["tensor"]
    index = node.attrs["index"]
    k = 0
    while k < len(index) and index[k][0] == "tile" and index[k][1].scalar:
        k += 1
    if k == 0 or k >= len(index) or tensor.dynamic or tensor.stride[-1] != 1:
        return 0  # (a permuted descriptor's dims do not merge)
    shape, stride = tensor.shape, tensor.stride
    if any(stride[i] != shape[i + 1] * stride[i + 1] for i in range(k)):
        return 0
    return k if shape[k] % sym_block(index[k][1], blocks, chunks) == 0 else 0


def _aligned_to_outer(node: Node, blocks: tuple[int, ...], chunks: tuple[int | None, ...]) -> bool:
    """Every nested tile over another tile's ``begin``/``end`` steps in blocks that divide that
    tile's block: then each of its blocks lies inside the loop's range (or past the tensor's
    end, where a descriptor load reads zeros)."""
    for item in node.attrs["index"]:
        if item[0] != "tile":
            continue
        for bound in (item[1].begin, item[1].extent):
            outer = outer_tile(bound)
            if outer is not None and sym_block(outer, blocks, chunks) % sym_block(
                item[1], blocks, chunks
            ):
                return False
    return True


def _ranges(
    spec: ConfigSpec, config: Config, accesses: tuple[AccessPlan, ...], repairs: list[str]
) -> tuple[RangePlan, ...]:
    """Each loop's knobs; a warp-specialized loop whose loads did not all stay descriptor loads
    (a block over TMA's limits falls back to pointers) is not specialized: Triton 3.6 fails to
    compile it."""
    out = []
    for slot in range(spec.space.n_ranges):
        knobs = RangePlan.of(config, slot)
        loads = spec.space.loop_loads[slot]
        if knobs.warp_specialize and any(_not_2d_descriptor(accesses[m], spec) for m in loads):
            reasons = sorted({accesses[m].fallback_reason for m in loads} - {""})
            repairs.append(
                f"range_warp_specializes[{slot}]=True: a load of that loop is not a 2-D descriptor "
                f"({', '.join(reasons) or 'its scalar-indexed dims cannot merge'}); using None"
            )
            knobs = dataclasses.replace(knobs, warp_specialize=None)
        out.append(knobs)
    return tuple(out)


def _not_2d_descriptor(access: AccessPlan, spec: ConfigSpec) -> bool:
    """Whether a load keeps a loop from being warp-specialized: not a descriptor, or one whose
    scalar-indexed dims could not merge (its 3-D blocks are reshaped in the kernel)."""
    if access.indexing != "tensor_descriptor":
        return True
    index = spec.space.accesses[access.slot].attrs["index"]
    scalar = sum(1 for item in index if item[0] == "tile" and item[1].scalar)
    return scalar > access.merged_dims


def _resources(spec: ConfigSpec, config: Config, warps: int) -> Resources:
    largest, value = spec.largest_value(config)
    threads = warps * spec.target.warp_size
    programs: list[int | None] = []
    for k in range(len(spec.loops)):
        count = spec.programs(k, config)
        split = config.split_reductions[k] if k < len(config.split_reductions) else 1
        programs.append(None if count is None else count * split)
    per_loop = loop_registers(spec, config, warps)
    registers = worst_loop(per_loop)
    return Resources(
        registers=registers.per_thread,
        register_limit=registers.limit,
        registers_at=registers.peak_at,
        loop_registers=tuple(e.per_thread for e in per_loop),
        largest_tile=largest,
        largest_tile_at=value.loc.short if value is not None and value.loc else "",
        elems_per_thread=-(-largest // threads),
        accumulator_registers=spec.accumulator_registers(config),
        shared_bytes=spec.estimated_shared_bytes(config),
        programs=tuple(programs),
    )


def predicted_registers(spec: ConfigSpec, config: Config, warps: int) -> RegisterEstimate:
    """The resource model's registers per thread for ``config``: the worst device loop."""
    return worst_loop(loop_registers(spec, config, warps))


def worst_loop(estimates: list[RegisterEstimate]) -> RegisterEstimate:
    """The loop estimate nearest to (or furthest past) its register limit."""
    return max(estimates, key=lambda e: e.spill_ratio, default=RegisterEstimate(0, 255, ""))


def loop_registers(spec: ConfigSpec, config: Config, warps: int) -> list[RegisterEstimate]:
    """The resource model's registers per thread of each device loop (``spec.loops``' order)
    under ``config``. A warp-specialized program's tiles live in its consumer warpgroups, which
    share the register file less what the producer warpgroup keeps."""
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    specialized = any(config.range_warp_specializes)
    threads = compute_threads(spec.target, warps, specialized)
    file = consumer_register_file(spec.target, warps, specialized)
    hip = spec.target.backend == "hip"
    on = _flags_as_run(spec, config)
    fma = fma_dots(spec)
    # a deferred sum's carry and per-iteration reductions do not exist in the loop: its tile
    # accumulator (held) replaces them
    deferred = _deferred_by_loop(spec, config, threads, on)
    skipped = {n.id for sums in deferred.values() for d, _ in sums for n in (d.carry, *d.chain)}
    # a deferred arg-best's per-step reductions and update neither: its lane tiles replace them
    lanes = _deferred_args_by_loop(spec, config, threads, on)
    skipped |= {
        n.id for pairs in lanes.values() for d in pairs for n in (d.best, d.arg, *d.skipped)
    }
    return [
        predict_registers(
            loop,
            lambda sym: sym_block(sym, blocks, chunks),
            threads,
            file,
            looped=lambda d: (
                isinstance(d, Sym)
                and d.kind is SymKind.RDIM
                and reduction_chunk(d, chunks) is not None
            ),
            held=lambda node: (
                _held_registers(node, config, threads, on, deferred[node.id])
                + _lane_registers(lanes[node.id], config, threads)
            ),
            fma_dots=fma,
            mma_row_groups=MFMA_ROW_GROUPS if hip else MMA_ROW_GROUPS,
            warp_size=spec.target.warp_size,
            base_registers=BASE_VGPRS if hip else BASE_REGISTERS,
            skip=lambda node: node.id in skipped,
        )
        for loop in spec.loops
    ]


def _flags_as_run(spec: ConfigSpec, config: Config) -> dict[str, bool]:
    """Each strategy knob as ``config`` runs it (an unset one is on where offered)."""
    return {name: bool(value) for name, value in flags.normalize_flags(spec, config, []).items()}


def deferred_reductions(spec: ConfigSpec, config: Config) -> set[int]:
    """The ids of the sums ``config`` reduces once after their loops instead of each step
    (``codegen/deferred_sums.py``; an unset ``deferred_sums`` is on where offered)."""
    threads = compute_threads(
        spec.target, config.num_warps or 4, any(config.range_warp_specializes)
    )
    on = _flags_as_run(spec, config)
    plans = _deferred_by_loop(spec, config, threads, on).values()
    return deferred_ids([d for sums in plans for d, _ in sums])


def _deferred_by_loop(
    spec: ConfigSpec, config: Config, threads: int, on: dict[str, bool]
) -> dict[int, list[tuple[DeferredSum, int]]]:
    """:func:`_deferred_sums` of every loop node of the kernel, by its id."""
    return {
        node.id: _deferred_sums(node, config, threads, on)
        for loop in spec.loops
        for node in loop.walk()
        if node.op is Op.LOOP
    }


def _deferred_sums(
    loop: Node, config: Config, threads: int, on: dict[str, bool]
) -> list[tuple[DeferredSum, int]]:
    """The carries of ``loop`` that run as deferred sums under ``config``, the sums each one
    skips and the elements of its tile accumulator (``codegen/deferred_sums.py``: only without
    a chunked width, and at most ``MAX_ELEMS_PER_THREAD`` a thread)."""
    if not on["deferred_sums"] or any(c is not None for c in config.reduction_loops):
        return []
    numel = _tile_numel(config)
    return [(d, numel(d.kept)) for d in deferred_plan(loop, numel, MAX_ELEMS_PER_THREAD * threads)]


def _tile_numel(config: Config) -> Callable[[tuple[Any, ...]], int]:
    """Elements of a tile of a given IR shape under ``config``'s blocks and chunks."""
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    return lambda shape: math.prod(block_dims(shape, blocks, chunks))


def _deferred_args_by_loop(
    spec: ConfigSpec, config: Config, threads: int, on: dict[str, bool]
) -> dict[int, list[DeferredArg]]:
    """The arg-bests of every loop node that run deferred under ``config``
    (``codegen/deferred_args.py``: as deferred sums, only without a chunked width, and not in
    a device loop split across programs)."""
    splits = list(config.split_reductions) + [1] * len(spec.loops)
    off = not on["deferred_args"] or any(c is not None for c in config.reduction_loops)
    numel = _tile_numel(config)
    return {
        node.id: []
        if off or splits[i] > 1
        else deferred_args_plan(node, numel, lane_budget(threads), loop_steps(node, numel))
        for i, loop in enumerate(spec.loops)
        for node in loop.walk()
        if node.op is Op.LOOP
    }


def _lane_registers(pairs: list[DeferredArg], config: Config, threads: int) -> float:
    """Registers a thread keeps for deferred arg-bests' lanes: a value and an index an element."""
    numel = _tile_numel(config)
    return sum(2 * numel(d.root.shape) / threads for d in pairs)


def _held_registers(
    loop: Node,
    config: Config,
    threads: int,
    on: dict[str, bool],
    deferred: list[tuple[DeferredSum, int]],
) -> float:
    """fp32 registers per thread that ``config``'s strategies keep through ``loop`` beyond its IR
    values: each deferred sum's tile accumulator (``deferred``: :func:`_deferred_sums`; its
    carry and per-iteration reduction are not counted: :func:`predicted_registers` skips them)
    and, for a row loop run chunks outer, its accumulators' chunks (``codegen/chunk_outer.py``).
    ``on``: each knob as it will run - an unset one (None) is on where the kernel offers it
    (``config/flags.py``): the default's rules size tiles, warps and splits on configs whose
    knobs are still unset (a tall column sum's split rule saw 33 registers a thread and 6
    programs per SM; it runs with its deferred sum at 59 and 4 per SM)."""
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    total = sum(tile / threads for _, tile in deferred)
    carried = loop.attrs.get("carried", [])
    rolled = any(c is not None for c in chunks)
    if on["chunk_outer"] and rolled and carried:
        on_chunk = [
            c
            for c in carried
            if any(isinstance(d, Sym) and reduction_chunk(d, chunks) for d in c.shape)
        ]
        total += sum(math.prod(block_dims(c.shape, blocks, chunks)) / threads for c in on_chunk)
    return total


def reduction_chunk(sym: Sym, chunks: tuple[int | None, ...]) -> int | None:
    """The chunk ``chunks`` (a config's ``reduction_loops``) gives reduction dim ``sym``: None
    where it stays whole."""
    slot = sym.config_slot
    return chunks[slot] if slot is not None and slot < len(chunks) else None

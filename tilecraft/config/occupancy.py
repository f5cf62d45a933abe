"""Occupancy of memory-bound kernels (stage: config heuristic; in: a ConfigSpec and the default
config being built; out: the config with smaller grid tiles where registers would starve the SM).

A kernel without ``tl.dot`` spends its time waiting for memory; an SM hides that latency by
switching between resident warps, and how many warps fit is set by the registers each thread
holds (65536 per SM). The default's tiles are sized by elements per value; when the resource
model predicts that the values live at once need more than ``OCCUPANCY_REGISTERS`` per thread,
an SM holds at most 16 warps (two 8-warp programs) and bandwidth drops. Example, cross-compiled
for sm_90: the RoPE example at 8192x32x128 defaulted to [8 tokens, 16 heads] at 8 warps = 192
registers per thread (model: 200), measured on the H200 at 0.647 ms against torch.compile's
0.113 ms; [4, 8] at 4 warps compiles to 48 registers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from tilecraft.config import flags
from tilecraft.config.config import Config
from tilecraft.config.grid_order import tensor_bytes
from tilecraft.config.plan import sym_block
from tilecraft.config.resolve import deferred_reductions, predicted_registers
from tilecraft.config.resources import index_values, register_limit
from tilecraft.ir.deferred_sums import keeps_step_reductions, step_reductions_only_accumulate
from tilecraft.ir.nodes import ELEMENTWISE_OPS, Op, Sym, SymKind, walk
from tilecraft.targets.target import Limits, Target

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec

_NOT_POINTWISE = (Op.DOT, Op.REDUCE, Op.SCAN, Op.GATHER, Op.LOOP)
OCCUPANCY_REGISTERS = 128  # per thread: above it an SM holds fewer than 16 warps
MIN_CONTIGUOUS = 64  # a block over a contiguous dim keeps 128-byte rows of bf16
REGISTER_GRANULE = 8  # ptxas allocates a thread's registers in steps of 8
MAX_PROGRAMS_PER_SM = 32  # resident thread blocks per SM on sm_80+/sm_90 (and CDNA workgroups)
# predicted registers times this where a residency decision must hold within the model's error
MODEL_MARGIN = 1.25
# a small grid's step tile per thread that more warps do not split further (small_grid_warps)
STEP_ELEMENTS_PER_THREAD = 16


def resident_programs(spec: ConfigSpec, config: Config, margin: float = 1.0) -> int:
    """Programs of ``config`` that one SM holds at once: bounded by its threads, by the
    registers the resource model predicts (a spilling config holds its register limit) and by
    the shared memory of its pipelined dot operands. A grid of ``num_sms * resident_programs``
    programs is the first one that keeps every SM as busy as the kernel allows (one wave of
    resident programs); a smaller one leaves latency that more programs would have hidden.
    ``margin`` scales the predicted registers (a decision that must hold within the model's
    error)."""
    limits = spec.target.limits
    warps = config.num_warps or 4
    threads = warps * spec.target.warp_size
    estimate = predicted_registers(spec, config, warps)
    registers = min(
        math.ceil(estimate.per_thread * margin), register_limit(threads, limits.registers_per_sm)
    )
    shared = spec.estimated_shared_bytes(config)
    return max(1, programs_per_sm(limits, threads, registers, shared))


def resident_threads(spec: ConfigSpec, config: Config, margin: float = 1.0) -> int:
    """Threads one SM holds at once for ``config`` (:func:`resident_programs` of its size)."""
    programs = resident_programs(spec, config, margin)
    return programs * (config.num_warps or 4) * spec.target.warp_size


def keep_occupancy(spec: ConfigSpec, config: Config) -> Config:
    """``config`` with its deferred sums off where the loop reduces its tile each step anyway
    (an online softmax's max: the cross-warp combine and its barrier stay) and their tile
    accumulators cost the SM more than half its threads: a streaming loop hides its loads'
    latency with resident threads. (H200, a label-smoothed cross entropy over 128256 logits, 16
    warps: deferred 82 registers, 1 program an SM, 2.00 ms; per-step sums 40 registers, 3
    programs, 1.05 ms; graph_replay_ce_s14. Where the deferred sums are the loop's only
    reductions they stay, whatever the occupancy: a tall column sum 0.0457 ms vs 0.0491.)"""
    if config.deferred_sums is False or not flags.offered(spec, config)["deferred_sums"]:
        return config
    ids = deferred_reductions(spec, config.replace(deferred_sums=True))
    if not any(keeps_step_reductions(loop.body, ids) for loop in spec.loops):
        return config
    half = spec.target.limits.max_threads_per_sm // 2
    deferred = resident_threads(spec, config.replace(deferred_sums=True))
    plain = config.replace(deferred_sums=False)
    # the plain config must hold more threads even at a quarter more registers than predicted
    # (the model's median error is ~30%): a layer-norm backward at [4, 8] x 1024 was predicted
    # at 128 registers plain (2 programs an SM), ptxas allocated 171 (1, as deferred)
    if deferred < half and resident_threads(spec, plain, MODEL_MARGIN) > deferred:
        return plain
    return config


SMALL_GRID_MIN_BYTES = 16 << 20  # small_grid_warps: the largest loaded tensor at least this


def small_grid_warps(spec: ConfigSpec, config: Config) -> Config:
    """``config`` with more warps where each SM runs at most two programs of it and its loops
    reduce only into carried sums, maxima or minima (each step or, deferred, after the loop):
    the cross-warp reduction's barrier makes every step wait for its loads, then for the step's
    work per thread, and with so few programs no other program fills that time; more warps
    shorten each thread's share (down to ``STEP_ELEMENTS_PER_THREAD`` elements of the largest
    tile) while what is in flight stays one tile. With the sums deferred no step waits, but the
    SM still holds only those few programs' threads to keep loads in flight (a column range,
    running max and min, 256 programs of [32, 256] steps: 8 warps 0.102 ms, 16 warps 0.081,
    range16_s28). Not where a step's reduction feeds the step's elements (an online softmax:
    more warps add cross-warp phases), nor with scans or dots. (H200: BatchNorm statistics over
    32x256x56x56, 256 programs, a [32, 256] step: 8 warps 0.0543 ms, 16 warps 0.0429; deferred
    whole tiles 8 warps 0.0635, 16 warps 0.0398, default_change_s21c;
    default_change_small_grids_s17 measured the same step on decode attention's softmax loop:
    0.528 -> 0.808 ms, and on a cumsum: 1.36x.)"""
    limits, warp_size = spec.target.limits, spec.target.warp_size
    if any(n.op in (Op.DOT, Op.SCAN) for loop in spec.loops for n in walk(loop.body)):
        return config
    # deferred or not, every reduction counts: a deferred one still only feeds its carried total
    if not all(step_reductions_only_accumulate(loop.body, set()) for loop in spec.loops):
        return config
    # a kernel of a few microseconds is its launch: more warps only cost (a 1000x1000 sum
    # 0.007 -> 0.008 ms at 16 warps, default_change_s21d)
    loaded = [tensor_bytes(n) for loop in spec.loops for n in walk(loop.body) if n.op is Op.LOAD]
    if max(loaded, default=0) < SMALL_GRID_MIN_BYTES:
        return config
    # a split loop runs a program per share (a tall column sum: 32 column tiles x 16 shares)
    splits = list(config.split_reductions) + [1] * len(spec.loops)
    programs = [spec.programs(i, config) for i in range(len(spec.loops))]
    if any(p is None or p * (splits[i] or 1) > 2 * limits.num_sms for i, p in enumerate(programs)):
        return config
    largest, _ = spec.largest_value(config)
    return _doubled_warps(
        spec, config, lambda w: largest // (2 * w * warp_size) >= STEP_ELEMENTS_PER_THREAD
    )


def programs_per_sm(limits: Limits, threads: int, registers: int, shared_bytes: int) -> int:
    """Programs of ``threads`` threads, ``registers`` each (allocated in steps of
    ``REGISTER_GRANULE``) and ``shared_bytes`` that one SM holds at once (0: none fits)."""
    registers = -(-max(registers, 1) // REGISTER_GRANULE) * REGISTER_GRANULE
    by_shared = limits.max_shared_bytes // shared_bytes if shared_bytes else MAX_PROGRAMS_PER_SM
    return min(
        limits.max_threads_per_sm // threads,
        limits.registers_per_sm // (registers * threads),
        by_shared,
        MAX_PROGRAMS_PER_SM,
    )


def fit_occupancy(spec: ConfigSpec, config: Config, warps_for: Callable[[Config], int]) -> Config:
    """Halve a grid block while the model predicts more than OCCUPANCY_REGISTERS per thread
    (times MODEL_MARGIN): dims other than the contiguous one first, then the one fewest computed
    values are broadcast along (:func:`broadcast_elements`), then the largest; ``warps_for``
    re-derives the warps of each smaller tile. Only pointwise device loops (no dot, no
    reduction, no inner loop, no block the host code sizes buffers by): a row reduction's rows
    and a loop's chunks have rules of their own, measured on the H200 (see ``config/spec.py``),
    and shrinking a host-registered block multiplies the partial results the host combines."""
    pointwise = not (
        any(n.op in _NOT_POINTWISE for loop in spec.loops for n in walk(loop.body))
        or any(b.role == "host" for b in spec.blocks)
    )
    if not pointwise:
        return config.replace(num_warps=warps_for(config))
    while True:
        config = config.replace(num_warps=warps_for(config))
        estimate = predicted_registers(spec, config, config.num_warps or 4)
        # within the model's error: ptxas issues a pointwise loop's loads ahead of the work
        # between them, which the model does not count (a 3x3 / 2 max pool with argmax, [32,
        # 64] at 4 warps: 104 predicted, 145 compiled, 0.403 ms; [16, 64] 0.229 ms, torch.compile
        # 0.13). Halving a tile predicted near the line cost none of six other pointwise
        # kernels measured (t5_maxpool_s45_h100, margin_cc_s45_h100)
        if estimate.per_thread * MODEL_MARGIN <= OCCUPANCY_REGISTERS:
            return config
        blocks = list(config.block_sizes)
        shrinkable = [
            s
            for slots in spec.grid_slots
            for s in slots
            if blocks[s]
            > max(spec.blocks[s].lo, MIN_CONTIGUOUS if spec.blocks[s].contiguous else 1)
        ]
        if not shrinkable:
            return config
        shared = {s: broadcast_elements(spec, config, s) for s in shrinkable}
        slot = max(shrinkable, key=lambda s: (not spec.blocks[s].contiguous, -shared[s], blocks[s]))
        blocks[slot] //= 2
        config = config.replace(block_sizes=blocks)


def broadcast_elements(spec: ConfigSpec, config: Config, slot: int) -> int:
    """Elements per program of the computed values that do not span block ``slot``'s dim: each
    program computes them once and broadcasts them along it, so halving that block doubles
    their work over the grid. (YaRN RoPE over [tokens, heads, 128], cos and sin per token
    broadcast over heads: [4, 8] -> [4, 4] recomputed them for every 4 heads, 0.196 -> 0.251 ms
    on an H100, default_change_s45_margin; halving the tokens adds only the per-dim inv_freq.)"""
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    total = 0
    for loop in spec.loops:
        indices = index_values(loop)  # masks and offsets: recomputed per element, no work
        for node in walk(loop.body):
            dims = [d for d in node.shape if isinstance(d, Sym)]
            if node.op not in ELEMENTWISE_OPS or node.id in indices or not dims:
                continue
            if any(d.kind is SymKind.BLOCK and d.config_slot == slot for d in dims):
                continue
            total += math.prod(sym_block(d, blocks, chunks) for d in dims)
    return total


def fit_maxnreg(target: Target, maxnreg: int | None, warps: int, repairs: list[str]) -> int | None:
    """A register cap over what one block's threads can share of the SM's file compiles, then
    fails at launch (Triton: "out of resource: threads"; 255 registers x 512 threads on sm_90);
    without the cap ptxas keeps to the block's launch bound by itself."""
    threads = warps * target.warp_size
    if maxnreg is None or maxnreg * threads <= target.limits.registers_per_sm:
        return maxnreg
    repairs.append(
        f"maxnreg={maxnreg} with {warps} warps needs {maxnreg * threads} registers, more than "
        f"the {target.limits.registers_per_sm} of an SM (the launch would fail): dropped"
    )
    return None


def recurrence_warps(spec: ConfigSpec, config: Config) -> Config:
    """``config`` with one thread per element of the largest state a recurrence exchanges
    across lanes each step (``ConfigSpec.exchanged_states``), where every SM runs at most one
    program: a step cannot start before the last one's exchange, so its time is the chain of
    one thread's share of the step, and with the grid under a wave more warps cost nothing
    else. (H200, CTC forward over 1000 steps, 64 samples, a 256-state alpha shifted by
    ``torch.gather``: 4 warps 0.494 ms, 8 warps 0.422, 16 warps 0.452, 1 warp 1.42; the same
    recurrence shifted by ``F.pad`` of slices: 4 warps 0.682, 8 warps 0.45; ctc_warps_s24b.)"""
    if not spec.exchanged_states:
        return config
    programs = [spec.programs(i, config) for i in range(len(spec.loops))]
    if any(p is None or p > spec.target.limits.num_sms for p in programs):
        return config
    elements = max(spec.numel(state, config) for state in spec.exchanged_states)
    return _doubled_warps(spec, config, lambda w: w * spec.target.warp_size < elements)


def _doubled_warps(spec: ConfigSpec, config: Config, more: Callable[[int], bool]) -> Config:
    """``config`` with its warps doubled while ``more(warps)`` holds (up to the target's
    most), unless that changes nothing or the resource model predicts spills there."""
    warps = config.num_warps or 4
    while warps < spec.target.max_warps and more(warps):
        warps *= 2
    candidate = config.replace(num_warps=warps)
    if warps == config.num_warps or spec.predicted(candidate).spills:
        return config
    return candidate

"""Hopper dot pipelines (stage: config; in: a ConfigSpec whose kernel has ``tl.dot`` and an sm_90+
CUDA target; out: pipeline configs ranked by the resource model, and the heuristic default).

A dot loop runs near the tensor cores' peak on Hopper when its operands arrive by TMA (tensor
descriptors: one thread issues a whole tile copy into shared memory, which wgmma reads directly),
several k-steps are in flight (``num_stages`` buffers of both operand tiles), and programs walk the
output tiles in L2-grouped order, optionally persistently (one program per SM looping over tiles,
so one tile's epilogue overlaps the next tile's loads). Triton 3.6 can also warp-specialize such a
loop on sm_90 (a producer warpgroup issuing TMA, two consumer warpgroups doing wgmma): only with
``num_warps=4`` (it then runs 12 warps) and only when every load of the loop is a descriptor load.

:func:`pipeline_configs` builds those configs from the spec's plain default (its tiles, and the
innermost output dim doubled), keeps the legal ones (every load of a dot loop is a descriptor load
in the resolved plan, nothing repaired, shared memory fits, no spill predicted) and ranks them by
:func:`pipeline_cost`; :func:`hopper_default` picks the first, the spec's default on sm_90.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tilecraft.config.config import Config
from tilecraft.config.fp32_dots import fma_dot_nodes
from tilecraft.config.plan import Plan, RangePlan, block_dims, extent_hint, sym_block
from tilecraft.config.tile_schedule import busiest_sm, uneven_work
from tilecraft.config.warp_specialize import (
    HOPPER_WS_WARPS,
    computed_operand,
    loads_in_loop,
    through_views,
    warp_specialize_stage_cap,
)
from tilecraft.errors import ConfigError
from tilecraft.ir.nodes import Node, Op, value_indexed, walk
from tilecraft.ir.split import readers
from tilecraft.ir.tile_work import inner_loops

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec

MAX_PIPELINE_STAGES = 5
MIN_PIPELINE_STAGES = 2
L2_GROUP = 8
WGMMA_ROWS = 64
FILL_STEPS = 1.75  # k-steps a plain pipelined tile spends filling its stages and draining
WS_STEADY_COST = 1.048  # a warp-specialized k-step's time against a plain steady one
# tile efficiency = intensity / (intensity + EFFICIENCY_KNEE), intensity = M*N / (M+N): output
# elements per operand element loaded per k-step. Small tiles wait on memory (16x64: 0.29),
# 128x256 tiles keep wgmma busy (0.73). A roofline-style shape, not a constant fitted to a suite.
EFFICIENCY_KNEE = 32.0


def store_staging_bytes(spec: ConfigSpec, config: Config) -> int:
    """Shared memory for descriptor stores that stays allocated beside the operand stages: a
    persistent or warp-specialized program keeps its pipeline buffers live while it stores
    (cross-compiled for sm_90, a 128x256 bf16 matmul tile at 3 stages: flat 147480 B,
    persistent 213016 B, warp-specialized 213464 B)."""
    if not (str(config.pid_type).startswith("persistent") or any(config.range_warp_specializes)):
        return 0
    modes = config.indexing
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    worst = 0
    for loop in spec.loops:  # each device loop is its own kernel: the worst one counts
        total = 0
        for node in (n for n in loop.walk() if n.op is Op.STORE):
            slot = node.attrs["mem_slot"]
            mode = modes if isinstance(modes, str) else modes[slot] if slot < len(modes) else ""
            if mode == "tensor_descriptor":
                box = [sym_block(item[1], blocks, chunks) for item in node.attrs["index"]]
                total += math.prod(box) * node.attrs["tensor"].dtype.itemsize
        worst = max(worst, total)
    return worst


def operand_stage_bytes(spec: ConfigSpec, config: Config) -> int:
    """Shared memory of tl.dot operands, in the loop that needs the most: an operand loaded in
    the loop takes one buffer per stage, one loaded before it (attention's query tile) one
    buffer, a computed left operand none (wgmma reads it from registers) except in an fp32 dot
    on the FMA units (both operands reach their layouts through shared memory: Mamba-2 state
    passing's [256, 256] fp32 decay matrix, 278528 B on sm_90, refused by ptxas after 216 s),
    a computed right operand one. Loops run one after another, so their buffers do not add up. (Cross-compiled
    for sm_90, attention at 128x64 blocks, d 128, 2 stages: 96 KiB = q + 2 x (k + v).)"""
    return sum(b for _, b in staged_operands(spec, config))


def staged_operands(spec: ConfigSpec, config: Config) -> list[tuple[Node, int]]:
    """The tl.dot operands of the loop body that needs the most shared memory, each with its
    bytes (what :func:`operand_stage_bytes` sums; errors name them)."""
    stages = max(config.num_stages or 1, *[s for s in config.range_num_stages if s], 1)
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)

    def size(node: Node) -> int:
        return math.prod(block_dims(node.shape, blocks, chunks)) * node.dtype.itemsize

    worst: list[tuple[Node, int]] = []
    worst_total = 0
    on_fma = {id(n) for n in fma_dot_nodes(spec)}
    for loop in spec.loops:
        scopes: list[list[Node]] = [
            loop.body,
            *(n.body or [] for n in loop.walk() if n.op is Op.LOOP),
        ]
        for body in scopes:
            inside = {id(n) for n in walk(body)}
            found: list[tuple[Node, int]] = []
            for dot in (n for n in body if n.op is Op.DOT):
                for k, operand in enumerate(dot.inputs[:2]):
                    source = through_views(operand)
                    if source.op is Op.LOAD:
                        found.append(
                            (operand, size(operand) * (stages if id(source) in inside else 1))
                        )
                        continue
                    # a computed operand (a masked or scaled tile) still has its loads staged;
                    # a gathered one (a bias table read by computed buckets) also passes through
                    # one buffer on its way into the dot's layout (T5 attention, [256, 64]
                    # fp32 bias tiles at 2 stages, cross-compiled for sm_90: 294912 B, 65536
                    # more than the staged loads; 163840 at [128, 64])
                    loads = loads_in_loop(operand, inside)
                    total = sum(size(n) * stages for n in loads)
                    total += max((size(n) for n in loads if value_indexed(n)), default=0)
                    total += size(operand) if k == 1 or id(dot) in on_fma else 0
                    found.append((operand, total))
            if (scope_total := sum(b for _, b in found)) > worst_total:
                worst, worst_total = found, scope_total
    return worst


# bytes of shared memory each element of a sorted tile passes through (its 64-bit key)
SORT_KEY_BYTES = 8


def sort_scratch(spec: ConfigSpec, config: Config) -> tuple[int, Node | None]:
    """The shared memory of the largest sort (``torch.sort`` / ``topk`` / ``argsort``) and its
    node: Triton's bitonic steps convert the whole tile of 64-bit keys through shared memory
    (cross-compiled for sm_90: 8 bytes an element at every size and warp count; a top-p mask
    over a 32000-wide row, 262144 bytes, fits no H100 or H200)."""
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    worst: tuple[int, Node | None] = (0, None)
    for loop in spec.loops:
        for node in loop.walk():
            if node.op is Op.EXTERN and node.hint in ("sorted_keys", "top_keys"):
                source = node.inputs[0]
                size = math.prod(block_dims(source.shape, blocks, chunks)) * SORT_KEY_BYTES
                worst = max(worst, (size, source), key=lambda w: w[0])
    return worst


def pipelined_load_bytes(spec: ConfigSpec, config: Config) -> int:
    """Shared memory of the loads Triton stages in loops given their own ``num_stages``
    (``range_num_stages``; a kernel-wide ``num_stages`` pipelines only dot operands, counted by
    :func:`operand_stage_bytes`): each load of an innermost pipelined loop (the persistent
    program loop or a tile loop) takes ``stages - 1`` buffers of its tile, times the loop's
    unroll factor, in the loop that needs the most. Cross-compiled for sm_90, a sum of squares
    over [64, 128] bf16 tiles in a persistent loop: 4096 bytes of reduction scratch, 20480 at
    range_num_stages 2, 36864 at 3 or at 2 unrolled twice; [512, 128] at 2 unrolled 4 times
    needed 532480 (more than the SM has: the launch fails). A masked pool's inner loop over
    [2, 32, 128] bf16 tiles at 3 stages: 32768 bytes, 65536 unrolled twice. gfx942 stages none
    of them in LDS (8192 bytes whatever the stages), so AMD counts none."""
    if spec.target.backend != "cuda":
        return 0
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    persistent = (config.pid_type or "flat").startswith("persistent")
    worst = 0
    for loop in spec.loops:
        scopes = [
            (n.body or [], n.attrs.get("range_slot", -1)) for n in loop.walk() if n.op is Op.LOOP
        ]
        if persistent:
            scopes.append((loop.body, loop.range_slot))
        for body, slot in scopes:
            plan = RangePlan.of(config, slot)
            if plan.num_stages < 2 or any(n.op is Op.LOOP for n in walk(body)):
                continue
            operands = {id(through_views(i)) for n in body if n.op is Op.DOT for i in n.inputs[:2]}
            tiles = sum(
                math.prod(block_dims(n.shape, blocks, chunks)) * n.dtype.itemsize
                for n in body
                if n.op is Op.LOAD and n.ndim and id(n) not in operands
            )
            worst = max(worst, tiles * (plan.num_stages - 1) * max(plan.unroll_factor, 1))
    return worst


def applies(spec: ConfigSpec) -> bool:
    """Pipelines exist for kernels with a dot loop on CUDA targets with TMA (sm_90+), except
    where a dot's right operand is computed in the loop: the threads write it to shared memory
    each k-step, between the loads and the wgmma, so streaming the loads by TMA does not pay.
    (An int8-weight GEMM 4096^3 dequantizing its weight tile on the H200: the TMA pipeline
    default 0.547 ms, TMA at four other tiles 0.38-0.62, the plain pointer-fed 128x128x64
    0.345, benchmarks/results/heldout_dots_s9.md.)"""
    target = spec.target
    if not (spec.space.dot_slots and target.backend == "cuda" and target.tensor_descriptors):
        return False
    return not any(
        computed_operand(node, 1)
        for loop in spec.loops
        for node in loop.walk()
        if node.op is Op.LOOP
    )


def _dot_loads(spec: ConfigSpec) -> set[int]:
    space = spec.space
    return {m for slot in space.dot_slots for m in space.loop_loads[slot]}


def _tma_indexing(spec: ConfigSpec) -> list[str]:
    """Tensor descriptors for every access that may be one, pointers for the rest and for
    vector loads outside the dot loops: a descriptor is created in each program and one TMA
    round trip serves a few hundred bytes there (fp8 GEMM's row and column scales in its
    epilogue, H200: 1000x1536x1000 0.0164 ms by descriptor, 0.0135 by pointer; 4096x7168x4096
    0.188 / 0.185, benchmarks/results/fp8_small_s9.md)."""
    looped = _dot_loads(spec)
    space = spec.space
    shared = _fma_operands_used_elsewhere(spec)
    return [
        "tensor_descriptor"
        if "tensor_descriptor" in choices
        and not (node.op is Op.LOAD and len(node.shape) <= 1 and slot not in looped)
        and node.id not in shared
        else "pointer"
        for slot, (choices, node) in enumerate(zip(space.indexing_choices, space.accesses))
    ]


def _fma_operands_used_elsewhere(spec: ConfigSpec) -> set[int]:
    """Loads that feed an fp32 dot run on the FMA units and other math too (a row norm beside
    the product): by tensor descriptor the tile lands in shared memory, and reading it into
    registers for both uses spilled (H200, pairwise squared distances 8192^2 x 128 fp32: by
    descriptor 22-25 ms at any stage count or schedule, by pointer 0.863; ptxas: 32 registers
    and 5.9 KB of stack a thread). A plain fp32 GEMM keeps its descriptors (its tiles only
    feed the dot)."""
    dots = fma_dot_nodes(spec)
    if not dots:
        return set()
    users = readers([n for loop in spec.loops for n in loop.body])
    out = set()
    for dot in dots:
        for operand in dot.inputs[:2]:
            while operand.op is Op.VIEW:  # a transposed tile: tl.trans of the load
                operand = operand.inputs[0]
            if operand.op is Op.LOAD and any(
                u is not dot and u.op is not Op.VIEW for u in users.get(operand.id, [])
            ):
                out.add(operand.id)
    return out


def _widened(spec: ConfigSpec, base: Config) -> Config | None:
    """``base`` with the innermost output dim of the dots doubled (128x128 -> 128x256 tiles)."""
    blocks = list(base.block_sizes)
    slots = [s for s in range(len(spec.blocks)) if spec.blocks[s].dot_role == "mn"]
    slots = [s for s in slots if spec.blocks[s].role == "grid" and spec.blocks[s].innermost]
    if not slots or blocks[slots[0]] * 2 > spec.blocks[slots[0]].hi:
        return None
    blocks[slots[0]] *= 2
    return base.replace(block_sizes=blocks)


def _variants(spec: ConfigSpec, base: Config) -> list[Config]:
    """Every pipeline shape around ``base``: tiles x (8 warps | 4 warps specialized) x pid."""
    tiles = [base, *filter(None, [_widened(spec, base)])]
    indexing = _tma_indexing(spec)
    l2 = [L2_GROUP if g.rank >= 2 else 1 for g in spec.space.grids]
    orders = batch_outer_orders(spec)
    # cross-compiled for sm_90 with Triton 3.6: one specialized loop per kernel compiles (two,
    # as in causal attention's split loops, fail in its pass)
    # (FMA dots: the consumers' capped registers cannot hold an fp32 outer product's operands;
    # an fp32 matmul 4096x512x4096 at 64x128x64 spilled 11984 B a thread, sm_90)
    ws_ok = (
        spec.target.warp_specialize
        and not fma_dot_nodes(spec)
        and len(spec.space.dot_slots) == 1
        and True in spec.space.range_choices["range_warp_specializes"][spec.space.dot_slots[0]]
    )
    single_dot = _dots_in_dot_loops(spec) == 1
    out = []
    for tile in tiles:
        # the specialized consumers issue wgmma, which takes >= 64 rows (16-row decode tiles
        # compile to mma.sync, and Triton leaves such a loop unspecialized)
        rows = _output_tile_of(spec, tile, 0)[0]
        # and only single-dot loops (GEMMs, bmm: the specialization measured exact and fast on
        # the H200); loops of several dots (attention's backward) are left to the search, which
        # checks each config's results
        for specialized in (
            (False, True) if ws_ok and single_dot and rows >= WGMMA_ROWS else (False,)
        ):
            ws = [True if s in spec.space.dot_slots else None for s in range(spec.space.n_ranges)]
            for pid in ("persistent_interleaved", "flat"):
                config = tile.replace(
                    num_warps=HOPPER_WS_WARPS if specialized else _plain_warps(spec, tile, rows),
                    pid_type=pid,
                    indexing=indexing,
                    l2_groupings=l2,
                    loop_orders=orders,
                    range_warp_specializes=ws if specialized else [],
                    num_sm_multiplier=1 if pid != "flat" else None,
                )
                out += _staged(spec, config)
    return out


def _staged(spec: ConfigSpec, config: Config) -> list[Config]:
    """``config`` with the most stages that fit; for a warp-specialized loop, preceded by the
    same with pointer stores where its descriptor stores' staging buffer (live beside the
    stages) is what keeps a stage out. Measured on the H200, bmm 16x1024^3 at 128x256x64,
    specialized: descriptor store 3 stages 0.0566 ms, pointer store 3 stages 0.0556, 4 stages
    0.0543 (benchmarks/results/stages_occupancy_s8.md). An unspecialized persistent matmul lost 0-3% the
    same way (8 warps, 3 -> 4 stages, default_change_s8.md): there the descriptor store of one
    tile overlaps the next tile's loads, so it is left alone."""
    staged = _most_stages(spec, config)
    if staged is None:
        return []
    if not any(config.range_warp_specializes) or not store_staging_bytes(spec, staged):
        return [staged]
    freed = _most_stages(spec, _pointer_stores(spec, config))
    if freed is not None and (freed.num_stages or 0) > (staged.num_stages or 0):
        return [freed, staged]
    return [staged]


def _pointer_stores(spec: ConfigSpec, config: Config) -> Config:
    """``config`` with every store through pointers (the loads keep their indexing)."""
    modes = list(config.indexing) if not isinstance(config.indexing, str) else []
    for node in spec.space.accesses:
        slot = node.attrs["mem_slot"]
        if node.op is Op.STORE and slot < len(modes):
            modes[slot] = "pointer"
    return config.replace(indexing=modes)


def _plain_warps(spec: ConfigSpec, tile: Config, rows: int) -> int:
    """Warps of an unspecialized pipeline: a warpgroup (4 warps) per 64 accumulator rows, as
    wgmma gives each warpgroup 64 rows; 8 for taller tiles, for < 64-row tiles (mma.sync), and
    where 4 warps would spill what 8 hold (an attention backward's two [64, d] accumulators
    beside its [64, 64] scores)."""
    if rows != WGMMA_ROWS:
        return 8
    fits = not spec.predicted(tile.replace(num_warps=4)).spills
    return 4 if fits else 8


def batch_outer_orders(spec: ConfigSpec) -> list[list[int]]:
    """Grid orders that walk a batched dot's output tiles (its two ``mn`` grid dims, L2-grouped)
    fastest and its batch dims slowest; ``[]`` (the grid's own order) where no grid needs it.

    ``tc.tile([batch, m, n], block_size=[1, None, None])`` groups (batch, m) in its own order:
    a wave of a 16x1024^3 bmm then reads every batch's ``a`` once per column of ``n`` tiles
    (4 x 32 MB past a 50 MB L2). With batches outermost, a wave works through a few whole
    batches, each operand read from DRAM once (the order of cuBLAS's and Inductor's batched
    grids: batch on the slowest axis)."""
    orders, changed = [], False
    for loop in spec.loops:
        syms = loop.grid_syms
        mn = [
            d
            for d, sym in enumerate(syms)
            if not sym.scalar
            and sym.config_slot is not None
            and spec.blocks[sym.config_slot].dot_role == "mn"
        ]
        order = list(range(len(syms)))
        if len(mn) == 2 and mn != [0, 1]:
            order = mn + [d for d in order if d not in mn]
            changed = True
        orders.append(order)
    return orders if changed else []


def _dots_in_dot_loops(spec: ConfigSpec) -> int:
    """The most tl.dot nodes directly in one dot loop's body."""
    counts = [
        sum(1 for n in node.body or [] if n.op is Op.DOT)
        for loop in spec.loops
        for node in loop.walk()
        if node.op is Op.LOOP
    ]
    return max(counts, default=0)


def _most_stages(spec: ConfigSpec, config: Config) -> Config | None:
    """``config`` with the most stages (up to MAX_PIPELINE_STAGES) whose shared memory fits."""
    limit = spec.target.limits.max_shared_bytes
    most = MAX_PIPELINE_STAGES
    if any(config.range_warp_specializes):
        most = min(most, warp_specialize_stage_cap(spec.target) or most)
    for stages in range(most, MIN_PIPELINE_STAGES - 1, -1):
        staged = config.replace(num_stages=stages)
        if spec.estimated_shared_bytes(staged) <= limit:
            return staged
    return None


def legal_plan(spec: ConfigSpec, config: Config) -> Plan | None:
    """The plan of a pipeline config, or None where it would not be one: a repair, a dot-loop
    load that falls back to pointers (TMA needs 16-byte aligned strides, boxes of <= 256), shared
    memory over the target's, or predicted spills (a chunked GLA whose plain default spills too:
    its spilling TMA pipeline 9.92 ms, the plain 9.43 on an H100). (The loads of a loop Triton
    miscompiles with descriptors, :func:`computed_left_operand_loads`, stream through
    pointers.)"""
    try:
        plan = spec.resolve(config, warn=False)
    except ConfigError:
        return None
    dot_loads = _dot_loads(spec)
    if plan.repairs or any(
        a.indexing != "tensor_descriptor"
        for a in plan.accesses
        if a.slot in dot_loads and a.slot not in spec.space.off_descriptors
    ):
        return None
    r = plan.resources
    if r.shared_bytes > spec.target.limits.max_shared_bytes or r.spills:
        return None
    return plan


def pipeline_cost(spec: ConfigSpec, plan: Plan) -> float:
    """A relative time: the tiles each SM works through (programs over SMs, rounded up: the
    last wave's idle SMs cost as much as busy ones) x output elements per tile / the tile's
    efficiency, in k-steps with their fill and drain (:func:`tile_steps`). Persistent programs
    walk the same tiles, so they take the same time here, unless the tiles' dot loops differ in
    length: then the busiest SM's share under the plan's schedule (:func:`_uneven_steps`)."""
    cost = 0.0
    sms = spec.target.limits.num_sms
    specialized = any(plan.config.range_warp_specializes)
    for k, programs in enumerate(plan.resources.programs):
        m, n = _output_tile(spec, plan, k)
        k_steps = _k_steps(spec, plan.config, k)
        steps = _uneven_steps(spec, plan, k, k_steps, specialized)
        if steps is None:
            steps = tile_steps(math.ceil((programs or sms) / sms), k_steps, specialized)
        cost += steps * m * n / tile_efficiency(m, n)
    return cost


def _uneven_steps(
    spec: ConfigSpec, plan: Plan, index: int, k_steps: int | None, specialized: bool
) -> float | None:
    """:func:`tile_steps` for a grid whose tiles run dot loops of different lengths (causal
    attention): the busiest SM's k-steps under the plan's schedule (config/tile_schedule.py), in
    tiles of the full loop's ``k_steps``; None where the tiles are equal."""
    if not k_steps:
        return None
    dot_blocks = [
        plan.block(node.attrs["sym"]) if any(n.op is Op.DOT for n in node.body or []) else 0
        for node in inner_loops(spec.loops[index])
    ]

    def tile_time(trips: list[int | None]) -> float | None:
        known = [t for t in trips if t is not None]
        if len(known) < len(trips):
            return None
        steps = sum(-(-t // b) for t, b in zip(known, dot_blocks, strict=True) if b)
        return steps * WS_STEADY_COST if specialized else steps + FILL_STEPS

    work = uneven_work(spec, plan, index, tile_time)
    if work is None:
        return None
    fill = FILL_STEPS if specialized else 0.0
    return busiest_sm(work, plan, spec.target.limits.num_sms, fill) / k_steps


def tile_steps(tiles: int, k_steps: int | None, specialized: bool) -> float:
    """Time of ``tiles`` output tiles in a row on one SM, in tiles of steady k-steps. Without warp
    specialization each tile also fills its stages and drains into the epilogue, ``FILL_STEPS``
    k-steps' worth; a specialized producer loads the next tile meanwhile (only the first fill
    shows) at ``WS_STEADY_COST`` per step. Fitted on the H200 to WS/plain time ratios at the same
    tiles: 0.86 at 8 k-steps x 4 tiles an SM (bmm 64x512^3), 0.90 / 0.95 at 16 x 4 (bmm
    16x1024^3, matmul 4096x1024x4096), 0.98 / 1.01 at 32, 1.02 at 64; 1.06-1.09 at 16 x 1 (matmul
    + bias + GELU 1000^3: no next tile to overlap); benchmarks/results/cc_bmm_*.md, cc_mm_*.md,
    default_change_ws*.md."""
    if k_steps is None:
        return tiles * (WS_STEADY_COST if specialized else 1.0)
    if specialized:
        return (tiles * k_steps * WS_STEADY_COST + FILL_STEPS) / k_steps
    return tiles * (k_steps + FILL_STEPS) / k_steps


def _k_steps(spec: ConfigSpec, config: Config, loop: int) -> int | None:
    """k-steps of device loop ``loop``'s (first) dot loop under ``config`` (None: none)."""
    for node in spec.loops[loop].walk():
        if node.op is Op.LOOP and any(n.op is Op.DOT for n in node.body or []):
            sym = node.attrs["sym"]
            block = sym_block(sym, config.block_sizes, config.reduction_loops)
            return max(1, -(-extent_hint(sym) // max(block, 1)))
    return None


def tile_efficiency(m: int, n: int) -> float:
    intensity = m * n / (m + n)
    return intensity / (intensity + EFFICIENCY_KNEE)


def _output_tile(spec: ConfigSpec, plan: Plan, loop: int) -> tuple[int, int]:
    return _output_tile_of(spec, plan.config, loop)


def _output_tile_of(spec: ConfigSpec, config: Config, loop: int) -> tuple[int, int]:
    """The (rows, cols) of a device loop's largest dot output with ``config``'s blocks (the
    accumulator a program computes: matmul's [tm, tn], attention's [tm, d])."""
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    best = (1, 1)
    for node in spec.loops[loop].walk():
        if node.op is Op.DOT:
            sizes = block_dims(node.shape, blocks, chunks)
            shape = (max(math.prod(sizes[:-1]), 1), sizes[-1])
            best = max(best, shape, key=lambda rc: rc[0] * rc[1])
    return best


def pipeline_configs(spec: ConfigSpec, base: Config | None = None) -> list[Config]:
    """Legal Hopper pipeline configs around ``base`` (default: the spec's plain default),
    resolved, cheapest first; ties keep the order of :func:`_variants` (8 warps before
    warp-specialized, persistent before flat)."""
    if not applies(spec):
        return []
    base = base or spec.plain_default()
    ranked: list[tuple[float, int, Config]] = []
    seen: set[str] = set()
    for i, config in enumerate(_variants(spec, base)):
        plan = legal_plan(spec, config)
        if plan is None or plan.config.key() in seen:
            continue
        seen.add(plan.config.key())
        ranked.append((pipeline_cost(spec, plan), i, plan.config))
    return [config for _, _, config in sorted(ranked, key=lambda t: (t[0], t[1]))]


def hopper_default(spec: ConfigSpec, base: Config) -> Config:
    """The best legal pipeline config, else ``base`` (no TMA for the dot operands, AMD, ...)."""
    found = pipeline_configs(spec, base)
    return found[0] if found else base


__all__ = [
    "batch_outer_orders",
    "hopper_default",
    "operand_stage_bytes",
    "pipelined_load_bytes",
    "pipeline_configs",
    "pipeline_cost",
    "store_staging_bytes",
    "tile_steps",
]

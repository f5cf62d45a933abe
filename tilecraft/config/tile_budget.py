"""Fitting a config's tiles to what a thread can hold (stage: config; in: a ConfigSpec and a
config; out: the config with blocks halved, reduction dims looped or warps added).

The heuristic default starts from preferred tiles and brings them within budget here: the largest
tile value within an element budget (:func:`shrink_to`), then enough warps that the values the
resource model predicts live at once fit a thread's registers (:func:`spread_live_values`); a dot
kernel stops at 8 warps and shrinks its tiles instead (:func:`shrink_dot_tiles`). Before that,
:func:`fill_device` halves grid blocks of a grid under a wave; after the splits, a column walk
whose grid still leaves resident slots empty reshapes its tile (:func:`fill_resident_slots`).
A strided reduction that chunks would read twice stays whole in narrower columns where it fits
(:func:`shrink_to`, one pass).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tilecraft.config import occupancy
from tilecraft.config.config import Config
from tilecraft.config.dims import cdiv
from tilecraft.config.eviction import reread_bytes
from tilecraft.config.fma_operands import FMA_K_STEP
from tilecraft.config.fp32_dots import fma_dot_k_slots, fma_dot_nodes
from tilecraft.config.plan import prev_pow2
from tilecraft.config.resolve import predicted_registers
from tilecraft.config.row_loops import MIN_WARPS
from tilecraft.ir.nodes import Op
from tilecraft.ir.streamed_steps import streamed_step

if TYPE_CHECKING:
    from tilecraft.config.dims import ValueShape
    from tilecraft.config.spec import ConfigSpec

DOT_MAX_WARPS = 8  # two warpgroups: more do not spread a dot kernel's accumulators
WGMMA_TILE_ROWS = 64  # a warpgroup's rows of a wgmma accumulator: dot tiles shrink to it
FMA_MIN_ROWS = 16  # ... and an FMA dot's rows and columns (no warpgroup) to this
# bytes of each row of a tile's last (contiguous) dim that shrinking keeps while other dims can
# halve: the 2-D pointwise default's 128 bf16 columns
LANE_ROW_BYTES = 256
SECTOR_BYTES = 32  # a DRAM sector: the narrowest row segment a one-pass reduction's tile takes
# a column walk whose steps stream into reductions (stream_walk_steps): elements a thread
# reduces each step, and the threads each SM's programs hold together
STREAM_ELEMENTS_PER_THREAD = 64
STREAM_THREADS_PER_SM = 1024


def spread_live_values(spec: ConfigSpec, config: Config) -> Config:
    """More warps while the resource model predicts that the values live at once exceed a
    thread's registers (up to the target's limit; 8 for dot kernels, whose tiles shrink
    instead): each thread then holds a smaller share of every live tile. (The seed-000
    kernel's default at 4608x40920 took 6.1 ms at 16 warps on an H200 and 3.0 ms at 32, both
    spilling.)"""
    warps = config.num_warps or 4
    most = min(spec.target.max_warps, DOT_MAX_WARPS) if spec.has_dot else spec.target.max_warps
    while warps < most:
        if not predicted_registers(spec, config.replace(num_warps=warps), warps).spills:
            break
        warps *= 2
    config = config.replace(num_warps=warps)
    return shrink_dot_tiles(spec, config) if spec.has_dot else config


def shrink_dot_tiles(spec: ConfigSpec, config: Config) -> Config:
    """Halve a dot kernel's largest grid block (down to a warpgroup's 64 rows) while values
    still spill at its warps: warps past 8 do not spread wgmma accumulators (a warpgroup
    owns 64 rows), smaller tiles do. An attention backward's dk/dv loop at 128 keys x 64
    queries, d 128: 32 warps spilled 952 B a thread (cross-compiled for sm_90), 64 x 64 at
    8 warps 210 registers and none. The K block of an fp32 dot on the FMA units halves first,
    down to ``FMA_K_STEP`` (an fp32 matmul 4096^3 on an H200: 128x128x32 3.10 ms, 64x128x64
    3.42, 128x128x16 3.37; cc_fp32_s17)."""
    # a kernel whose every dot runs on the FMA units has no warpgroup to fill: its tile halves
    # on where that ends its spills (an STFT's two dots over a whole K of 64 at [64, 64],
    # 8 warps: 255 registers and 528 B spilled; at [32, 32] 170 and none; cross-compiled for
    # sm_90); one that spills at every size keeps its tile (Mamba-2's SSD: chunks of 16 spill
    # too and walk more of them)
    dots = [n for loop in spec.loops for n in loop.walk() if n.op is Op.DOT]
    if dots and len(fma_dot_nodes(spec)) == len(dots):
        smaller = _halve_while_spilling(spec, config, FMA_MIN_ROWS)
        if not predicted_registers(spec, smaller, config.num_warps or 4).spills:
            return smaller
    return _halve_while_spilling(spec, config, WGMMA_TILE_ROWS)


def _halve_while_spilling(spec: ConfigSpec, config: Config, floor: int) -> Config:
    """Halve the FMA dots' K blocks, then the largest grid block down to ``floor``, while the
    model predicts spills."""
    warps = config.num_warps or 4
    k_slots = fma_dot_k_slots(spec)
    while predicted_registers(spec, config, warps).spills:
        blocks = list(config.block_sizes)
        # an FMA dot's K block sets only the operand slices it holds, its M x N tile the
        # outer product each thread runs per shared-memory read: K shrinks first
        deep = [s for s in k_slots if blocks[s] > FMA_K_STEP]
        grid = [s for slots in spec.grid_slots for s in slots if blocks[s] > floor]
        if not deep and not grid:
            break
        slot = max(deep or grid, key=lambda s: blocks[s])
        blocks[slot] //= 2
        config = config.replace(block_sizes=blocks)
    return config


def shrink_to(spec: ConfigSpec, config: Config, budget: int) -> Config:
    """Halve the largest block (or rolled-reduction chunk) of the largest tile until every
    tile has at most ``budget`` elements (or nothing can shrink). A contiguous block keeps
    ``MIN_SEGMENT_BYTES`` of each row while a whole reduction dim of the tile can be looped
    instead: a logsumexp over the middle dim of [16, 4096, 1024] bf16 shrank its contiguous
    block to 2 columns (4 of every 32 bytes read used) rather than loop over the 4096. The
    tile's last dim keeps ``LANE_ROW_BYTES`` while another block can halve."""
    blocks = list(config.block_sizes)
    chunks = list(config.reduction_loops)
    while True:
        current = Config(**{**config.to_dict(), "block_sizes": blocks, "reduction_loops": chunks})
        largest, value = spec.largest_value(current)
        if largest <= budget or value is None:
            return current
        grid = [d[1] for d in value.dims if d[0] == "b" and blocks[d[1]] > spec.blocks[d[1]].lo]
        above_floor = [s for s in grid if blocks[s] > (spec.blocks[s].row_floor or 1)]
        rolled = [d[1] for d in value.dims if d[0] == "r" and (chunks[d[1]] or 0) > 16]
        whole = [d[1] for d in value.dims if d[0] == "r" and _may_roll(spec, d[1], chunks)]
        # the value's last dim lies along each warp's lanes: while another dim can halve, it
        # keeps LANE_ROW_BYTES of each row
        wide = [s for s in above_floor if not _keeps_lanes(spec, value, s, blocks[s])]
        if wide or above_floor:
            slot = max(wide or above_floor, key=lambda s: blocks[s])
            blocks[slot] //= 2
        elif rolled:
            chunks[rolled[0]] = (chunks[rolled[0]] or 32) // 2
        elif whole and (one_pass := _one_pass_lanes(spec, current, value, whole[0])):
            return one_pass
        elif whole:
            chunks[whole[0]] = spec.reductions[whole[0]].full // 2
        elif grid:
            slot = max(grid, key=lambda s: blocks[s])
            blocks[slot] //= 2
        elif short := [
            d[1] for d in value.dims if d[0] == "r" and _may_roll(spec, d[1], chunks, 1)
        ]:
            # nothing else shrinks: a short dim loops too (NSA's [1024 blocks, 16 keys, 128]
            # pooled over its 16 was past Triton's tile limit at every config)
            slot = max(short, key=lambda s: spec.reductions[s].full)
            chunks[slot] = (chunks[slot] or spec.reductions[slot].full) // 2
        else:
            return current


def _one_pass_lanes(
    spec: ConfigSpec, config: Config, value: ValueShape, slot: int
) -> Config | None:
    """``config`` with ``value``'s lane block narrowed (not below ``SECTOR_BYTES`` of a row) so
    that its whole reduction dim ``slot`` fits a thread's registers at half the target's most
    warps (``OCCUPANCY_REGISTERS``, no spills), where looping that dim in chunks would make each
    program read its rows twice (a softmax over a non-contiguous dim: a statistics pass, then the
    normalization); None where it would not, or no such block fits. One pass moves a third fewer
    bytes than two passes that each stream the rows. H200, bf16 (one_pass_s26), against the old
    default of 32 columns in 256-row chunks at 8 warps: a softmax over the middle dim of
    [64, 2048, 1024] 0.228 ms whole at 16 columns (0.313 chunked; torch.compile 0.295), of
    [32, 1024, 4096] 0.208 at 32 columns (0.254), of [16, 512, 8192] 0.076 (0.101); a var_mean
    over dim 0 of [1024, 128, 2048] 0.223 (0.264), of [512, 256, 768] 0.0744 (0.0862). The warps
    are then the fewest that hold the tile without spilling (``spread_live_values``): each warp
    more is another cross-warp combine per pass (var_mean [1024, 128, 2048] at 16 warps 0.262,
    [256, 512, 1024] at 8 warps 0.134 against 0.093 at 2)."""
    lane = lanes_slot(spec, value)
    if lane is None or slot in spec.contiguous_reductions:
        return None
    chunks = list(config.reduction_loops)
    chunks[slot] = spec.reductions[slot].full // 2
    rolled = config.replace(reduction_loops=chunks)
    if not any(reread_bytes(spec, rolled, i) for i in range(len(spec.loops))):
        return None  # one pass over the rows either way: chunks keep longer row segments
    warps, blocks = spec.target.max_warps // 2, list(config.block_sizes)
    while True:
        candidate = config.replace(block_sizes=blocks)
        estimate = predicted_registers(spec, candidate, warps)
        if not estimate.spills and estimate.per_thread <= occupancy.OCCUPANCY_REGISTERS:
            return candidate
        narrower = blocks[lane] // 2
        if narrower < spec.blocks[lane].lo or narrower * spec.blocks[lane].itemsize < SECTOR_BYTES:
            return None
        blocks[lane] = narrower


def _keeps_lanes(spec: ConfigSpec, value: ValueShape, slot: int, block: int) -> bool:
    """Whether ``slot`` is ``value``'s last contiguous loaded or stored block dim (where Triton puts each
    warp's lanes), at or under ``LANE_ROW_BYTES`` a row. (A masked mean over the middle dim of
    [64, 512, 4096] bf16, tiles [batch, time, hidden]: the old order halved the largest dim
    whatever it was and gave [8, 32, 32], reading 64 bytes of each row. A global average pool
    of a channels_last [256, 2048, 7, 7] bf16 tensor, tiles [batch, channel, :, :] with the
    channel contiguous: [8, 16] 0.0765 ms, [4, 32] 0.0319, torch.compile 0.0553; H200 graph
    replays, graph_replay_avgpool_s14.)"""
    if lanes_slot(spec, value) != slot:
        return False
    return 0 < block * spec.blocks[slot].itemsize <= LANE_ROW_BYTES


def lanes_slot(spec: ConfigSpec, value: ValueShape) -> int | None:
    """The block slot of ``value``'s last contiguous loaded dim, along which Triton lays each
    warp's lanes (None: no block dim of it is contiguous)."""
    blocks = [d[1] for d in value.dims if d[0] == "b" and spec.blocks[d[1]].contiguous]
    return blocks[-1] if blocks else None


def _may_roll(spec: ConfigSpec, slot: int, chunks: list[int | None], shortest: int = 32) -> bool:
    """Whether reduction dim ``slot`` may be looped in chunks by the default: longer than
    ``shortest``, whole or in chunks over 1 (a last resort halves them), and no other dim is
    looped (codegen rolls one)."""
    r = spec.reductions[slot]
    others = [c for i, c in enumerate(chunks) if i != slot and c is not None]
    chunk = chunks[slot]
    open_chunk = chunk is None or (shortest < 32 and chunk > 1)
    return open_chunk and not others and r.loopable and not r.homes and r.full > shortest


def fill_device(spec: ConfigSpec, blocks: list[int]) -> list[int]:
    """Halve a device loop's largest grid block while its grid has fewer programs than the
    target has SMs (an underfilled GPU is the default's worst case: e.g. a column sum of
    8192 columns in 128-wide blocks runs 64 programs on 132 SMs), a contiguous one not
    below ``MIN_SEGMENT_BYTES`` of a row (split reductions fill the rest: a bf16 column sum
    of 65536 x 1024 on the H200 ran 0.0552 ms in 16-column tiles, 0.0477 in 32-column
    ones with the same 512 programs, benchmarks/results/colsum_s7.md). Below its segment
    floor a block halves where :func:`_refills` allows: a decode attention over 256 heads
    looping over 8192 keys ran 3.2 ms at 16 heads a program (16 programs), 1.0 at 2 (128),
    0.36 at 1 (256, 128-key chunks; decode_s9.md); 1000-row sums of one 1000-wide tile a
    program did not gain from 250 programs over 125 (0.83-1.17x, default_change_s9.md).
    Blocks over other dims halve first, the widest first: a masked mean pool over
    [64, 2048, 2048] bf16 halved [32 sequences, 128 columns] to [16, 32] (64 bytes of each
    row), now to [4, 128] (graph_s16b: 0.252 -> 0.221 ms at the same loop chunk)."""
    blocks = list(blocks)
    for loop, (slots, fixed) in enumerate(zip(spec.grid_slots, spec.fixed_programs, strict=True)):
        while True:
            programs = fixed * math.prod(cdiv(spec.blocks[s].extent, blocks[s]) for s in slots)
            shrinkable = [
                s
                for s in slots
                if blocks[s] > spec.blocks[s].lo
                and (blocks[s] > spec.blocks[s].segment_floor or _refills(spec, s, loop))
            ]
            if programs >= spec.target.limits.num_sms or not shrinkable:
                break
            # a dim that walks rows contiguously halves last: its segments stay long
            slot = max(shrinkable, key=lambda s: (spec.blocks[s].row_floor is None, blocks[s]))
            blocks[slot] //= 2
    return blocks


def _column_walk(spec: ConfigSpec, config: Config, index: int) -> tuple[int, int] | None:
    """(column slot, row slot) of device loop ``index`` when its programs walk the rows of a
    column tile (one contiguous grid block, one inner loop over a dim that is not contiguous)
    and its inner loop is not split (a split loop fills the device with its shares instead,
    ``config/split.py``)."""
    splits = config.split_reductions
    if index < len(splits) and (splits[index] or 1) > 1:
        return None
    grid, inner = spec.grid_slots[index], spec.loop_slots[index]
    columns = [s for s in grid if spec.blocks[s].contiguous and spec.blocks[s].row_floor]
    rows = [s for s in inner if not spec.blocks[s].contiguous and not spec.blocks[s].dot_role]
    return (columns[0], rows[0]) if len(columns) == 1 and len(rows) == 1 else None


def fill_resident_slots(spec: ConfigSpec, config: Config) -> Config:
    """Reshape the tile of each device loop whose programs walk the rows of a column tile (a
    contiguous grid block, an inner loop over a dim that is not) while its grid leaves resident
    slots empty (fewer programs than SMs x ``occupancy.resident_programs``): the column block
    halves (not below its 64-byte row floor) and the loop's step takes twice the rows. The tile
    and its registers stay; each step still moves as many bytes, and twice the programs walk
    the columns at once. Such a loop waits on each step's loads (its running result feeds the
    next step), so its time is its steps, not its bytes. H200, a column max + argmax of
    4096x32000 bf16 (colmax_s26a, colmax_s26c): [128 columns, 64 rows] a step (250
    programs) 0.399 ms, [64, 128] (500: the rule's) 0.237 at 8 warps and 0.173 at 4, [32, 256]
    0.186 at 8; torch.compile 0.207. Loops that split (``config/split.py``) fill the slots with
    their shares instead."""
    blocks = list(config.block_sizes)
    for index in range(len(spec.loops)):
        walk = _column_walk(spec, config, index)
        if walk is None:
            continue
        column, row = walk
        while True:
            current = config.replace(block_sizes=blocks)
            programs = spec.programs(index, current)
            slots = spec.target.limits.num_sms * occupancy.resident_programs(spec, current)
            narrower = blocks[column] // 2
            if (
                programs is None
                or programs >= slots
                or narrower < (spec.blocks[column].row_floor or 1)
                or blocks[row] * 2 > spec.blocks[row].hi
            ):
                break
            blocks[column], blocks[row] = narrower, blocks[row] * 2
    return config.replace(block_sizes=blocks)


def stream_walk_steps(spec: ConfigSpec, config: Config) -> Config:
    """Size the step of a one-loop kernel's column walk whose steps stream into reductions
    that are not sums (``ir/streamed_steps.py``: a column max, argmax, min): each step pays a
    cross-warp combine and the load latency it waits on, and holds nothing of its tile after,
    so the step grows to ``STREAM_ELEMENTS_PER_THREAD`` elements a thread (while the model
    predicts no spill) at the warps that put ``STREAM_THREADS_PER_SM`` threads on each SM
    (the grid's programs per SM decide; at most half the target's warps). Never a smaller
    step. H200 (walk_*_s27, argmin_s27, stream_*_s27): column max+argmax bf16 32768x4096 (128
    programs of 32 columns) [32, 256] at 8 warps 0.336 ms -> [32, 1024] at 16 (the rule's)
    0.171; at 4096x32000 (1000 programs) the step stays [32, 256], 8 warps 0.186 -> 4 (the
    rule's) 0.157; a column argmin of 4096x50000 fp32 [64, 128], 8 warps 0.362 -> 4 0.287.
    Larger steps measured faster on the max+argmax ([32, 2048] at 16 0.133; [32, 1024] at 4
    0.106) but slower on a column argmin of 16384x8192 fp32 ([16, 1024] at 8 0.19, at 4 0.286;
    [16, 2048] at 8 0.289), so the rule keeps to 64 elements a thread. Column sums gain
    nothing from larger steps (0.0187 -> 0.0221 ms for a 4096^2 sum): they defer into tile
    accumulators instead."""
    if len(spec.loops) != 1 or (walk := _column_walk(spec, config, 0)) is None:
        return config
    column, row = walk
    loops = [n for n in spec.loops[0].walk() if n.op is Op.LOOP]
    programs = spec.programs(0, config)
    if len(loops) != 1 or not streamed_step(loops[0]) or programs is None:
        return config
    target = spec.target
    per_sm = cdiv(programs, target.limits.num_sms)
    threads = max(STREAM_THREADS_PER_SM // per_sm, MIN_WARPS * target.warp_size)
    # at most half the most warps: a program of them holds an SM alone (chunk_limit's reason)
    warps = min(prev_pow2(threads // target.warp_size), target.max_warps // 2)
    elements = STREAM_ELEMENTS_PER_THREAD * warps * target.warp_size
    step = min(prev_pow2(elements // config.block_sizes[column]), spec.blocks[row].hi)
    blocks = list(config.block_sizes)
    while step >= config.block_sizes[row]:
        blocks[row] = step
        stepped = config.replace(block_sizes=blocks, num_warps=warps)
        if not predicted_registers(spec, stepped, warps).spills:
            return stepped
        step //= 2
    return config


def _refills(spec: ConfigSpec, slot: int, loop: int) -> bool:
    """Whether a grid block at its segment floor may still halve (while the grid is under a
    wave): a dim without a row floor (not a contiguous loaded one, whose 64-byte segments
    stay) of a device loop whose programs loop. A looping program's time grows with its
    work, so an SM left idle is idle for the whole kernel; a program of one load and store
    ends in about a memory latency either way."""
    looping = any(n.op is Op.LOOP for n in spec.loops[loop].walk())
    return spec.blocks[slot].row_floor is None and looping


__all__ = [
    "DOT_MAX_WARPS",
    "fill_device",
    "fill_resident_slots",
    "shrink_dot_tiles",
    "shrink_to",
    "spread_live_values",
    "stream_walk_steps",
]

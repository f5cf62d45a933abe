"""Defaults for row loops (stage: config heuristic; in: a ConfigSpec and the default's starting
blocks; out: row blocks, chunks and warps of the device loops that walk rows).

A *row loop* is a device loop over rows whose program walks each row's contiguous dim: an inner
``tc.tile`` loop over it (a two-pass softmax, Welford) or a reduction dim too long to stay whole
(a full-row tile ``x[tm, :]`` of 40920 columns, looped in chunks). Such a loop is bound by memory
latency per iteration, so its default is:

* **The chunk as large as the row, up to a register limit.** A chunk holds about
  ``ROW_ELEMS_PER_THREAD`` elements per thread at half the target's most warps (16 warps x 32
  lanes on NVIDIA, 8 wave64s on AMD: 8192 elements either way). A row up to that is one chunk
  (a second loop over the same row then re-reads it from L1/L2); a longer row takes the largest
  power-of-two chunk that pads its last chunk by at most ``MAX_PAD`` of the row.
* **One row per program** once a chunk reaches ``ROW_LOOP_TILE`` elements; shorter rows share a
  program up to that tile (512-column rows: 8 per program).
* **Enough rows to amortize what a program writes once.** A store at the program's own row
  (``partial[tm.id, :] = ...``: a per-program partial that a later reduction reads back) costs
  the same bytes whatever the rows per program; a program takes enough rows that those bytes,
  written and read once, are at most ``PROGRAM_BYTES_SHARE`` of the bytes its rows move, and its
  chunk shrinks so that the tile stays at most ``MULTI_ROW_TILE`` elements (RMSNorm backward
  4608x40920: 4 rows x 2048, 0.586 ms, vs 0.858 at 1 x 8192 and 0.674 at 2 x 4096; 2048x128256:
  0.774 vs 1.19 and 0.984; benchmarks/results/cc_rmsbwd_*.md).
* **Warps from the tile**: enough threads that each holds ``ROW_ELEMS_PER_THREAD`` elements
  (8192 -> 16 warps on NVIDIA, 8 wave64s on AMD), at least 4, but no more threads along a row
  than give each ``VECTOR_BYTES`` of it; more if the resource model still predicts spills
  (``config/tile_budget.spread_live_values``).

Measured on the H200 (bf16, ms; benchmarks/results/row_loops.md and issue 11's quick runs): two-pass
softmax 8192^2 0.155 at 32 rows x 256, 0.083 at 1 x 4096 / 4 warps, 0.072 at 1 x 8192 / 16 warps;
Welford 4096x16384 0.180 -> 0.098 (1 x 4096 / 4 warps) -> 0.073 (whole row, 8 warps, 2 stages);
RMSNorm over full rows of 40920 0.283 at 2 rows x 4096 / 8 warps, 0.189 at 1 x 4096 / 32 warps.

Loops that scan along the row (cumsum) keep ``ROW_LOOP_TILE`` chunks (a whole row scanned in
one tile counts as one chunk) and the tile-size warps: a scan's cross-warp steps grow with the
warps, and no measurement supports wider ones. Loops with
``tl.dot`` keep their dot tiles (their k loop is not a row).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from tilecraft.config.config import Config
from tilecraft.config.dims import cdiv
from tilecraft.config.occupancy import OCCUPANCY_REGISTERS
from tilecraft.config.plan import next_pow2
from tilecraft.config.resolve import predicted_registers
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Shape, Sym, SymKind
from tilecraft.targets.target import Target

if TYPE_CHECKING:
    from tilecraft.config.dims import ReductionSpec
    from tilecraft.config.spec import ConfigSpec

ROW_LOOP_TILE = 4096  # elements of a row program's tile below which it takes several rows
ROW_ELEMS_PER_THREAD = 16  # elements of a row loop's chunk per thread the default aims for
MAX_PAD = 1 / 8  # of a chunked row: masked columns its last chunk may add
WHOLE_ROW = 16384  # a reduction dim up to this many (padded) elements stays one tile
MIN_WARPS = 4
# a program's own writes (written once, read back once) at most this share of its rows' bytes;
# RMSNorm backward's [n] fp32 partial per program against 6n bytes per bf16 row: 4 rows
PROGRAM_BYTES_SHARE = 1 / 3
# the tile of a program raised to several rows (4 x 2048 beat 4 x 4096 and 4 x 8192 for RMSNorm
# backward at 40920 and 128256 columns; benchmarks/results/cc_rmsbwd_*.md)
MULTI_ROW_TILE = 2 * ROW_LOOP_TILE
SHORT_ROW_TILE = 1024  # elements a whole-row program's tile grows to (short_row_blocks)
MIN_CHUNK = 512  # a chunk shrunk for more rows keeps at least this many elements (1 KB of bf16)
# bytes of a row one thread loads at once: 128-bit loads. RMSNorm backward 4 rows x 2048 bf16 at
# 16 warps (4 elements of each row a thread) ran 0.786 ms, at 8 warps (8: 16 bytes) 0.586
VECTOR_BYTES = 16


def chunk_limit(target: Target) -> int:
    """The widest chunk: ``ROW_ELEMS_PER_THREAD`` per thread at half the target's most warps. A
    program of the most warps holds an SM alone (two per SM) and stalls at each cross-warp
    reduction of the row: on the H200, 1 x 16384 at 32 warps against 1 x 8192 at 16 (registers
    equal, 64): softmax 8192x32000 0.383 vs 0.320 ms, cross-entropy 4096x32000 0.106 vs 0.096,
    Welford 4096x16384 0.121 vs 0.082 (benchmarks/results/default_change_model.md)."""
    return target.max_warps // 2 * target.warp_size * ROW_ELEMS_PER_THREAD


def row_chunk(extent: int, target: Target) -> int:
    """The chunk of a row of ``extent`` elements: the whole row (padded to a power of two) up to
    :func:`chunk_limit`; for a longer row the largest power of two that pads the last chunk by
    at most ``MAX_PAD`` of the row, else (down to ``ROW_LOOP_TILE``) the largest that pads
    least."""

    def lanes(c: int) -> int:
        return -(-extent // c) * c

    chunk = best = min(next_pow2(max(extent, 1)), chunk_limit(target))
    while chunk > ROW_LOOP_TILE and lanes(chunk) - extent > extent * MAX_PAD:
        chunk //= 2
        # a halving that pads no less only adds iterations (7168: one 8192 chunk pads as much
        # as two of 4096; H200 fp8 row quantization 16384x7168: 0.108 vs 0.112 ms)
        best = chunk if lanes(chunk) < lanes(best) else best
    return best


def default_chunk(r: ReductionSpec, chunk_rows: bool, target: Target) -> int | None:
    """The default's chunk for a reduction dim (None: whole): a row up to ``WHOLE_ROW`` stays
    whole, a longer one is looped in :func:`row_chunk` chunks; a row whose carried accumulators
    need homes is chunked only when ``chunk_rows`` (by 4096, or half the row), whatever its
    length."""
    if not r.loopable or (r.homes and not chunk_rows):
        return None
    if r.homes:
        return min(ROW_LOOP_TILE, r.full // 2)
    return None if r.full <= WHOLE_ROW else row_chunk(r.extent, target)


def _left_alone(loop: DeviceLoop) -> bool:
    """Whether the row rule leaves ``loop`` alone: a scan along the row, or a ``tl.dot`` (its
    k loop walks a contiguous dim too, but its blocks are set by the dot tiles)."""
    return any(n.op in (Op.SCAN, Op.GATHER, Op.DOT) for n in loop.walk())


def _scanned_rows(spec: ConfigSpec, loop: DeviceLoop, chunks: list[int | None]) -> list[int]:
    """The (padded) widths of ``loop``'s whole reduction dims when it scans along them (a
    cumsum over a full-row tile ``x[tm, :]``): such a row takes ``ROW_LOOP_TILE`` elements of
    tile like a chunked row, not the pointwise element budget, whose wider tile wants more
    warps, and each warp more is another cross-warp step of the scan. (H200, a stream
    compaction of 16384x4096 fp32 rows by an exclusive cumsum of the keep mask: 2 rows a program
    at 8 warps 0.448 ms, at 4 warps 0.374, 1 row at 4 warps 0.343; one_pass_s26.)"""
    if not any(n.op is Op.SCAN for n in loop.walk()):
        return []
    return [spec.reductions[i].full for i in _row_indices(spec, loop) if chunks[i] is None]


def _chunked_rdims(spec: ConfigSpec, loop: DeviceLoop, chunks: list[int | None]) -> list[int]:
    """The chunks of ``loop``'s looped reduction dims (a full-row tile walked in chunks)."""
    return [c for i in _row_chunk_indices(spec, loop) if (c := chunks[i]) is not None]


def _row_dims(spec: ConfigSpec, loop: DeviceLoop, grid: list[int]) -> list[tuple[int, Sym]]:
    """(slot, sym) of ``loop``'s grid dims that count rows: neither dot tiles nor a contiguous
    dim (a 2-D grid's column tiles)."""
    return [
        (s, next(y for y in loop.grid_syms if y.config_slot == s))
        for s in grid
        if not (spec.blocks[s].dot_role or spec.blocks[s].contiguous)
    ]


def _row_chunk_indices(spec: ConfigSpec, loop: DeviceLoop) -> list[int]:
    """Indices into ``reduction_loops`` of ``loop``'s reduction dims whose chunks are row
    widths (not those whose carried accumulators live in memory: their chunk has rules of its own)."""
    return [i for i in _row_indices(spec, loop) if not spec.reductions[i].homes]


def _row_indices(spec: ConfigSpec, loop: DeviceLoop) -> list[int]:
    """Indices into ``reduction_loops`` of ``loop``'s reduction dims."""
    slots = {s.config_slot for s in loop.syms if s.kind is SymKind.RDIM}
    return [i for i, r in enumerate(spec.reductions) if r.slot in slots]


def _resize_widths(
    spec: ConfigSpec,
    loop: DeviceLoop,
    inner: list[int],
    blocks: list[int],
    chunks: list[int | None],
    resize: Callable[[int], int],
) -> bool:
    """``resize`` applied in place to the contiguous blocks among ``inner`` (never below their
    least) and to ``loop``'s looped row chunks; whether any changed."""
    changed = False
    for s in inner:
        if spec.blocks[s].contiguous:
            new = max(spec.blocks[s].lo, resize(blocks[s]))
            changed, blocks[s] = changed or new != blocks[s], new
    for i in _row_chunk_indices(spec, loop):
        chunk = chunks[i]
        if chunk is not None and resize(chunk) != chunk:
            changed, chunks[i] = True, resize(chunk)
    return changed


def row_blocks(
    spec: ConfigSpec, blocks: list[int], chunks: list[int | None]
) -> tuple[list[int], list[int | None]]:
    """Each row loop's chunks (inner loops over a contiguous dim: :func:`row_chunk`) and rows
    per program (a tile of ``ROW_LOOP_TILE`` elements: one row once a chunk is that wide; more
    where :func:`amortizing_rows` asks, with chunks shrunk to keep the tile). Many short
    programs hide the latency of each dependent iteration; few tall ones serialize it."""
    blocks, chunks = list(blocks), list(chunks)
    for loop, grid, inner in zip(spec.loops, spec.grid_slots, spec.loop_slots, strict=True):
        contiguous = [s for s in inner if spec.blocks[s].contiguous]
        if contiguous and not _left_alone(loop):
            for s in contiguous:
                b = spec.blocks[s]
                blocks[s] = max(b.lo, min(b.hi, row_chunk(b.extent, spec.target)))
        widths = [blocks[s] for s in contiguous] + _chunked_rdims(spec, loop, chunks)
        widths = widths or _scanned_rows(spec, loop, chunks)
        if not widths:
            continue
        for s, sym in _row_dims(spec, loop, grid):
            b = spec.blocks[s]
            by_tile, by_bytes = ROW_LOOP_TILE // max(widths), amortizing_rows(loop, sym)
            blocks[s] = max(b.lo, min(b.hi, max(by_tile, by_bytes)))
            if by_bytes > max(by_tile, 1):  # more rows than the tile gives: narrower chunks
                tile = min(max(ROW_LOOP_TILE, max(widths)), MULTI_ROW_TILE)
                width = max(tile // blocks[s], MIN_CHUNK)
                narrowed = [] if _left_alone(loop) else inner
                _resize_widths(spec, loop, narrowed, blocks, chunks, partial(min, width))
    return blocks, chunks


def short_row_blocks(spec: ConfigSpec, blocks: list[int], chunks: list[int | None]) -> list[int]:
    """Grid blocks of each straight-line loop (no inner loop; any reduction dim a whole tile,
    ``x[tn, :]``) doubled while the loop's largest tile holds fewer than ``SHORT_ROW_TILE``
    elements: the default's 32 rows of a short row (quaternions of 4 fp32, pixels of 3
    channels) leave a program a few hundred bytes to move, and so does a [128] tile of a grid
    whose other dims take one index each (``block_size=[1, 1, None]``: a per-channel affine
    of NCDHW volumes, 0.162 -> 0.038 ms at [1024], one element a thread in 2-byte scalar
    accesses before; short_row_ab_s30). The grid dim with the most programs grows first."""
    blocks = list(blocks)
    loops = zip(spec.loops, spec.grid_slots, spec.loop_slots, strict=True)
    for index, (loop, grid, inner) in enumerate(loops):
        rows = _row_indices(spec, loop)
        if inner or any(chunks[i] is not None for i in rows) or _left_alone(loop):
            continue
        while _tile_elements(spec, index, blocks, chunks) < SHORT_ROW_TILE:
            growable = [
                s for s in grid if blocks[s] < min(spec.blocks[s].hi, spec.blocks[s].extent)
            ]
            if not growable:
                break
            slot = max(growable, key=lambda s: cdiv(spec.blocks[s].extent, blocks[s]))
            blocks[slot] *= 2
    return blocks


def _tile_elements(
    spec: ConfigSpec, index: int, blocks: list[int], chunks: list[int | None]
) -> int:
    """Elements of device loop ``index``'s largest tile value with these blocks and chunks."""
    config = Config(block_sizes=blocks, reduction_loops=chunks)
    return max((spec.numel(v, config) for v in spec.loop_values[index]), default=0)


def amortize_whole_rows(spec: ConfigSpec, config: Config) -> Config:
    """Rows per program of each loop whose rows stay whole tiles (a reduction dim not looped,
    no inner loop over the row) raised to :func:`amortizing_rows` where it stores a per-program
    partial, after the tile budget shrank them: the partial's bytes outweigh a larger tile. A
    raised tile past ``2 * MULTI_ROW_TILE`` loops its row in chunks that keep it there (the
    warps such a whole tile needs cost more than the chunks' second pass over the row).
    H200 (benchmarks/results/rmsbwd_rows_s15.md, default_change_s15.md), RMSNorm backward with
    [cdiv(m, rows), n] fp32 dw partials: 16384x4096 2 rows 0.181 ms, 4 rows 0.150 (8 warps;
    torch.compile 0.136); 8192x8192 1 row 0.254, 4 rows whole at 32 warps 0.213, 4 rows in
    4096 chunks at 8 warps 0.190, at 16 warps (the default's) 0.166."""
    blocks, chunks = list(config.block_sizes), list(config.reduction_loops)
    for loop, grid, inner in zip(spec.loops, spec.grid_slots, spec.loop_slots, strict=True):
        whole = [i for i in _row_indices(spec, loop) if chunks[i] is None]
        if not whole or any(spec.blocks[s].contiguous for s in inner) or _left_alone(loop):
            continue
        rows = 1
        for s, sym in _row_dims(spec, loop, grid):
            wanted = amortizing_rows(loop, sym)
            if wanted > blocks[s]:
                blocks[s] = min(spec.blocks[s].hi, wanted)
                rows *= blocks[s]
        for i in whole if rows > 1 else []:
            r = spec.reductions[i]
            if r.loopable and not r.homes and rows * r.full > 2 * MULTI_ROW_TILE:
                chunks[i] = max(2 * MULTI_ROW_TILE // rows, MIN_CHUNK)
    return config.replace(block_sizes=blocks, reduction_loops=chunks)


STREAMS_PER_SM = 2  # programs per SM a grid of long row-streaming programs wants at least


def streams_per_sm(spec: ConfigSpec, config: Config) -> Config:
    """Halve the grid block of each device loop whose row loop keeps ``[n]`` accumulators in
    memory while its grid has fewer than ``STREAMS_PER_SM`` programs per SM (and the halved block
    still amortizes the per-program partial rows, :func:`amortizing_rows`). Each such program is
    one long serial stream over its rows with barriers (per row step, or between the statistics
    pass and the chunks-outer pass): alone on an SM, nothing hides those stalls. H200, seed-000
    LayerNorm backward 4608x40920: 32 rows a program (144 programs) 0.842 ms, 16 rows (288)
    0.618 ms (benchmarks/results/co_seed.md)."""
    blocks = list(config.block_sizes)
    homed = {h.loop_slot for r in spec.reductions for h in r.homes}
    want = STREAMS_PER_SM * spec.target.limits.num_sms
    for index, (loop, slots) in enumerate(zip(spec.loops, spec.grid_slots, strict=True)):
        if not any(n.op is Op.LOOP and n.attrs.get("range_slot") in homed for n in loop.body):
            continue
        grid = {s.config_slot: s for s in loop.grid_syms if s.config_slot is not None}
        while True:
            programs = spec.programs(index, config.replace(block_sizes=blocks))
            fits = [
                s
                for s in slots
                if blocks[s] // 2 >= max(spec.blocks[s].lo, amortizing_rows(loop, grid[s]), 1)
            ]
            if programs is None or programs >= want or not fits:
                break
            widest = max(fits, key=lambda s: blocks[s])
            blocks[widest] //= 2
    return config.replace(block_sizes=blocks)


def resident_chunks(spec: ConfigSpec, config: Config) -> Config:
    """Halve the chunk of rows whose accumulators live in memory while the programs cannot
    all be resident at once by the predicted registers (a memory-bound row loop that runs a
    second wave for a few programs takes twice as long). Never below a chunk that gives every
    thread a 128-bit vector of the row: narrower, the warps spread over the rows and the
    per-step sum over them crosses warps (H200 seed 000, 16 x 2 rows / 8 warps: chunk 2048
    0.621 ms, 1024 2.99 ms: benchmarks/results/co_seed2.md)."""
    limits = spec.target.limits
    while True:
        plan = spec.resolve(config, warn=False)
        threads = (config.num_warps or 4) * spec.target.warp_size
        per_sm = limits.registers_per_sm // max(plan.resources.registers * threads, 1)
        if all(p is None or p <= per_sm * limits.num_sms for p in plan.resources.programs):
            return plan.config
        chunks = list(plan.reduction_loops)
        slots = [
            r.slot
            for r in spec.reductions
            if r.homes
            and (chunks[r.slot] or 0) > 1024
            and all(
                vector_threads(loop, (chunks[r.slot] or 0) // 2) >= threads for loop in spec.loops
            )
        ]
        if not slots:
            return plan.config
        chunks[slots[0]] = (chunks[slots[0]] or 2048) // 2
        config = plan.config.replace(reduction_loops=chunks)


def amortizing_rows(loop: DeviceLoop, sym: Sym) -> int:
    """Rows per program of ``loop``'s grid dim ``sym`` that keep the bytes a program stores at
    its own row (a store indexed by ``sym``'s tile id: a partial a later reduction reads back, so
    counted twice) within ``PROGRAM_BYTES_SHARE`` of the bytes its rows load and store (accesses
    indexed by ``sym``'s tile, per row). 1 where the loop has no such store."""
    per_row = per_program = 0
    for n in loop.walk():
        if n.op not in (Op.LOAD, Op.STORE):
            continue
        shape = n.shape if n.op is Op.LOAD else n.inputs[0].shape
        size = n.attrs["tensor"].dtype.itemsize
        if any(item[0] == "tile" and item[1] is sym for item in n.attrs["index"]):
            per_row += _elements(shape, sym) * size
        elif n.op is Op.STORE and any(_is_tile_id(i, sym) for i in n.inputs[1:]):
            per_program += 2 * _elements(shape, sym) * size
    if not per_row or not per_program:
        return 1
    return next_pow2(-(-per_program // int(PROGRAM_BYTES_SHARE * per_row)))


def _is_tile_id(node: Node, sym: Sym) -> bool:
    return node.op is Op.TILE_ID and node.attrs.get("sym") is sym


def _elements(shape: Shape, skip: Sym) -> int:
    """Elements of a tile of ``shape`` per index of ``skip`` (dims of unknown extent: 1)."""
    n = 1
    for d in shape:
        if isinstance(d, Sym):
            n *= d.extent if d is not skip and isinstance(d.extent, int) else 1
        else:
            n *= d
    return n


def row_tiles(spec: ConfigSpec, config: Config) -> list[int]:
    """Elements of each row loop's tile under ``config`` (rows x chunk), scanning loops left out;
    a chunked column's at most :func:`chunk_limit` (its chunk, sized as a row's, is a number of
    rows: the element budget then shrinks it to the limit with its column block)."""
    limit = chunk_limit(spec.target)
    return [
        min(tile.elements, limit) if tile.column else tile.elements
        for tile in _row_loop_tiles(spec, config)
    ]


@dataclasses.dataclass(frozen=True)
class _RowTile:
    rows: int  # rows per program (a chunked column: its column block)
    width: int  # the widest chunk
    loop: DeviceLoop
    column: bool  # the chunks walk a strided dim (_column_chunks)

    @property
    def elements(self) -> int:
        return self.rows * self.width


def _row_loop_tiles(spec: ConfigSpec, config: Config) -> list[_RowTile]:
    """Each row loop's tile under ``config``."""
    out = []
    blocks, chunks = list(config.block_sizes), list(config.reduction_loops)
    for loop, grid, inner in zip(spec.loops, spec.grid_slots, spec.loop_slots, strict=True):
        if _left_alone(loop):
            continue
        widths = [blocks[s] for s in inner if spec.blocks[s].contiguous]
        widths += _chunked_rdims(spec, loop, chunks)
        if widths:
            # a chunked column (a reduction down the leading dim of x[:, tn]): the lanes run
            # along the grid's contiguous block, which the tile holds whole beside the chunk
            column = _column_chunks(spec, loop, inner, chunks)
            rows = 1
            for s in grid:
                if not spec.blocks[s].dot_role and (column or not spec.blocks[s].contiguous):
                    rows *= blocks[s]
            out.append(_RowTile(rows, max(widths), loop, column))
    return out


def _column_chunks(
    spec: ConfigSpec, loop: DeviceLoop, inner: list[int], chunks: list[int | None]
) -> bool:
    """Whether ``loop`` walks chunks of a reduction dim that no load reads contiguously (and
    walks no contiguous inner block): its tile is the chunk times the grid's column block.
    (H200, a softmax down the columns of 4096x4096 bf16, [32 columns, 256 rows] chunks:
    counted as a 256-element row at 8 warps 0.0529 ms, as the 8192-element tile at 16 warps
    0.0441; LayerNorm of the columns of 4096x16384 0.174 -> 0.158; softmax over the middle dim
    of 16x8192x256 0.139 -> 0.097; logsumexp over the middle dim of 16x4096x1024 0.0799 ->
    0.097, the one loss; default_change_col_s27.)"""
    if any(spec.blocks[s].contiguous for s in inner):
        return False
    looped = [spec.reductions[i] for i in _row_chunk_indices(spec, loop) if chunks[i] is not None]
    return bool(looped) and not any(r.slot in spec.contiguous_reductions for r in looped)


def fit_registers(spec: ConfigSpec, config: Config, settle: Callable[[Config], Config]) -> Config:
    """The row loops' chunks and warps fitted to the registers the resource model predicts: the
    fewest warps from ``config``'s up at which the values live at once neither spill nor exceed
    ``OCCUPANCY_REGISTERS`` per thread; if none, the chunks halve (not below ``ROW_LOOP_TILE``;
    ``settle`` re-derives their warps) and the search repeats. At 32 warps a thread has 64
    registers: a chunk whose values need more is slower than half of it at 16 warps."""
    if not row_tiles(spec, config):
        return config
    while True:
        warps = config.num_warps or 4
        while warps <= spec.target.max_warps:
            estimate = predicted_registers(spec, config, warps)
            if not estimate.spills and estimate.per_thread <= OCCUPANCY_REGISTERS:
                return config.replace(num_warps=warps)
            warps *= 2
        halved = _halved_chunks(spec, config)
        if halved is None:
            return config
        config = settle(halved)


def _halved_chunks(spec: ConfigSpec, config: Config) -> Config | None:
    """``config`` with every row loop's chunk over ``ROW_LOOP_TILE`` halved (None: none is)."""
    blocks, chunks = list(config.block_sizes), list(config.reduction_loops)
    halved = False
    for loop, inner in zip(spec.loops, spec.loop_slots, strict=True):
        if not _left_alone(loop):
            halve = _resize_widths(
                spec, loop, inner, blocks, chunks, lambda w: w // 2 if w > ROW_LOOP_TILE else w
            )
            halved = halved or halve
    return config.replace(block_sizes=blocks, reduction_loops=chunks) if halved else None


def row_warps(spec: ConfigSpec, config: Config) -> int | None:
    """Warps for the widest row loop tile: ``ROW_ELEMS_PER_THREAD`` elements per thread, from
    ``MIN_WARPS`` up to the target's most, but no more threads along a row than give each
    ``VECTOR_BYTES`` of it (None: the kernel has no row loop)."""
    tiles = _row_loop_tiles(spec, config)
    if not tiles:
        return None
    tile = max(tiles, key=lambda t: t.elements)
    threads = tile.elements // ROW_ELEMS_PER_THREAD
    if not tile.column:  # a column chunk's threads each load 16 bytes of its column block
        threads = min(threads, vector_threads(tile.loop, tile.width))
    warps = next_pow2(max(1, threads // spec.target.warp_size))
    return max(MIN_WARPS, min(warps, spec.target.max_warps))


def vector_threads(loop: DeviceLoop, width: int) -> int:
    """Threads along a row chunk of ``width`` elements at which each still loads
    ``VECTOR_BYTES`` contiguous bytes of the loop's narrowest loaded dtype (one 128-bit load)."""
    sizes = [n.dtype.itemsize for n in loop.walk() if n.op is Op.LOAD and n.ndim]
    return max(1, width * min(sizes, default=4) // VECTOR_BYTES)


__all__ = [
    "ROW_LOOP_TILE",
    "WHOLE_ROW",
    "amortizing_rows",
    "chunk_limit",
    "default_chunk",
    "fit_registers",
    "row_blocks",
    "row_chunk",
    "row_tiles",
    "resident_chunks",
    "row_warps",
    "streams_per_sm",
]

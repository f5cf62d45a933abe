"""The ``split_reductions`` knob (stage: config; in: a ConfigSpec's device loops and a config;
out: the per-device-loop split factors a Plan records, the heuristic's choice, search moves).

``split_reductions[i] = S`` runs device loop ``i``'s splittable inner loop (``ir/split.py``
says which loop qualifies and why another does not) in ``S`` programs per grid tile, then
combines the partials in a second, deterministic kernel. It is offered only where the IR
allows it, with ``pid_type='flat'`` (the split is the launch grid's second axis) and no rolled
reduction in that device loop.

The heuristic splits when a device loop's grid has fewer programs than the target's SMs hold at
once (its SM count times the programs resident per SM, from the resource model) and its inner
loop is long: ``S`` brings the programs to about that many (``UNEVEN_WAVES`` times as many where
the loop's trip count is data), keeping at least ``MIN_SPLIT_TRIPS`` iterations per program
(fewer would cost more in partials than they gain). A grid of more than one wave whose programs
fall unevenly on the SMs (152 programs on 132 SMs: 20 run two, the rest one; 58% busy) splits
too, into the fewest shares that keep ``TAIL_FILL`` of the SMs busy.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import torch

from tilecraft.config import occupancy
from tilecraft.config.config import MAX_SPLIT, Config
from tilecraft.config.plan import block_dims, sym_block, traced_extent
from tilecraft.errors import ConfigError
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, walk
from tilecraft.ir.split import NOTHING_TO_SPLIT, RolledSite, Site, SplitSite, split_site

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec

MIN_SPLIT_TRIPS = 4  # inner-loop iterations each split program keeps at least (heuristic)
# the smallest chunk of a rolled dim a split shrinks it to (4 elements a thread at 8 warps)
ROLLED_CHUNK_FLOOR = 1024
# of each row a nested split's contiguous grid block keeps: two 128-byte lines (a depthwise
# conv1d weight gradient reads rows 8 KB apart: 64 channels split 4 0.200 ms, 128 split 8
# 0.151, the same programs; conv_split_s21)
SPLIT_SEGMENT_BYTES = 256
MIN_SPLIT_WORK = 1 << 16  # elements of a tile's inner loop below which splitting never pays
# waves of resident programs a split aims at when each program's trip count comes from the data
# (``tc.tile(start, end)`` over loaded bounds): programs' work is uneven, and smaller shares
# let SMs that finish early take the rest (H200 graph replays, 8 sequences of random lengths
# summing to 32768 rows x 4096, 512 tiles: split 2 0.211 ms, 4 0.143, 8 0.115, 16 0.114;
# graph_replay_varlen_s13)
UNEVEN_WAVES = 4
# the share of the SMs a grid of more than one wave keeps busy (programs per SM, averaged over
# the busiest SM's), below which the heuristic splits its loop into more, shorter programs
TAIL_FILL = 0.9


def sites(loops: list[DeviceLoop]) -> list[tuple[Site | None, str]]:
    return [split_site(loop) for loop in loops]


def trips(spec: ConfigSpec, index: int, config: Config) -> int:
    """Iterations of device loop ``index``'s split site under ``config`` (an upper bound)."""
    site = spec.split_sites[index][0]
    assert site is not None
    return _sym_trips(site.sym, config)


def _sym_trips(sym: Sym, config: Config) -> int:
    """Iterations of the loop over ``sym`` under ``config`` (an upper bound)."""
    block = 1 if sym.scalar else sym_block(sym, config.block_sizes, config.reduction_loops)
    return max(1, -(-traced_extent(sym) // block))


def normalize_splits(
    spec: ConfigSpec, config: Config, pid_type: str, chunks: list[int | None], repairs: list[str]
) -> list[int]:
    """``config.split_reductions`` checked against the kernel: one factor per device loop
    (a single value applies to every loop that has a split site)."""
    n = len(spec.loops)
    given = list(config.split_reductions)
    if not given or all(s == 1 for s in given):
        return [1] * n
    if len(given) == 1 and n > 1:
        given = [given[0] if site else 1 for site, _ in spec.split_sites]
    if len(given) != n:
        raise ConfigError(
            f"split_reductions has {len(given)} entries; this kernel has {n} device loops"
        )
    out = []
    for i, factor in enumerate(given):
        site, why = spec.split_sites[i]
        reduces = any(n.op is Op.REDUCE for n in walk(spec.loops[i].body))
        if factor > 1 and site is None and why == NOTHING_TO_SPLIT and reduces:
            repairs.append(
                f"split_reductions[{i}]={factor}: device loop {i} reduces nothing at these shapes "
                "(a dim of 1 is no reduction); using 1"
            )
            out.append(1)
            continue
        if factor > 1 and site is None:
            raise ConfigError(
                f"split_reductions[{i}]={factor}: device loop {i} has no inner loop that can be "
                f"split: {why}",
                spec.loops[i].loc,
                hint="split_reductions needs an inner loop that only accumulates (+=, max, min, "
                "tc.dot(acc=)); use 1",
            )
        if factor > 1 and pid_type != "flat":
            repairs.append(
                f"split_reductions[{i}]={factor} needs pid_type='flat' (got {pid_type!r}); using 1"
            )
            factor = 1
        if factor > 1 and (why := _unsplittable(spec.loops[i], site, chunks)):
            repairs.append(f"split_reductions[{i}]={factor} {why}; using 1")
            factor = 1
        if factor > 1:
            factor = min(factor, trips(spec, i, config))
        out.append(factor)
    return out


ATOMIC_DTYPES = (torch.float32, torch.int32)  # what tl.atomic_add adds on every target


def normalize_atomics(
    spec: ConfigSpec, config: Config, splits: list[int], repairs: list[str]
) -> bool:
    """``split_atomics`` kept only where every split device loop's partials are sums that
    ``tl.atomic_add`` can add (fp32 or int32); it is an opt-in, never the default."""
    if not config.split_atomics or all(s == 1 for s in splits):
        return False
    for i, factor in enumerate(splits):
        site = spec.split_sites[i][0]
        if factor == 1 or site is None:
            continue
        values = (
            [(n.attrs["kind"], n.dtype) for n in site.reduces]
            if isinstance(site, RolledSite)
            else [(a.kind, a.carry.dtype) for a in site.accumulators]
        )
        if any(kind != "sum" or dtype not in ATOMIC_DTYPES for kind, dtype in values):
            repairs.append(
                f"split_atomics=True needs fp32/int32 sums in device loop {i}; using False"
            )
            return False
    return True


def _unsplittable(loop: DeviceLoop, site: Site | None, chunks: list[int | None]) -> str:
    """Why the plan's reduction chunks keep ``site`` from splitting ("" if they do not): an
    inner loop cannot split beside a rolled reduction, a reduction dim splits only rolled."""
    if isinstance(site, RolledSite):
        slot = site.sym.config_slot
        if slot is None or slot >= len(chunks) or not chunks[slot]:
            return f"splits {site.sym.name}'s chunk loops: it needs reduction_loops to roll it"
        return ""
    rolled = any(
        s.config_slot is not None and s.config_slot < len(chunks) and chunks[s.config_slot]
        for s in loop.syms
        if s.kind.value == "rdim"
    )
    return "cannot combine with a looped reduction in the same device loop" if rolled else ""


def with_default_splits(
    spec: ConfigSpec,
    config: Config,
    budget: int,
    settle: Callable[[Config], Config] = lambda c: c,
) -> Config:
    """``config`` with the heuristic's split factors. A device loop whose grid holds fewer
    programs than the SMs keep resident at once (``num_sms * resident_programs``: threads,
    predicted registers and shared memory per program, ``config/occupancy.py``) and whose inner
    loop is long enough to share is split until the programs reach about that many (H200, a
    65536x1024 column sum: 256 programs 0.093 ms, 512 programs 0.057-0.063 ms). Its inner loop's
    block first grows (up to ``budget`` elements per iteration's widest tile, keeping
    ``MIN_SPLIT_TRIPS`` iterations per share) so each iteration moves more than a few rows of a
    narrow grid tile; ``settle`` re-derives the warps of a grown tile. Dot loops keep their k
    block (shared memory stages depend on it). The interpreter splits nothing: it runs one
    program after another, so a split only adds partials and their combine (a ragged softmax
    split 64 ways ran 370 times longer)."""
    if spec.target.backend == "interpret":
        return config.replace(split_reductions=[1] * len(spec.split_sites))
    factors = []
    for i, (site, _) in enumerate(spec.split_sites):
        programs = spec.programs(i, config)
        if (
            site is None
            or _unsplittable(spec.loops[i], site, list(config.reduction_loops))
            or (spec.space.grids[i].counts is None and _dot_accumulators(site))
            or (wanted := _wanted_split(spec, i, config, programs)).factor == 1
        ):
            factors.append(1)
            continue
        grown, before = config, config
        if wanted.under_wave:  # a tail split keeps the tile: its programs fill the SMs already
            grown = _grow_loop_block(spec, i, site, config, wanted.factor, budget)
            grown = _shift_to_nested(spec, i, site, grown, wanted.factor)
        if grown != config:
            config = settle(grown)
            wanted = _wanted_split(spec, i, config, programs)
        n_trips, inner = trips(spec, i, config), _nested_trips(site, config)
        work = n_trips * inner * _iteration_elems(spec.loops[i], site, config)
        factor = min(wanted.factor, _most_split(spec, i, site, config))
        # the partials' round trip (written, then read) stays under a quarter of what the loop
        # reads (e.g. split-K of a square-ish GEMM: S fp32 [BM, BN] blocks per tile)
        loop_bytes = n_trips * inner * _iteration_load_bytes(spec.loops[i], site, config)
        while factor > 1 and 4 * 2 * factor * _partial_bytes(site, config) > loop_bytes:
            factor //= 2
        if factor > 1 and work >= MIN_SPLIT_WORK and wanted.under_wave and _nested_chain(site):
            widened, factor = _widen_rows(spec, i, site, config, factor)
            config = settle(widened) if widened != config else config
        if factor > 1 and work >= MIN_SPLIT_WORK:
            factors.append(factor)
        else:  # no split after all: the tile it grew or shrank for one goes back
            factors.append(1)
            config = before
    return config.replace(split_reductions=factors)


def _dot_accumulators(site: Site) -> bool:
    """Whether a split would store ``tl.dot`` accumulator blocks (split-K). Under dynamic
    shapes the heuristic never splits them: the blocks are sized for a large call (a
    run-time extent counts as ``1 << 16``), so their partials' traffic says nothing of the
    traced one's (an AWQ GEMV of 4 rows held [128, 128] fp32 blocks)."""
    if not isinstance(site, SplitSite):
        return False
    return any((a.carry.attrs.get("next") or a.carry).op is Op.DOT for a in site.accumulators)


def _widen_rows(
    spec: ConfigSpec, index: int, site: Site, config: Config, factor: int
) -> tuple[Config, int]:
    """A split device loop whose work runs in a nested loop and whose contiguous grid block
    keeps less than ``SPLIT_SEGMENT_BYTES`` of each row (``fill_device`` halves it to 64 bytes
    before any split) gets them back, its split doubling for each doubling of the block (the
    same programs, each reading longer runs of its rows; the split loop's block halves where it
    needs more iterations to share). A share there runs whole nested loops, so a larger split
    costs only its partials: a depthwise conv1d weight gradient, [8, 4096, 4096] bf16, 32
    channels split 2 0.304 ms, 64 split 4 0.208 (H200, default_change_s20c). Where the split
    loop itself is the work, each doubling halves a share's iterations, and widening measured
    slower (the same table: a tall column sum 0.0456 -> 0.0487 ms, BatchNorm1d 0.123 ->
    0.141)."""
    for slot in spec.grid_slots[index]:
        block = spec.blocks[slot]
        if block.row_floor is None:
            continue
        line = max(block.row_floor, SPLIT_SEGMENT_BYTES // block.index_bytes)
        while config.block_sizes[slot] < line and config.block_sizes[slot] * 2 <= block.hi:
            blocks = list(config.block_sizes)
            blocks[slot] *= 2
            wider = _shift_to_nested(
                spec, index, site, config.replace(block_sizes=blocks), factor * 2
            )
            if factor * 2 > _most_split(spec, index, site, wider):
                break
            config, factor = wider, factor * 2
    return config, factor


def _most_split(spec: ConfigSpec, index: int, site: Site, config: Config) -> int:
    """The largest split the heuristic gives device loop ``index`` under ``config``: at most its
    trips, and ``MIN_SPLIT_TRIPS`` iterations (nested ones counted) a share."""
    n_trips, inner = trips(spec, index, config), _nested_trips(site, config)
    return min(MAX_SPLIT, n_trips, max(1, n_trips * inner // MIN_SPLIT_TRIPS))


class WantedSplit(NamedTuple):
    factor: int
    under_wave: bool  # the unsplit grid is under a wave of resident programs


def _wanted_split(spec: ConfigSpec, index: int, config: Config, programs: int) -> WantedSplit:
    """The power of two nearest (in ratio) to the split that brings ``programs`` to one wave of
    resident programs, and at least one program per SM (1: the grid already fills the SMs as
    far as the kernel allows); a grid of more than a wave gets :func:`_tail_split`'s factor. A
    dot loop aims at one program per SM and is never tail-split: its stages and persistent
    schedule are chosen after this (``config/pipelines.py``), and a split-K grid gives the
    persistent schedule up."""
    sms = spec.target.limits.num_sms
    dots = any(n.op is Op.DOT for n in spec.loops[index].walk())
    site = spec.split_sites[index][0]
    waves = UNEVEN_WAVES if site is not None and _data_trips(site.sym) else 1
    # loops after the split one that the combine runs whole, one program per tile, keep the
    # grid's occupancy whatever the split: splitting pays only below one program per SM
    # (BatchNorm statistics' second pass over [32, 256, 56, 56], 256 channel programs: split 2
    # 0.047 ms, unsplit 0.0434; H200, default_change_s20a)
    whole_after = _unshared_loops_after(spec.loops[index], site)
    resident = 1 if dots or whole_after else occupancy.resident_programs(spec, config)
    target = sms * waves * resident
    if programs == 0:  # an empty grid (a batch of 0): the launcher returns before launching
        return WantedSplit(1, False)
    if programs >= target:
        tail = 1 if dots or whole_after else _tail_split(programs, sms)
        return WantedSplit(tail, False)
    factor = 1 << max(0, round(math.log2(target / programs)))
    while programs * factor < sms:
        factor *= 2
    return WantedSplit(min(factor, MAX_SPLIT), True)


def _tail_split(programs: int, sms: int) -> int:
    """The smallest power-of-two split whose programs keep the ``sms`` at least ``TAIL_FILL``
    busy: an SM's programs share its memory pipeline, so the one that runs the most
    (``ceil(programs / sms)``) sets the time, 1 where the grid already spreads evenly. 152
    programs on 132 SMs: 20 SMs run two while the rest idle for the second, 58% busy; split
    4, 608 programs, five on most SMs and four on the rest, 92% (H200, Dice loss over
    4x150x512x512, one program an SM for (image, 4 classes): 0.339 ms unsplit, 0.297 split 2,
    0.261 split 4; 8x19x512x1024: 0.321, 0.251, 0.218; dice_split_s25). Counted in programs
    per SM, not in resident slots: a masked mean pool's 512 programs, four or so per SM of
    three resident slots (97% even), ran 0.080 ms unsplit, 0.097 split 2, 0.151 split 8
    (maskpool_tail_s25)."""
    factor = 1
    while factor <= MAX_SPLIT:
        total = programs * factor
        if total >= TAIL_FILL * math.ceil(total / sms) * sms:
            return factor
        factor *= 2
    return 1


def _unshared_loops_after(loop: DeviceLoop, site: Site | None) -> bool:
    """Whether the combine kernel runs a loop after the split one whole (not in shares)."""
    if not isinstance(site, SplitSite):
        return False
    after = loop.body[site.position + 1 :]
    # a chained loop (ir/split.chained_sites) still counts as whole here: the small-grid rules
    # for BatchNorm statistics and instance norm (16 warps, unsplit) were measured before
    # chains, and a chain's factor has not been timed on a GPU yet
    return any(n.op is Op.LOOP and n not in site.shared for n in after)


def _data_trips(sym: Sym) -> bool:
    """Whether a loop's trip count is a loaded value (not a shape - static or a run-time size
    argument, the same for every program - nor another tile's bounds)."""
    bound = sym.extent
    if isinstance(bound, int) or isinstance(bound, Node) and bound.op is Op.ARG:
        return False
    return not (isinstance(bound, Node) and "sym" in bound.attrs)


def _numel(node: Node, config: Config) -> int:
    return math.prod(block_dims(node.shape, config.block_sizes, config.reduction_loops))


def _partial_bytes(site: Site, config: Config) -> int:
    """Bytes of one share's partial results for one tile."""
    values = site.reduces if isinstance(site, RolledSite) else [a.carry for a in site.accumulators]
    return sum(_numel(v, config) * v.dtype.itemsize for v in values)


def _iteration_load_bytes(loop: DeviceLoop, site: Site, config: Config) -> int:
    """Bytes one iteration of the split loop (or chunk) loads for one tile."""
    if isinstance(site, SplitSite):
        nodes = list(walk(site.loop.body or []))
    else:
        nodes = [n for n in loop.body if site.sym in n.shape]
    return sum(_numel(n, config) * n.dtype.itemsize for n in nodes if n.op is Op.LOAD)


def _grow_loop_block(
    spec: ConfigSpec, index: int, site: Site, config: Config, wanted: int, budget: int
) -> Config:
    if isinstance(site, RolledSite):
        return _shrink_rolled_chunk(spec, index, site, config, wanted)
    slot = site.sym.config_slot
    if slot is None or site.sym.scalar or any(n.op is Op.DOT for n in walk(site.loop.body or [])):
        return config
    while True:
        blocks = list(config.block_sizes)
        blocks[slot] *= 2
        grown = config.replace(block_sizes=blocks)
        if (
            blocks[slot] > spec.blocks[slot].hi
            or _iteration_elems(spec.loops[index], site, grown) > budget
            or trips(spec, index, grown) < wanted * MIN_SPLIT_TRIPS
        ):
            return config
        config = grown


def _shrink_rolled_chunk(
    spec: ConfigSpec, index: int, site: RolledSite, config: Config, wanted: int
) -> Config:
    """A rolled dim's chunk (the register budget chose it as a most) halved while the loop has
    fewer than ``MIN_SPLIT_TRIPS`` chunks for each of the ``wanted`` shares, down to
    ``ROLLED_CHUNK_FLOOR`` elements: a logsumexp over a 128256-entry vocabulary at 8192 a chunk
    had 16 chunks, 4 shares for a row where the SMs wanted over 100 programs."""
    slot = site.sym.config_slot
    chunks = list(config.reduction_loops)
    if slot is None or slot >= len(chunks) or not chunks[slot]:
        return config
    while trips(spec, index, config) < wanted * MIN_SPLIT_TRIPS:
        chunk = chunks[slot]
        if chunk is None or chunk // 2 < ROLLED_CHUNK_FLOOR:
            break
        chunks[slot] = chunk // 2
        config = config.replace(reduction_loops=chunks)
    return config


def _nested_chain(site: Site) -> list[Node]:
    """The loops nested in a split loop whose iterations hold all of its work: each the only
    loop of its parent's body (``for tb ...: for tt ...:`` under the split loop)."""
    chain: list[Node] = []
    body = site.loop.body if isinstance(site, SplitSite) else None
    while body:
        loops = [n for n in body if n.op is Op.LOOP]
        if len(loops) != 1 or any(n.op in (Op.IF, Op.WHILE) for n in body):
            break
        chain.append(loops[0])
        body = loops[0].body
    return chain


def _nested_trips(site: Site, config: Config) -> int:
    """Iterations of the nested loops (``_nested_chain``) per iteration of the split loop."""
    return math.prod(_sym_trips(loop.attrs["sym"], config) for loop in _nested_chain(site))


def _shift_to_nested(
    spec: ConfigSpec, index: int, site: Site, config: Config, wanted: int
) -> Config:
    """A split loop with fewer iterations than ``wanted`` shares, whose work runs in a loop
    nested in it (a depthwise conv's weight gradient: batch tiles around time tiles), halves
    its block until it has them: its iterations are whole nested loops, so a share of one
    batch row still runs thousands of elements per nested step. The nested block stays (it
    sizes the deferred accumulators each thread keeps)."""
    slot = site.sym.config_slot
    if not _nested_chain(site) or slot is None:
        return config
    blocks = list(config.block_sizes)
    least = spec.blocks[slot].lo  # a dot's dims stay at tl.dot's least (16)
    while (
        trips(spec, index, config.replace(block_sizes=blocks)) < wanted
        and blocks[slot] // 2 >= least
    ):
        blocks[slot] //= 2
    return config.replace(block_sizes=blocks)


def _iteration_elems(loop: DeviceLoop, site: Site, config: Config) -> int:
    """Elements of the widest value one iteration of the split loop (or chunk) computes."""
    if isinstance(site, SplitSite):
        chain = _nested_chain(site)
        nodes = (chain[-1] if chain else site.loop).body or []
    else:
        nodes = [n for n in loop.body if site.sym in n.shape]
    return max(
        (
            math.prod(
                sym_block(d, config.block_sizes, config.reduction_loops)
                for d in node.shape
                if isinstance(d, Sym)
            )
            for node in nodes
        ),
        default=1,
    )


def random_splits(spec: ConfigSpec, config: Config, rng: random.Random) -> list[int]:
    """A random power-of-two factor per splittable device loop (up to its trips and MAX_SPLIT)."""
    out = []
    for i, (site, _) in enumerate(spec.split_sites):
        most = min(MAX_SPLIT, trips(spec, i, config)) if site is not None else 1
        out.append(1 << rng.randint(0, most.bit_length() - 1))
    return out


def split_moves(spec: ConfigSpec, config: Config) -> list[Config]:
    """Search moves: each splittable device loop's factor doubled and halved."""
    current = list(config.split_reductions) or [1] * len(spec.loops)
    moves = []
    for i, (site, _) in enumerate(spec.split_sites):
        if site is None or i >= len(current):
            continue
        for factor in (current[i] * 2, current[i] // 2):
            if 1 <= factor <= min(MAX_SPLIT, trips(spec, i, config)) and factor != current[i]:
                moves.append(config.replace(split_reductions=_set(current, i, factor)))
    return moves


def _set(values: list[int], i: int, v: int) -> list[int]:
    out = list(values)
    out[i] = v
    return out


__all__ = [
    "normalize_splits",
    "random_splits",
    "sites",
    "split_moves",
    "trips",
    "with_default_splits",
]

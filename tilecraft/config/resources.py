"""The resource model: registers a config needs, from the values live at once (stage: config;
in: a device loop's IR and a config's blocks/warps; out: predicted registers per thread).

Why not "the largest tile / threads": what spills is the *sum* of what is live at one point of the
program, and a value's share of each thread depends on Triton's layout, not only on its size. A
row-reduction result ``[BLOCK_M]`` of a ``[BLOCK_M, 65536]`` tile is held whole by every thread
(all threads sit along the long dim), and a kernel that carries several ``[n]`` fp32 accumulators
across a loop keeps all of them live through the loop body.

The model:
* **Layout.** Threads of a program (``num_warps * warp_size``) are laid along the dims of the
  loop's widest value from the fastest (last) dim backwards, as Triton's default blocked layout
  does; a value holds ``ceil(block / threads along that dim)`` elements per thread on each dim it
  has, and its broadcast dims cost nothing.
* **Liveness.** Nodes are numbered in program order; a value is live from its definition to its
  last use, and a use inside a nested loop keeps it live to the end of that loop (the loop repeats);
  loop-carried values are live through their loop.
* **Transient values.** In a loop with reductions, scans or dots, an elementwise value (cast,
  unary, binary, where) that no reduction, scan, dot, loop or store separates from its last use
  is computed element by element into its users (ptxas schedules the chain per element): it
  costs no tile of registers. One that must survive such a barrier (``x`` used by a row sum and
  again after it) is a whole tile. A rolled reduction is no barrier: the code after it
  recomputes its inputs chunk by chunk (``ir/phases.py``). (RMSNorm backward at 4 rows x 2048,
  8 warps: 192 predicted without this, 128 with it, 80 compiled; softmax 1 x 16384 at 32 warps:
  64 with it, 64 compiled.) Pure elementwise loops keep whole tiles (see ``_STREAMED_INTO``).
* **Rolled reductions.** A reduction dim processed in chunks runs one chunk loop per phase
  (``ir/phases.py``); each loop holds its reductions' chunk-wide accumulators and the chunks of
  the loads it reads, and only the largest loop counts. Values on the dim never exist whole,
  and masks computed from tile indices alone are recomputed where used.
* **Expansions.** An op far heavier than one instruction holds temporaries per element while
  it runs (``PointwiseOp.expansion_registers``: Philox rounds, libdevice's erff).
* **Registers.** 32-bit registers per element by dtype (16-bit values pack two to a register);
  the peak over program points plus a fixed overhead for pointers, offsets and loop counters.

It is checked against the registers ptxas allocates (``benchmarks/resource_model.py`` cross-compiles
every example for sm_90 and records the error per kernel in ``benchmarks/results/``).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Iterable

from tilecraft.config.fma_operands import fma_operand_events
from tilecraft.ir import reduce_pairs
from tilecraft.ir.chunk_reductions import reduces_per_chunk
from tilecraft.ir.nodes import (
    ELEMENTWISE_OPS,
    DeviceLoop,
    Node,
    Op,
    Sym,
    bodies,
    nested_bodies,
)
from tilecraft.ir.paired_slices import slice_pairs
from tilecraft.ir.phases import chunk_loop_loads, phases, rolled_reduce
from tilecraft.ir.pointwise import POINTWISE

# registers for pointers, program ids, loop counters and offsets: ptxas (sm_90) over the
# examples' unspilled configs (benchmarks/results/resource_model.md) has a median error of +9 at
# 24 and +1 at 16; AMD keeps 24 (gfx942 attention compiles to more VGPRs than predicted)
BASE_REGISTERS = 16
BASE_VGPRS = 24
# groups of accumulator rows one warp's lanes hold apart: a row vector in an MMA layout costs
# rows / (warps x groups) registers a lane (NVIDIA mma: 8; AMD 32x32 MFMA: 2)
MMA_ROW_GROUPS = 8
MFMA_ROW_GROUPS = 2
# bytes each thread loads at once along the fastest dim (Triton's blocked layouts give a thread
# a 16-byte vector of it, and the lanes spread over the other dims after it)
VECTOR_BYTES = 16
MAX_REGISTERS = 255  # per thread on NVIDIA GPUs (and the VGPR budget we assume elsewhere)
_NO_VALUE = (Op.STORE,)
# ops that need a whole tile of their inputs before anything after them runs
_BARRIERS = (Op.REDUCE, Op.SCAN, Op.GATHER, Op.DOT, Op.LOOP, Op.IF, Op.WHILE, Op.EXTERN, Op.STORE)
# loops whose elementwise chains stream into these (a pure elementwise loop does not: ptxas
# hoists its loads and computes whole output tiles before the stores; RoPE [8, 16] at 8 warps
# compiles to 192 registers, which per-element chains would put at 104)
_STREAMED_INTO = (Op.REDUCE, Op.SCAN, Op.DOT)


@dataclasses.dataclass(frozen=True)
class RegisterEstimate:
    per_thread: int  # predicted 32-bit registers per thread at the peak
    limit: int  # registers a thread may have at this block size (min(255, file / threads))
    peak_at: str  # the user's file:line of the value defined at the peak ("" if unknown)

    @property
    def spills(self) -> bool:
        return self.per_thread > self.limit

    @property
    def spill_ratio(self) -> float:
        """Predicted registers over the limit (> 1: ptxas will spill)."""
        return self.per_thread / self.limit


def register_limit(threads: int, register_file: int) -> int:
    """Registers one thread may use when a block of ``threads`` must fit one SM's register file."""
    return max(16, min(MAX_REGISTERS, register_file // max(threads, 1)))


def predict_registers(
    loop: DeviceLoop,
    block_of: Callable[[Sym], int],
    threads: int,
    register_file: int,
    looped: Callable[[Sym], bool] = lambda sym: False,
    held: Callable[[Node], float] = lambda loop: 0.0,
    fma_dots: bool = False,
    mma_row_groups: int = MMA_ROW_GROUPS,
    warp_size: int = 32,
    base_registers: int = BASE_REGISTERS,
    skip: Callable[[Node], bool] = lambda node: False,
) -> RegisterEstimate:
    """Peak live registers per thread of ``loop`` with blocks from ``block_of``; ``looped``: the
    reduction dims processed in chunks (a rolled reduction keeps a chunk-wide accumulator through
    its chunk loop; a carried value on such a dim lives in memory, not in registers); ``held``:
    registers per thread a codegen strategy keeps through a LOOP node beyond its IR values (a
    deferred sum's tile accumulator, chunks-outer accumulators); ``fma_dots``: fp32 dots run on
    the FMA units (``input_precision="ieee"`` on NVIDIA), whose operands are held in registers
    as slices as large as the accumulator per ``FMA_K_STEP`` of K while the dot runs
    (cross-compiled for sm_90, an fp32 matmul 128x128x32 at 8 warps: 176 registers for a
    64-register accumulator); ``mma_row_groups``: the groups of accumulator rows one warp's
    lanes hold apart (NVIDIA's mma: 8; AMD's 32x32 MFMA: 2, so each lane holds 16 rows of a
    row vector: gfx942 attention at 8 warps compiles to 190 VGPRs, 101 predicted with 8);
    ``base_registers``: what every program holds beyond its values; ``skip``: values a codegen
    strategy does not compute in the loop (a deferred sum's carry and reduction)."""
    order, itemsize = _thread_order(loop, block_of)
    widest = math.prod(block_of(d) for d in order)
    # a loop with tl.dot computes in MMA layouts: each warp owns row groups of the output, so
    # rows spread over the warps first (a row vector such as softmax's running max is a few
    # registers, not a whole column of the tile)
    has_dot = any(n.op is Op.DOT for n in loop.walk())
    mma_rows = (threads // warp_size) * mma_row_groups if has_dot else 0
    # Triton gives a thread at most its share of the tile as one vector along the fastest dim:
    # a full-rank value (a tile, or a mask broadcast along that dim) is held in that layout; a
    # reduced one (a row sum, an accumulator) is counted spread as before. Over the examples'
    # 173 unspilled configs (benchmarks/results/resource_model.md) the error against ptxas is
    # median 32% / mean 36% without vectors, 31.5% / 35% with them for full-rank values; with
    # every value vectorized 31% / 34%, but a masked pool's [4, 128] accumulator and its sum
    # came to 64 registers where ptxas allocated 40 for the whole kernel
    vector = 1 if mma_rows else max(1, min(VECTOR_BYTES // itemsize, widest // threads))
    vectored = _threads_per_dim(order, block_of, threads, mma_rows, vector)
    parent = _threads_per_dim(order, block_of, threads, mma_rows)
    program = _program_order(loop, looped)
    positions, loop_spans = program.positions, program.spans
    events: list[tuple[int, float, Node]] = []

    def value_cost(node: Node) -> float:
        # a value on the parent's dims is a slice of its layout (a row reduction result is held
        # by every thread along the reduced dim); another, or a smaller tile loaded (and cast)
        # in a coalesced layout of its own before it is broadcast, gets a layout of its own
        dims = [d for d in node.shape if isinstance(d, Sym)]
        spread = (
            (vectored if node.ndim >= len(order) else parent)
            if all(id(d) in parent for d in dims)
            and not (len(dims) < len(order) and _own_layout(node))
            else _threads_per_dim(dims, block_of, threads, mma_rows)
        )
        return _per_thread(node, block_of, spread) * _registers_per_element(node)

    for node, loop_end in _values(loop.body, loop_spans):
        if skip(node) or not _holds_registers(node, loop_end, program, looped):
            continue
        cost = value_cost(node)
        start = positions[node.id]
        end = max(program.last_use.get(node.id, start), loop_end)
        events += [(start, cost, node), (end + 1, -cost, node)]
    if fma_dots:
        events += fma_operand_events(loop, positions, loop_spans, block_of, value_cost, looped)
    for node in loop.walk():
        if program.streams and (words := _expansion_registers(node)) and not skip(node):
            # an op far heavier than one instruction (Philox rounds, libdevice erff) holds
            # temporaries per element while it runs (ir/pointwise.py), beside the tiles its
            # elementwise chain streams from (a GEMM epilogue's accumulator). A pure
            # elementwise loop's whole tiles already hold more than ptxas keeps (GEGLU's
            # gelu(a) * b at [32, 128], 4 warps: 112 predicted without its erf, 71 compiled)
            cost = words * value_cost(node)
            start = _chain_start(node, positions, program.skipped)
            events += [(start, cost, node), (positions[node.id] + 1, -cost, node)]
    for nodes in bodies(loop.body):
        accumulators = _rolled_accumulators(nodes, looped, block_of, parent, threads, mma_rows)
        if accumulators is not None:
            cost, final = accumulators
            start, end = positions[nodes[0].id], positions[final.id] + 1
            events += [(start, cost, final), (end, -cost, final)]
    for node in loop.walk():
        extra = held(node) if node.op is Op.LOOP else 0.0
        if extra:
            _, last = loop_spans[node.id]
            events += [(positions[node.id], extra, node), (last + 1, -extra, node)]
    peak, peak_node = _peak(events)
    loc = peak_node.loc.short if peak_node is not None and peak_node.loc else ""
    return RegisterEstimate(
        base_registers + math.ceil(peak), register_limit(threads, register_file), loc
    )


@dataclasses.dataclass
class _ProgramOrder:
    """A device loop's values in program order, for liveness."""

    positions: dict[int, int]  # node id -> position
    spans: dict[int, tuple[int, int]]  # loop node id -> (first, last) position
    last_use: dict[int, int]  # node id -> position of its last use
    barriers: list[int]  # sorted positions of ops that need whole tiles
    streams: bool  # elementwise chains stream into reductions, scans or dots
    skipped: set[int]  # node ids: carried next values (in place), values from tile indices only


def _program_order(loop: DeviceLoop, looped: Callable[[Sym], bool]) -> _ProgramOrder:
    positions, spans = _number(loop.body)
    last_use = _last_uses(loop.body, positions, spans)
    _hold_grouped_stores(loop, looped, positions, last_use)
    partners = _later_partners(loop, positions, last_use)
    barriers = sorted(
        positions[n.id]
        for n in loop.walk()
        if n.op in _BARRIERS
        and n.id not in partners
        and not (n.op is Op.REDUCE and looped(n.inputs[0].shape[n.attrs["axis"]]))
    )
    in_place = {
        c.attrs["next"].id
        for n in loop.walk()
        for c in n.attrs.get("carried", [])
        if c.attrs.get("next") is not None
    }
    return _ProgramOrder(
        positions,
        spans,
        last_use,
        barriers,
        any(n.op in _STREAMED_INTO for n in loop.walk()),
        in_place | index_values(loop),
    )


def _hold_grouped_stores(
    loop: DeviceLoop,
    looped: Callable[[Sym], bool],
    positions: dict[int, int],
    last_use: dict[int, int],
) -> None:
    """Stores that codegen emits as one access of their group (``ir/paired_slices.py``: a
    slice pair, an element group) move down to the group's last store, so each stored value
    lives until then (updates ``last_use``). (A window-of-4 unfold of bf16 rows, four shifted
    loads each stored to one element of the windows, [8, 8, 128] tiles at 8 warps: one tile
    live predicted 32 registers; ptxas allocates 80 and spills 40 bytes, the four tiles 80.)"""
    by_slot = {n.attrs["mem_slot"]: n for n in loop.walk() if "mem_slot" in n.attrs}
    for pair in slice_pairs([loop], looped):
        if pair.op != "store" or pair.later not in by_slot:
            continue
        at = positions[by_slot[pair.later].id]
        for slot in pair.slots:
            value = by_slot[slot].inputs[0] if slot in by_slot else None
            if value is not None and value.id in last_use:
                last_use[value.id] = max(last_use[value.id], at)


def _later_partners(
    loop: DeviceLoop, positions: dict[int, int], last_use: dict[int, int]
) -> set[int]:
    """Ids of the second reduction of each max/argmax pair (``ir/reduce_pairs.py``): codegen
    computes both at the first, so the second is no barrier, and the pair's input is last
    needed there (updates ``last_use``). (A column max + argmax over [512 rows, 64 columns]
    bf16 steps at 4 warps: the fp32 cast held whole to the second reduction predicted 403
    registers; ptxas allocates 116.)"""
    keys = reduce_pairs.paired_keys(loop.walk())
    first: dict[reduce_pairs.PairKey, Node] = {}
    later: set[int] = set()
    for node in sorted(loop.walk(), key=lambda n: positions.get(n.id, -1)):
        if not reduce_pairs.pairable(node) or reduce_pairs.pair_key(node) not in keys:
            continue
        head = first.setdefault(reduce_pairs.pair_key(node), node)
        if head is not node:
            later.add(node.id)
            src = node.inputs[0].id
            if last_use.get(src) == positions[node.id]:
                last_use[src] = positions[head.id]
    return later


def _holds_registers(
    node: Node, loop_end: int, program: _ProgramOrder, looped: Callable[[Sym], bool]
) -> bool:
    """Whether ``node`` is a tile of registers of its own (see the module docstring)."""
    if node.op is Op.FULL:
        return False  # a constant splat: materialized in its user (a carry holds its own)
    if node.id in program.skipped:
        # a carried value's next value reuses its registers (acc = acc + ...); a mask such as
        # ``tn.index[None, :] < n`` is recomputed from the thread's indices where used
        return False
    rolled = any(looped(d) for d in node.shape if isinstance(d, Sym))
    if rolled and node.op is Op.LOAD and loop_end == 0:
        return False  # counted with the chunk loops that read it (_rolled_accumulators)
    if program.streams and node.op in ELEMENTWISE_OPS and loop_end == 0:
        if rolled:
            return False  # recomputed chunk by chunk in each chunk loop that needs it
        start = program.positions[node.id]
        end = program.last_use.get(node.id, start)
        if bisect.bisect_right(program.barriers, start) == bisect.bisect_left(
            program.barriers, end
        ):
            return False  # computed element by element into its users (no barrier between)
    # a carried value on a looped dim is kept in its output row (ir/carried_homes.py)
    return not (node.op is Op.CARRY and any(looped(d) for d in node.shape if isinstance(d, Sym)))


def _peak(events: list[tuple[int, float, Node]]) -> tuple[float, Node | None]:
    """The most registers live at once over ``(position, +/- registers, value)`` events, and the
    value whose definition reached it."""
    live = peak = 0.0
    peak_node: Node | None = None
    for _, delta, node in sorted(events, key=lambda e: (e[0], e[1])):
        live += delta
        if live > peak:
            peak, peak_node = live, node
    return peak, peak_node


_INDEX_LEAVES = (
    Op.TILE_INDEX,
    Op.TILE_BEGIN,
    Op.TILE_END,
    Op.TILE_ID,
    Op.BLOCK_SIZE,
    Op.CONST,
    Op.ARG,
)


def index_values(loop: DeviceLoop) -> set[int]:
    """Ids of the elementwise values computed from tile indices and scalars alone (masks,
    offsets): cheap to recompute, ptxas keeps no tile of them."""
    found: set[int] = set()
    for node in loop.walk():
        if (node.op in ELEMENTWISE_OPS or node.op is Op.VIEW) and all(
            i.op in _INDEX_LEAVES or i.id in found for i in node.inputs
        ):
            found.add(node.id)
    return found


def _rolled_accumulators(
    nodes: list[Node],
    looped: Callable[[Sym], bool],
    block_of: Callable[[Sym], int],
    parent: dict[int, int],
    threads: int,
    mma: int,
) -> tuple[float, Node] | None:
    """Registers of ``nodes``' chunk loops (a rolled reduction's dim) at their largest and the
    last rolled reduction (None: no rolled reduction). Codegen runs one chunk loop per phase
    (``ir/phases.py``); each holds its reductions' chunk-wide accumulators and the chunks of
    every load it reads (a step's loads are issued together), while the elementwise values
    between them stream. Held from the block's start to its last rolled reduction. (KL
    divergence over two logit rows, 4096-wide chunks at 8 warps: five accumulators in three
    chunk loops; counting all five at once predicted 144 registers, ptxas allocated 59.)"""
    per_phase: dict[tuple[int, int], float] = {}
    order = {n.id: i for i, n in enumerate(nodes)}
    last: Node | None = None
    dims = {id(n.inputs[0].shape[n.attrs["axis"]]): n.inputs[0].shape[n.attrs["axis"]]
            for n in nodes if n.op is Op.REDUCE}  # fmt: skip
    for sym in (d for d in dims.values() if isinstance(d, Sym) and looped(d)):
        phase, _ = phases(nodes, sym)
        for node in nodes:
            if rolled_reduce(node, sym):
                key = (id(sym), phase.get(node.inputs[0].id, 0))
                # a reduction of a dot's chunks carries a row (ir/chunk_reductions.py)
                held = node if reduces_per_chunk(node, sym) else node.inputs[0]
                acc = _chunk_tile(held, block_of, parent, threads, mma)
                per_phase[key] = per_phase.get(key, 0.0) + acc
                last = node if last is None or order[node.id] > order[last.id] else last
        for p, loads in chunk_loop_loads(nodes, sym).items():
            tiles = sum(_chunk_tile(n, block_of, parent, threads, mma) for n in loads)
            per_phase[(id(sym), p)] = per_phase.get((id(sym), p), 0.0) + tiles
    return None if last is None else (max(per_phase.values()), last)


def _chunk_tile(
    src: Node, block_of: Callable[[Sym], int], parent: dict[int, int], threads: int, mma: int
) -> float:
    """Registers per thread of one chunk of ``src`` (a rolled reduction's accumulator has its
    input's chunk shape; a load's chunk is what one step of the chunk loop holds)."""
    dims = [d for d in src.shape if isinstance(d, Sym)]
    spread = (
        parent
        if all(id(d) in parent for d in dims)
        else _threads_per_dim(dims, block_of, threads, mma)
    )
    return _per_thread(src, block_of, spread) * _registers_per_element(src)


def _values(body: list[Node], spans: dict[int, tuple[int, int]]) -> Iterable[tuple[Node, int]]:
    """Every value with the position it must live to at least (a loop-carried value: its loop's
    end; others: their definition)."""
    for node in body:
        if node.op is Op.LOOP:
            yield from ((carry, spans[node.id][1]) for carry in node.attrs.get("carried", []))
        elif node.op not in _NO_VALUE:
            yield node, 0
        for block in nested_bodies(node):
            yield from _values(block, spans)


def _thread_order(loop: DeviceLoop, block_of: Callable[[Sym], int]) -> tuple[list[Sym], int]:
    """The dims threads are laid along, slowest first: those of the loop's widest value, and
    the bytes of its elements."""
    widest: tuple[int, tuple[Sym, ...], int] = (0, (), 4)
    for node in loop.walk():
        dims = tuple(d for d in node.shape if isinstance(d, Sym))
        size = math.prod(block_of(d) for d in dims)
        if size > widest[0]:
            widest = (size, dims, getattr(node.dtype, "itemsize", 4))
    return list(widest[1]), widest[2]


def _own_layout(node: Node) -> bool:
    """A load, or elementwise values of loads and scalars only: Triton computes them in the
    load's own layout and converts at the broadcast that uses them."""
    if node.op is Op.LOAD:
        return True
    return node.op in ELEMENTWISE_OPS and all(not i.shape or _own_layout(i) for i in node.inputs)


def _threads_per_dim(
    order: list[Sym],
    block_of: Callable[[Sym], int],
    threads: int,
    mma_rows: int = 0,
    vector: int = 1,
) -> dict[int, int]:
    """Threads along each dim: the fastest dims first (a blocked layout), or for an MMA layout
    (``mma_rows`` > 0) up to ``mma_rows`` along the first dim, the rest along the others."""
    spread: dict[int, int] = {}
    left = threads
    if mma_rows and len(order) >= 2:
        along = max(1, min(left, mma_rows, block_of(order[0])))
        spread[id(order[0])] = along
        left = max(1, left // along)
        order = order[1:]
    for k, sym in enumerate(reversed(order)):
        elements = -(-block_of(sym) // vector) if k == 0 else block_of(sym)
        along = max(1, min(left, elements))
        spread[id(sym)] = along
        left = max(1, left // along)
    return spread


def _chain_start(node: Node, positions: dict[int, int], skipped: set[int]) -> int:
    """The first position of the elementwise chain that computes ``node``, element by element
    from the tiles it reads (index values, recomputed where used, end the chain)."""
    start = positions[node.id]
    stack, seen = [node], {node.id}
    while stack:
        for i in stack.pop().inputs:
            if i.id in seen or i.id in skipped or i.id not in positions:
                continue
            if i.op in (*ELEMENTWISE_OPS, Op.VIEW):
                seen.add(i.id)
                start = min(start, positions[i.id])
                stack.append(i)
    return start


def _expansion_registers(node: Node) -> float:
    """Registers per element an elementwise op's expansion holds beyond its operands."""
    if node.op not in (Op.UNARY, Op.BINARY):
        return 0.0
    op = POINTWISE.get(node.attrs.get("fn", ""))
    return op.expansion_registers if op is not None else 0.0


def _per_thread(node: Node, block_of: Callable[[Sym], int], spread: dict[int, int]) -> int:
    n = 1
    for d in node.shape:
        if isinstance(d, Sym):
            n *= -(-block_of(d) // spread.get(id(d), 1))
    return n


def _registers_per_element(node: Node) -> float:
    size = getattr(node.dtype, "itemsize", 4)
    if size < 4 and _scalar_load(node):
        return 1.0  # each narrow element loaded alone lands in a register of its own
    return max(size, 2) / 4


def _scalar_load(node: Node) -> bool:
    """Whether a load reads its contiguous dim one narrow element at a time: no vector of two
    or more can start at every lane's address, because the element offset of the slice's start,
    a tile's begin, another indexed dim's stride or an int index's offset is odd, or the dim's
    mask ends at an odd extent (Triton vectorizes a masked load only as far as the mask is
    constant). Static shapes only (a dynamic one is specialized to multiples of 16). (A
    window-of-4 unfold of bf16 rows [16, 256, 4096], 4093 windows, four loads shifted by 0 to
    3 at [8, 8, 128] tiles and 8 warps: all four compile to ld.global.b16, ptxas allocates 134
    registers, 128 of them the four tiles; counted packed two to a register, 80 were
    predicted.)"""
    if node.op is not Op.LOAD or node.attrs.get("positions") is not None:
        return False
    tensor, index = node.attrs["tensor"], node.attrs["index"]
    if tensor.dynamic or len(index) != len(tensor.stride):
        return False
    offsets: list[int] = []
    along = False  # a unit-step tile, whole dim or slice runs along the contiguous dim
    for item in index:
        kind = item[0]
        if kind == "int":
            offsets.append(item[1] * tensor.stride[item[2]])
        elif kind in ("tile", "rdim", "rslice"):
            sym, step = item[1], item[4] if kind == "rslice" else 1
            if sym.scalar:
                continue  # tc.grid: one element of the dim a program
            start = item[3] if kind == "rslice" else 0
            if tensor.stride[item[2]] != 1:
                offsets.append(tensor.stride[item[2]])
                continue
            if step != 1:
                return False  # a strided slice: ir/paired_slices.py
            along = True
            ends = [sym.begin, sym.extent] if isinstance(sym.extent, int) else []
            offsets += [start, *(e for e in ends if isinstance(e, int))]
        else:
            return False  # a value index: a gather, laid out by codegen/lane_order.py
    return along and math.gcd(*offsets) % 2 == 1


def _number(body: list[Node]) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    """Program-order positions of every node and each loop's (first, last) position."""
    positions: dict[int, int] = {}
    spans: dict[int, tuple[int, int]] = {}

    def visit(nodes: list[Node]) -> None:
        for node in nodes:
            positions[node.id] = len(positions)
            for carry in node.attrs.get("carried", []) if node.op is Op.LOOP else []:
                positions[carry.id] = len(positions)  # defined (initialized) before the body
            if node.body is not None:  # an empty loop body still has a (first, last) span
                first = len(positions)
                for block in nested_bodies(node):
                    visit(block)
                spans[node.id] = (first, len(positions) - 1)

    visit(body)
    return positions, spans


def _last_uses(
    body: list[Node], positions: dict[int, int], spans: dict[int, tuple[int, int]]
) -> dict[int, int]:
    """For each value, the last position that needs it (a use in a loop body that the value is
    defined outside of keeps it to the loop's end)."""
    last: dict[int, int] = {}

    def visit(nodes: list[Node], enclosing: list[Node]) -> None:
        for node in nodes:
            uses = list(node.inputs)
            if node.op is Op.LOOP:
                for carry in node.attrs.get("carried", []):
                    uses += [*carry.inputs, carry.attrs.get("next")]
            for used in uses:
                if used is None or used.id not in positions:
                    continue
                at = positions[node.id]
                for outer in enclosing:  # outermost loop that does not contain the definition
                    first, end = spans[outer.id]
                    if not first <= positions[used.id] <= end:
                        at = max(at, end)
                        break
                last[used.id] = max(last.get(used.id, 0), at)
            for block in nested_bodies(node):
                visit(block, [*enclosing, node])

    visit(body, [])
    return last

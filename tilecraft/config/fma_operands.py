"""Registers of fp32 dots on the FMA units (stage: config; in: a device loop's fp32 ``DOT``
nodes, their program positions and blocks; out: live-register events for the resource model,
``config/resources.py``).

An fp32 ``tl.dot`` with ``input_precision="ieee"`` runs on the FMA units. Each thread computes an
``s x s`` square of the accumulator (``s`` the largest power of two with ``s * s`` at most its
share), lanes along N first (up to 32), warps along M; its operands arrive in the dot-operand
layout as slabs of ``rows x K`` values of A and ``cols x K`` of B, whole K (the ttgir of an STFT's
and Mamba-2 SSD's dots at eight block / warp configs, cross-compiled for sm_90).

Where a dot's operand is read from shared memory right before the dot (a K-loop GEMM), ptxas
streams the slab into the FMAs: a slice as large as the accumulator per ``FMA_K_STEP`` of K
(an fp32 matmul 128x128x32 at 8 warps: 176 registers for a 64-register accumulator). The slab
stays whole, from the operand's definition to its last dot, where
- one operand feeds several dots (Triton loads it once for every dot of that layout: an STFT's
  frames times the cosine and the sine tables, 8 x 64 registers across the first dot),
- a loaded operand is defined before another dot runs (the pipeliner loads all of a step's
  operands at its top: the SSD's C, B and x tiles), or
- it is defined outside a loop that runs its dot (its load is hoisted and held through it:
  decode attention's query).
Counted that way, 29 of 29 cross-compiled STFT / SSD / decode-attention / matmul configs land on
the side of the register limit ptxas does (11 of 29 before; /work/fuzz38a's audit, session 38).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from tilecraft.ir.dot_k_chunks import chunkable, k_dim
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym

# an fp32 FMA dot holds operand slices as large as its accumulator per 32 of K (sm_90, fp32
# matmul 128x128 at 8 warps: K 16 -> 168 registers, 32 -> 176, 64 -> 255 and 856 B spilled)
FMA_K_STEP = 32
WARP_LANES = 32

Event = tuple[int, float, Node]


def fma_dot(node: Node) -> bool:
    """Whether ``node`` is a dot of two fp32 operands."""
    return node.op is Op.DOT and all(i.dtype == torch.float32 for i in node.inputs[:2])


def fma_k_chunk(
    dot: Node, block_of: Callable[[Sym], int], looped: Callable[[Sym], bool]
) -> int | None:
    """The K chunk an fp32 FMA dot over a whole K dim runs in (``ir/dot_k_chunks.py``,
    ``codegen/dot_chunks.py``), None where it runs whole: each thread then holds K values per
    accumulator row and column (64 points x 64 centroids x K 64 at 4 warps spilled on sm_90; in
    chunks of 32: 198 registers, none spilled). A rolled K is already one chunk a step."""
    k = k_dim(dot)
    if not fma_dot(dot) or k is None or looped(k) or block_of(k) <= FMA_K_STEP:
        return None
    return FMA_K_STEP if chunkable(dot) else None


def fma_operand_events(
    loop: DeviceLoop,
    positions: dict[int, int],
    spans: dict[int, tuple[int, int]],
    block_of: Callable[[Sym], int],
    value_cost: Callable[[Node], float],
    looped: Callable[[Sym], bool] = lambda sym: False,
) -> list[Event]:
    """(position, registers, node) events of every fp32 FMA dot's operands: the streamed slice
    while each dot runs, and the whole slabs held across other dots or loops (module doc).
    ``spans``: each LOOP node's (first, last) position."""
    dots = [n for n in loop.walk() if fma_dot(n)]
    chunked = {d.id for d in dots if fma_k_chunk(d, block_of, looped) is not None}
    events: list[Event] = []
    for dot in dots:
        k_block = FMA_K_STEP if dot.id in chunked else _block(dot.inputs[0].shape[-1], block_of)
        cost = value_cost(dot) * max(1.0, k_block / FMA_K_STEP)
        events += [(positions[dot.id], cost, dot), (positions[dot.id] + 1, -cost, dot)]
    dot_positions = [positions[d.id] for d in dots]
    # a chunked dot reads its operands' chunks in its own loop: no whole slab is held
    whole = [d for d in dots if d.id not in chunked]
    for operand, slab, users in _operand_slabs(whole, block_of, value_cost):
        start = positions.get(operand.id, 0)
        last = max(positions[d.id] for d in users)
        end = max(
            [last] + [hi for lo, hi in spans.values() if lo <= last <= hi and not lo <= start <= hi]
        )
        loaded_early = _loaded(operand) and any(start < p < last for p in dot_positions)
        if len(users) > 1 or loaded_early or end > last:
            events += [(start, slab, users[0]), (end + 1, -slab, users[0])]
    return events


def _operand_slabs(
    dots: list[Node], block_of: Callable[[Sym], int], value_cost: Callable[[Node], float]
) -> list[tuple[Node, float, list[Node]]]:
    """(operand, registers of its slab per thread, the dots reading it in one layout)."""
    groups: dict[tuple[int, int, int, int], tuple[Node, float, list[Node]]] = {}
    for dot in dots:
        m_block, n_block = _block(dot.shape[-2], block_of), _block(dot.shape[-1], block_of)
        k_block = _block(dot.inputs[0].shape[-1], block_of)
        rows, cols = _thread_square(value_cost(dot), n_block)
        for which, share in ((0, rows), (1, cols)):
            operand = dot.inputs[which]
            key = (operand.id, which, m_block, n_block)
            groups.setdefault(key, (operand, float(share * k_block), []))[2].append(dot)
    return list(groups.values())


def _thread_square(accumulator: float, n_block: int) -> tuple[int, int]:
    """Rows and columns of the accumulator one thread holds."""
    share = max(1, int(accumulator))
    side = 1 << int(math.log2(math.isqrt(share)))
    lanes_n = max(1, min(WARP_LANES, n_block // side))
    cols = max(1, n_block // lanes_n)
    return max(1, math.ceil(share / cols)), cols


def _loaded(node: Node) -> bool:
    """Whether ``node`` is a load (through views): it passes through shared memory."""
    while node.op is Op.VIEW:
        node = node.inputs[0]
    return node.op is Op.LOAD


def _block(dim: object, block_of: Callable[[Sym], int]) -> int:
    return block_of(dim) if isinstance(dim, Sym) else int(dim)  # type: ignore[call-overload]

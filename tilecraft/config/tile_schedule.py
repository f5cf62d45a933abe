"""Time of a grid whose tiles do unequal work, under each program-id strategy (stage: config; in:
a ConfigSpec, a plan and per-tile work; out: the busiest SM's load, for the pipeline cost).

A flat grid launches one program per tile, in program-id order, and the hardware gives each
waiting program to the first SM that frees up: a list schedule. A persistent grid assigns tiles
to its programs statically (interleaved: tile ``t`` to program ``t mod P``; blocked: contiguous
runs), so a program that drew long tiles runs long while the others idle. With equal tiles both
take ``ceil(tiles / SMs)`` tile times; with a causal attention's triangle of work (tile ``i`` of a
query dim walks ``i + 1`` key blocks) the static split ends with a few SMs busy, measured on the
H200 at 2x32x4096, d 64: persistent 0.60 ms, flat 0.39 ms, both longest first
(benchmarks/results/causal_order_s8.md).

The launch order mirrors ``codegen/grid.py``'s decomposition (L2 groups, loop orders, the
longest-first reversal of ``ir/tile_work.growing_dims``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from tilecraft.config.dims import cdiv
from tilecraft.config.plan import Plan
from tilecraft.ir.nodes import DeviceLoop
from tilecraft.ir.tile_work import tile_trips, work_trends

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec

MAX_SIMULATED_TILES = 1 << 16  # beyond it the grid's waves even out; the uniform model serves


def tile_counts(loop: DeviceLoop, plan: Plan) -> list[int] | None:
    """Tiles along each grid dim (None: a dim is dynamic)."""
    counts = []
    for sym in loop.grid_syms:
        if not (isinstance(sym.begin, int) and isinstance(sym.extent, int)):
            return None
        counts.append(max(cdiv(sym.extent - sym.begin, plan.block(sym)), 1))
    return counts


def launch_tile(v: int, counts: list[int], order: list[int], group: int) -> list[int]:
    """The tile (one index per grid dim) that program ``v`` works on, as codegen decomposes it."""
    tile = [0] * len(counts)
    if group > 1 and len(order) > 1:
        a, b = order[0], order[1]
        inner = v % (counts[a] * counts[b])
        in_group = group * counts[b]
        first = (inner // in_group) * group
        rows = min(counts[a] - first, group)
        tile[a] = first + (inner % in_group) % rows
        tile[b] = (inner % in_group) // rows
        rest, v = order[2:], v // (counts[a] * counts[b])
    else:
        rest = order
    for d in rest:
        tile[d], v = v % counts[d], v // counts[d]
    return tile


def uneven_work(
    spec: ConfigSpec, plan: Plan, index: int, steps: Callable[[list[int | None]], float | None]
) -> list[float] | None:
    """Work of each program of device loop ``index`` in launch order, ``steps`` turning one
    tile's inner-loop trips into time; None where the tiles do equal work (or it is unknown)."""
    loop = spec.loops[index]
    trends = work_trends(loop)
    counts = tile_counts(loop, plan)
    if len(trends) != 1 or counts is None or math.prod(counts) > MAX_SIMULATED_TILES:
        return None
    ((d, trend),) = trends.items()
    trips = tile_trips(loop, d, plan.block(loop.grid_syms[d]))
    if trips is None:
        return None
    per_tile = [steps(t) for t in trips]
    if any(w is None for w in per_tile):
        return None
    orders = plan.loop_orders
    order = list(orders[loop.grid_slot]) if orders else list(range(len(counts)))
    group = plan.l2_groupings[loop.grid_slot] if plan.l2_groupings else 1
    last = counts[d] - 1
    out = []
    for v in range(math.prod(counts)):
        i = launch_tile(v, counts, order, group)[d]
        tile = last - i if trend > 0 else i  # growing dims are walked longest first
        out.append(float(per_tile[tile]))  # type: ignore[arg-type]
    return out


def busiest_sm(work: list[float], plan: Plan, sms: int, once: float = 0.0) -> float:
    """The load of the busiest SM when ``work`` (programs in launch order) runs under the plan's
    pid type; ``once`` is paid once per program sequence (a specialized producer's first fill)."""
    if not plan.persistent:
        loads = [0.0] * min(sms, len(work))
        for w in work:  # the hardware's list schedule: the least-loaded SM takes the next one
            heapq.heapreplace(loads, loads[0] + w)
        return max(loads) + once
    programs = min(len(work), sms * max(plan.num_sm_multiplier, 1))
    per_program = [0.0] * programs
    if plan.pid_type == "persistent_interleaved":
        for v, w in enumerate(work):
            per_program[v % programs] += w
    else:
        per = -(-len(work) // programs)
        for v, w in enumerate(work):
            per_program[v // per] += w
    per_sm = [0.0] * min(sms, programs)
    for p, w in enumerate(per_program):
        per_sm[p % len(per_sm)] += w
    return max(per_sm) + once


__all__ = ["busiest_sm", "launch_tile", "tile_counts", "uneven_work"]

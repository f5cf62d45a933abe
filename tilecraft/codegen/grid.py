"""Program ids -> tile offsets for a device loop's grid (stage: codegen; in: an
:class:`~tilecraft.codegen.context.EmitContext` over the loop and its plan; out: the kernel's
program loop with each grid dim's offsets, indices and masks, and the launcher's grid).

Strategies selected by the plan: ``pid_type`` (``flat``: one program per tile, ids decomposed in
``loop_orders`` order; ``xyz``: one grid axis per tile dim; ``persistent_blocked`` /
``persistent_interleaved``: ``num_sm_multiplier x #SMs`` programs, each looping over tiles) and
``l2_groupings`` (grouped ordering of the first two dims so neighbouring programs share L2 lines).
A dim whose later tiles run longer inner loops (causal attention's query blocks) is walked from
its last tile down, so the longest programs start first and short ones fill the tail.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch

from tilecraft.codegen.context import SymState
from tilecraft.codegen.grid_diagonal import emit_grid_body
from tilecraft.ir.nodes import Sym
from tilecraft.ir.tile_work import growing_dims

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


@dataclasses.dataclass
class GridLayout:
    counts: list[str]  # tiles per grid dim, as kernel-side expressions
    host_counts: list[str]  # the same, as launcher expressions
    static: list[bool]  # whether each dim's extent is known and divisible


def layout(em: EmitContext) -> GridLayout:
    counts, host, full = [], [], []
    for i, sym in enumerate(em.loop.grid_syms):
        st = SymState(block=em.block_expr(sym))
        em.syms[id(sym)] = st
        st.begin, st.end = em.bound_expr(sym.begin), em.bound_expr(sym.extent)
        block = em.block_value(sym)
        if isinstance(sym.begin, int) and isinstance(sym.extent, int):
            n = max(-(-(sym.extent - sym.begin) // block), 1)
            counts.append(str(n))
            host.append(str(n))
            full.append((sym.extent - sym.begin) % block == 0)
        else:
            span = st.end if st.begin == "0" else f"({st.end} - {st.begin})"
            counts.append(f"tl.cdiv({span}, {st.block})")
            host.append(f"triton.cdiv(spec.ends[{i}] - spec.begins[{i}], {block})")
            full.append(False)
    return GridLayout(counts, host, full)


def _product(items: list[str]) -> str:
    return " * ".join(f"({c})" if " " in c else c for c in items) if items else "1"


def total_tiles(grid: GridLayout) -> str:
    return _product(grid.counts)


def host_grid(em: EmitContext, grid: GridLayout) -> str:
    """The launcher's grid tuple contents."""
    if em.plan.pid_type == "xyz":
        order = _order(em)
        return ", ".join(grid.host_counts[d] for d in order)
    total = _product(grid.host_counts)
    if em.plan.persistent:
        return f"min({total}, num_programs)"
    return total


def _order(em: EmitContext) -> list[int]:
    orders = em.plan.loop_orders
    return list(orders[em.loop.grid_slot]) if orders else list(range(len(em.loop.grid_syms)))


def decompose(em: EmitContext, grid: GridLayout, pid: str) -> None:
    """Emit ``pid_<d>`` for every grid dim, then each dim's offsets, indices and mask."""
    syms = em.loop.grid_syms
    order = _order(em)
    pids: dict[int, str] = {d: em.w.fresh(f"pid_{syms[d].index}") for d in order}
    group = em.plan.l2_groupings[em.loop.grid_slot]
    if em.plan.pid_type == "xyz":
        for axis, d in enumerate(order):
            em.w.line(f"{pids[d]} = tl.program_id({axis})")
    elif len(order) == 1:
        em.w.line(f"{pids[order[0]]} = {pid}")
    elif group > 1:
        _grouped(em, grid, order, pids, pid, group)
    else:
        _mixed_radix(em, grid, order, pids, pid)
    for d in growing_dims(em.loop):  # longest tiles launch first (ir/tile_work.py)
        em.w.line(f"{pids[d]} = {grid.counts[d]} - 1 - {pids[d]}")
    for d, sym in enumerate(syms):
        tile_vars(em, sym, em.state(sym), pids[d], needs_mask=not grid.static[d])


def tile_vars(em: EmitContext, sym: Sym, st: SymState, pid_var: str, needs_mask: bool) -> None:
    """Offset, indices and mask of a grid dim whose tile number is ``pid_var``."""
    st.tile_id = pid_var
    st.offset = em.w.fresh(f"offset_{sym.index}")
    begin, end = st.begin, st.end
    plus_begin = f" + {begin}" if begin != "0" else ""
    if sym.scalar:
        em.w.line(f"{st.offset} = {em.index_cast(pid_var)}{plus_begin}")
        st.index = st.offset
        return
    em.w.line(f"{st.offset} = {em.index_cast(pid_var)} * {st.block}{plus_begin}")
    st.index = em.w.fresh(f"indices_{sym.index}")
    em.w.line(f"{st.index} = {st.offset} + tl.arange(0, {st.block})")
    if needs_mask:
        st.mask = em.w.fresh(f"mask_{sym.index}")
        em.w.line(f"{st.mask} = {st.index} < {end}")


def _mixed_radix(
    em: EmitContext, grid: GridLayout, order: list[int], pids: dict[int, str], pid: str
) -> None:
    stride: list[str] = []
    for k, d in enumerate(order):
        quotient = pid if not stride else f"{pid} // ({_product(stride)})"
        expr = quotient if k == len(order) - 1 else f"({quotient}) % ({grid.counts[d]})"
        em.w.line(f"{pids[d]} = {expr}")
        stride.append(grid.counts[d])


def _grouped(
    em: EmitContext, grid: GridLayout, order: list[int], pids: dict[int, str], pid: str, group: int
) -> None:
    """Groups of ``group`` rows of the first dim walk the second dim together (L2 reuse)."""
    a, b = order[0], order[1]
    n_a, n_b = grid.counts[a], grid.counts[b]
    w = em.w
    inner = w.fresh("inner_pid")
    w.line(f"{inner} = {pid} % (({n_a}) * ({n_b}))")
    in_group = w.fresh("pids_in_group")
    w.line(f"{in_group} = {group} * ({n_b})")
    first = w.fresh("first_pid")
    w.line(f"{first} = ({inner} // {in_group}) * {group}")
    size = w.fresh("group_rows")
    w.line(f"{size} = tl.minimum(({n_a}) - {first}, {group})")
    w.line(f"{pids[a]} = {first} + ({inner} % {in_group}) % {size}")
    w.line(f"{pids[b]} = ({inner} % {in_group}) // {size}")
    rest = order[2:]
    stride = [n_a, n_b]
    for k, d in enumerate(rest):
        quotient = f"{pid} // ({_product(stride)})"
        expr = quotient if k == len(rest) - 1 else f"({quotient}) % ({grid.counts[d]})"
        w.line(f"{pids[d]} = {expr}")
        stride.append(grid.counts[d])


def emit_program_loop(em: EmitContext, grid: GridLayout) -> None:
    """Non-persistent: one tile per program. Persistent: a loop over tiles in each program."""
    pid_type = em.plan.pid_type
    if not em.plan.persistent:
        decompose(em, grid, "tl.program_id(0)")
        emit_grid_body(em, em.loop.body)
        return
    total = em.w.fresh("total_tiles")
    em.w.line(f"{total} = {total_tiles(grid)}")
    em.scalars["num_programs"] = ("programs",)
    em.scalar_types["num_programs"] = torch.int32
    knobs = em.plan.range(em.loop.range_slot).kwargs()
    if em.interpret:
        _interpreted_program_loop(em, grid, total, knobs)
        return
    if pid_type == "persistent_interleaved":
        em.w.line(f"for virtual_pid in tl.range(tl.program_id(0), {total}, num_programs{knobs}):")
    else:
        per = em.w.fresh("tiles_per_program")
        em.w.line(f"{per} = tl.cdiv({total}, num_programs)")
        start = em.w.fresh("first_tile")
        em.w.line(f"{start} = tl.program_id(0) * {per}")
        em.w.line(
            f"for virtual_pid in tl.range({start}, tl.minimum({start} + {per}, {total}){knobs}):"
        )
    with em.w.indented():
        decompose(em, grid, "virtual_pid")
        emit_grid_body(em, em.loop.body)


def _interpreted_program_loop(em: EmitContext, grid: GridLayout, total: str, knobs: str) -> None:
    """The persistent loop for Triton's interpreter: its bound is a constexpr the launcher
    computes (there a ``tl.range`` bound computed in the kernel is a one-element array, which
    NumPy deprecates converting to an int), and tiles past the end are skipped by an ``if``."""
    per = "_TILES_PER_PROGRAM"
    em.launch_constexprs[per] = f"triton.cdiv({_product(grid.host_counts)}, num_programs)"
    step = em.w.fresh("tile_step")
    em.w.line(f"for {step} in tl.range(0, {per}{knobs}):")
    with em.w.indented():
        if em.plan.pid_type == "persistent_interleaved":
            em.w.line(f"virtual_pid = tl.program_id(0) + {step} * num_programs")
        else:
            em.w.line(f"virtual_pid = tl.program_id(0) * {per} + {step}")
        em.w.line(f"if virtual_pid < {total}:")
        with em.w.indented():
            decompose(em, grid, "virtual_pid")
            emit_grid_body(em, em.loop.body)

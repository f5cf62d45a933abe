"""Running arg-bests that may defer their reduction (stage: ir analysis; in: a ``LOOP`` node;
out: its carried (best, index) pairs updated from a min / argmin (max / argmax) of the loop's
own tile).

The idiom users write for a nearest neighbour, a column argmin or a greedy token over chunks::

    v, i = torch.min(x, dim=1)          # x: [rows, tk], the loop's own tile on dim 1
    better = v < best                   # strict: the earliest chunk wins a tie
    arg = torch.where(better, i + tk.begin, arg)
    best = torch.where(better, v, best)

reduces every step's tile across its lanes with a (value, index) combine. Deferred
(``codegen/deferred_args.py``), each lane keeps its own best and index and one (value, index)
reduction runs after the loop, the smaller index on equal values, and the user's update is
applied once to that result. The same result: the rows' best is the first position of the
least value over the steps. A step whose row holds a NaN is skipped by the user's code (its min
is NaN, and ``NaN < best`` is false): a deferred lane keeps a NaN it meets, and a tile that
has one runs the loop again as written. Legal when the pair is read by nothing else in the
loop, the compared values do not depend on a carried value, the index is the reduction's index
plus the loop tile's begin, and the loop stores nothing (it may run twice).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tilecraft.ir.nodes import Node, Op, Sym, walk
from tilecraft.ir.phases import rolled_reduce
from tilecraft.ir.recurrence import carry_dependent
from tilecraft.ir.reduce_pairs import ARG_OF, pair_key
from tilecraft.ir.split import readers

# lane values (a best and its index each) a thread may keep through the loop: the row tile of a
# nearest-neighbour step, [64, 128] at 8 warps, keeps 32 pairs
LANE_VALUES_PER_THREAD = 64
# a loop of one step has no per-step reduction to save: the lanes only add their registers, a
# compare and two selects an element and the NaN test (H100, point_box_nearest's single step
# over 64 boxes: 0.98 -> 1.36 ms deferred; 32 steps of chamfer: 4.04 -> 0.80 ms)
MIN_STEPS = 2
_EFFECTS = (Op.STORE, Op.ATOMIC, Op.PRINT)
# the comparison that keeps a new value, with the new value first: v < best, v > best
_STRICT = {"min": "lt", "max": "gt"}
_SWAPPED = {"lt": "gt", "gt": "lt"}


@dataclasses.dataclass(frozen=True)
class DeferredArg:
    """One running arg-best that runs deferred: its carries, the reductions and update nodes
    the loop no longer emits, and the reduced tile (``root``) with the axis of the loop's own
    dim."""

    best: Node  # CARRY of the running value
    arg: Node  # CARRY of the running index
    kind: str  # "min" or "max"
    value: Node  # the REDUCE (min / max) of ``root``
    skipped: tuple[Node, ...]  # every node of the update: reductions, compare, index, wheres
    sym: Sym  # the loop's own dim (the reduced one)

    @property
    def root(self) -> Node:
        return self.value.inputs[0]

    @property
    def axis(self) -> int:
        return int(self.value.attrs["axis"])


def deferrable_args(loop: Node) -> list[DeferredArg]:
    """The running arg-bests of ``loop`` that may run deferred (see the module)."""
    sym = loop.attrs["sym"]
    body = loop.body or []
    if sym.scalar or any(n.op in _EFFECTS for n in walk(body)):
        return []  # (the NaN fallback runs the loop again: it must have no effects)
    carried: list[Node] = list(loop.attrs.get("carried", []))
    dependent = carry_dependent(body, carried)
    users = readers(body)
    found = []
    for best in carried:
        found_arg = _arg_best(best, carried, users, sym)
        if found_arg is None or found_arg.root.id in dependent:
            continue
        if not rolled_reduce(found_arg.value, sym) or found_arg.root.dtype != best.dtype:
            continue
        found.append(found_arg)
    return found


def lane_budget(threads: int) -> int:
    """Lane values (two an element) the deferred pairs of a loop may keep, all threads."""
    return LANE_VALUES_PER_THREAD * threads


def deferred_args_plan(
    loop: Node, numel: Callable[[tuple[Any, ...]], int], budget: int, steps: int
) -> list[DeferredArg]:
    """The pairs of ``loop`` that run deferred: in order, while their lane tiles (a value and
    an index an element, ``numel`` of the reduced tile under the config) fit ``budget``
    values; none where the loop takes fewer than ``MIN_STEPS`` steps (``steps``: its trip
    count in the traced call)."""
    if steps < MIN_STEPS:
        return []
    plan, used = [], 0
    for d in deferrable_args(loop):
        need = 2 * numel(d.root.shape)
        if used + need <= budget:
            plan.append(d)
            used += need
    return plan


def _arg_best(
    best: Node, carried: list[Node], users: dict[int, list[Node]], sym: Sym
) -> DeferredArg | None:
    """``best``'s pair if it is updated as the module shows (a min / max pair of one tile,
    a strict compare, the index plus the tile's begin), each node read only within it."""
    update = best.attrs.get("next")
    if update is None or update.op is not Op.WHERE or update.inputs[2] is not best:
        return None
    better, value = update.inputs[0], update.inputs[1]
    kind = _compared(better, value, best)
    if kind is None or value.op is not Op.REDUCE or value.attrs["kind"] != kind:
        return None
    if value.attrs["keepdim"] or not value.inputs[0].dtype.is_floating_point:
        return None
    for arg in carried:
        nxt = arg.attrs.get("next")
        if arg is best or nxt is None or nxt.op is not Op.WHERE or nxt.inputs[0] is not better:
            continue
        if nxt.inputs[2] is not arg:
            continue
        chain = _index_chain(nxt.inputs[1], value, sym)
        if chain is None:
            continue
        skipped = (value, *chain, better, update, nxt)
        if _read_within(best, arg, skipped, users):
            return DeferredArg(best, arg, kind, value, skipped, sym)
    return None


def _compared(better: Node, value: Node, best: Node) -> str | None:
    """ "min" for ``value < best`` (or ``best > value``), "max" for ``value > best``."""
    if better.op is not Op.BINARY or len(better.inputs) != 2:
        return None
    fn = better.attrs.get("fn")
    if better.inputs == [value, best]:
        pass
    elif better.inputs == [best, value] and fn in _SWAPPED:
        fn = _SWAPPED[fn]
    else:
        return None
    return next((k for k, f in _STRICT.items() if f == fn), None)


def _index_chain(node: Node, value: Node, sym: Sym) -> tuple[Node, ...] | None:
    """The nodes of ``i + tk.begin`` (``i`` the arg partner of ``value``, ``tk`` the loop's
    ``sym``, either side, each maybe cast), the arg reduction first, or None."""
    if node.op is not Op.BINARY or node.attrs.get("fn") != "add" or len(node.inputs) != 2:
        return None
    for i, j in (node.inputs, node.inputs[::-1]):
        reduce, casts = _uncast(i)
        begin, begin_casts = _uncast(j)
        if reduce.op is not Op.REDUCE or begin.op is not Op.TILE_BEGIN:
            continue
        if reduce.attrs["kind"] != ARG_OF[value.attrs["kind"]]:
            continue
        if pair_key(reduce) != pair_key(value) or begin.attrs["sym"] is not sym:
            continue
        return (reduce, *casts, *begin_casts, node)
    return None


def _uncast(node: Node) -> tuple[Node, tuple[Node, ...]]:
    """``node`` without its integer casts, and the casts."""
    casts: list[Node] = []
    while node.op is Op.CAST and not node.dtype.is_floating_point:
        casts.append(node)
        node = node.inputs[0]
    return node, tuple(casts)


def _read_within(
    best: Node, arg: Node, nodes: tuple[Node, ...], users: dict[int, list[Node]]
) -> bool:
    """Whether every node of the update (and both carries) is read only by the update's own
    nodes (the wheres: by nothing in the loop, only its yield)."""
    inside = {n.id for n in nodes}
    for node in (best, arg, *nodes):
        if node is best.attrs["next"] or node is arg.attrs["next"]:
            if users.get(node.id):
                return False
            continue
        if any(u.id not in inside for u in users.get(node.id, [])):
            return False
    return True


def has_deferrable_args(body: list[Node]) -> bool:
    return any(n.op is Op.LOOP and deferrable_args(n) for n in walk(body))

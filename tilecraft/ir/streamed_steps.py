"""Loops whose steps stream into reductions (stage: ir analysis; in: a ``LOOP`` node; out:
whether each step's tiles are only reduced over the loop's dim, by something other than sums).

Such a step holds nothing of its tile after its reductions: its loads are cast and combined
element by element into the step's results (ptxas interleaves the loads with the in-thread
part of the reduction), so a larger step costs few registers, while every step pays a fixed
cross-warp combine and the load latency it waits on. ``config/tile_budget.stream_walk_steps``
sizes those steps. Sums are left out: they defer their reduction into a tile accumulator
(``ir/deferred_sums.py``) that grows with the step, and split rules of their own fill the device.
"""

from __future__ import annotations

from tilecraft.ir.nodes import Node, Op, Sym
from tilecraft.ir.phases import rolled_reduce
from tilecraft.ir.split import readers

_STREAMED = (Op.LOAD, Op.CAST, Op.UNARY, Op.BINARY, Op.WHERE, Op.VIEW)
_CHAIN = (Op.CAST, Op.UNARY, Op.BINARY, Op.WHERE, Op.VIEW)


def streamed_step(loop: Node) -> bool:
    """Whether every value of ``loop``'s step tile (a value with the loop's dim) is a load or
    an elementwise chain read only by more of the chain or by reductions over that dim, none
    computed from a reduction of the same step (an online softmax's ``exp(x - max)`` needs its
    tile twice), and some reduction is not a sum."""
    sym: Sym = loop.attrs["sym"]
    body = loop.body or []
    users = readers(body)
    reduced: set[int] = set()  # reduction results of the step and what is computed from them
    found_other = False
    for node in body:  # program order: inputs come first
        if any(i.id in reduced for i in node.inputs):
            reduced.add(node.id)
        if node.op in (Op.LOOP, Op.IF, Op.WHILE, Op.SCAN, Op.DOT, Op.GATHER):
            return False
        if rolled_reduce(node, sym):
            reduced.add(node.id)
            found_other |= node.attrs["kind"] != "sum"
            continue
        if not any(d is sym for d in node.shape):
            continue
        if node.op not in _STREAMED or node.id in reduced:
            return False
        for user in users.get(node.id, []):
            if not (user.op in _CHAIN or rolled_reduce(user, sym)):
                return False
    return found_other


__all__ = ["streamed_step"]

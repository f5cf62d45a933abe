"""Rolled reductions that reduce each chunk (stage: ir analysis; in: a rolled reduction over
dim R; out: whether codegen reduces each chunk before combining it into a row accumulator).

A rolled reduction keeps, by default, an accumulator as wide as a chunk: each step combines
lane by lane (one instruction an element) and the lanes are reduced once, after the loop. Where
the chunk comes out of a dot, each element cost K multiply-adds and the dot's own accumulator
already fills the registers: a chunk-wide accumulator (two for an argmin: value and index) beside
it doubles or triples them (a k-means assignment at 64 points x 64 centroids on 4 warps spilled
on sm_90 with lane accumulators, not with row ones). There each chunk is reduced across its
lanes as it comes (as flash attention takes each block's row max) and only a row is carried.
"""

from __future__ import annotations

from tilecraft.ir.nodes import Node, Op, Sym, on_dim
from tilecraft.ir.phases import rolled_reduce


def reduces_per_chunk(node: Node, sym: Sym) -> bool:
    """Whether the rolled reduction ``node`` over ``sym`` reduces each chunk as it comes: its
    input is computed, through values on ``sym``, from a dot."""
    if not rolled_reduce(node, sym):
        return False
    seen: set[int] = set()
    stack = [node.inputs[0]]
    while stack:
        n = stack.pop()
        if n.id in seen or not on_dim(n, sym):
            continue
        seen.add(n.id)
        if n.op is Op.DOT:
            return True
        if n.body is None:
            stack.extend(n.inputs)
    return False


__all__ = ["reduces_per_chunk"]

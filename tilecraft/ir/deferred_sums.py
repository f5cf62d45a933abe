"""Which loop-carried sums may defer their reduction (stage: ir analysis; in: a ``LOOP`` node;
out: its carried values updated as ``c = c + sum(x, axis)`` over the loop's own tile).

The ``deferred_sums`` config knob (codegen/deferred_sums.py) keeps such a sum's tile accumulator
and reduces once after the loop. Legal when ``x``'s reduced dim is the loop's own tile, ``c`` and
the sum are read by nothing else in the loop, and the sum is fp32/fp64 (the additions only change
order). The spec offers the knob where some loop has one (``ConfigSpec.deferrable_sums``).
"""

from __future__ import annotations

import torch

from tilecraft.ir.nodes import Node, Op, walk

_FLOATS = (torch.float32, torch.float64)


def deferrable_sums(loop: Node) -> list[Node]:
    """The carried values of ``loop`` whose per-iteration sum may move after it."""
    uses: dict[int, int] = {}
    for n in walk(loop.body or []):
        for i in n.inputs:
            uses[i.id] = uses.get(i.id, 0) + 1
    return [c for c in loop.attrs.get("carried", []) if _pattern(loop, c, uses)]


def summed(carry: Node) -> Node:
    """The REDUCE node a deferrable carry adds each iteration."""
    return next(i for i in carry.attrs["next"].inputs if i is not carry)


def _pattern(loop: Node, carry: Node, uses: dict[int, int]) -> bool:
    update = carry.attrs.get("next")
    if update is None or update.op is not Op.BINARY or update.attrs.get("fn") != "add":
        return False
    others = [i for i in update.inputs if i is not carry]
    if len(others) != 1 or len(update.inputs) != 2:
        return False
    reduce = others[0]
    if reduce.op is not Op.REDUCE or reduce.attrs["kind"] != "sum" or reduce.attrs["keepdim"]:
        return False
    src = reduce.inputs[0]
    sym = loop.attrs["sym"]
    if src.shape[reduce.attrs["axis"]] is not sym or sym.scalar:
        return False
    if not (carry.dtype == src.dtype == reduce.dtype and carry.dtype in _FLOATS):
        return False
    return uses.get(carry.id, 0) == 1 and uses.get(reduce.id, 0) == 1 and not uses.get(update.id)


def has_deferrable_sums(body: list[Node]) -> bool:
    return any(n.op is Op.LOOP and deferrable_sums(n) for n in walk(body))

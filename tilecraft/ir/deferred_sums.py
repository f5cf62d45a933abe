"""Which loop-carried sums may defer their reduction (stage: ir analysis; in: a ``LOOP`` node;
out: its carried values updated as ``c = c + sum(x, axis)`` over the loop's own tile).

The ``deferred_sums`` config knob (codegen/deferred_sums.py) keeps such a sum's tile accumulator
and reduces once after the loop. Legal when ``c`` is an accumulator by split reductions' rules
(``ir/split.py``: read by nothing else in the loop, updated by a value that does not depend on a
carried one), ``x``'s reduced dim is the loop's own tile, nothing else reads the sum, and it is
fp32/fp64 (the additions only change order). The spec offers the knob where some loop has one
(``ConfigSpec.deferrable_sums``).
"""

from __future__ import annotations

import torch

from tilecraft.ir.nodes import Node, Op, Sym, walk
from tilecraft.ir.split import accumulators, readers

_FLOATS = (torch.float32, torch.float64)
# a deferred accumulator's fp32 values per thread (registers it keeps through the loop); larger
# tiles keep the per-step sum (codegen) and cost nothing extra (the resource model)
MAX_ELEMS_PER_THREAD = 32


def deferrable_sums(loop: Node) -> list[Node]:
    """The carried values of ``loop`` whose per-iteration sum may move after it: accumulators
    (``ir/split.py``'s rules: read by nothing else in the loop) updated by ``+`` with a sum over
    the loop's own tile that nothing else reads, in fp32/fp64."""
    users = readers(loop.body or [])
    sym = loop.attrs["sym"]
    out = []
    for acc in accumulators(loop).values():
        update = acc.carry.attrs["next"]
        if update.op is not Op.BINARY or acc.fn != "add" or acc.carry.dtype not in _FLOATS:
            continue
        reduce = summed(acc.carry)
        if reduce.op is not Op.REDUCE or reduce.attrs["kind"] != "sum" or reduce.attrs["keepdim"]:
            continue
        src = reduce.inputs[0]
        own_tile = src.shape[reduce.attrs["axis"]] is sym and not sym.scalar
        same_dtype = src.dtype == reduce.dtype == acc.carry.dtype
        if own_tile and same_dtype and len(users.get(reduce.id, [])) == 1:
            out.append(acc.carry)
    return out


def own_tile_summed_last(body: list[Node]) -> None:
    """Reorder ``sum(x, dim=[a, b])`` added to a loop's carried value so that the loop's own
    tile is summed last: ``acc += torch.sum(x * g, dim=[0, 1])`` over batch tiles ``[0]`` and
    time tiles ``[1]`` in a loop over time sums time first as traced, so the step's sum over
    batch is all that reaches ``acc`` and the per-step cross-warp reduction stays. Summed the
    other way round the update is a sum over the loop's own tile, which ``deferrable_sums``
    takes. Sums commute; only the order of additions changes (as deferring them does)."""
    for loop in (n for n in walk(body) if n.op is Op.LOOP):
        sym = loop.attrs["sym"]
        users = readers(loop.body or [])
        carried = {c.id for c in loop.attrs.get("carried", [])}
        for outer in loop.body or []:
            inner = outer.inputs[0] if outer.op is Op.REDUCE else None
            if inner is None or inner.op is not Op.REDUCE or len(users.get(inner.id, [])) != 1:
                continue
            adds = users.get(outer.id, [])
            feeds_carry = any(
                u.op is Op.BINARY
                and u.attrs.get("fn") == "add"
                and carried & {i.id for i in u.inputs}
                for u in adds
            )
            if feeds_carry and _plain_sum(inner) and _plain_sum(outer):
                _swap(inner, outer, sym)


def _plain_sum(node: Node) -> bool:
    return node.attrs["kind"] == "sum" and not node.attrs["keepdim"] and node.dtype in _FLOATS


def _swap(inner: Node, outer: Node, sym: Sym) -> None:
    """Make ``outer(inner(x))`` reduce ``sym`` last when ``inner`` reduces it first."""
    x = inner.inputs[0]
    if x.dtype != inner.dtype or x.shape[inner.attrs["axis"]] is not sym:
        return
    other = inner.shape[outer.attrs["axis"]]
    if other is sym or other == 1 or sym not in x.shape or x.shape.count(other) != 1:
        return
    first_axis = x.shape.index(other)
    inner.attrs["axis"] = first_axis
    inner.shape = tuple(d for i, d in enumerate(x.shape) if i != first_axis)
    outer.attrs["axis"] = inner.shape.index(sym)


def summed(carry: Node) -> Node:
    """The value a deferrable carry adds each iteration (its update's other operand)."""
    return next(i for i in carry.attrs["next"].inputs if i is not carry)


def keeps_step_reductions(body: list[Node]) -> bool:
    """Whether a loop with deferrable sums also reduces its tile each step otherwise (an online
    softmax's row max): its cross-warp combine then runs each step whatever is deferred."""
    for loop in (n for n in walk(body) if n.op is Op.LOOP):
        deferred = {summed(carry).id for carry in deferrable_sums(loop)}
        if deferred and any(
            n.op is Op.REDUCE and n.id not in deferred for n in walk(loop.body or [])
        ):
            return True
    return False


def has_deferrable_sums(body: list[Node]) -> bool:
    return any(n.op is Op.LOOP and deferrable_sums(n) for n in walk(body))


def step_reductions_only_sum(body: list[Node], deferred: bool) -> bool:
    """Whether the loops in ``body`` reduce their tile each step (cross-warp, with a barrier)
    and every such reduction only feeds the loop's carried sums: each is read by other
    reductions or by a sum accumulator's update, so no value computed from it flows back into
    the step's elements (an online softmax's max does). ``deferred``: the deferrable sums are
    reduced once after their loop (``Config.deferred_sums``), not each step. BatchNorm's
    statistics, ``sum(x, dim=[0, 2])`` over two nested loops, reduce only into sums."""
    found = False
    for loop in (n for n in walk(body) if n.op is Op.LOOP):
        users = readers(loop.body or [])
        sums = {a.carry.attrs["next"].id for a in accumulators(loop).values() if a.fn == "add"}
        after = {summed(carry).id for carry in deferrable_sums(loop)} if deferred else set()
        for node in loop.body or []:
            if node.op is not Op.REDUCE or node.id in after:
                continue
            if not all(u.op is Op.REDUCE or u.id in sums for u in users.get(node.id, [])):
                return False
            found = True
    return found

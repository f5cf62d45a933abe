"""Which loop-carried sums may defer their reduction (stage: ir analysis; in: a ``LOOP`` node;
out: its carried values updated as ``c = c + sum(x, dims)`` over the loop's own tile, and for a
config how each runs deferred).

The ``deferred_sums`` config knob (codegen/deferred_sums.py) keeps such a sum's tile accumulator
and reduces once after the loop. Legal when ``c`` is an accumulator by split reductions' rules
(``ir/split.py``: read by nothing else in the loop, updated by a value that does not depend on a
carried one), the sum (a chain of plain sums: ``sum(x, dim=[0, 2])`` traces as two) covers the
loop's own tile, nothing else reads it, and it is fp32/fp64 (the additions only change order).
A running max or min, ``c = torch.maximum(c, amax(x, dims))``, defers the same way in any dtype
(its result does not depend on the order). The spec offers the knob where some loop has one
(``ConfigSpec.deferrable_sums``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from tilecraft.ir.nodes import Node, Op, walk
from tilecraft.ir.phases import rolled_reduce
from tilecraft.ir.split import COMBINES, accumulators, readers

_FLOATS = (torch.float32, torch.float64)
# a deferred accumulator's fp32 values per thread (registers it keeps through the loop); larger
# tiles keep the per-step sum (codegen) and cost nothing extra (the resource model)
MAX_ELEMS_PER_THREAD = 32


def deferrable_sums(loop: Node) -> list[Node]:
    """The carried values of ``loop`` whose per-iteration sum may move after it: accumulators
    (``ir/split.py``'s rules: read by nothing else in the loop) updated by ``+`` with a sum
    that nothing else reads, over the loop's own tile (among other dims, :func:`sum_chain`), in
    fp32/fp64."""
    return [carry for carry, _, _ in _deferrable_chains(loop)]


def _deferrable_chains(loop: Node) -> list[tuple[Node, list[Node], int]]:
    """Each deferrable carry of ``loop`` with its chain of sums (:func:`sum_chain`) and the
    index in it of the sum over the loop's own tile (the body's readers found once)."""
    users = readers(loop.body or [])
    out = []
    for acc in accumulators(loop).values():
        update = acc.carry.attrs["next"]
        if update.op is not Op.BINARY or acc.kind == "sum" and acc.carry.dtype not in _FLOATS:
            continue
        reduce = summed(acc.carry)
        if reduce.op is not Op.REDUCE or not _plain(reduce, acc.kind):
            continue
        if reduce.dtype != acc.carry.dtype or len(users.get(reduce.id, [])) != 1:
            continue
        chain = sum_chain(acc.carry, users)
        level = _own_level(loop, chain)
        if level is not None:
            out.append((acc.carry, chain, level))
    return out


def _own_level(loop: Node, chain: list[Node]) -> int | None:
    """The index in ``chain`` of the sum over the loop's own tile, if one is."""
    sym = loop.attrs["sym"]
    if sym.scalar:
        return None
    return next((i for i, r in enumerate(chain) if rolled_reduce(r, sym)), None)


def _plain(node: Node, kind: str) -> bool:
    """A reduction of ``kind`` without keepdim; a sum in fp32/fp64 (a max or min is exact in
    any dtype, so any order of its steps gives the same result)."""
    if node.attrs["kind"] != kind or node.attrs["keepdim"]:
        return False
    return kind != "sum" or node.dtype in _FLOATS


def summed(carry: Node) -> Node:
    """The value a deferrable carry adds each iteration (its update's other operand)."""
    return next(i for i in carry.attrs["next"].inputs if i is not carry)


def sum_chain(carry: Node, users: dict[int, list[Node]]) -> list[Node]:
    """The sums ``carry`` adds each iteration, outermost first: plain sums of one dtype, each
    inner one read only by the next (``users``: the loop body's readers)."""
    chain = [summed(carry)]
    while True:
        src = chain[-1].inputs[0]
        if src.op is not Op.REDUCE or len(users.get(src.id, [])) != 1:
            break
        if not _plain(src, chain[0].attrs["kind"]) or src.dtype != chain[-1].dtype:
            break
        chain.append(src)
    return chain


def chain_axes(chain: list[Node]) -> list[int]:
    """The dims of the chain's root tile (its innermost sum's input) that ``chain`` reduces, in
    the root's own numbering, outermost sum first."""
    remaining = list(range(chain[-1].inputs[0].ndim))
    return [remaining.pop(r.attrs["axis"]) for r in reversed(chain)][::-1]


@dataclasses.dataclass(frozen=True)
class DeferredSum:
    """How one carried sum runs deferred: its tile accumulator adds the chain's input (the
    root tile) each step, summed over ``step_axes`` first; the rest of ``axes`` is summed once
    after the loop."""

    carry: Node
    chain: tuple[Node, ...]  # the sums the loop no longer emits, outermost first
    axes: tuple[int, ...]  # the root's dims the chain reduces
    own: int  # the root's dim of the loop's own tile
    whole: bool  # True: every sum after the loop; False: the other dims each step

    @property
    def root(self) -> Node:
        return self.chain[-1].inputs[0]

    @property
    def kind(self) -> str:
        """The reduction: "sum", or "max" / "min" (a running ``torch.maximum(acc, amax(x))``)."""
        return str(self.chain[0].attrs["kind"])

    @property
    def step_axes(self) -> tuple[int, ...]:
        return () if self.whole else tuple(a for a in self.axes if a != self.own)

    @property
    def kept(self) -> tuple[Any, ...]:
        """The accumulator's shape: the root's dims less those summed each step."""
        return tuple(d for i, d in enumerate(self.root.shape) if i not in self.step_axes)

    @property
    def after_axes(self) -> tuple[int, ...]:
        """The accumulator's dims summed after the loop, in its own numbering, last first."""
        kept = [a for a in range(self.root.ndim) if a not in self.step_axes]
        return tuple(sorted((kept.index(a) for a in self.axes if a in kept), reverse=True))


def deferred_plan(
    loop: Node, numel: Callable[[tuple[Any, ...]], int], budget: int
) -> list[DeferredSum]:
    """The carries of ``loop`` whose sums defer (``numel``: a shape's elements under the
    config). Each keeps an accumulator of the loop's own dim (its other summed dims summed each
    step) where that has at most ``budget`` elements; then, while all the loop's accumulators
    together stay within ``budget``, whole root tiles, so that an iteration only adds its tile.
    BatchNorm statistics over [32, 256, 56, 56], one channel a program: the batch tile summed
    across warps each step and the spatial dim deferred 0.251 ms (H200); both deferred 0.056
    at 16 warps. A depthwise conv's four taps keep their batch sums (two rows, in-thread):
    four whole tiles would not fit."""
    plan: list[DeferredSum] = []
    for carry, chain, level in _deferrable_chains(loop):
        axes = chain_axes(chain)
        own_dim = DeferredSum(carry, tuple(chain), tuple(axes), axes[level], whole=False)
        if numel(own_dim.kept) <= budget:
            plan.append(own_dim)
    total = sum(numel(d.kept) for d in plan)
    for i, d in enumerate(plan):
        whole = dataclasses.replace(d, whole=True)
        grown = total - numel(d.kept) + numel(whole.kept)
        if grown <= budget:
            plan[i], total = whole, grown
    return plan


def deferred_ids(plan: list[DeferredSum]) -> set[int]:
    """The ids of the IR sums ``plan`` no longer runs each step (the own-tile sum of a carry
    that still sums its other dims each step; every sum of a whole tile's)."""
    out: set[int] = set()
    for d in plan:
        out |= {r.id for i, r in enumerate(d.chain) if d.whole or d.axes[i] == d.own}
    return out


def keeps_step_reductions(body: list[Node], deferred: set[int]) -> bool:
    """Whether a loop with deferred sums (``deferred``: the ids of the sums a config defers,
    :func:`deferred_plan`) also reduces its tile each step otherwise (an online softmax's row
    max): its cross-warp combine then runs each step whatever is deferred."""
    for loop in (n for n in walk(body) if n.op is Op.LOOP):
        steps = [n for n in walk(loop.body or []) if n.op is Op.REDUCE]
        if any(n.id in deferred for n in steps) and any(n.id not in deferred for n in steps):
            return True
    return False


def has_deferrable_sums(body: list[Node]) -> bool:
    return any(n.op is Op.LOOP and deferrable_sums(n) for n in walk(body))


def step_reductions_only_accumulate(body: list[Node], deferred: set[int]) -> bool:
    """Whether the loops in ``body`` reduce their tile each step (cross-warp, with a barrier)
    and every such reduction only feeds the loop's carried accumulators (a running sum, max or
    min, ``ir/split.py``): each is read by other reductions or by an accumulator's update, so
    no value computed from it flows back into the step's elements (an online softmax's max
    does). ``deferred``: the ids of the reductions a config runs once after their loop
    (:func:`deferred_plan`), not each step. BatchNorm's statistics, ``sum(x, dim=[0, 2])`` over
    two nested loops, reduce only into sums; a column range into a running max and min."""
    found = False
    for loop in (n for n in walk(body) if n.op is Op.LOOP):
        users = readers(loop.body or [])
        updates = {
            a.carry.attrs["next"].id for a in accumulators(loop).values() if a.fn in COMBINES
        }
        for node in loop.body or []:
            if node.op is not Op.REDUCE or node.id in deferred:
                continue
            if not all(u.op is Op.REDUCE or u.id in updates for u in users.get(node.id, [])):
                return False
            found = True
    return found

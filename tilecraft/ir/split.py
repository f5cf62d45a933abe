"""Split reductions: where a device loop's inner loop may run across several programs
(stage: ir analysis; in: a traced :class:`DeviceLoop`; out: the :class:`SplitSite` that the
config space offers ``split_reductions`` for, or the reason there is none).

Splitting runs the iterations of one inner loop in ``S`` programs per grid tile; each program
starts the loop's accumulators at their neutral value and writes its partials to a scratch
buffer, and a second kernel combines ``init (+) p_0 (+) ... (+) p_{S-1}`` in that fixed order and
runs the code after the loop. That is only the same computation when the loop is a reduction,
so the legal pattern is precise:

* the inner loop is a direct child of the device loop's body and carries at least one value;
* every carried value ``c`` is updated by exactly one associative op whose other operand does
  not depend on any carried value of the loop: ``c + x`` / ``x + c`` (``acc += ...``,
  ``acc = acc + x.sum(0)``), ``torch.maximum`` / ``torch.minimum`` (``amax``/``amin`` updates), or
  ``tc.dot(a, b, acc=c)`` (``acc += a @ b``: the split-K case);
* ``c`` is read by nothing else in the loop, and its update by nothing but the loop's yield;
* sums accumulate in fp32/fp64/int32/int64 (a 16-bit float sum would round differently);
* ``c``'s dims are the grid's tiles or whole reduction dims (what one program holds);
* the loop stores nothing (iterations would no longer run in order), and nothing before it
  stores or prints (the code before the loop runs again in the combining kernel).

A **rolled** reduction dim (a ``:`` slice that ``reduction_loops`` processes in chunks, e.g. a
few very long rows) splits its chunk loops instead (:class:`RolledSite`): the partials kernel
runs the first chunk loop's share and stores each reduction's partial result, the combine kernel
combines them (every share the same way, in the same order) and runs the second chunk loop's
share. Legal when the device loop has no inner loop, the reductions over the dim finish in one
pass (phase 1 in ``ir/phases.py``: no reduction depends on another one over the dim), each is a
sum (fp32/fp64/int32/int64), max or min, nothing before them stores, and nothing after them uses
atomics or prints (a store of a value off the dim is repeated, with the same value, by every
share). One second pass is legal too: sums of ``exp(x - shift)`` with ``shift`` a function of
a first-pass max alone (``torch.logsumexp``, softmax's denominator: :class:`RelativeSum`); each
share runs both passes over its chunks and the combine rescales its sums to the combined max.

Anything else is not offered: a split never changes what the kernel computes beyond the order
in which partial sums are added.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeGuard

import torch

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, walk
from tilecraft.ir.phases import phases, rolled_reduce
from tilecraft.ir.recurrence import carry_dependent

# the BINARY fn of an update -> the reduction it is (and its neutral element's kind)
COMBINES = {"add": "sum", "maximum": "max", "minimum": "min"}
FN_OF = {kind: fn for fn, kind in COMBINES.items()}  # a reduction -> the fn combining partials
SUM_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)
_EFFECTS = (Op.STORE, Op.ATOMIC, Op.PRINT)


@dataclasses.dataclass(frozen=True)
class Accumulator:
    carry: Node  # the CARRY node: its value after the loop is the combined one
    kind: str  # "sum", "max" or "min"
    fn: str  # the BINARY fn that combines two partials ("add", "maximum", "minimum")
    # an online softmax's sum of exponentials, relative to this running max (the CARRY of its
    # "max" accumulator): partials combine as sum_s l_s * exp(m_s - max_s m_s) (softmax_pairs)
    relative_to: Node | None = None


@dataclasses.dataclass(frozen=True)
class SplitSite:
    loop: Node  # the LOOP node, a direct child of the device loop's body
    position: int  # its index in the body
    accumulators: tuple[Accumulator, ...]
    # the loops after it that the combine kernel's S programs share (see shared_loops)
    shared: tuple[Node, ...] = ()
    # later loops with accumulators, each split in turn in a kernel of its own (chained_sites)
    chained: tuple[SplitSite, ...] = ()

    @property
    def sym(self) -> Sym:
        sym: Sym = self.loop.attrs["sym"]
        return sym


@dataclasses.dataclass(frozen=True)
class RelativeSum:
    """A second-pass sum over a rolled dim of ``exp(x - shift)``, ``shift`` an off-dim function
    of the first pass's max ``m`` (a softmax's or logsumexp's denominator): each share sums
    relative to its own shift, and the combine rescales by ``exp(shift_s - shift)``."""

    total: Node  # the sum REDUCE
    m: Node  # the max REDUCE of the first pass
    shift: Node  # the off-dim value subtracted inside the exponential (m, or m with inf -> 0)


@dataclasses.dataclass(frozen=True)
class RolledSite:
    sym: Sym  # the reduction dim whose chunk loops are split (when reduction_loops rolls it)
    reduces: tuple[Node, ...]  # the reductions over it whose partial results are combined
    # the second pass's sums of exponentials relative to a first-pass max (two passes run in
    # each share; empty: one pass)
    relative: tuple[RelativeSum, ...] = ()

    @property
    def loop(self) -> None:
        return None

    @property
    def passes(self) -> int:
        """The chunk loops each share runs before its partials are stored."""
        return 2 if self.relative else 1


Site = SplitSite | RolledSite


# why a loop has no split site at these shapes alone (a whole dim of 1 is no reduction dim): an
# explicit split written for other shapes is repaired to 1 there, not refused
NOTHING_TO_SPLIT = "the device loop has no inner loop or reduction dim"


def split_site(loop: DeviceLoop) -> tuple[Site | None, str]:
    """The inner loop of ``loop`` that ``split_reductions`` may split (the one with the longest
    trip extent when several qualify), or its rolled reduction dim, or None and why neither."""
    loops = [(p, n) for p, n in enumerate(loop.body) if n.op is Op.LOOP]
    if loops:
        return _longest([_site(loop, p, n) for p, n in loops])
    rdims = [s for s in loop.syms if s.kind is SymKind.RDIM and s.config_slot is not None]
    if rdims:
        return _longest([_rolled_site(loop, sym) for sym in rdims])
    return None, NOTHING_TO_SPLIT


def _longest(found: list[tuple[Any, str]]) -> tuple[Site | None, str]:
    """The legal site with the longest trip extent, else the last reason none is legal."""
    sites = [site for site, _ in found if site is not None]
    if sites:
        return max(sites, key=lambda s: _trip_hint(s.sym)), ""
    return None, found[-1][1]


def _rolled_site(loop: DeviceLoop, sym: Sym) -> tuple[RolledSite | None, str]:
    phase, last = phases(loop.body, sym)
    reduces = [n for n in loop.body if rolled_reduce(n, sym)]
    if not reduces:
        return None, f"nothing reduces over {sym.name}"
    relative: tuple[RelativeSum, ...] = ()
    if last != 1:
        second = [n for n in reduces if phase[n.id] == 2]
        relative = tuple(r for n in second if (r := _relative_sum(n, sym, phase)) is not None)
        if last != 2 or not second or len(relative) != len(second):
            why = f"reductions over {sym.name} depend on each other ({last} passes over it)"
            return None, why
    for n in reduces:
        kind, dtype = n.attrs["kind"], n.inputs[0].dtype
        if kind not in FN_OF or dtype == torch.bool:
            return None, f"a {kind} over {sym.name} cannot be combined from partial results"
        if kind == "sum" and (dtype not in SUM_DTYPES or n.dtype != dtype):
            return None, f"a sum over {sym.name} in {dtype} (partial sums need fp32/fp64/int)"
    first_after = 2 if relative else 1  # the first phase the combine kernel runs
    for n in loop.body:
        if n.op in _EFFECTS and (phase[n.id] < first_after or n.op is not Op.STORE):
            return None, f"the {n.op.value} at {n.loc.short if n.loc else '?'} would run twice"
    return RolledSite(sym, tuple(reduces), relative), ""


def _relative_sum(total: Node, sym: Sym, phase: dict[int, int]) -> RelativeSum | None:
    """``total`` as ``sum(exp(x - shift))`` over ``sym`` with ``x`` from the first pass (phase
    0) and ``shift`` off the dim, a function of one first-pass max alone, else None."""
    if total.attrs.get("kind") != "sum" or total.dtype != torch.float32:
        return None
    e = total.inputs[0]
    if not _is_unary(e, "exp") or not _is_binary(e.inputs[0], "sub"):
        return None
    x, placed = e.inputs[0].inputs
    shift = _through_views(placed)
    if shift is None or phase.get(x.id, 0) != 0 or any(d is sym for d in shift.shape):
        return None
    maxes = _first_pass_maxes(shift, sym)
    if len(maxes) != 1:
        return None
    return RelativeSum(total, maxes[0], shift)


def _first_pass_maxes(node: Node, sym: Sym) -> list[Node]:
    """The reductions over ``sym`` that ``node`` is computed from (without loads or other
    reductions in between): one max, where ``node`` is its shift."""
    found: list[Node] = []
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if rolled_reduce(n, sym):
            found.append(n)
            if n.attrs.get("kind") != "max":
                return []
            continue
        if n.op in (Op.LOAD, Op.REDUCE) or n.body is not None:
            return []
        stack.extend(n.inputs)
    return found


def _site(loop: DeviceLoop, position: int, node: Node) -> tuple[SplitSite | None, str]:
    where = f"the loop at {node.loc.short}" if node.loc else "the inner loop"
    if any(n.op in _EFFECTS for n in walk(loop.body[:position])):
        return None, f"code before {where} stores (it would run twice)"
    site, why = _loop_site(loop, position, node)
    if site is None or site.shared:
        return site, why
    chained, shared = chained_sites(loop, position)
    return dataclasses.replace(site, chained=chained, shared=shared), ""


def _loop_site(loop: DeviceLoop, position: int, node: Node) -> tuple[SplitSite | None, str]:
    """``node`` as a split site by its own body (the code before it is the caller's rule)."""
    where = f"the loop at {node.loc.short}" if node.loc else "the inner loop"
    carried: list[Node] = list(node.attrs.get("carried", []))
    if not carried:
        return None, f"{where} carries no accumulator"
    body = node.body or []
    if any(n.op in _EFFECTS for n in walk(body)):
        return None, f"{where} stores inside the loop"
    dependent = carry_dependent(body, carried)
    users = readers(body)
    pairs = softmax_pairs(carried, dependent)
    accumulators = []
    for carry in carried:
        acc, why = pairs.get(carry.id) or _accumulator(carry, dependent, users)
        acc = acc or _nested_accumulator(carry, users)
        if acc is None:
            return None, f"{where}: '{carry.hint}' {why}"
        bad = [d for d in carry.shape if isinstance(d, Sym) and not _held(loop, d)]
        if bad:
            return None, f"{where}: '{carry.hint}' spans {bad[0].name}, not a grid or whole dim"
        accumulators.append(acc)
    return SplitSite(node, position, tuple(accumulators), shared_loops(loop, position)), ""


def shared_loops(loop: DeviceLoop, position: int) -> tuple[Node, ...]:
    """The loops after the split loop at ``position`` that the combine's ``S`` programs per
    tile run a share each of (empty: the combine runs one program per tile, as before).

    A BatchNorm over ``x [N, C]`` sums each channel over N, then writes every row of its
    channels again: with one combine program per channel tile that second pass ran on 32
    programs (H200, 65536x1024: 0.294 ms; torch.compile 0.117). Sharing is the same computation
    when every loop after the split one carries nothing (its iterations are independent),
    stores only rows its own dim indexes (no two iterations write one element, so their order
    does not matter), nothing in the device loop reads a tensor stored after the split loop
    (a share could read rows another has not written yet), and nothing after the split loop
    adds atomically or prints; what the code between them stores is stored by every share
    with the same value."""
    loops = _loops_after(loop, position)
    if not loops or any(n.attrs.get("carried") or not _stores_own_rows(n) for n in loops):
        return ()
    return tuple(loops)


def chained_sites(
    loop: DeviceLoop, position: int
) -> tuple[tuple[SplitSite, ...], tuple[Node, ...]]:
    """The loops after the split one at ``position`` that carry accumulators, each split in turn
    (a kernel of its own on the ``(tiles, S)`` grid whose programs combine the earlier loops'
    partials alike, run the code between, and write their share's partials), and the carry-free
    loops after them that the last kernel's programs share; ``((), ())`` when the loops after it
    are not such a chain. A GroupNorm's mean, then its variance about the mean, then the
    normalizing pass: with one combine program per (image, group) the last two passes ran on 128
    programs (H200, 4x128x128x320 bf16: 0.212 ms; torch.compile 0.0698). The rules are
    :func:`shared_loops`' with accumulators allowed in the chain's loops, each an accumulator
    loop by :func:`_site`'s rules (nothing stored inside it); the code between them may store
    (every share stores the same value: partials combine in a fixed order)."""
    loops = _loops_after(loop, position)
    chained: list[SplitSite] = []
    for n in loops:
        if not n.attrs.get("carried"):
            break
        site, _ = _loop_site(loop, loop.body.index(n), n)
        if site is None:
            return (), ()
        chained.append(site)
    # the loops after the chain must be the last one's shared loops (carry-free, each storing
    # its own rows): shared_loops computed them for it
    if not chained or len(loops) > len(chained) and not chained[-1].shared:
        return (), ()
    return tuple(chained), chained[-1].shared


def _loops_after(loop: DeviceLoop, position: int) -> list[Node]:
    """The loops after ``position`` in the device loop's body, where the programs of a split
    may share them: nothing after it adds atomically or prints, nothing in the device loop reads
    a tensor stored after it (a share could read rows another share has not written yet), and no
    loop sits under a branch (it would run whole in every share); [] otherwise."""
    after = loop.body[position + 1 :]
    loops = [n for n in after if n.op is Op.LOOP]
    if not loops or any(n.op in (Op.ATOMIC, Op.PRINT) for n in walk(after)):
        return []
    stored = {n.attrs["tensor"].name for n in walk(after) if n.op is Op.STORE}
    if any(n.op is Op.LOAD and n.attrs["tensor"].name in stored for n in loop.walk()):
        return []
    if any(n.op in (Op.IF, Op.WHILE) and any(m.op is Op.LOOP for m in walk([n])) for n in after):
        return []
    return loops


def _stores_own_rows(node: Node) -> bool:
    """Whether every store in loop ``node`` is indexed by the loop's own tile (no two of its
    iterations write one element, so their order does not matter)."""
    sym = node.attrs["sym"]
    return all(
        any(item[0] == "tile" and item[1] is sym for item in store.attrs["index"])
        for store in walk(node.body or [])
        if store.op is Op.STORE
    )


def accumulators(loop: Node) -> dict[int, Accumulator]:
    """The carried values of ``loop`` that are accumulators (the update rules above: one
    associative update by a value independent of the carries, read by nothing else), by id."""
    carried: list[Node] = list(loop.attrs.get("carried", []))
    dependent = carry_dependent(loop.body or [], carried)
    users = readers(loop.body or [])
    found = (_accumulator(c, dependent, users)[0] for c in carried)
    return {acc.carry.id: acc for acc in found if acc is not None}


def _accumulator(
    carry: Node, dependent: set[int], users: dict[int, list[Node]]
) -> tuple[Accumulator | None, str]:
    nxt = carry.attrs.get("next")
    if nxt is None or nxt is carry:
        return None, "is not updated in the loop"
    if [u.id for u in users.get(carry.id, [])] != [nxt.id] or users.get(nxt.id):
        return None, "is read by other code in the loop"
    if nxt.dtype != carry.dtype or nxt.shape != carry.shape:
        return None, "changes shape or dtype in its update"
    if nxt.op is Op.DOT and len(nxt.inputs) == 3 and nxt.inputs[2] is carry:
        others, kind, fn = nxt.inputs[:2], "sum", "add"
    elif nxt.op is Op.BINARY and nxt.attrs.get("fn") in COMBINES and carry in nxt.inputs:
        others = [i for i in nxt.inputs if i is not carry]
        kind, fn = COMBINES[nxt.attrs["fn"]], nxt.attrs["fn"]
        if len(others) != 1:
            return None, "is combined with itself"
    else:
        return None, "is not updated by +, maximum, minimum or tc.dot(..., acc=)"
    if any(o.id in dependent for o in others):
        return None, "is updated with a value that depends on a loop-carried value"
    if kind == "sum" and carry.dtype not in SUM_DTYPES:
        return None, f"sums in {carry.dtype} (partial sums need fp32, fp64 or int32/int64)"
    if carry.dtype == torch.bool:
        return None, "is a bool"
    return Accumulator(carry, kind, fn), ""


def softmax_pairs(carried: list[Node], dependent: set[int]) -> dict[int, tuple[Accumulator, str]]:
    """The carried running max ``m`` and sum of exponentials ``l`` of an online softmax (and
    flash decoding's accumulator ``acc = acc * exp(m - m_new)[:, None] + p @ v`` with
    ``p = exp(s - m_new[:, None])``, which combines the same way), as accumulators by carry
    id::

        m_new = torch.maximum(m, a)                 # a: independent of the carries
        l = l * torch.exp(m - m_new) + torch.exp(s - m_new[:, None]).sum(dim=1)
        m = m_new

    ``l`` is then ``sum(exp(s - m))`` over the iterations so far, whatever order they ran in,
    so shares of the loop combine exactly: ``M = max(m_s)``, ``L = sum(l_s * exp(m_s - M))``
    (attention statistics over a long key range with one program per head: NSA's block scores
    and SnapKV's votes ran on 64 programs, 0.37x and 0.19x torch.compile on an H100). ``s``
    must not depend on a carry; other values read from the pattern (flash attention's
    ``acc * exp(m - m_new) + p @ v``) make their own carries fail the accumulator rules, and the
    loop stores nothing, so nothing else can see a share's running values."""
    found: dict[int, tuple[Accumulator, str]] = {}
    for m in carried:
        m_new = m.attrs.get("next")
        if not _is_binary(m_new, "maximum") or m not in m_new.inputs:
            continue
        other = [i for i in m_new.inputs if i is not m]
        if len(other) != 1 or other[0].id in dependent or m_new.dtype != torch.float32:
            continue
        for l_carry in carried:
            if not _sums_exponentials(l_carry, m, m_new, dependent):
                continue
            found[m.id] = (Accumulator(m, "max", "maximum"), "")
            found[l_carry.id] = (Accumulator(l_carry, "sum", "add", relative_to=m), "")
    return found


def _sums_exponentials(l_carry: Node, m: Node, m_new: Node, dependent: set[int]) -> bool:
    """Whether ``l_carry`` is updated to ``l * exp(m - m_new)[...] + X`` (either operand order
    of the ``+`` and the ``*``; or ``tc.dot(p, v, acc=l * ...)``, as ``acc * alpha + p @ v``
    is traced), ``X`` linear in ``p = exp(s - m_new[...])``: ``p.sum(dim)`` (a softmax's sum)
    or ``p @ v`` (flash decoding's accumulator, ``v`` independent of the carries); ``l``'s
    leading dims are ``m``'s (the combine rescales along them)."""
    nxt = l_carry.attrs.get("next")
    if nxt is None or nxt.dtype != torch.float32 or nxt.shape != l_carry.shape:
        return False
    if l_carry.ndim > m.ndim and (m.ndim == 0 or l_carry.shape[: m.ndim] != m.shape):
        return False
    if nxt.op is Op.DOT and len(nxt.inputs) == 3:
        p, v, scaled = nxt.inputs
        return _rescaled(scaled, l_carry, m, m_new) and _exp_product(p, v, m_new, dependent)
    if not _is_binary(nxt, "add"):
        return False
    return any(
        _rescaled(scaled, l_carry, m, m_new)
        and (_exp_sum(summed, m_new, dependent) or _exp_dot(summed, m_new, dependent))
        for scaled, summed in (nxt.inputs, nxt.inputs[::-1])
    )


def _rescaled(scaled: Node, l_carry: Node, m: Node, m_new: Node) -> bool:
    """Whether ``scaled`` is ``l_carry * exp(m - m_new)`` (the factor maybe placed by views)."""
    if not _is_binary(scaled, "mul") or l_carry not in scaled.inputs:
        return False
    factor = _through_views(next((i for i in scaled.inputs if i is not l_carry), None))
    if factor is None or not _is_unary(factor, "exp"):
        return False
    diff = factor.inputs[0]
    return _is_binary(diff, "sub") and diff.inputs[0] is m and diff.inputs[1] is m_new


def _exp_sum(summed: Node, m_new: Node, dependent: set[int]) -> bool:
    """Whether ``summed`` is ``exp(s - m_new[...]).sum(dim)``."""
    if summed.op is not Op.REDUCE or summed.attrs.get("kind") != "sum":
        return False
    return _exponentials(summed.inputs[0], m_new, dependent)


def _exp_dot(product: Node, m_new: Node, dependent: set[int]) -> bool:
    """Whether ``product`` is ``exp(s - m_new[...]) @ v`` with no accumulator of its own."""
    if product.op is not Op.DOT or len(product.inputs) != 2:
        return False
    p, v = product.inputs
    return _exp_product(p, v, m_new, dependent)


def _exp_product(p: Node, v: Node, m_new: Node, dependent: set[int]) -> bool:
    """Whether ``p @ v`` has ``p = exp(s - m_new[...])`` (maybe cast) and ``v`` independent
    of the carries."""
    while p.op is Op.CAST:
        p = p.inputs[0]
    return v.id not in dependent and _exponentials(p, m_new, dependent)


def _exponentials(exp: Node, m_new: Node, dependent: set[int]) -> bool:
    """Whether ``exp`` is ``exp(s - m_new[...])``: ``s`` independent of the carries, the
    running max placed by views."""
    if not _is_unary(exp, "exp") or not _is_binary(exp.inputs[0], "sub"):
        return False
    scores, placed = exp.inputs[0].inputs
    return _through_views(placed) is m_new and scores.id not in dependent


def _through_views(node: Node | None) -> Node | None:
    while node is not None and node.op is Op.VIEW:
        node = node.inputs[0]
    return node


def _is_binary(node: Node | None, fn: str) -> TypeGuard[Node]:
    return node is not None and node.op is Op.BINARY and node.attrs.get("fn") == fn


def _is_unary(node: Node | None, fn: str) -> TypeGuard[Node]:
    return node is not None and node.op is Op.UNARY and node.attrs.get("fn") == fn


def _nested_accumulator(carry: Node, users: dict[int, list[Node]]) -> Accumulator | None:
    """``carry`` as an accumulator of the loop nested in its loop that it starts and that
    leaves it its result (``acc`` over batch tiles, added to in a loop over time tiles: the
    nest sums, so the outer loop's iterations may be split too), else None."""
    nxt = carry.attrs.get("next")
    readers_of = users.get(carry.id, [])
    if nxt is None or nxt.op is not Op.CARRY or nxt.inputs[0] is not carry or len(readers_of) != 1:
        return None
    inner = readers_of[0]
    if inner.op is not Op.LOOP or not any(c is nxt for c in inner.attrs.get("carried", [])):
        return None
    found = accumulators(inner).get(nxt.id) or _nested_accumulator(nxt, readers(inner.body or []))
    inside = {n.id for n in walk(inner.body or [])}
    if found is None or any(u.id not in inside for u in users.get(nxt.id, []) if u is not inner):
        return None
    return Accumulator(carry, found.kind, found.fn)


def readers(body: list[Node]) -> dict[int, list[Node]]:
    """Who reads each value inside ``body`` (a nested loop's carried init and yielded next
    value count as reads by that loop)."""
    users: dict[int, list[Node]] = {}
    for node in walk(body):
        reads = list(node.inputs)
        if node.op is Op.LOOP:
            for carry in node.attrs.get("carried", []):
                reads += [*carry.inputs, carry.attrs.get("next")]
        for r in reads:
            if r is not None:
                users.setdefault(r.id, []).append(node)
    return users


def _held(loop: DeviceLoop, dim: Sym) -> bool:
    return dim in loop.grid_syms or dim.kind is SymKind.RDIM


def _trip_hint(sym: Sym) -> int:
    extent = sym.extent if isinstance(sym.extent, int) else 1 << 16
    return extent - (sym.begin if isinstance(sym.begin, int) else 0)


__all__ = [
    "COMBINES",
    "FN_OF",
    "Accumulator",
    "RolledSite",
    "Site",
    "SplitSite",
    "chained_sites",
    "shared_loops",
    "split_site",
]

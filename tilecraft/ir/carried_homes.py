"""Loop-carried row accumulators that can live in their output row (stage: ir; in: a device loop
and one of its reduction dims; out: a home for every carried value on that dim, or why not).

A kernel such as a LayerNorm backward keeps ``[n]`` fp32 accumulators across a nested row loop
(``for mb in tc.tile(cta.begin, cta.end): dw += (xhat * dy).sum(0)``) and stores them once after
it (``dw_part[cta.id, :] = dw``). With ``n`` in the tens of thousands those accumulators, plus the
full rows the loop body needs for its row reductions, cannot live in registers. The width dim can
still be processed in chunks when each accumulator is kept in memory instead: its output row is
zero-filled (its initial value, chunk by chunk) before the row loop, every row iteration reads,
updates and writes it back chunk by chunk, and the final store disappears (the row already holds
the value). The row is the program's own, so no other program touches it.

That is legal when, for every carried value ``acc`` on the dim (checked here, else refused):

* ``acc`` is exactly ``[dim]`` and is carried by a single (not multi-dim) loop at the top level
  of the device loop, and its initial value is computed elementwise along the dim (no reduction
  over it, no other loop-carried value);
* inside the loop, ``acc`` and everything computed from it are elementwise ``[dim]`` values that
  only lead to its next value (no reduction over the dim, no store, no other use), so chunk ``i`` of
  the next value needs only chunk ``i`` of ``acc``;
* after the loop, ``acc``'s one use is a plain store of it into a tensor of its dtype, at an index
  that is ``:`` on the dim and otherwise names every grid dim by its tile id / begin (one row per
  program), and nothing else in the device loop reads or writes that tensor.

When the last condition fails (the accumulator is cast, scaled, reduced or stored twice after the
loop), it lives in a **scratch row** instead: a ``[tiles..., n]`` buffer the launcher allocates,
one row per program, and the code after the loop reads it back chunk by chunk wherever it uses
the accumulator. That needs a static width and grid, every such use at the device loop's top
level (not in another loop) and the loop not behind a reduction over the dim (its readers would
be emitted before it).
"""

from __future__ import annotations

import dataclasses

from tilecraft.ir.nodes import ELEMENTWISE_OPS, DeviceLoop, Node, Op, Sym, walk
from tilecraft.ir.phases import phases, rolled_reduce

_PER_PROGRAM = (Op.TILE_ID, Op.TILE_BEGIN)  # scalars that differ between the grid's programs


@dataclasses.dataclass(frozen=True)
class CarriedHome:
    """One carried accumulator kept in its output row. Nodes are named by their slots, which stay
    the same when the kernel is traced again for a config (node ids do not)."""

    loop_slot: int  # the carrying LOOP's range_slot
    name: str  # the carried variable's name (its CARRY node's ``name``)
    store_slot: int  # the mem_slot of the STORE after the loop that writes it (-1: scratch)
    tensor: str  # the home tensor's parameter name ("" for a scratch row)
    where: str = ""  # the user's file:line of the loop

    @property
    def scratch(self) -> bool:
        """Kept in a row of a scratch buffer the launcher allocates (one row per grid tile)."""
        return self.store_slot < 0

    def matches(self, loop: Node, carry: Node) -> bool:
        return (
            loop.attrs.get("range_slot") == self.loop_slot and carry.attrs.get("name") == self.name
        )

    def describe(self) -> str:
        at = f" (loop at {self.where})" if self.where else ""
        if self.scratch:
            return f"'{self.name}' is kept in a scratch row per program{at}"
        return f"'{self.name}' is kept in its output row of {self.tensor}{at}"


def carried_on(loop: DeviceLoop, sym: Sym) -> list[tuple[Node, Node]]:
    """(LOOP, CARRY) pairs of every loop-carried value whose shape includes ``sym``."""
    return [
        (node, carry)
        for node in walk(loop.body)
        if node.op is Op.LOOP
        for carry in node.attrs.get("carried", [])
        if any(d is sym for d in carry.shape)
    ]


def carried_homes(loop: DeviceLoop, sym: Sym) -> tuple[tuple[CarriedHome, ...], str]:
    """A home for every loop-carried value on ``sym``, or ``((), why)`` when one has none."""
    homes: list[CarriedHome] = []
    for owner, carry in carried_on(loop, sym):
        home, why = _home(loop, sym, owner, carry)
        if home is None:
            return (), f"the loop-carried value '{carry.hint}' spans it and {why}"
        if home.loop_slot < 0:
            return (), f"the loop-carried value '{carry.hint}' spans it (its loop has no slot)"
        if not home.scratch and any(h.tensor == home.tensor for h in homes):
            return (), f"'{carry.hint}' and another accumulator are stored into {home.tensor}"
        homes.append(home)
    return tuple(homes), ""


def _home(loop: DeviceLoop, sym: Sym, owner: Node, carry: Node) -> tuple[CarriedHome | None, str]:
    top = loop.body
    if not any(n is owner for n in top):
        return None, "its loop is nested in another loop"
    if carry.shape != (sym,):
        return None, "it has other dims besides this one"
    if not any(c is carry for c in owner.attrs.get("carry_updates", [])):
        return None, "a multi-dim tile loop carries it"
    if not _elementwise_init(carry.inputs[0], sym):
        return None, "its initial value is not computed elementwise along the dim"
    why = _check_updates(owner, carry, sym)
    if why:
        return None, why
    where = owner.loc.short if owner.loc else ""
    slot, name = owner.attrs.get("range_slot", -1), carry.attrs.get("name", carry.hint)
    store, why = _home_store(loop, sym, owner, carry)
    if store is not None:
        return CarriedHome(
            slot, name, store.attrs["mem_slot"], store.attrs["tensor"].name, where
        ), ""
    no_scratch = _scratch_refusal(loop, sym, owner, carry)
    if no_scratch:
        return None, f"{why}, and {no_scratch}"
    return CarriedHome(slot, name, -1, "", where), ""


def _scratch_refusal(loop: DeviceLoop, sym: Sym, owner: Node, carry: Node) -> str:
    """'' when ``carry`` can live in a scratch row (its final value then read back chunk by
    chunk wherever the code after the loop uses it): a static extent and grid, and every use
    after the loop at the device loop's top level (inside a chunk loop of that level)."""
    static = [sym, *loop.grid_syms]
    if not all(isinstance(s.extent, int) and isinstance(s.begin, int) for s in static):
        return "a scratch row needs a static width and grid"
    if phases(loop.body, sym)[0][owner.id]:  # its readers would be emitted before the loop
        return "its loop follows a reduction over the dim"
    inside = {n.id for n in walk(owner.body or [])}
    top = {n.id for n in loop.body}
    for node in walk(loop.body):
        if node.id in inside:
            continue
        uses = any(i is carry for i in node.inputs) or (
            node.op is Op.LOOP and _carries_from(node, carry)
        )
        if uses and (node.id not in top or node.op is Op.LOOP):
            return "a scratch row cannot be read inside another loop"
    return ""


def _elementwise_init(init: Node, sym: Sym) -> bool:
    """Whether ``init`` is computed without reductions over ``sym`` and without loop state."""
    stack, seen = [init], set()
    while stack:
        node = stack.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        if node.op in (Op.CARRY, Op.LOOP, Op.SCAN, Op.GATHER, Op.DOT, Op.ATOMIC):
            return False
        if rolled_reduce(node, sym):
            return False
        if node.op is Op.VIEW and node.attrs.get("perm"):
            return False
        stack.extend(node.inputs)
    return True


def _check_updates(owner: Node, carry: Node, sym: Sym) -> str:
    """'' when ``carry`` only flows, elementwise along ``sym``, into its own next value."""
    nxt = carry.attrs.get("next")
    body = list(walk(owner.body or []))
    if nxt is not carry and not any(n is nxt for n in body):
        return "its next value is not computed in its loop"
    derived: set[int] = {carry.id}
    for node in body:  # program order: a node's inputs come before it
        if not any(i.id in derived for i in node.inputs):
            continue
        if node.op is Op.LOOP or node.body is not None:
            return "a nested loop uses it"
        if node.op not in ELEMENTWISE_OPS or node.shape != (sym,):
            return (
                f"it feeds a {node.op.value} in its loop (only elementwise updates can be chunked)"
            )
        derived.add(node.id)
    users = {i.id for node in body if node.id not in derived for i in node.inputs}
    if users & derived:
        return "a value computed from it is used for something else than its next value"
    others = [c.attrs.get("next") for c in owner.attrs.get("carried", []) if c is not carry]
    if any(o is not None and o.id in derived for o in others):
        return "another loop-carried value is computed from it"
    return ""


def _home_store(loop: DeviceLoop, sym: Sym, owner: Node, carry: Node) -> tuple[Node | None, str]:
    """The one store after the loop that writes ``carry`` into a row of its own program."""
    inside = {n.id for n in walk(owner.body or [])}
    outside = [n for n in walk(loop.body) if n.id not in inside]
    uses = [n for n in outside if any(i is carry for i in n.inputs)]
    uses += [n for n in outside if n.op is Op.LOOP and _carries_from(n, carry)]
    if len(uses) != 1 or uses[0].op is not Op.STORE or uses[0].inputs[0] is not carry:
        return None, "its value after the loop is not just stored once"
    store = uses[0]
    tensor = store.attrs["tensor"]
    if not any(n is store for n in loop.body):
        return None, "it is stored inside another loop"
    if tensor.dtype != carry.dtype:
        return None, f"it is stored into {tensor.name} of another dtype ({tensor.dtype})"
    if "extra_mask" in store.attrs or store.attrs.get("positions") is not None:
        return None, f"its store into {tensor.name} is masked or uses advanced indexing"
    why = _one_row_per_program(loop, sym, store)
    if why:
        return None, why
    for node in walk(loop.body):
        accessed = node.op in (Op.LOAD, Op.STORE, Op.ATOMIC) and node is not store
        if accessed and node.attrs["tensor"].name == tensor.name:
            return None, f"{tensor.name} is also accessed elsewhere in the device loop"
    return store, ""


def _carries_from(loop: Node, carry: Node) -> bool:
    return any(c.inputs[0] is carry for c in loop.attrs.get("carried", []))


def _one_row_per_program(loop: DeviceLoop, sym: Sym, store: Node) -> str:
    """'' when the store's index is ``:`` on ``sym`` and names every grid dim per program."""
    named: set[int] = set()
    on_dim = 0
    for item in store.attrs["index"]:
        kind = item[0]
        if kind == "rdim" and item[1] is sym:
            on_dim += 1
        elif kind == "value":
            node = store.inputs[1 + item[1]]
            per_program = node.op in _PER_PROGRAM and node.attrs["sym"] in loop.grid_syms
            if node.ndim != 0 or not per_program:
                return f"its row of {store.attrs['tensor'].name} is not indexed by tile ids"
            named.add(id(node.attrs["sym"]))
        elif kind == "tile" and item[1].scalar:
            named.add(id(item[1]))
        elif kind not in ("int", "none"):
            return f"its store into {store.attrs['tensor'].name} has a {kind} index"
    if on_dim != 1:
        return f"its store into {store.attrs['tensor'].name} is not ':' on the dim"
    if any(id(g) not in named for g in loop.grid_syms):
        return f"its row of {store.attrs['tensor'].name} is shared by several programs"
    return ""

"""Dead-code removal and config-slot numbering of traced device loops (stage: ir; in: a loop's
traced node list; out: the nodes that reach a store, the whole dims still used, and the slot
numbers the per-item config lists index).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, walk


def assign_config_slots(loops: list[DeviceLoop]) -> None:
    """Number what per-item config lists index, kernel-wide in program order: ``indexing`` (loads
    and stores), ``load_eviction_policies`` (loads), the ``range_*`` knobs (each device loop's
    persistent loop, then its nested loops)."""
    mem = loads = ranges = 0
    for k, loop in enumerate(loops):
        loop.grid_slot = k
        loop.range_slot = ranges
        ranges += 1
        for node in loop.walk():
            if node.op in (Op.LOAD, Op.STORE):
                node.attrs["mem_slot"] = mem
                mem += 1
            if node.op is Op.LOAD:
                node.attrs["load_slot"] = loads
                loads += 1
            if node.op is Op.LOOP:
                node.attrs["range_slot"] = ranges
                ranges += 1


def without_dead_rdims(syms: list[Sym], body: list[Node]) -> list[Sym]:
    """``syms`` less the whole dims no live node uses (in its shape, its attributes or a leaf
    it reads): a row load ``x[tb, :]`` whose only use became a load at gathered positions
    (``frontend/gather_loads.py``) would otherwise keep a reduction-loop slot in the config
    and a whole row's width in the default's tile budget."""
    used: set[int] = set()
    seen: set[int] = set()
    stack = list(walk(body))
    while stack:
        node = stack.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        stack += node.inputs
        used |= {id(d) for d in node.shape if isinstance(d, Sym)}
        used |= {id(s) for s in _attr_syms(node.attrs)}
    return [s for s in syms if s.kind is not SymKind.RDIM or id(s) in used]


def _attr_syms(value: Any) -> Iterator[Sym]:
    """The syms in a node attribute (a sym, or tuples, lists and dicts holding them)."""
    if isinstance(value, Sym):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _attr_syms(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _attr_syms(v)


def eliminate_dead_code(body: list[Node]) -> list[Node]:
    """Keep nodes that reach a store/atomic (and the loops that hold them)."""
    parent: dict[int, Node] = {}
    for n in walk(body):
        if n.op in (Op.LOOP, Op.IF, Op.WHILE):
            for child in [
                *(n.body or []),
                *n.attrs.get("orelse", []),
                *n.attrs.get("cond_body", []),
            ]:
                parent[child.id] = n
            for carry in n.attrs.get("carried", []):
                parent[carry.id] = n
    live: set[int] = set()
    stack = [n for n in walk(body) if n.op in (Op.STORE, Op.ATOMIC, Op.PRINT)]
    while stack:
        n = stack.pop()
        if n.id in live:
            continue
        live.add(n.id)
        stack.extend(n.inputs)
        if n.op is Op.WHILE:
            stack.append(n.attrs["cond"])
        if n.op is Op.CARRY:  # a loop's next value, or an if's value from each branch
            stack += [v for k in ("next", "then", "else") if (v := n.attrs.get(k)) is not None]
        if n.id in parent:
            stack.append(parent[n.id])
    return _filter(body, live)


def _filter(nodes: list[Node], live: set[int]) -> list[Node]:
    out = []
    for n in nodes:
        if n.id not in live:
            continue
        if n.op is Op.IF:
            n.body = _filter(n.body or [], live)
            n.attrs["orelse"] = _filter(n.attrs["orelse"], live)
            n.attrs["carried"] = [c for c in n.attrs["carried"] if c.id in live]
        if n.op is Op.WHILE:
            n.body = _filter(n.body or [], live)
            n.attrs["cond_body"] = _filter(n.attrs["cond_body"], live)
            n.attrs["carried"] = [c for c in n.attrs["carried"] if c.id in live]
        if n.op is Op.LOOP:
            n.body = _filter(n.body or [], live)
            n.attrs["carried"] = [c for c in n.attrs.get("carried", []) if c.id in live]
            n.attrs["carry_updates"] = [c for c in n.attrs.get("carry_updates", []) if c.id in live]
        out.append(n)
    return out

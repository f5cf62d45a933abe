"""Loop-carried dependence (stage: ir analysis; in: a loop body and its carried values, or a
traced :class:`DeviceLoop`; out: the body's values that depend on a carried value, and the
carried tiles a step exchanges across lanes).

A recurrence (CTC's forward variables, a scan written as a loop) carries a register tile from
one step to the next; when a step gathers that tile along a dim (``torch.gather``, a constant
slice or ``F.pad`` of it, ``torch.roll``), every step waits for the exchange between threads
before its next one: the config heuristic gives such a loop one thread per element of the state
(``config/occupancy.recurrence_warps``).
"""

from __future__ import annotations

from tilecraft.ir.nodes import DeviceLoop, Node, Op, walk


def carry_dependent(body: list[Node], carried: list[Node]) -> set[int]:
    """Ids of the body's values that depend on a carried value (a nested loop that reads one
    makes everything in it dependent)."""
    dependent = {c.id for c in carried}
    changed = True
    while changed:
        changed = False
        for node in walk(body):
            if node.id in dependent:
                continue
            deps = list(node.inputs)
            if node.op is Op.LOOP:
                deps += _free_inputs(node)
            if any(d.id in dependent for d in deps):
                inner = [node, *walk(node.body or [])]
                inner += [c for n in inner for c in n.attrs.get("carried", [])]
                dependent.update(n.id for n in inner)
                changed = True
    return dependent


def _free_inputs(loop: Node) -> list[Node]:
    inputs = [c.inputs[0] for c in loop.attrs.get("carried", [])]
    return inputs + [i for n in walk(loop.body or []) for i in n.inputs]


def exchanged_states(loop: DeviceLoop) -> list[Node]:
    """The values a step of one of ``loop``'s inner loops gathers across lanes (``Op.GATHER``
    sources) that depend on that inner loop's carried values."""
    found: list[Node] = []
    for inner in loop.walk():
        carried = inner.attrs.get("carried", []) if inner.op is Op.LOOP else []
        if not carried:
            continue
        dependent = carry_dependent(inner.body or [], carried)
        found += [
            n.inputs[0]
            for n in walk(inner.body or [])
            if n.op is Op.GATHER and n.inputs[0].id in dependent
        ]
    return found

"""Loads that may read what other threads of the same program stored (stage: ir analysis; in: a
device loop; out: the ids of the loads that need a block barrier before them).

Triton orders nothing between the threads of one program: a store of a tile and a later load of
the same tensor through other indices (a recurrence's scratch row read back shifted by one
position, a row written and then read transposed) may see the old value where another thread
wrote the new one, while ref mode runs the statements in order. Codegen emits
``tl.debug_barrier()`` before such a load (``codegen/memory.emit_load``). "Later" is in program
order, or an earlier position in a loop (inside the device loop) that also holds the store: the
next iteration reads it. A load indexed exactly as every store to its tensor reads only what its
own lanes wrote and needs none; tensor-valued indices always may cross lanes. Tensors are told
apart by name (two host views of one buffer are not seen as one).

A TMA copy (a ``tensor_descriptor`` load or store) runs in the async proxy, which does not see
the program's ordinary stores in order even in the storing thread's own lanes:
:func:`proxy_crossings` names the loads and stores of every such pair, which the config space
keeps on pointers.
"""

from __future__ import annotations

from tilecraft.ir.nodes import DeviceLoop, Node, Op, nested_bodies, value_indexed

_LOOPS = (Op.LOOP, Op.WHILE)


def loads_after_stores(loop: DeviceLoop) -> set[int]:
    """Ids of the loads of ``loop`` that may read another thread's earlier store."""
    order, enclosing, writes = _writes(loop)
    return {
        node.id
        for node in loop.walk()
        if node.op is Op.LOAD
        and any(
            _may_follow(node, store, order, enclosing) and _crosses_lanes(node, store)
            for store in writes.get(node.attrs["tensor"].name, ())
        )
    }


def proxy_crossings(loop: DeviceLoop) -> set[int]:
    """Ids of the loads of ``loop`` that may read an earlier store to their tensor (in any
    lanes) and of those stores."""
    order, enclosing, writes = _writes(loop)
    found: set[int] = set()
    for node in loop.walk():
        if node.op is not Op.LOAD:
            continue
        earlier = [
            store
            for store in writes.get(node.attrs["tensor"].name, ())
            if _may_follow(node, store, order, enclosing)
        ]
        if earlier:
            found.update([node.id, *(store.id for store in earlier)])
    return found


def _writes(
    loop: DeviceLoop,
) -> tuple[dict[int, int], dict[int, tuple[int, ...]], dict[str, list[Node]]]:
    """Program-order positions, enclosing loops, and the stores and atomics of each tensor."""
    order: dict[int, int] = {}
    enclosing: dict[int, tuple[int, ...]] = {}
    _number(loop.body, (), order, enclosing)
    writes: dict[str, list[Node]] = {}
    for node in loop.walk():
        if node.op in (Op.STORE, Op.ATOMIC):
            writes.setdefault(node.attrs["tensor"].name, []).append(node)
    return order, enclosing, writes


def _number(
    nodes: list[Node],
    loops: tuple[int, ...],
    order: dict[int, int],
    enclosing: dict[int, tuple[int, ...]],
) -> None:
    """Program-order positions, and the ids of the loops inside the device loop around each
    node."""
    for node in nodes:
        order[node.id] = len(order)
        enclosing[node.id] = loops
        inner = (*loops, node.id) if node.op in _LOOPS else loops
        for body in nested_bodies(node):
            _number(body, inner, order, enclosing)


def _may_follow(
    load: Node, store: Node, order: dict[int, int], enclosing: dict[int, tuple[int, ...]]
) -> bool:
    """The store can run before the load in one program: earlier in program order, or later
    inside a loop that holds both (its next iteration)."""
    if order[store.id] < order[load.id]:
        return True
    return bool(set(enclosing[load.id]) & set(enclosing[store.id]))


def _crosses_lanes(load: Node, store: Node) -> bool:
    """Whether the load's lanes may read elements other lanes stored: any difference in the
    index items, or a tensor-valued index."""
    if value_indexed(load) or load.attrs.get("positions") is not None:
        return True
    return load.attrs["index"] != store.attrs["index"] or store.attrs.get("positions") is not None


__all__ = ["loads_after_stores", "proxy_crossings"]

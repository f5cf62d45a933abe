"""Sibling loops over one range become one loop (stage: ir transform; in: a traced
:class:`DeviceLoop`; out: the same loop, with sibling loops fused and the loads they repeat read
once).

Users unroll a loop over a few taps, heads or statistics with ``tc.static_range``::

    for tch in tc.tile(c):
        for k in tc.static_range(4):
            acc = tc.zeros([tch], dtype=torch.float32)
            for tb in tc.tile(b):
                for tt in tc.tile(seq):
                    acc += torch.sum(x[tb, tt.index - k, tch] * dy[tb, tt, tch], dim=[0, 1])
            dw[k, tch] = acc

As traced, the program runs four loop nests one after another, each reading its slab of ``x``
and ``dy`` again, with a store between them (which also keeps a split reduction from spreading
the loops over programs). The copies of one source loop share a block size
(``frontend/loop_nest.block_sym``), so two sibling loops over the same range can run as one:
each iteration runs the first loop's body, then the second's, with the carried values of both.
``dy[tb, tt, tch]``, read by every copy, is then read once (identical loads of a body with no
write to their tensor between them are merged, with the ops that repeat them).

Two loops ``A`` and ``B`` of one body fuse when (checked on the IR; anything else is left as
written):

* their syms cover the same range with the same block size (the same config slot or the same
  literal block);
* ``B`` uses nothing ``A`` computes (its carried results or values in its body), and the code
  between them splits into what ``B`` needs (moved before ``A``: no stores, atomics or prints, no
  use of ``A``'s results, no loads of a tensor ``A`` writes) and the rest (moved after ``B``:
  stores and loads that touch no tensor ``B`` writes, and no tensor ``B`` reads is stored);
* no tensor written in one is read or written in the other (an iteration of ``B`` would see
  ``A``'s later iterations' writes, or miss them), and neither prints.

The loops' bodies are fused in turn, so nested nests of copies become one nest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, same_range, walk

_WRITES = (Op.STORE, Op.ATOMIC)
_CONTROL = (Op.LOOP, Op.IF, Op.WHILE)
_NODE_REFS = ("next", "then", "else", "cond")  # attrs that name another node


def fuse_sibling_loops(loop: DeviceLoop) -> DeviceLoop:
    """Fuse every fusable pair of sibling loops in ``loop`` (see the module docstring)."""
    removed: set[int] = set()
    loop.body = _fuse_body(loop.body, removed)
    if removed:
        loop.syms = [s for s in loop.syms if id(s) not in removed]
    return loop


def _fuse_body(body: list[Node], removed: set[int], merge: bool = False) -> list[Node]:
    """``body`` with its fusable sibling loops fused, then each nested body done the same way.
    ``merge``: the body holds fused copies, whose repeated loads are merged."""
    fused: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i, first in enumerate(body):
            j = _next_loop(body, i)
            parts = _fusion(body, i, j) if first.op is Op.LOOP and j is not None else None
            if j is not None and parts is not None:
                body = _fuse_pair(body, i, j, parts, removed)
                fused.add(id(first))
                changed = True
                break
    for node in body:
        if node.op is Op.LOOP and node.body is not None:
            node.body = _fuse_body(node.body, removed, merge or id(node) in fused)
        elif node.op is Op.IF:
            node.body = _fuse_body(node.body or [], removed)
            node.attrs["orelse"] = _fuse_body(node.attrs["orelse"], removed)
        elif node.op is Op.WHILE:
            node.body = _fuse_body(node.body or [], removed)
    return merge_repeated_loads(body) if merge else body


def _next_loop(body: list[Node], i: int) -> int | None:
    """The index of the next loop after ``body[i]`` when only plain nodes lie between."""
    for j in range(i + 1, len(body)):
        if body[j].op is Op.LOOP:
            return j
        if body[j].op in _CONTROL:
            return None
    return None


def _same_loop_range(a: Sym, b: Sym) -> bool:
    """Two loop syms over one range in the same blocks (one config slot, or one literal)."""
    same_block = (
        a.config_slot == b.config_slot
        if a.config_slot is not None or b.config_slot is not None
        else a.fixed_block == b.fixed_block
    )
    return a.kind is SymKind.BLOCK and a.scalar == b.scalar and same_block and same_range(a, b)


def _subtree(node: Node) -> list[Node]:
    """``node`` and every node it holds: bodies, branches, conditions, carried values."""
    nodes = []
    for n in walk([node]):
        nodes.append(n)
        nodes.extend(n.attrs.get("carried", []))
    return nodes


def _refs(node: Node) -> list[Node]:
    """The nodes ``node`` reads: its inputs and the nodes its attrs name."""
    named = [v for k in _NODE_REFS if isinstance(v := node.attrs.get(k), Node)]
    return [*node.inputs, *named]


def _outside_refs(nodes: list[Node]) -> list[Node]:
    """Nodes that ``nodes`` read but do not define."""
    own = {id(n) for n in nodes}
    return [r for n in nodes for r in _refs(n) if id(r) not in own]


def _tensors(nodes: Iterable[Node], ops: tuple[Op, ...]) -> set[str]:
    return {n.attrs["tensor"].name for n in nodes if n.op in ops}


def _split_between(
    between: list[Node], second: list[Node], first_ids: set[int]
) -> tuple[list[Node], list[Node]] | None:
    """The nodes between two loops as (what the second loop needs, the rest), or None when what
    it needs depends on the first loop."""
    needed = {id(r) for r in _outside_refs(second)}
    pre: list[Node] = []
    for node in reversed(between):  # a node is needed when a needed node (or the loop) reads it
        if id(node) in needed:
            pre.append(node)
            needed.update(id(r) for r in _refs(node))
    pre.reverse()
    if any(n.op in (*_WRITES, Op.PRINT, Op.EXTERN) for n in pre):
        return None
    if any(id(r) in first_ids for n in pre for r in _refs(n)):
        return None
    pre_ids = {id(n) for n in pre}
    return pre, [n for n in between if id(n) not in pre_ids]


def _fusion(body: list[Node], i: int, j: int) -> tuple[list[Node], list[Node]] | None:
    """How loops ``body[i]`` and ``body[j]`` fuse: the code between them that moves before the
    fused loop and the code that moves after it, or None when they must stay apart."""
    first, second = body[i], body[j]
    if not _same_loop_range(first.attrs["sym"], second.attrs["sym"]):
        return None
    a_nodes, b_nodes = _subtree(first), _subtree(second)
    first_ids = {id(n) for n in a_nodes}
    if any(id(r) in first_ids for r in _outside_refs(b_nodes)):
        return None  # the second loop uses the first one's results
    parts = _split_between(body[i + 1 : j], b_nodes, first_ids)
    if parts is None or any(n.op is Op.PRINT for n in (*a_nodes, *b_nodes)):
        return None
    pre, post = parts
    a_writes, b_writes = _tensors(a_nodes, _WRITES), _tensors(b_nodes, _WRITES)
    a_reads, b_reads = _tensors(a_nodes, (Op.LOAD,)), _tensors(b_nodes, (Op.LOAD,))
    post_writes, post_reads = _tensors(post, _WRITES), _tensors(post, (Op.LOAD,))
    conflict = (
        a_writes & (b_writes | b_reads)
        or b_writes & a_reads
        or _tensors(pre, (Op.LOAD,)) & (a_writes | post_writes)
        or post_writes & (b_writes | b_reads)
        or post_reads & b_writes
        or any(n.op is Op.EXTERN for n in post)
    )
    return None if conflict else parts


def _fuse_pair(
    body: list[Node], i: int, j: int, parts: tuple[list[Node], list[Node]], removed: set[int]
) -> list[Node]:
    """``body`` with ``body[j]`` fused into ``body[i]``: ``parts`` (from ``_fusion``) is what
    the second loop needs, moved before the fused loop, and the rest of the code between them,
    moved after it."""
    first, second = body[i], body[j]
    pre, post = parts
    old, new = second.attrs["sym"], first.attrs["sym"]
    for node in _reachable(_subtree(second)):
        _rename_sym(node, old, new)
    removed.add(id(old))
    first.attrs["carried"] = [*first.attrs.get("carried", []), *second.attrs.get("carried", [])]
    if "carry_updates" in first.attrs or "carry_updates" in second.attrs:
        first.attrs["carry_updates"] = [
            *first.attrs.get("carry_updates", []),
            *second.attrs.get("carry_updates", []),
        ]
    first.inputs += [n for n in second.inputs if not any(n is m for m in first.inputs)]
    first.body = [*(first.body or []), *(second.body or [])]
    return [*body[:i], *pre, first, *post, *body[j + 1 :]]


def _reachable(nodes: list[Node]) -> list[Node]:
    """``nodes`` and the nodes they read, transitively (leaves such as a tile's index are in no
    body, only in inputs)."""
    seen: dict[int, Node] = {}
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if id(n) not in seen:
            seen[id(n)] = n
            stack.extend(_refs(n))
    return list(seen.values())


def _rename_sym(node: Node, old: Sym, new: Sym) -> None:
    node.shape = tuple(new if d is old else d for d in node.shape)
    for key, value in node.attrs.items():
        node.attrs[key] = _renamed(value, old, new)


def _renamed(value: Any, old: Sym, new: Sym) -> Any:
    if value is old:
        return new
    if isinstance(value, tuple):
        return tuple(_renamed(v, old, new) for v in value)
    if isinstance(value, list):
        return [_renamed(v, old, new) for v in value]
    return value


def merge_repeated_loads(body: list[Node]) -> list[Node]:
    """``body`` with each load (and pure op) that repeats an earlier one of the same body (the
    same tensor, index and inputs, no write to that tensor between them) replaced by the
    earlier one; nested bodies are merged on their own."""
    seen: dict[Any, Node] = {}
    replaced: dict[int, Node] = {}
    out: list[Node] = []
    for node in body:
        _repoint(node, replaced)  # reads of earlier repeats, so this node's key can match
        written = _tensors(_subtree(node), _WRITES)
        if written or node.op is Op.EXTERN:
            seen = {
                k: v
                for k, v in seen.items()
                if k[0] is not Op.LOAD or (k[1] not in written and node.op is not Op.EXTERN)
            }
        key = _value_key(node)
        if key is not None and key in seen:
            replaced[id(node)] = seen[key]
            continue
        if key is not None:
            seen[key] = node
        out.append(node)
    if replaced:
        _replace_uses(out, replaced)
    return out


_PURE = (Op.CAST, Op.UNARY, Op.BINARY, Op.WHERE, Op.VIEW)
_SLOT_ATTRS = ("mem_slot", "load_slot")


def _value_key(node: Node) -> Any:
    """What makes two nodes compute the same value, or None for nodes never merged."""
    if node.op is not Op.LOAD and node.op not in _PURE:
        return None
    attrs = []
    for k, v in sorted(node.attrs.items()):
        if k in _SLOT_ATTRS:
            continue
        if k == "tensor":
            v = v.name
        try:
            hash(v)
        except TypeError:
            return None
        attrs.append((k, v))
    return (
        node.op,
        node.attrs["tensor"].name if node.op is Op.LOAD else None,
        tuple(id(n) for n in node.inputs),
        node.shape,
        node.dtype,
        tuple(attrs),
    )


def _replace_uses(body: list[Node], replaced: dict[int, Node]) -> None:
    """Point every read of a replaced node (nested bodies and carried values too) at its
    replacement."""
    for n in (n for top in body for n in _subtree(top)):
        _repoint(n, replaced)


def _repoint(node: Node, replaced: dict[int, Node]) -> None:
    """``node`` reading each replaced node's replacement (inputs and the nodes attrs name)."""
    node.inputs = [replaced.get(id(r), r) for r in node.inputs]
    for key in _NODE_REFS:
        ref = node.attrs.get(key)
        if isinstance(ref, Node) and id(ref) in replaced:
            node.attrs[key] = replaced[id(ref)]

"""Loads that a ``where`` throws away where its condition is false read only what it keeps
(stage: ir transform; in: a traced device loop; out: the same loop, such loads with the
condition as an extra mask).

Users mask padding after loading it::

    xt = x[tb, ts, td].to(torch.float32)
    valid = ts.index[None, :] < n[:, None]  # each sequence's length
    acc = acc + torch.sum(torch.where(valid[:, :, None], xt, 0.0), dim=1)

As written, every row of ``x`` is read, the padded ones too (half the bytes for lengths uniform
in ``[1, S]``). When a load's value reaches only the kept branch of a ``where`` (through casts,
unary and binary ops used nowhere else), the masked-off lanes are never used, so the load takes
the condition as an extra mask: the GPU reads no sector whose lanes are all masked off. A load
that reaches only the second branch (``torch.where(pad, 0.0, x)``) takes the negated condition. A
varlen mean pool, a lazy optimizer's pass over touched rows, a ragged batch gain the bytes
they skip.

A load qualifies when the condition is constant along the dim of the tensor's unit stride
(``valid[:, :, None]``: a whole row kept or dropped). A condition that varies along it (a
causal ``col <= row`` mask over a tile's columns, a dropout mask) saves no whole sector and
would make the access mask vary element by element, which stops Triton from vectorizing the
load. A ``where`` that feeds a dot is left alone (a masked load cannot be a tensor-descriptor
load in the dot's pipeline). The load and the ops between it and the ``where`` move to just
before the ``where`` (the condition may be computed after the load was written) only when
nothing stores or adds atomically in between.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import torch

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, bodies, walk

_ELEMENTWISE = (Op.CAST, Op.UNARY, Op.BINARY)
_WRITES = (Op.STORE, Op.ATOMIC, Op.PRINT, Op.EXTERN)


def mask_loads_by_where(loop: DeviceLoop) -> DeviceLoop:
    """Give each qualifying load the condition of the ``where`` that keeps its value."""
    uses = _use_counts(loop.body)
    operands = _dot_operands(loop.body)
    for body in bodies(loop.body):
        for where in [n for n in body if n.op is Op.WHERE and n.id not in operands]:
            for branch in (1, 2):  # kept where the condition holds / where it does not
                tree = _kept_tree(where, branch, body, uses)
                loads = [n for n in tree if n.op is Op.LOAD and _maskable(n, where.inputs[0])]
                if loads and _in_order(tree, where, body):
                    mask = _mask_node(where.inputs[0], loads, branch == 2, body)
                    for load in loads:
                        load.attrs["extra_mask"] = len(load.inputs)
                        load.inputs.append(mask)
    return loop


def _dot_operands(body: list[Node]) -> set[int]:
    """Ids of the values a dot reads (through views and casts): their loads stay unmasked, so
    that they may still be tensor-descriptor loads feeding the dot's pipeline."""
    out: set[int] = set()
    for dot in (n for n in walk(body) if n.op is Op.DOT):
        for node in dot.inputs[:2]:
            out.add(node.id)
            while node.op in (Op.VIEW, Op.CAST) and node.inputs:
                node = node.inputs[0]
                out.add(node.id)
    return out


def _use_counts(body: list[Node]) -> Counter[int]:
    """How many references each node has (inputs, a carry's next / branch values, a while's
    condition)."""
    uses: Counter[int] = Counter()
    for node in _with_carries(body):
        refs = list(node.inputs)
        refs += [
            v for k in ("next", "then", "else", "cond") if isinstance(v := node.attrs.get(k), Node)
        ]
        uses.update(r.id for r in refs)
    return uses


def _with_carries(nodes: list[Node]) -> Iterator[Node]:
    """Every node of ``nodes`` and their nested bodies, with the loops' carried values."""
    for node in walk(nodes):
        yield node
        yield from node.attrs.get("carried", [])


def _kept_tree(where: Node, branch: int, body: list[Node], uses: Counter[int]) -> list[Node]:
    """The nodes of ``body`` whose value reaches only the where's input ``branch`` (1: kept
    where the condition holds, 2: where it does not): walked up from it through single-use
    elementwise ops of the where's shape, ending at loads."""
    here = {n.id for n in body}
    tree: list[Node] = []
    stack = [where.inputs[branch]]
    while stack:
        node = stack.pop()
        if node.id not in here or uses[node.id] != 1 or node.shape != where.shape:
            continue
        if node.op is Op.LOAD or node.op in _ELEMENTWISE:
            tree.append(node)
        if node.op in _ELEMENTWISE:
            stack.extend(node.inputs)
    return tree


def _maskable(load: Node, cond: Node) -> bool:
    """Whether ``cond`` can mask ``load``: a bool the load's rank or less, constant along the
    dim of the tensor's unit stride, on a plain pointer access without an extra mask."""
    if "extra_mask" in load.attrs or load.attrs.get("positions") is not None:
        return False
    if cond.dtype != torch.bool or cond.ndim > load.ndim:
        return False
    position = _unit_stride_position(load)
    if position is None:
        return False
    if position < 0:
        return True  # no dim of the result walks the unit stride
    padded = (1,) * (load.ndim - cond.ndim) + tuple(cond.shape)
    return padded[position] == 1


def _unit_stride_position(load: Node) -> int | None:
    """The result dim reading the tensor's unit-stride dim (-1: none does; None: an
    advanced index does, whose per-element offsets a mask does not make worse or better)."""
    tensor = load.attrs["tensor"]
    unit = [d for d, (size, stride) in enumerate(zip(tensor.shape, tensor.stride)) if stride == 1]
    unit = [d for d in unit if tensor.shape[d] != 1]
    pos = 0
    for item in load.attrs["index"]:
        kind = item[0]
        if kind == "none":
            pos += 1
            continue
        if kind == "int":
            continue
        if kind == "value":
            return None
        sym: Sym = item[1]
        if item[2] in unit and not sym.scalar:
            return pos
        pos += 0 if sym.scalar else 1
    return -1


def _in_order(tree: list[Node], where: Node, body: list[Node]) -> bool:
    """Whether the condition is defined before the tree's first node, moving the tree to just
    before ``where`` where it is not and nothing in between writes memory (False: neither)."""
    start = min(body.index(n) for n in tree)
    cond = where.inputs[0]
    if cond not in body or body.index(cond) < start:
        return True
    between = body[start : body.index(where)]
    if any(n.op in _WRITES for n in walk(between)):
        return False
    _move_before(tree, where, body)
    return True


def _move_before(tree: list[Node], where: Node, body: list[Node]) -> None:
    """Move the tree's nodes (in their order) to just before ``where``; each is used only by
    the next, so every input stays defined before its use."""
    ids = {n.id for n in tree}
    moved = [n for n in body if n.id in ids]
    kept = [n for n in body if n.id not in ids]
    at = kept.index(where)
    body[:] = kept[:at] + moved + kept[at:]


def _mask_node(cond: Node, loads: list[Node], negate: bool, body: list[Node]) -> Node:
    """The condition raised to the loads' rank by a view (and negated for a where's second
    branch), inserted before the first of them."""
    mask = cond
    added = []
    rank = loads[0].ndim
    if 0 < cond.ndim < rank:
        pad = rank - cond.ndim
        spec = tuple([None] * pad + [":"] * cond.ndim)
        mask = Node(Op.VIEW, [cond], (1,) * pad + cond.shape, cond.dtype, {"spec": spec})
        added.append(mask)
    if negate:
        mask = Node(Op.UNARY, [mask], mask.shape, torch.bool, {"fn": "logical_not"})
        added.append(mask)
    for node in added:
        node.loc, node.hint = cond.loc, "kept"
    at = min(body.index(n) for n in loads)
    body[at:at] = added
    return mask

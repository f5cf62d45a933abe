"""Dots whose K dim can run chunk by chunk (stage: ir analysis; in: a ``DOT`` node and the
device loop's rolled dim; out: its K dim, and whether its operands can be computed on one chunk
of K at a time).

A user writes ``x[t, :] @ c.t()`` with K the whole row. On the FMA units (fp32 "ieee" dots) each
thread then holds its rows x K slab of A and cols x K slab of B in registers for the whole dot:
a k-means assignment at 64 rows x 64 centroids x K 64 on 4 warps spilled on sm_90. Run as a loop
over K chunks (``codegen/dot_chunks.py``), each step computes the operands on its chunk only,
read right before the dot, which ptxas streams into the FMAs.

That is legal where every value of an operand's expression tree that spans K is elementwise
along K - loads, pointwise ops, selects, casts, transposes, broadcasts and unit dims - so a
chunk of it needs that chunk of its inputs only. A value of the tree that does not span K (a
row's norm, ``y / y.norm(dim=-1, keepdim=True)``) is computed once, outside the loop.
"""

from __future__ import annotations

from tilecraft.ir.nodes import Node, Op, Sym, SymKind, on_dim

# ops whose element at k depends only on their inputs' elements at k
_ELEMENTWISE = frozenset(
    {Op.LOAD, Op.UNARY, Op.BINARY, Op.WHERE, Op.CAST, Op.FULL, Op.CONST, Op.TILE_INDEX}
)


def k_dim(dot: Node) -> Sym | None:
    """The dot's K dim where it is a whole dim of the kernel (``x[t, :]``'s ``:``): a dim the
    user tiled (``tc.tile(k)``) already has the block the config gives it."""
    a, b = dot.inputs[0], dot.inputs[1]
    k = a.shape[-1]
    if not isinstance(k, Sym) or k.kind is not SymKind.RDIM or b.shape[-2] is not k:
        return None
    return k


def chunkable(dot: Node) -> bool:
    """Whether ``dot`` can run as a loop over chunks of its K dim (module docstring): its K is a
    whole dim and both operands are elementwise along it (a rolled K is the caller's to rule
    out: its chunk loop already gives the dot one chunk)."""
    k = k_dim(dot)
    if dot.op is not Op.DOT or k is None:
        return False
    return all(_elementwise_along(operand, k, {}) for operand in dot.inputs[:2])


def _elementwise_along(node: Node, k: Sym, seen: dict[int, bool]) -> bool:
    if not on_dim(node, k):
        return True  # computed once, before the loop
    if node.id in seen:
        return seen[node.id]
    ok = _keeps_k_elementwise(node) and all(_elementwise_along(i, k, seen) for i in node.inputs)
    seen[node.id] = ok
    return ok


def _keeps_k_elementwise(node: Node) -> bool:
    if node.op in _ELEMENTWISE:
        return node.body is None
    if node.op is not Op.VIEW:
        return False  # a reduction, scan, gather, dot, carried value, ... along K
    attrs = node.attrs
    if attrs.get("perm") or attrs.get("expand"):
        return True
    if any(key in attrs for key in ("join", "reshape", "split", "flip")):
        return False
    return 0 not in attrs.get("spec", (0,))  # unit dims added (a reshape merges dims)


__all__ = ["chunkable", "k_dim"]

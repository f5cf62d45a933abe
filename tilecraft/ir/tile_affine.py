"""Index values that are a tile's positions scaled and shifted (stage: ir analysis; in: a node;
out: ``(sym, a, c)`` where the node is ``a * t.index + c``). The frontend rewrites such indices
as slices where they stay inside the tensor (``frontend/strided_tiles.py``); codegen drops a
tile's mask that the bounds check of such an index already implies (``codegen/memory.py``)."""

from __future__ import annotations

from tilecraft.ir.nodes import Node, Op, Sym, SymKind


def tile_affine(node: Node) -> tuple[Sym, int, int] | None:
    """(sym, a, c) where ``node`` is ``a * t.index + c`` of a tile ``t`` (a >= 1, ints), placed
    along any dim of size-1 dims; None otherwise."""
    while node.op is Op.VIEW and not node.attrs.get("expand") and len(node.syms()) == 1:
        node = node.inputs[0]
    if node.op is Op.TILE_INDEX:
        sym = node.attrs["sym"]
        ok = sym.kind is SymKind.BLOCK and not sym.scalar and node.shape == (sym,)
        return (sym, 1, 0) if ok else None
    if node.op is not Op.BINARY or node.attrs["fn"] not in ("add", "sub", "mul"):
        return None
    a, b = node.inputs
    fn = node.attrs["fn"]
    if fn != "sub" and const_int(a) is not None:
        a, b = b, a
    c, inner = const_int(b), tile_affine(a)
    if c is None or inner is None:
        return None
    sym, scale, shift = inner
    if fn == "mul":
        return (sym, scale * c, shift * c) if c >= 1 else None
    return (sym, scale, shift + c if fn == "add" else shift - c)


def const_int(node: Node) -> int | None:
    """The value of an int constant node (None for anything else, bools included)."""
    value = node.attrs.get("value") if node.op is Op.CONST else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def static_extent(sym: Sym) -> int | None:
    """A tile loop's end where it is a static int (None: dynamic)."""
    if not isinstance(sym.begin, int) or not isinstance(sym.extent, int) or sym.extent_args:
        return None
    return sym.extent


__all__ = ["const_int", "static_extent", "tile_affine"]

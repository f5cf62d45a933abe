"""Comparisons that order two tiles' indices (stage: IR analysis; in: nodes; out: the tiles a
comparison orders, or None).

``tm.index[:, None] >= tn.index[None, :]`` (causal attention's mask) and ``(tn.index[None, :] -
tm.index[:, None]).to(torch.float32) <= 0.0`` (ALiBi's) are decided for a whole block pair once
the two tiles' blocks do not overlap: codegen can split a loop at the diagonal
(``codegen/diagonal.py``) and fold such selects off it (``codegen/known.py``); the config offers
that split only where a select has such a condition (``config/flags.py``).
"""

from __future__ import annotations

from tilecraft.ir.nodes import Node, Op, Sym, walk

COMPARES = ("lt", "le", "gt", "ge")


def index_sym(node: Node) -> Sym | None:
    """The tile whose ``index`` ``node`` is, through views (None for other values)."""
    while node.op is Op.VIEW:
        node = node.inputs[0]
    if node.op is not Op.TILE_INDEX:
        return None
    sym = node.attrs["sym"]
    return sym if isinstance(sym, Sym) else None


def difference_syms(node: Node) -> tuple[Sym, Sym] | None:
    """``(a, b)`` when ``node`` is ``a.index - b.index`` of two tiles, through views and casts
    to a float type (which keep its sign and its magnitude of at least 1), else None."""
    while node.op is Op.VIEW or node.op is Op.CAST and node.dtype.is_floating_point:
        node = node.inputs[0]
    if node.op is not Op.BINARY or node.attrs["fn"] != "sub":
        return None
    a, b = (index_sym(i) for i in node.inputs[:2])
    return (a, b) if a is not None and b is not None else None


def compared_tiles(node: Node) -> tuple[Sym, Sym] | None:
    """The two tiles a comparison orders: ``a.index < b.index`` or ``a.index - b.index <= c``
    (in any of the four comparisons, either side), else None."""
    if node.op is not Op.BINARY or node.attrs["fn"] not in COMPARES:
        return None
    a, b = (index_sym(i) for i in node.inputs[:2])
    if a is not None and b is not None:
        return a, b
    return difference_syms(node.inputs[0]) or difference_syms(node.inputs[1])


def has_diagonal_selects(body: list[Node]) -> bool:
    """Whether some ``torch.where`` in ``body`` selects by a comparison of two tiles' indices."""
    return any(n.op is Op.WHERE and compared_tiles(n.inputs[0]) for n in walk(body))


__all__ = ["COMPARES", "compared_tiles", "difference_syms", "has_diagonal_selects", "index_sym"]

"""Computed indices that are a tile's positions scaled and shifted (stage: frontend; in: a load's
or store's resolved index items; out: the same access with each ``a * t.index + c`` index value
as a slice item ``("rslice", t's sym, dim, c, a)``, or the items unchanged).

``x[tb, tc, 2 * to.index + 1]`` (a stride-2 window, a 2x downsample's ``(2 * tj.index)[None,
:]``) is a tensor-valued index: codegen masks it to the tensor's bounds and Triton, proving no
contiguity of a computed value, loads it one element at a time. As a slice item it is what
``x[t, 1::2]`` is: ``1 + 2 * indices`` with the tile's own mask, which Triton's axis analysis
follows, and which ``ir/paired_slices.py`` can pair with ``2 * to.index`` or widen into one
contiguous span.

Rewritten only where nothing changes but the form: every tensor-valued index of the access is
such a value (through the ``[:, None]`` placements that lay advanced indices out), the rewritten
items give the access the same shape, and the positions provably stay inside the tensor (static
sizes, ``a >= 1``): a computed index past the tensor reads 0 (a store skips it), a slice has no
such mask.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilecraft.frontend.advanced_index import item_dims
from tilecraft.ir.nodes import Node, Shape, Sym
from tilecraft.ir.tile_affine import static_extent, tile_affine

if TYPE_CHECKING:
    from tilecraft.frontend.values import HostTensor


def as_tile_slices(
    t: HostTensor, items: tuple[Any, ...], inputs: list[Node], shape: Shape
) -> tuple[tuple[Any, ...], list[Node]] | None:
    """``items`` and ``inputs`` with each tensor-valued index a slice of a tile, where all of
    them are (see the module docstring); None otherwise."""
    if t.dynamic or not any(item[0] == "value" and inputs[item[1]].ndim for item in items):
        return None
    out: list[Any] = []
    kept: list[Node] = []  # 0-d index values (``x[tb.begin, ...]``) stay as they are
    for item in items:
        value = inputs[item[1]] if item[0] == "value" else None
        if value is None:
            out.append(item)
        elif value.ndim == 0:
            out.append(("value", len(kept), item[2]))
            kept.append(value)
        elif (affine := tile_affine(value)) and _inside(affine, int(t.shape[item[2]])):
            sym, scale, shift = affine
            out.append(("rslice", sym, item[2], shift, scale))
        else:
            return None
    if tuple(d for item in out for d in item_dims(item, kept)) != tuple(shape):
        return None
    return tuple(out), kept


def _inside(affine: tuple[Sym, int, int], size: int) -> bool:
    """Whether every position of the tile, scaled and shifted, indexes a dim of ``size``."""
    sym, scale, shift = affine
    extent = static_extent(sym)
    if extent is None or not isinstance(sym.begin, int) or extent <= sym.begin:
        return False
    return shift + scale * sym.begin >= 0 and shift + scale * (extent - 1) < size

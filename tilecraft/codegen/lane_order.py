"""Lane order of gathers and scatters (stage: codegen; in: a LOAD / STORE whose index along the
tensor's contiguous dim is a computed value; out: its pointer, mask and value built with that
dim first, and a loaded tile permuted back).

Triton's coalescing pass gives a memory access the layout whose fastest dim is the one where the
pointer is provably contiguous. A computed index proves nothing, so every dim ties, and the tie
keeps dim 0 fastest (Triton 3.6, ``getOrderFromContiguity``): a bilinear upsample's
``maps[p, y0[:, None], x0[None, :]]`` of a [16, 128] tile was laid out with threadsPerWarp
[16, 2], sixteen rows of memory per warp instruction (cross-compiled TTGIR), where its x0 runs
along the rows' contiguous elements. Built with the tensor's contiguous dim first, the same tie
puts that dim fastest: the upsample went 1.33 -> 0.547 ms on an H200 (s23_gather_order). The
permutations cost no data movement: ``tl.trans`` / ``tl.permute`` of a blocked layout is the
layout with its order permuted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext
    from tilecraft.codegen.memory import IndexPlace


def computed_contiguous_dim(ctx: EmitContext, node: Node, places: list[IndexPlace]) -> int | None:
    """The position in ``node``'s tile along which a computed (tensor-valued) index walks the
    tensor's stride-1 dim, where it is not already dim 0 (whose lanes Triton's tie puts first);
    None where the access is not such a gather or scatter. ``places``: where each index item
    lands (``codegen/memory.index_places``)."""
    if node.ndim < 2:
        return None
    tensor = node.attrs["tensor"]
    for place in places:
        value = place.value
        if value is None or ctx.stride_expr(tensor, place.item[2]) != "1":
            continue
        varying = [j for j, d in enumerate(value.shape) if d != 1]
        if not varying:
            continue
        if _tile_positions(value):  # Triton proves these contiguous itself
            return None
        at = place.pos + varying[-1]
        return at if at > 0 and node.shape[at] != 1 else None
    return None


def _tile_positions(node: Node) -> bool:
    """Whether ``node`` is a tile's positions (``tile.index``, ``tc.arange``) shifted by a
    scalar and viewed: Triton's axis analysis proves such an index contiguous."""
    while True:
        if node.op is Op.TILE_INDEX:
            return True
        viewed = node.op is Op.VIEW and ("spec" in node.attrs or node.attrs.get("expand"))
        if viewed or (node.op is Op.CAST and not node.dtype.is_floating_point):
            node = node.inputs[0]
        elif node.op is Op.BINARY and node.attrs["fn"] in ("add", "sub"):
            tiles = [i for i in node.inputs if i.ndim]
            if len(tiles) != 1 or (node.attrs["fn"] == "sub" and tiles[0] is node.inputs[1]):
                return False
            node = tiles[0]
        else:
            return False


def _perm(rank: int, first: int) -> list[int]:
    """Dims with ``first`` moved to the front."""
    return [first, *(d for d in range(rank) if d != first)]


def permuted(
    ctx: EmitContext, node: Node, text: str, first: int, scalar: torch.dtype | None = None
) -> str:
    """``text`` (a pointer, mask or value of ``node``'s tile, possibly broadcast; ``scalar``:
    the dtype of a 0-d value, which ``tl.broadcast_to`` does not take) at the tile's full shape,
    with dim ``first`` moved to the front."""
    dims = ", ".join(ctx.dim_expr(d) for d in node.shape)
    if scalar is not None:
        full = f"tl.full([{dims}], {text}, {dtypes.triton_dtype(scalar)})"
    else:
        full = f"tl.broadcast_to({text}, [{dims}])"
    if node.ndim == 2:
        return f"tl.trans({full})"
    return f"tl.permute({full}, {_perm(node.ndim, first)})"


def restored(node: Node, text: str, first: int) -> str:
    """A tile loaded in the order :func:`permuted` gave, permuted back to ``node``'s dims."""
    if node.ndim == 2:
        return f"tl.trans({text})"
    perm = _perm(node.ndim, first)
    back = [perm.index(d) for d in range(node.ndim)]
    return f"tl.permute({text}, {back})"

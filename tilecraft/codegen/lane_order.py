"""Lane order of gathers and scatters (stage: codegen; in: a LOAD / STORE whose index along the
tensor's contiguous dim is a computed value, or whose whole contiguous dim a tile dim continues
in memory; out: its pointer, mask and value built with that dim first, and a loaded tile
permuted back).

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

from tilecraft.ir.nodes import Node, Op, Sym

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext
    from tilecraft.codegen.memory import IndexPlace


# a whole contiguous dim of at least a cache line keeps its order (continued_contiguous_dim)
LINE_BYTES = 128


def lane_first_dim(ctx: EmitContext, node: Node, places: list[IndexPlace]) -> int | None:
    """The tile dim an access is built with first (None: its own order): a gather's computed
    contiguous dim, else the dim that continues a whole contiguous dim. Not on AMD targets:
    Triton's AMD buffer-op pass (TritonAMDGPUCanonicalizePointers) fails on a load or store of
    permuted pointers ("PassManager::run failed", gfx942: bilinear upsample, a conv-state roll,
    row compaction, a bitonic sort)."""
    if ctx.plan.target.backend == "hip":
        return None
    first = computed_contiguous_dim(ctx, node, places)
    return first if first is not None else continued_contiguous_dim(ctx, node, places)


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


def continued_contiguous_dim(ctx: EmitContext, node: Node, places: list[IndexPlace]) -> int | None:
    """The position of the tile dim that continues the access's whole stride-1 dim in memory
    (``x[tm, tg, :]`` of [M, G, 16], ``tg`` of stride 16), where it is neither dim 0 nor the
    last; None elsewhere. Triton proves the whole dim contiguous, then ties the rest and keeps
    dim 0 next: a group-mean subtraction's [16, 32, 16] bf16 tile was laid out with
    threadsPerWarp [16, 1, 2], 32 bytes of 16 rows per warp instruction (cross-compiled for
    sm_90), 0.76x torch.compile on an H200 (heldout_s28b). Moved to the front, the tie puts it
    next: a warp reads 16 consecutive groups, 512 contiguous bytes (0.090 -> 0.072 ms). Only
    where the whole dim is shorter than ``LINE_BYTES``: rows of whole lines gained little or
    lost (lane_order_s28)."""
    tensor = node.attrs["tensor"]
    whole = next((p for p in places if p.width and p.pos == node.ndim - 1), None)
    if whole is None or whole.item[0] != "rdim" or node.ndim < 3:
        return None
    extent, dim = tensor.shape[whole.item[2]], whole.item[2]
    if not tensor.unit_stride(dim) or not isinstance(extent, int) or ctx.state(whole.item[1]).mask:
        return None
    if extent * tensor.dtype.itemsize >= LINE_BYTES:
        return None  # whole lines a row already (int8 groups of 128: 0.122 -> 0.127 ms moved)
    for place in places:
        item = place.item
        if item[0] == "tile" and place.width and tensor.stride[item[2]] == extent:
            at = place.pos
            # only where a dim before it holds more than one element: Triton gives a dim of
            # one no lanes, so the tie leaves the lanes on ``at`` already
            before = [d for d in node.shape[:at] if isinstance(d, Sym) and ctx.block_value(d) > 1]
            return at if 0 < at < node.ndim - 1 and before else None
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
            tiles = _varying_along_last(node)
            if len(tiles) != 1 or (node.attrs["fn"] == "sub" and tiles[0] is node.inputs[1]):
                return False
            node = tiles[0]
        else:
            return False


def _varying_along_last(node: Node) -> list[Node]:
    """The tile inputs of an add that vary along its last varying dim; the other input is
    constant along it, so the sum is as contiguous there as that input (a frame's positions
    ``tf.index[:, None] * hop + tc.arange(n)[None, :]``)."""
    tiles = [i for i in node.inputs if i.ndim]
    varying = [j for j, d in enumerate(node.shape) if d != 1]
    if len(tiles) < 2 or not varying:
        return tiles
    if any(i.ndim != node.ndim for i in tiles):
        return []  # broadcast by rank: leave it to the lane order
    return [i for i in tiles if i.shape[varying[-1]] != 1]


def _perm(rank: int, first: int) -> list[int]:
    """Dims with ``first`` moved to the front."""
    return [first, *(d for d in range(rank) if d != first)]


def permuted(
    ctx: EmitContext, node: Node, text: str, first: int, scalar: torch.dtype | None = None
) -> str:
    """``text`` (a pointer, mask or value of ``node``'s tile, possibly broadcast; ``scalar``:
    the dtype of a 0-d value, which ``tl.broadcast_to`` does not take) at the tile's full shape,
    with dim ``first`` moved to the front."""
    dims = ctx.shape_expr(node.shape)
    if scalar is not None:
        full = ctx.full_expr(dims, text, scalar)
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

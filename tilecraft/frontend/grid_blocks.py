"""Ops that need a whole dim, refused along a tile the config cuts (stage: frontend; in: a
traced tile and the dims an op spans; out: nothing, or a ShapeError at the user's line).

A device loop runs one program per tile the config cuts: an op along its block sees one tile of
the dim. A sum or a max there is a partial the user may combine (``tc.atomic_add``); a scan, a
softmax or a normalization is not: each tile would be scanned or normalized on its own, so the
result would depend on the config, while ref mode spans the dim whole. A scan may run along an
inner loop's tiles (a chunked scan carries its total from tile to tile); a normalization may
not (nothing carries it). A block the host knows (a literal or registered ``block_size``) is the
user's per-block intent either way.
"""

from __future__ import annotations

from typing import Any

from tilecraft.errors import ShapeError
from tilecraft.ir.nodes import Node, Sym, shape_str, tile_block

_NORMALIZE_HINT = (
    "normalize along a whole dim (`x[tm, :]` then dim=1), or loop over the dim in an inner "
    "`for tk in tc.tile(n)`: a first pass for the statistics, a second for the normalized tiles"
)


def grid_block_at(t: Any, node: Node, axis: int) -> Sym | None:
    """The device loop's block at ``node``'s dim ``axis``, if the config cuts it there."""
    d = node.shape[axis]
    return d if tile_block(d) and any(d is g for g in t.grid_syms) else None


def refuse_grid_blocks(t: Any, x: Any, dims: Any, kind: str) -> None:
    """Raise where ``kind`` (a normalization over ``dims`` of ``x``) spans a tile whose block
    only the config sets: each tile of the dim would be normalized on its own."""
    node = t.value_node(x)
    if node.ndim == 0:
        return
    for dim in dims if isinstance(dims, (list, tuple)) else [dims]:
        axis = t._axis(node, dim) % node.ndim
        block = node.shape[axis]
        if tile_block(block) and id(block) in t.config_blocks:
            where = "device loop's block" if grid_block_at(t, node, axis) else "loop's tile"
            raise ShapeError(
                f"{kind} along dim {axis} of {shape_str(node.shape)}: {block.name} is a "
                f"{where}, cut by the config, so each tile of the dim would be normalized on "
                "its own",
                t.loc,
                hint=_NORMALIZE_HINT,
            )

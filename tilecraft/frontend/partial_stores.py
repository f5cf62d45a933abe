"""Stores whose elements follow the config's tiles of a grid dim, refused (stage: frontend; in:
a traced device loop's body, its grid dims and the blocks only the config sets; out: nothing, or
a DeviceCodeError at the store's line).

Each program of a device loop holds one tile of each grid dim. A store the programs along a dim
make at the same elements (``out[tm] = x[tm, tn].sum(1)``: no ``tn`` in the index) keeps the last
program's partial; one whose value was reduced over the dim's tile and then spread over it
(``out[t] = x[t, :].sum()``, ``x[t] - x[t].max()``) gives every tile its own sum. Either result
follows the config's block, while ref mode spans the dim whole; with autotuning every config
then "differed", and without it the values were silently wrong. A store inside a branch on the
dim's positions (``if tn.begin == 0:``), with an ``extra_mask`` on them, or indexed by the tile's
id is the user's choice of one program and is left alone, and so are atomics; a value reduced
over a literal or registered block is the per-block result the user means.
"""

from __future__ import annotations

from typing import Any

from tilecraft.errors import DeviceCodeError
from tilecraft.ir.nodes import Node, Op, Sym, upstream, uses_sym


def check_partial_stores(tracer: Any, grid_syms: list[Sym], body: list[Node]) -> None:
    """Raise at the first store of ``body`` described in the module docstring."""
    tiled = [g for g in grid_syms if not g.scalar]
    if tiled:
        _check_block(body, tiled, tracer.config_blocks, [])


def _check_block(
    nodes: list[Node], tiled: list[Sym], cut: set[int], conditions: list[Node]
) -> None:
    for node in nodes:
        if node.op is Op.STORE:
            _check_store(node, tiled, cut, conditions)
        if node.op is Op.IF:
            inner = [*conditions, node.inputs[0]]
            _check_block(node.body or [], tiled, cut, inner)
            _check_block(node.attrs.get("orelse") or [], tiled, cut, inner)
        elif node.body:
            _check_block(node.body, tiled, cut, conditions)


def _check_store(store: Node, tiled: list[Sym], cut: set[int], conditions: list[Node]) -> None:
    """``tiled``: the grid's tile dims (every store along one races, whatever set its block);
    ``cut``: the ids of those whose block only the config sets."""
    # the dims the index spans: tiles, whole dims, shifted or strided tiles (("rslice", sym..))
    tiles = {
        id(item[1]) for item in store.attrs["index"] if len(item) > 1 and isinstance(item[1], Sym)
    }
    chosen = [*store.inputs[1:], *conditions]  # index values, an extra mask, enclosing ifs
    name = store.attrs["tensor"].name
    for sym in tiled:
        if id(sym) not in tiles and not any(uses_sym(n, sym) for n in chosen):
            if uses_sym(store.inputs[0], sym):
                raise DeviceCodeError(
                    f"the store to '{name}' is made by every program along {sym.name} at the "
                    f"same elements, each with a value from its own tile of {sym.name} (a "
                    "partial): the programs race and the last one's stays",
                    store.loc,
                    hint="reduce over the whole dim (`x[tm, :].sum(1)`), or combine the "
                    "partials with tc.atomic_add / tc.atomic_max into a zeroed tensor",
                )
        elif id(sym) in tiles and id(sym) in cut and _reduced_over(store.inputs[0], sym):
            raise DeviceCodeError(
                f"the value stored to '{name}' was reduced over {sym.name}, the device loop's "
                f"block, and is stored along it: each tile the config cuts gets its own "
                "tile's sum (or max), not the dim's",
                store.loc,
                hint="reduce along the dim you mean (`x[t, :].sum(dim=1)` keeps a value a "
                "row), take the dim whole (`x[tm, :]`), or combine partials with "
                "tc.atomic_add into a zeroed tensor",
            )


def _reduced_over(node: Node, sym: Sym) -> bool:
    """Whether ``node`` is computed from a reduction of a tile over ``sym``'s dim."""
    return any(
        n.op is Op.REDUCE
        and any(d is sym for d in n.inputs[0].shape)
        and not any(d is sym for d in n.shape)
        for n in upstream([node])
    )

"""Advanced indexing of host tensors as PyTorch defines it (stage: frontend; in: resolved index
items of one load/store/atomic; out: broadcast index values, the result shape and where each item
lands in it).

PyTorch's rule: ints (and 0-d index values) select and vanish; every index value of rank >= 1 is an
*advanced* index. All advanced indices broadcast together into one shape ``B`` (elementwise pairs:
``x[rows, cols]`` reads ``x[rows[k], cols[k]]``). When the advanced indices are adjacent (only ints
between them) ``B`` takes the place of the first one; otherwise ``B`` goes first and the sliced
dims (tiles, ``:``, ``None``) follow in order. ``x[:, i, None, j]`` is such a non-adjacent case.

``extra_mask`` (``hl.load``/``hl.store``) is placed here too: a bool value of the access's rank.

Codegen reads the ``positions`` this module records: the result dim at which each item's index
values are placed (each advanced value is expanded to rank ``len(B)`` so all of them line up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import ShapeError
from tilecraft.ir.nodes import Dim, Node, Shape

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


def item_dims(item: tuple[Any, ...], inputs: list[Node]) -> Shape:
    """The result dims one index item contributes when it is not part of an advanced group."""
    kind = item[0]
    if kind == "none":
        return (1,)
    if kind in ("tile", "rdim", "rslice"):
        return () if item[1].scalar else (item[1],)
    if kind == "value":
        return inputs[item[1]].shape
    return ()  # "int"


def _is_advanced(item: tuple[Any, ...], inputs: list[Node]) -> bool:
    return item[0] == "value" and inputs[item[1]].ndim > 0


def _adjacent(items: tuple[Any, ...], inputs: list[Node], advanced: list[int]) -> bool:
    """Only ints (which vanish) may sit between advanced indices for ``B`` to stay in place."""
    between = items[advanced[0] : advanced[-1] + 1]
    return all(_is_advanced(i, inputs) or not item_dims(i, inputs) for i in between)


def place(
    tracer: Tracer, name: str, items: tuple[Any, ...], inputs: list[Node]
) -> tuple[list[Node], Shape, tuple[int, ...]] | None:
    """For two or more advanced indices: (broadcast inputs, result shape, per-item positions).
    ``None`` when there is at most one (the plain left-to-right layout is already right)."""
    advanced = [k for k, item in enumerate(items) if _is_advanced(item, inputs)]
    if len(advanced) < 2:
        return None
    try:
        group = tracer.broadcast_shapes(*[inputs[items[k][1]].shape for k in advanced])
    except ShapeError as err:
        raise ShapeError(
            f"the tensor-valued indices of '{name}' do not broadcast together: {err.message}",
            tracer.loc,
            hint="index values pair up elementwise (as in PyTorch); give them one shape, "
            "or add [:, None] / [None, :] to take an outer product",
        ) from None
    inputs = list(inputs)
    for k in advanced:
        slot = items[k][1]
        inputs[slot] = tracer.expand_rank(inputs[slot], len(group))
    in_place = _adjacent(items, inputs, advanced)
    shape: list[Dim] = [] if in_place else list(group)
    positions: list[int] = []
    group_at = 0
    for k, item in enumerate(items):
        if _is_advanced(item, inputs):
            if k == advanced[0] and in_place:
                group_at = len(shape)
                shape.extend(group)
            positions.append(group_at)
            continue
        positions.append(len(shape))
        shape.extend(item_dims(item, inputs))
    return inputs, tuple(shape), tuple(positions)


def extra_mask(tracer: Tracer, name: str, mask: Any, shape: Shape) -> Node:
    """``hl.load/store(..., extra_mask=m)``: ``m`` as a bool node of the access's rank (it must
    broadcast to the accessed shape); codegen ands it with the bounds masks."""
    node = tracer.value_node(mask)
    try:
        fits = tracer.broadcast_shapes(shape, node.shape) == tuple(shape)
    except ShapeError:
        fits = False
    if not fits or node.ndim > len(shape):
        raise ShapeError(
            f"extra_mask of shape {list(node.shape)} does not fit the access to '{name}' "
            f"of shape {list(shape)}",
            tracer.loc,
            hint="build the mask from the same tiles as the index, e.g. tile.index < n",
        )
    return tracer.expand_rank(tracer.cast(node, torch.bool), len(shape))

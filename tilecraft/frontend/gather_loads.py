"""Gathers from a loaded tile read memory instead (stage: frontend; in: ``torch.gather`` /
``torch.take_along_dim`` of a tile that is a plain load of a host tensor; out: a load with
tensor-valued indices, or None where the gather stays a register gather).

``torch.take_along_dim(x[tb, :], idx[tb, tk], dim=1)`` loads whole rows of ``x`` to pick a few
elements of each: the register gather (``tl.gather``) moves every element of the row through
warp shuffles per picked element, and the row's registers stay live (a [2, 4096] bf16 row tile
picking [2, 32] of it: 255 registers, 2.6 KB of spills a thread, sm_90). The same values come
from memory as ``x[tb.index[:, None], idx]``: one load per picked element, the row never read
whole. The rewritten load reads the tensor at the gather's position, so it needs no store to the
tensor earlier in the kernel (the row load read what was there before that store).

An index outside ``[0, n)`` of the gathered dim is an error in torch and undefined in a register
gather; the load's tensor-valued index is masked to the tensor's bounds like any other
(``codegen/memory.py``), so it reads 0 rather than past the tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilecraft.frontend import indexing
from tilecraft.frontend.rdims import along
from tilecraft.ir.nodes import Node, Op, walk

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue

_PLAIN_ITEMS = ("tile", "rdim", "rslice", "int")


def gather_load(t: Tracer, src: Node, idx: Node, axis: int) -> TileValue | None:
    """``src`` gathered at ``idx`` along ``axis`` as a load of ``src``'s tensor, where ``src`` is
    a plain load (tiles, whole dims, slices and ints as its index, no mask of its own) of a
    tensor the kernel has not stored to, or casts of one (a gather commutes with them); None
    otherwise."""
    casts: list[Node] = []
    while src.op is Op.CAST:
        casts.append(src)
        src = src.inputs[0]
    if not plain_load(t, src):
        return None
    loaded = _load_at(t, src, idx, axis)
    for cast in reversed(casts):
        loaded = t.to_dtype(loaded, cast.dtype)
    return loaded


def rereadable(t: Tracer, src: Node) -> bool:
    """Whether a gather from ``src`` would re-read memory (:func:`gather_load` applies)."""
    while src.op is Op.CAST:
        src = src.inputs[0]
    return plain_load(t, src)


def _load_at(t: Tracer, src: Node, idx: Node, axis: int) -> TileValue:
    """The load ``src`` with its dim ``axis`` indexed by ``idx`` and every other dim by its own
    positions placed to broadcast with ``idx`` (all indices advanced: the result is ``idx``'s
    shape, as torch lays out adjacent advanced indices)."""
    return load_at(t, src, idx, tuple(range(src.ndim)), axis)


def load_at(t: Tracer, src: Node, positions: Node, space: tuple[int, ...], line: int) -> TileValue:
    """The load ``src`` read at ``positions`` along its dim that is axis ``line`` of
    ``positions``' shape, its dim ``k`` (axis ``space[k]`` there) at its own positions."""
    index: list[Any] = []
    dim = 0
    for item in src.attrs["index"]:
        if item[0] == "int" or (item[0] == "tile" and item[1].scalar):
            index.append(item[1] if item[0] == "int" else t.tile_leaf(item[1], Op.TILE_INDEX))
            continue
        if space[dim] == line:
            tensor_index = _tensor_index(t, item, t.wrap(positions))
        else:
            position = t.tile_leaf(item[1], Op.TILE_INDEX)
            placed = along(t, position, positions.shape, space[dim], broadcast=False)
            tensor_index = placed if item[0] == "tile" else _tensor_index(t, item, placed)
        index.append(tensor_index)
        dim += 1
    assert line in space  # the gathered line is one of the load's dims
    return indexing.load(t, src.attrs["tensor"], tuple(index))


def _tensor_index(t: Tracer, item: tuple[Any, ...], positions: TileValue) -> TileValue:
    """The tensor's index at these positions of a whole dim (``:``) or a slice of it."""
    if item[0] != "rslice":
        return positions
    _, _, _, first, stride = item
    return positions * stride + first if stride != 1 else positions + first


def plain_load(t: Tracer, src: Node) -> bool:
    """Whether ``src`` is a load that can be re-read where the gather is: indexed by tiles,
    whole dims, slices and ints only, with no mask or cache hint, of a tensor no store or atomic
    traced so far writes."""
    if src.op is not Op.LOAD or set(src.attrs) - {"tensor", "index"}:
        return False
    if any(item[0] not in _PLAIN_ITEMS for item in src.attrs["index"]):
        return False
    return unwritten(t, src)


def unwritten(t: Tracer, load: Node) -> bool:
    """Whether no store or atomic traced so far writes the tensor ``load`` reads (a load moved
    past one would read what it wrote)."""
    name = load.attrs["tensor"].name
    return not any(
        n.op in (Op.STORE, Op.ATOMIC) and n.attrs["tensor"].name == name
        for block in t.blocks
        for n in walk(block)
    )

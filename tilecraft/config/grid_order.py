"""The default order of a multi-dim grid's program ids, and which accesses walk memory rows
(stage: config).

In: the device loops (IR). Out: per device loop, its grid dims fastest-first (the default's
``Config.loop_orders``, kept as ``StrategySpace.memory_orders``); for the spec, each access's contiguous index and whether a store is bulk
(its dims keep whole segments, ``BlockSpec.row_floor``).

Programs run in about program-id order, so the dim that varies fastest decides which memory
the programs resident at once touch. Flattening a 2-D grid row-tile-fastest (the identity order)
has the programs of one wave read a narrow column strip of every row: short pieces of many DRAM
pages. Making the dim that indexes the tensors' contiguous (stride-1) dim vary fastest has them
read whole rows, neighbours in memory. (A SwiGLU backward over 8192x14336 bf16, [16, 128]
tiles: 0.294 ms with rows fastest, 0.279 with columns fastest; H200, swiglu_s18.)
Loops holding a ``tl.dot`` keep their order: their programs share operand panels through L2,
which ``l2_groupings`` and the Hopper pipelines order for (``config/pipelines.py``). So do loops
that scatter by atomics into rows a value picks: their cost is the atomics' contention, which
this rule does not model (an embedding backward adding 16384 bf16 rows of 4096 into an fp32
table: rows fastest 0.301 ms, columns fastest 0.320; emb_order_s18). The search moves between
both orders (``StrategySpace.neighbor_fields``): a pointwise AdamW step over seven fp32/bf16
streams ran 8% faster rows-first (adam_order_s18), which no rule here predicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, value_indexed, walk


def contiguous_item(node: Node) -> tuple[Any, ...] | None:
    """The index item of a 2-D+ load/store on the tensor's stride-1 dim (else its last dim;
    None: a 1-D access)."""
    items, unit = _items_and_unit_dim(node)
    if len(items) < 2:
        return None
    item: tuple[Any, ...] = items[unit] if unit is not None else items[-1]
    return item


def _items_and_unit_dim(node: Node) -> tuple[list[tuple[Any, ...]], int | None]:
    """A load/store's index items (``None`` dims left out), and the tensor's stride-1 dim where
    each item indexes one tensor dim (else None)."""
    items = [item for item in node.attrs.get("index", ()) if item[0] != "none"]
    tensor = node.attrs["tensor"]
    unit = [d for d in range(tensor.ndim) if tensor.stride[d] == 1 and tensor.shape[d] != 1]
    return items, unit[-1] if tensor.ndim == len(items) and unit else None


def contiguous_index_sym(node: Node, largest: int) -> Sym | None:
    """The tile sym indexing the contiguous (stride-1) dim of a 2-D+ load/store, else its last
    dim when no dim has stride 1 (None: an int, slice or value there, or a 1-D access, which
    walks no row). A channels_last [B, C, H, W] tensor's rows run along C, not W. Where an int
    picks an element of a short stride-1 dim, the dim outside it (:func:`_interleaved_item`) of
    a bulk access (:func:`bulk_store` of ``largest``; a conv's [C, 4] taps are not)."""
    item = contiguous_item(node)
    if item is not None and item[0] == "int" and bulk_store(node, largest):
        item = _interleaved_item(node)
    if item is None or not isinstance(item[1], Sym):
        return None
    if item[0] == "tile":
        return item[1]
    # a shifted tile (``t.index + c``, ``x[t, c:]`` of a grid block: ``("rslice", sym, dim, c,
    # 1)``) walks the row in order too; its lanes lie along the block as a tile's do
    if item[0] == "rslice" and item[1].kind is SymKind.BLOCK and item[4] == 1:
        return item[1]
    return None


INTERLEAVED_BYTES = 16  # an int-indexed stride-1 dim at most this wide: see _interleaved_item


def _interleaved_item(node: Node) -> tuple[Any, ...] | None:
    """Where an int picks one element of a short stride-1 dim (``x.view(t, d // 2, 2)[tt, tp,
    0]``, one of a complex number's parts; one of an RGBA pixel's channels): the item of the dim
    whose stride is that dim's extent, whose indices walk memory a few elements apart; codegen
    loads such element groups as one access. (An interleaved complex multiply over 16384x4096
    bf16 halved its rows under the occupancy rule instead of its 64-pair rows: 0.141 ->
    0.150 ms on an H100, complex_cc_s46_h100.)"""
    items, unit = _items_and_unit_dim(node)
    tensor = node.attrs["tensor"]
    if unit is None or not isinstance(tensor.shape[unit], int):
        return None
    inner = tensor.shape[unit]
    # a power-of-two group is one vector access (``tl.split`` of a [.., n, 2] load); a point's
    # x, y, z are three strided loads (chamfer distance over [B, N, 3] points: counting them
    # gave its default 16 warps, 4.07 -> 4.28 ms, default_change_s46_interleaved_h100)
    if inner & (inner - 1) or inner * node.dtype.itemsize > INTERLEAVED_BYTES:
        return None
    outer = _dims_of_stride(tensor, inner)
    return items[outer[0]] if outer else None


def _dims_of_stride(tensor: Any, stride: int) -> list[int]:
    """The tensor's dims of more than one index whose stride is ``stride`` (the dim just outside
    a stride-1 dim of that many elements)."""
    return [d for d in range(tensor.ndim) if tensor.stride[d] == stride and tensor.shape[d] != 1]


def narrow_run(node: Node, least_bytes: int) -> tuple[Sym, int] | None:
    """The tile sym whose indices continue a load/store's memory run past a whole stride-1 dim
    (``x[t, g, :]`` with ``g``'s stride the size of ``:``: ``g``'s block of ``n`` indices walks
    ``n`` times that dim in one run), and the bytes one index covers, where those are under
    ``least_bytes`` (None: no such dim, or one index already covers that many). A group norm's
    10 channels a group in channels-last maps are 20 bytes a group index: one group a program
    reads 20 of every 640 bytes."""
    items, unit = _items_and_unit_dim(node)
    tensor = node.attrs["tensor"]
    if len(items) < 2 or unit is None:
        return None
    if items[unit][0] != "rdim" or not isinstance(tensor.shape[unit], int):
        return None
    inner = tensor.shape[unit]
    outer = _dims_of_stride(tensor, inner)
    if not outer or items[outer[0]][0] != "tile" or not isinstance(items[outer[0]][1], Sym):
        return None
    run_bytes = inner * node.dtype.itemsize
    return (items[outer[0]][1], run_bytes) if run_bytes < least_bytes else None


BULK_STORE_SHARE = 16  # a store of at least 1/16 of the loop's largest tensor: see bulk_store


def tensor_bytes(node: Node) -> int:
    """Bytes of the tensor a load, store or atomic accesses (0 where its shape is symbolic)."""
    tensor = node.attrs["tensor"]
    shape = getattr(tensor, "shape", ())
    if not all(isinstance(d, int) for d in shape):
        return 0
    return math.prod(shape) * node.dtype.itemsize


def largest_tensor_bytes(nodes: Iterable[Node]) -> int:
    """Bytes of the largest tensor ``nodes`` access (the ``largest`` of :func:`bulk_store`)."""
    return max((tensor_bytes(n) for n in nodes if "tensor" in n.attrs), default=0)


def bulk_store(node: Node, largest: int) -> bool:
    """Whether a store writes a share of its loop's traffic worth whole segments: a tensor at
    least 1/16 the size of the ``largest`` one the loop accesses (a group norm's per-group
    statistics, 2 KB beside 64 MB of activations, are not; a max pool's outputs are)."""
    return tensor_bytes(node) * BULK_STORE_SHARE >= largest


def contiguous_first_order(loop: DeviceLoop) -> list[int]:
    """``loop``'s grid dims fastest-first: the dims that index the most accesses' stride-1 dim
    first, the others in their own order (the identity for 1-D grids, dot loops, and grids no
    access walks along)."""
    syms = list(loop.grid_syms)
    identity = list(range(len(syms)))
    body = list(walk(loop.body))
    if len(syms) < 2 or any(n.op is Op.DOT or _scatters(n) for n in body):
        return identity
    votes = [0] * len(syms)
    largest = largest_tensor_bytes(body)
    for node in body:
        if node.op in (Op.LOAD, Op.STORE):
            sym = contiguous_index_sym(node, largest)
            for d, grid_sym in enumerate(syms):
                votes[d] += sym is grid_sym
    return sorted(identity, key=lambda d: (-votes[d], d))


def _scatters(node: Node) -> bool:
    """An atomic whose index takes a loaded value (rows picked by ids)."""
    return node.op is Op.ATOMIC and value_indexed(node)


__all__ = [
    "bulk_store",
    "contiguous_first_order",
    "contiguous_index_sym",
    "contiguous_item",
    "largest_tensor_bytes",
    "tensor_bytes",
]

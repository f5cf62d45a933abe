"""Views and shape changes of tiles (stage: frontend; in: torch view ops and ``tc.join`` /
``tc.split`` on traced tiles; out: ``VIEW`` nodes).

A ``VIEW`` node carries one of: ``spec`` (insert / drop size-1 dims: ``unsqueeze``, ``squeeze``,
``[:, None]``), ``perm`` (``permute``, ``transpose``, ``.T``), ``expand`` (broadcast size-1 dims to
tile dims), ``join`` (two tiles become one with a new last dim of 2, ``tl.join``) or ``split``
(element 0 or 1 of the last dim of 2, ``tl.split``), or ``reshape`` (merged or split whole dims,
and ``torch.cat``: :mod:`tilecraft.frontend.regroup`, which says when padding allows it).
The registry in :mod:`tilecraft.frontend.lowerings` maps torch functions to these builders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import ShapeError, UnsupportedOpError
from tilecraft.frontend import rdims
from tilecraft.frontend.values import TileProxy, TileValue
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Dim, Node, Op, Sym, SymKind

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


def _dims(args: tuple[Any, ...]) -> list[Any]:
    """``f(x, 1, 0)`` and ``f(x, (1, 0))`` both give ``[1, 0]``."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return list(args[0])
    return list(args)


def _view(t: Tracer, node: Node, shape: tuple[Dim, ...], **attrs: Any) -> TileValue:
    return t.wrap(t.emit(Op.VIEW, [node], shape, node.dtype, **attrs))


def unsqueeze(t: Tracer, x: Any, dim: int) -> TileValue:
    """A new size-1 dim at ``dim``."""
    node = t.value_node(x)
    d = int(dim)
    if not -node.ndim - 1 <= d <= node.ndim:
        raise ShapeError(f"unsqueeze: dim={d} is out of range for a {node.ndim}-D tile")
    d %= node.ndim + 1
    spec = tuple([":"] * d + [None] + [":"] * (node.ndim - d))
    return _view(t, node, node.shape[:d] + (1,) + node.shape[d:], spec=spec)


def squeeze(t: Tracer, x: Any, dim: Any = None) -> TileValue:
    """Drops size-1 dims (all, or those in ``dim``)."""
    node = t.value_node(x)
    if dim is None:
        drop = {i for i, d in enumerate(node.shape) if d == 1}
    else:
        axes = dim if isinstance(dim, (list, tuple)) else [dim]
        drop = {t._axis(node, a) for a in axes if node.shape[t._axis(node, a)] == 1}
    if not drop:
        return t.wrap(node)
    spec = tuple(0 if i in drop else ":" for i in range(node.ndim))
    shape = tuple(d for i, d in enumerate(node.shape) if i not in drop)
    return _view(t, node, shape, spec=spec)


def permute(t: Tracer, x: Any, *dims: Any) -> TileValue:
    """Any permutation of a tile's dims (``tl.permute``; ``tl.trans`` for two)."""
    node = t.value_node(x)
    perm = tuple(t._axis(node, d) for d in _dims(dims))
    if sorted(perm) != list(range(node.ndim)):
        raise ShapeError(f"permute{perm} is not a permutation of a {node.ndim}-D tile's dims")
    if perm == tuple(range(node.ndim)):
        return t.wrap(node)
    return _view(t, node, tuple(node.shape[p] for p in perm), perm=perm)


def transpose(t: Tracer, x: Any, d0: int = 0, d1: int = 1) -> TileValue:
    """Swaps any two dims (``.t()`` swaps the two dims of a 2-D tile)."""
    node = t.value_node(x)
    a, b = t._axis(node, d0), t._axis(node, d1)
    perm = list(range(node.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(t, x, perm)


def expand(t: Tracer, x: Any, *sizes: Any) -> TileValue:
    """``x.expand(tm, -1)``: size-1 dims become tile dims (or whole extents); -1 keeps a dim."""
    node = t.value_node(x)
    wanted = _dims(sizes)
    if len(wanted) < node.ndim:
        raise ShapeError(f"expand: {len(wanted)} sizes for a {node.ndim}-D tile")
    node = t.expand_rank(node, len(wanted))
    out: list[Dim] = []
    for have, want in zip(node.shape, wanted, strict=True):
        if isinstance(want, int) and not isinstance(want, TileProxy) and int(want) == -1:
            out.append(have)
            continue
        dim = t.size_dim(want, [s for s in out if not isinstance(s, int)])
        if have != 1 and have is not dim and have != dim and not rdims.interchangeable(have, dim):
            raise ShapeError(f"expand: a dim of size {have} cannot become {dim}")
        out.append(dim)
    # a whole dim named otherwise than the one of its extent it stands for (expand_as(y) of a
    # tile whose 16 is y's other 16) takes that name, as torch's positional sizes say
    named = tuple(d if d == 1 else o for d, o in zip(node.shape, out, strict=True))
    node = rdims.relabel(t, node, named)
    if any(d != 1 and d is not o for d, o in zip(node.shape, out, strict=True)):
        raise ShapeError(f"expand: dims {list(node.shape)} cannot become {list(out)}")
    if tuple(out) == node.shape:
        return t.wrap(node)
    return _view(t, node, tuple(out), expand=True)


def expand_as(t: Tracer, x: Any, other: Any) -> TileValue:
    """Size-1 dims broadcast to ``other``'s shape."""
    return expand(t, x, *t.value_node(other).shape)


def reshape(t: Tracer, x: Any, *shape: Any) -> TileValue:
    """Reshapes that add or drop size-1 dims (the tile dims keep their order), or merge and
    split whole dims of static size (``frontend/regroup.py``)."""
    node = t.value_node(x)
    wanted = _dims(shape)
    _check_sizes("reshape", t, wanted)
    kept = [d for d in node.shape if d != 1]
    target = [w.sym if isinstance(w, TileProxy) else w for w in wanted]
    non_one = [i for i, d in enumerate(target) if not (isinstance(d, int) and d == 1)]
    if len(non_one) == len(kept):  # -1 stands for the tile dim at its place
        for k, i in enumerate(non_one):
            if isinstance(target[i], int) and target[i] == -1:
                target[i] = kept[k]
    new_kept = [d for d in target if not (isinstance(d, int) and d == 1)]
    same = len(new_kept) == len(kept) and all(
        a is b or _whole_extent(a, b) for a, b in zip(kept, new_kept, strict=True)
    )
    squeezed = squeeze(t, t.wrap(node)).node  # drop the source's 1s, then insert the target's
    if not same:  # dims merge or split: whole dims of static size only
        from tilecraft.frontend import regroup

        new_kept = regroup.resolve_minus_one(squeezed, new_kept)
        what = f"reshape of a tile {list(node.shape)} to {list(wanted)}"
        squeezed = regroup.regroup(t, squeezed, new_kept, what).node
        kept = list(squeezed.shape)
    ones = [isinstance(d, int) and d == 1 for d in target]
    if not any(ones):
        return t.wrap(squeezed)
    kept_iter = iter(kept)
    result = tuple(1 if one else next(kept_iter) for one in ones)
    spec = tuple(None if one else ":" for one in ones)
    return _view(t, squeezed, result, spec=spec)


def _check_sizes(op: str, t: Tracer, wanted: list[Any]) -> None:
    """Sizes are numbers, tiles or -1: a device value (``tb.block_size``, a loaded number) is
    neither a static size nor the tile's dim (the last tile may be shorter than its block)."""
    for i, w in enumerate(wanted):
        if isinstance(w, TileValue):
            raise ShapeError(
                f"{op}: size {i} is a device value (a tile's block_size or a number computed "
                "in the loop), not a size the shape can have",
                t.loc,
                hint="name a tile dim by its tile (x.reshape(tb, 64)) or by -1, and whole dims "
                "by host ints (sizes of the tensors)",
            )


def _whole_extent(have: Dim, want: Any) -> bool:
    """An int names a dim only when the dim is a whole extent of that size (not a tile)."""
    if isinstance(have, int):
        return isinstance(want, int) and have == want
    return (
        isinstance(want, int) and have.kind is SymKind.RDIM and not have.extent_args
    ) and have.extent == int(want)


def join(t: Tracer, a: Any, b: Any) -> TileValue:
    """``tc.join(a, b)``: one tile with a new last dim of 2 (``a`` at 0, ``b`` at 1)."""
    result = dtypes.promote(t.promotion_of(a), t.promotion_of(b))
    an, bn = t.cast(t.value_node(a), result), t.cast(t.value_node(b), result)
    an, bn = rdims.conform_all(t, [an, bn])
    shape = t.broadcast_shapes(an.shape, bn.shape)
    an, bn = (_broadcast(t, n, shape) for n in (an, bn))
    return t.wrap(t.emit(Op.VIEW, [an, bn], (*shape, 2), result, join=True))


def _broadcast(t: Tracer, node: Node, shape: tuple[Dim, ...]) -> Node:
    node = t.expand_rank(node, len(shape))
    if node.shape == shape:
        return node
    return t.emit(Op.VIEW, [node], shape, node.dtype, expand=True)


def split(t: Tracer, x: Any) -> tuple[TileValue, TileValue]:
    """``tc.split(x)``: the two halves of a last dim of size 2."""
    from tilecraft.frontend.regroup import static_size

    node = t.value_node(x)
    # a whole static dim of 2 (``x2[t, :]`` of a ``view(..., 2)``) is as good as a literal 2
    if node.ndim == 0 or static_size(node.shape[-1]) != 2:
        raise ShapeError(
            f"tc.split needs a tile whose last dim is 2, got {list(node.shape)}",
            t.loc,
            hint="view the tensor with a last dim of 2 (x.view(..., n // 2, 2)) and index it "
            "with `:` there, or load each half with its own int index (x2[t, 0], x2[t, 1])",
        )
    return (
        _view(t, node, node.shape[:-1], split=0),
        _view(t, node, node.shape[:-1], split=1),
    )


def chunk(t: Tracer, x: Any, chunks: int, dim: int = 0, op: str = "chunk") -> tuple[TileValue, ...]:
    """``torch.chunk`` / ``Tensor.chunk`` into 2, 4, 8... equal parts of a whole dim whose size
    is a power of two: the dim viewed as [2, n / 2], that 2 moved last and split
    (``tc.split``), each half chunked again (the fast path of
    :mod:`tilecraft.frontend.splits`, which slices other parts)."""
    from tilecraft.frontend.regroup import pow2, static_size

    node = t.value_node(x)
    axis = t._axis(node, dim)
    size = static_size(node.shape[axis])
    if not (isinstance(chunks, int) and chunks >= 1 and pow2(chunks)):
        raise UnsupportedOpError(
            f"chunk of a tile into {chunks!r} parts",
            t.loc,
            hint="chunk into 1, 2, 4, 8... parts, or load each part with sliced indices",
        )
    if chunks == 1:
        return (t.wrap(node),)
    if size is None or not pow2(size) or size < chunks:
        raise UnsupportedOpError(
            f"{op} of a tile {list(node.shape)} into {chunks} parts along dim {axis}",
            t.loc,
            hint="chunk a whole dim whose size is a power of two (and at least the parts); "
            "otherwise load each part with sliced indices (x[t, :h] and x[t, h:])",
        )
    shape = [*node.shape[:axis], 2, size // 2, *node.shape[axis + 1 :]]
    paired = reshape(t, t.wrap(node), *shape).node
    rank = paired.ndim
    perm = [*range(axis), *range(axis + 1, rank), axis]  # the 2 last
    first, second = split(t, permute(t, t.wrap(paired), perm))
    return (*chunk(t, first, chunks // 2, axis), *chunk(t, second, chunks // 2, axis))


def _tile_count(t: Tracer, op: str, tensors: Any, otherwise: str) -> int:
    """How many tiles ``op`` (torch.stack / torch.cat) joins: 2, 4, 8, ... (an error else)."""
    from tilecraft.frontend.regroup import pow2

    count = len(tensors) if isinstance(tensors, (list, tuple)) else 0
    if count < 2 or not pow2(count):
        raise UnsupportedOpError(
            f"{op} of {count} tiles",
            t.loc,
            hint=f"use a power-of-two number of tiles (2, 4, 8, ...), {otherwise}",
        )
    return count


def stack(t: Tracer, tensors: Any, dim: int = 0) -> TileValue:
    """``torch.stack(tiles, dim)`` of 2, 4, 8... tiles: two are a join with the new dim moved to
    ``dim``; more stack each half and concatenate the halves along ``dim``."""
    otherwise = "or store each tile with its own index (a tile's dims are powers of two)"
    count = _tile_count(t, "torch.stack", tensors, otherwise)
    if count > 2:
        half = count // 2
        halves = [stack(t, tensors[:half], dim), stack(t, tensors[half:], dim)]
        return cat(t, halves, dim)
    joined = join(t, *tensors)
    rank = joined.node.ndim
    d = int(dim) % rank
    perm = [*range(d), rank - 1, *range(d, rank - 1)]
    return permute(t, joined, perm)


def cat(t: Tracer, tensors: Any, dim: int = 0) -> TileValue:
    """2, 4, 8... tiles of one shape along a whole dim whose size is a power of two (or 1):
    more than two concatenate each half, then the halves (the fast path of
    :func:`tilecraft.frontend.concat.cat`, which places pieces of other sizes)."""
    from tilecraft.frontend.regroup import pow2, static_size

    count = _tile_count(t, "torch.cat", tensors, "or store each part with sliced indices")
    if count > 2:
        half = count // 2
        return cat(t, [cat(t, tensors[:half], dim), cat(t, tensors[half:], dim)], dim)
    a, b = rdims.conform_all(t, [t.value_node(x) for x in tensors])
    axis = t._axis(a, dim)
    size = static_size(a.shape[axis])
    if a.shape != b.shape or size is None or not pow2(size):
        raise UnsupportedOpError(
            f"torch.cat of tiles {list(a.shape)} and {list(b.shape)} along dim {axis}",
            t.loc,
            hint="both tiles need one shape, and the dim must be a whole dim whose size is a "
            "power of two; otherwise store the parts with sliced indices "
            "(out[t, :half] = a; out[t, half:] = b)",
        )
    joined = join(t, t.wrap(a), t.wrap(b)).node  # [..., 2]: a at 0, b at 1
    rank = joined.ndim
    perm = [*range(axis), rank - 1, *range(axis, rank - 1)]  # [..., 2, n, ...]
    moved = permute(t, t.wrap(joined), perm).node
    wanted = [*a.shape[:axis], 2 * size, *a.shape[axis + 1 :]]
    shape: list[Dim] = []
    used = [d for d in wanted if isinstance(d, Sym)]
    for d in wanted:
        shape.append(d if not isinstance(d, int) else t.size_dim(d, used))
    return t.wrap(t.emit(Op.VIEW, [moved], tuple(shape), moved.dtype, reshape=True))


def bitcast(t: Tracer, x: Any, dtype: torch.dtype) -> TileValue:
    """``x.view(dtype)``: the same bits as another dtype of the same width (``f.view(torch.int32)``
    for sign and exponent tricks)."""
    node = t.value_node(x)
    if dtype.itemsize != node.dtype.itemsize or torch.bool in (dtype, node.dtype):
        raise UnsupportedOpError(
            f"Tensor.view({dtype}) of a {node.dtype} tile: a bitcast keeps the width",
            hint="view as a dtype of the same size (float32 <-> int32, bfloat16 <-> int16, ...)",
        )
    if dtype == node.dtype:
        return t.wrap(node)
    call = f"_tc_bitcast({{0}}, {dtypes.triton_dtype(dtype)})"
    out = t.emit(Op.EXTERN, [node], node.shape, dtype, call=call, what="Tensor.view(dtype)")
    out.hint = "bits"
    return t.wrap(out)

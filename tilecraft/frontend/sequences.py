"""Torch's vector and sequence ops on tiles (stage: frontend; in: the tracer and the call's
operands; out: traced values).

Each is built from ops tiles already have, so it needs no IR of its own: ``torch.outer`` is a
broadcast product; ``torch.diff`` subtracts two constant slices of a whole dim (register
gathers, :mod:`~tilecraft.frontend.tile_shifts`); ``torch.searchsorted`` / ``torch.bucketize``
count the boundaries below each value (a broadcast compare and a sum over the sequence's whole
dim, whose padded lanes the sum leaves out); ``torch.repeat_interleave`` by a constant is a
broadcast and a merge of whole dims (``tl.reshape``), or a gather of ``i // repeats``;
``Tensor.unfold``'s sliding windows are a gather of ``window * step + k`` into a new last dim.
Shapes must be known when the kernel compiles: a result's length sizes a register tile, so an
argument that would make it depend on data (a tensor of repeats) is an error naming it.
Registered in :mod:`~tilecraft.frontend.lowerings`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import ShapeError, UnsupportedOpError
from tilecraft.frontend.rdims import along
from tilecraft.frontend.regroup import pow2
from tilecraft.frontend.tile_gather import gather, long_line, same_dim
from tilecraft.frontend.tile_shifts import slice_dim
from tilecraft.frontend.views import expand, reshape, unsqueeze
from tilecraft.ir.nodes import Op, Sym, sized_shape_str, tile_block

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue
    from tilecraft.ir.nodes import Node

T = torch.Tensor
# a sorted sequence at least this long is searched by binary lifting, not counted (_binary_search)
SEARCH_LINE = 1024


def outer(t: Tracer, a: Any, b: Any, *, out: Any = None) -> TileValue:
    """``a[:, None] * b[None, :]`` of two 1-D tiles (``torch.ger`` too), in their promoted
    dtype (bools: ``and``)."""
    for name, value in (("input", a), ("vec2", b)):
        rank = t.value_node(value).ndim
        if rank != 1:
            raise UnsupportedOpError(
                f"torch.outer: {name} is a {rank}-D {'tile' if rank else 'scalar'}; it takes "
                "two 1-D tiles (as in torch)",
                t.loc,
                hint="for more dims broadcast yourself: a[..., :, None] * b[..., None, :]",
            )
    return t.pointwise("mul", unsqueeze(t, a, 1), unsqueeze(t, b, 0))


def diff(
    t: Tracer, x: Any, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None
) -> TileValue:
    """``x[..., 1:] - x[..., :-1]`` along a whole static ``dim`` (``!=`` for bools), ``n``
    times: each leaves one element fewer (a register gather of each slice)."""
    if prepend is not None or append is not None:
        raise UnsupportedOpError(
            "torch.diff with prepend= / append= in device code",
            t.loc,
            hint="take the differences inside the tile with torch.diff(x, dim=d), and the "
            "one at the edge yourself: x[..., :1] - before",
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise UnsupportedOpError(f"torch.diff with n={n!r}: n must be an int >= 0", t.loc)
    out = t.wrap(t.value_node(x))
    for _ in range(n):
        out = _diff_once(t, out, dim)
    return out


def _diff_once(t: Tracer, x: TileValue, dim: int) -> TileValue:
    node = x.node
    axis = t._axis(node, dim)
    rewrite = "for t in tc.tile(n - 1): out[t] = x[t.index + 1] - x[t]"
    if _whole_length(t, node, axis, "torch.diff", rewrite) < 2:
        raise UnsupportedOpError(
            f"torch.diff along dim {axis} of {node.ndim}-D tile with one element: the result "
            "would be empty",
            t.loc,
            hint="torch.diff needs a whole dim of at least 2 elements",
        )
    later = slice_dim(t, x, axis, slice(1, None))
    earlier = slice_dim(t, x, axis, slice(None, -1))
    return t.pointwise("ne" if node.dtype == torch.bool else "sub", later, earlier)


def _whole_length(t: Tracer, node: Node, axis: int, op: str, rewrite: str) -> int:
    """The static length of ``node``'s whole dim ``axis``; an error naming ``op`` otherwise."""
    _check_whole(t, node, axis, op, rewrite)
    d = node.shape[axis]
    if isinstance(d, int):
        return d
    if d.extent_args or not isinstance(d.extent, int):
        raise UnsupportedOpError(
            f"{op} along dim {axis}, whose size is known only at run time: the result's "
            "length sizes a register tile",
            t.loc,
            hint="compile for the size: @tc.kernel(static_shapes=True), or tc.specialize(n)",
        )
    return d.extent


def _check_whole(t: Tracer, node: Node, axis: int, op: str, rewrite: str) -> None:
    """An op whose result's length changes along ``axis`` needs the whole dim: a tile loop's
    block holds only part of the line (its neighbours are in the next tile)."""
    d = node.shape[axis]
    if tile_block(d):
        raise UnsupportedOpError(
            f"{op} along dim {axis}, a tile loop's block ({d.name}): its result's length "
            "differs from the block's, and the neighbouring elements lie in other tiles",
            t.loc,
            hint=f"load the dim whole with `:` (x[tm, :]), or tile the output and load each "
            f"element's sources ({rewrite})",
        )


def searchsorted(
    t: Tracer,
    sorted_sequence: Any,
    values: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Any = None,
    out: Any = None,
) -> TileValue:
    """The int64 (``out_int32``: int32) count of the sorted tile's elements below each value
    (``right``: at most it), a broadcast compare and a sum over its whole last dim: ``O(n)``
    per value, for small boundary sets. A 1-D sequence serves every value; an N-D one is
    torch's batched search, its leading dims those of ``values`` (each row of values searches
    its own row: ``cdf[tb, :]`` with ``v[tb, :]``). A NaN value counts every element, as
    torch's search."""
    if sorter is not None:
        raise UnsupportedOpError(
            "torch.searchsorted with sorter= in device code",
            t.loc,
            hint="sort the sequence first (values, _ = torch.sort(seq)) and search the values",
        )
    if side is not None:
        if side not in ("left", "right") or (right and side == "left"):
            raise UnsupportedOpError(
                f"torch.searchsorted with side={side!r}, right={right}", t.loc,
                hint="side='left' or 'right', not contradicting right=",
            )  # fmt: skip
        right = side == "right"
    if t.value_node(sorted_sequence).ndim > 1:
        return _row_count(t, sorted_sequence, values, right, out_int32)
    return _bucket_count(t, sorted_sequence, values, right, out_int32, "torch.searchsorted")


def bucketize(
    t: Tracer,
    values: Any,
    boundaries: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    out: Any = None,
) -> TileValue:
    """``torch.searchsorted(boundaries, values, right=right)``: the bucket of each value among
    the 1-D tile ``boundaries`` (sorted), int64 or ``out_int32``."""
    return _bucket_count(t, boundaries, values, right, out_int32, "torch.bucketize")


def _bucket_count(
    t: Tracer, sequence: Any, values: Any, right: bool, out_int32: bool, op: str
) -> TileValue:
    """How many elements of ``sequence`` lie below each value (``right``: not above it):
    ``!(s >= v)`` (``!(s > v)``) as torch's binary search tests, so a NaN value counts all."""
    seq = t.value_node(sequence)
    if seq.ndim != 1:
        raise UnsupportedOpError(
            f"{op}: the sorted sequence is a {seq.ndim}-D "
            f"{'tile' if seq.ndim else 'scalar'}; it must be one 1-D tile for every value",
            t.loc,
            hint="load one sorted row (seq[:]); for a sequence per row, search each row of "
            "values in its own row: torch.searchsorted(seq[tb, :], v[tb, :])",
        )
    _check_whole(t, seq, 0, op, "load every boundary: b[:]")
    if (searched := _binary_search(t, seq, values, right, out_int32)) is not None:
        return searched
    placed = values if isinstance(values, (bool, int, float)) else unsqueeze(t, values, -1)
    above = t.pointwise("ge" if not right else "gt", t.wrap(seq), placed)
    return _counted(t, above, out_int32)


def _binary_search(
    t: Tracer, seq: Node, values: Any, right: bool, out_int32: bool
) -> TileValue | None:
    """The count of a 1-D tile of values in a long sorted sequence (``SEARCH_LINE`` elements or
    more, a static length) by binary lifting, as torch searches: ``log2(n)`` gathers of one
    element a value, each step moving a value's position forward by a power of two while the
    element before the new position is not above it (``!(s > v)``; ``!(s >= v)`` left). Counting
    compares every value with every element: an inverse-CDF sampler's 64 draws in a 4096-long
    CDF, a [64, 4096] compare and sum a row (0.269 ms on an H100, torch.compile 0.106).
    None where the compare-and-count form is kept (short sequences, values of other ranks)."""
    if isinstance(values, (bool, int, float)):
        return None
    vals = t.value_node(values)
    n = seq.shape[0]
    extent = n if isinstance(n, int) else n.extent if not n.extent_args else None
    if vals.ndim != 1 or not isinstance(extent, int) or extent < SEARCH_LINE:
        return None
    pos = t.full(list(vals.shape), 0, torch.int32)
    step = 1 << (extent.bit_length() - 1)
    while step:
        cand = t.pointwise("add", pos, step)
        at = t.pointwise("minimum", t.pointwise("sub", cand, 1), extent - 1)
        probe = gather(t, t.wrap(seq), 0, at)
        above = t.pointwise("gt" if right else "ge", probe, t.wrap(vals))
        ok = t.pointwise("and", t.pointwise("le", cand, extent), t.pointwise("logical_not", above))
        pos = t.where(ok, cand, pos)
        step //= 2
    return t.to_dtype(pos, torch.int32 if out_int32 else torch.int64)


def _counted(t: Tracer, above: TileValue, out_int32: bool) -> TileValue:
    """The number of boundaries not ``above`` each value (``above``'s last dim), as torch's
    binary search counts them: ``!(s >= v)``, so a NaN value counts them all."""
    count = t.reduce("sum", t.pointwise("logical_not", above), -1)
    return t.to_dtype(count, torch.int32 if out_int32 else torch.int64)


def _row_count(t: Tracer, sequence: Any, values: Any, right: bool, out_int32: bool) -> TileValue:
    """torch's batched search: ``values[..., j]`` counts in ``sequence[..., :]`` of the same
    leading index, ``[..., s, 1]`` against ``[..., 1, n]`` summed over ``n`` (the 1-D form's
    compare, once per row)."""
    seq = t.value_node(sequence)
    vals = _row_values(t, seq, values)
    _check_whole(t, seq, seq.ndim - 1, "torch.searchsorted", "load every boundary: b[tb, :]")
    rows = unsqueeze(t, t.wrap(seq), -2)
    above = t.pointwise("ge" if not right else "gt", rows, unsqueeze(t, t.wrap(vals), -1))
    return _counted(t, above, out_int32)


def _row_values(t: Tracer, seq: Node, values: Any) -> Node:
    """``values`` as a tile whose leading dims are ``seq``'s (the same tile loops' blocks, or
    whole dims of one size): torch refuses any other shape, broadcasting none."""
    vals = t.value_node(values)
    lead, have = seq.shape[:-1], vals.shape[:-1]
    if vals.ndim == seq.ndim and all(same_dim(a, b) for a, b in zip(lead, have, strict=True)):
        return vals
    got = f"a {vals.ndim}-D tile {sized_shape_str(vals.shape)}" if vals.ndim else "a scalar"
    raise ShapeError(
        f"torch.searchsorted: the sorted sequence is a {seq.ndim}-D tile "
        f"{sized_shape_str(seq.shape)}, whose leading dims {sized_shape_str(lead)} must be the "
        f"values' leading dims (torch's batched search: each row of values searches its own "
        f"row), but the values are {got}",
        t.loc,
        hint="index both with the same tiles and whole dims (torch.searchsorted(cdf[tb, :], "
        "v[tb, :]); one value a row: v[:, None]), or search one 1-D sequence for every value "
        "(seq[:])",
    )


def repeat_interleave(
    t: Tracer, x: Any, repeats: Any, dim: Any = None, *, output_size: Any = None
) -> TileValue:
    """``x`` with each element repeated ``repeats`` (a Python int) times along a whole static
    ``dim`` (``None``: of a 1-D tile): a broadcast and a merge of whole dims (``tl.reshape``)
    for a power-of-two ``repeats``, else a gather of ``i // repeats``."""
    node = t.value_node(x)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise UnsupportedOpError(
            f"torch.repeat_interleave with repeats={repeats!r} in device code: repeats must "
            "be a Python int >= 1 (a tile's length is fixed when the kernel compiles)",
            t.loc,
            hint="repeat by a host int (tc.specialize(k) for a size), or index with a "
            "computed position: x[..., idx // k]",
        )
    if dim is None and node.ndim != 1:
        raise UnsupportedOpError(
            f"torch.repeat_interleave without dim= of a {node.ndim}-D tile (it flattens it)",
            t.loc,
            hint="pass dim=",
        )
    axis = t._axis(node, 0 if dim is None else dim)
    rewrite = "for t in tc.tile(n * k): out[t] = x[t.index // k]"
    n = _whole_length(t, node, axis, "torch.repeat_interleave", rewrite)
    if output_size is not None and output_size != n * repeats:
        raise UnsupportedOpError(
            f"torch.repeat_interleave: output_size={output_size!r}, but {n} x {repeats} "
            f"elements is {n * repeats}",
            t.loc,
        )
    if repeats == 1:
        return t.wrap(node)
    if pow2(repeats) and n > 1:  # [.., n, r] merges into [.., n * r] as laid out
        keep = [-1] * node.ndim
        wide = expand(t, unsqueeze(t, x, axis + 1), *keep[: axis + 1], repeats, *keep[axis + 1 :])
        return reshape(t, wide, *node.shape[:axis], n * repeats, *node.shape[axis + 1 :])
    return _gathered_repeat(t, x, axis, n, repeats)


def _gathered_repeat(t: Tracer, x: Any, axis: int, n: int, repeats: int) -> TileValue:
    """Position ``i`` of the result reads ``x``'s ``i // repeats`` along ``axis`` (a new whole
    dim of ``n * repeats``; a dim of size 1 is broadcast)."""
    node = t.value_node(x)
    if n == 1:  # nothing to gather: a broadcast of the one element
        keep = [-1] * node.ndim
        return expand(t, x, *keep[:axis], repeats, *keep[axis + 1 :])
    # the padded lanes past n * repeats read n - 1: tl.gather takes no position past the block
    source = t.pointwise("minimum", t.pointwise("floordiv", t.arange(n * repeats), repeats), n - 1)
    shape = tuple(source.node.shape[0] if i == axis else s for i, s in enumerate(node.shape))
    placed = along(t, source, shape, axis)
    return gather(t, x, axis, placed, reread=long_line(node.shape, axis))


def unfold(t: Tracer, x: Any, dimension: int, size: int, step: int) -> TileValue:
    """``x.unfold(dim, size, step)``: windows of ``size`` every ``step`` along a whole static
    ``dim``, which becomes ``(n - size) // step + 1`` windows, each in a new last dim of
    ``size`` (a register gather of ``window * step + k``)."""
    node = t.value_node(x)
    for name, value in (("size", size), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UnsupportedOpError(
                f"Tensor.unfold with {name}={value!r}: {name} must be a Python int >= 1 "
                "(a tile's length is fixed when the kernel compiles)",
                t.loc,
                hint="unfold by host ints (tc.specialize(k) for a size)",
            )
    if node.ndim == 0:
        raise UnsupportedOpError("Tensor.unfold of a scalar: it needs a dim to slide along", t.loc)
    axis = t._axis(node, dimension)
    rewrite = "for t in tc.tile(windows): out[t, :] = x[t.index[:, None] * step + k[None, :]]"
    n = _whole_length(t, node, axis, "Tensor.unfold", rewrite)
    if size > n:
        raise UnsupportedOpError(
            f"Tensor.unfold: size={size} is larger than dim {axis}'s {n} elements (as torch says)",
            t.loc,
        )
    last = unsqueeze(t, x, -1)
    if n == 1:  # one window of one element
        return last
    if size == 1 and n <= step:  # one window of one element: the first
        return slice_dim(t, last, axis, slice(0, 1))
    return _windows(t, last.node, axis, n, size, step)


def _windows(t: Tracer, src: Node, axis: int, n: int, size: int, step: int) -> TileValue:
    """``src`` (``x`` with a new last dim of 1) read at ``w * step + k`` along ``axis`` into
    ``[..., windows, ..., size]``; padded lanes read position ``n - 1``."""
    others = [d for i, d in enumerate(src.shape) if i != axis and isinstance(d, Sym)]
    windows = t.size_dim((n - size) // step + 1, others)
    width = t.size_dim(size, others + ([windows] if isinstance(windows, Sym) else []))
    keep = [-1] * (src.ndim - 1)
    wide = expand(t, t.wrap(src), *keep, width) if isinstance(width, Sym) else t.wrap(src)
    shape = tuple(windows if i == axis else d for i, d in enumerate(wide.node.shape))
    start: Any = 0
    if isinstance(windows, Sym):
        begins = t.pointwise("mul", t.tile_leaf(windows, Op.TILE_INDEX), step)
        start = along(t, begins, shape, axis)
    position = start
    if isinstance(width, Sym):
        offsets = along(t, t.tile_leaf(width, Op.TILE_INDEX), shape, len(shape) - 1)
        position = t.pointwise("add", offsets, start)
    return gather(t, wide, axis, position, reread=long_line(src.shape, axis), bound=n)


LOWERINGS: list[tuple[tuple[Any, ...], Any]] = [
    ((torch.outer, T.outer, torch.ger, T.ger), outer),
    ((torch.diff, T.diff), diff),
    ((torch.searchsorted,), searchsorted),
    ((torch.bucketize,), bucketize),
    ((torch.repeat_interleave, T.repeat_interleave), repeat_interleave),
    ((T.unfold,), unfold),
]

"""Slices and pads of register tiles (stage: frontend; in: ``tile[..., a:b:s]`` and
``torch.nn.functional.pad`` of a traced tile along whole static dims; out: ``GATHER`` nodes).

Torch code shifts a vector with slices and pads: ``F.pad(alpha[:-1], (1, 0), value=-inf)`` is
``alpha`` moved one place right with ``-inf`` in front. Device code keeps a tile in registers,
so each becomes a register gather (:mod:`tilecraft.frontend.tile_gather`): a slice reads
``start + i * step`` into a whole dim of the slice's length; a pad reads ``i - left`` where that
lies inside and takes ``value`` elsewhere (a pad of negative widths is the slice it crops).
Indices of a padded tile's lanes past the end are clamped into the source, so no lane reads
outside it (their values are never used). Two slices need no gather: one element is a size-1
dim picked by a masked max (``tile_gather.pick_position``), and an aligned power-of-two block of
a power-of-two dim (rotary's halves) is a reshape into dims of 2 and ``tl.split``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError
from tilecraft.frontend.gather_loads import rereadable
from tilecraft.frontend.rdims import along
from tilecraft.frontend.regroup import pow2, regroup
from tilecraft.frontend.tile_gather import (
    clamp_positions,
    gather,
    long_line,
    pick_position,
    static_whole,
)
from tilecraft.frontend.views import permute, split
from tilecraft.ir.nodes import Sym

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue
    from tilecraft.ir.nodes import Node


def slice_dim(t: Tracer, x: TileValue, axis: int, part: slice) -> TileValue:
    """``x`` sliced by ``part`` (Python ints) along its whole dim ``axis``."""
    src = x.node
    n = static_whole(t, src, axis, "slicing a tile")
    if part.step is not None and part.step <= 0:  # torch refuses them too
        raise DeviceCodeError(
            f"slicing a tile with step {part.step}: steps must be positive (as in torch)",
            t.loc,
            hint="torch.flip(x, [dim]) reverses a whole dim",
        )
    start, stop, step = part.indices(n)
    length = len(range(start, stop, step))
    if length == n and step == 1:
        return x
    if length == 0:
        raise DeviceCodeError(f"slicing a tile's dim of {n} with {part} leaves no elements", t.loc)
    if length == 1 and isinstance(src.shape[axis], Sym):  # one element: a size-1 dim
        if not long_line(src.shape, axis):
            return pick_position(t, src, axis, start)
        # of a long line, a loaded tile is read there and a computed one recomputed there
        # where it can be (else picked: tile_gather.gather); the pick, a max over the line,
        # kept a whole loop over a 16000-sample row for its x[:, :1]
        return gathered(t, x, axis, t.full([1], start, torch.int32), n)
    # a loaded tile's long line is re-read from memory instead (tile_gather.long_line)
    reread = long_line(src.shape, axis) and rereadable(t, src)
    if step == 1 and _aligned_block(src, n, start, length) and not reread:
        return _block_of(t, x, axis, n, n // length, start // length)
    wanted = t.pointwise("add", t.pointwise("mul", t.arange(length), step), start)
    return gathered(t, x, axis, wanted, n)


def _aligned_block(src: Node, n: int, start: int, length: int) -> bool:
    """Whether ``[start, start + length)`` is one of the equal power-of-two blocks a dim of
    ``n`` (a power of two) splits into, in a tile without size-1 dims (which regroup drops)."""
    return (
        pow2(n) and pow2(length) and 1 < length < n and start % length == 0
        and all(d != 1 for d in src.shape)
    )  # fmt: skip


def _block_of(t: Tracer, x: TileValue, axis: int, n: int, count: int, k: int) -> TileValue:
    """Block ``k`` of ``count`` equal blocks of ``x``'s dim ``axis``: the dim reshaped into
    ``log2(count)`` dims of 2 and the block's length, and each dim of 2 moved last and split
    (``tl.reshape`` / ``tl.permute`` / ``tl.split``: a layout change, where a register gather
    moves every element through warp shuffles: a rotary embedding's halves of a normalized
    [8, 8, 128] head tile took 320 ``shfl.sync.idx`` a thread, sm_90)."""
    node = x.node
    bits = count.bit_length() - 1
    length = n // count
    target = [*node.shape[:axis], *[2] * bits, length, *node.shape[axis + 1 :]]
    out = regroup(t, node, target, "a block of a tile")
    for bit in range(bits - 1, -1, -1):  # the most significant remaining dim of 2 sits at axis
        rank = out.node.ndim
        moved = permute(t, out, [*range(axis), *range(axis + 1, rank), axis])
        out = split(t, moved)[(k >> bit) & 1]
    return out


def pad(t: Tracer, x: Any, widths: Any, mode: str = "constant", value: Any = None) -> TileValue:
    """``F.pad(x, (left, right, ...), mode, value=v)`` of a tile: the last dims grown (or cut,
    for negative widths) by ``value`` (0 by default) on either side; ``replicate`` repeats the
    edge elements, ``reflect`` mirrors about them and ``circular`` wraps around (each a
    register gather of the positions torch reads)."""
    if mode not in ("constant", *_EDGE_POSITIONS):
        raise DeviceCodeError(
            f"F.pad of a tile with mode='{mode}'",
            t.loc,
            hint="modes: 'constant', 'replicate', 'reflect', 'circular'",
        )
    pairs = list(widths)
    node = t.value_node(x)
    if len(pairs) % 2 or len(pairs) // 2 > node.ndim:
        raise DeviceCodeError(f"F.pad: {pairs} for a {node.ndim}-D tile", t.loc)
    out = t.wrap(node)
    for k in range(len(pairs) // 2):
        axis, left, right = node.ndim - 1 - k, int(pairs[2 * k]), int(pairs[2 * k + 1])
        if mode == "constant":
            out = _pad_dim(t, out, axis, left, right, value)
        else:
            out = _pad_edges(t, out, axis, left, right, mode)
    return out


def _reflected(t: Tracer, p: TileValue, n: int) -> TileValue:
    """Positions ``p`` in ``(-n, 2n - 1)`` mirrored about the ends (``-1`` reads 1)."""
    below = t.where(t.pointwise("lt", p, 0), t.pointwise("neg", p), p)
    past = t.pointwise("sub", 2 * (n - 1), below)
    return t.where(t.pointwise("gt", below, n - 1), past, below)


_EDGE_POSITIONS = {
    "replicate": clamp_positions,
    "reflect": _reflected,
    "circular": lambda t, p, n: t.pointwise("mod_int", t.pointwise("add", p, n), n),
}


def _pad_edges(t: Tracer, x: TileValue, axis: int, left: int, right: int, mode: str) -> TileValue:
    n = static_whole(t, x.node, axis, "F.pad")
    widest = n - 1 if mode == "reflect" else n  # torch's limits: reflect < n, circular <= n
    if min(left, right) < 0 or (mode != "replicate" and max(left, right) > widest):
        limit = "" if mode == "replicate" else f", at most {widest} for a dim of {n}"
        raise DeviceCodeError(
            f"F.pad with mode='{mode}': widths ({left}, {right}) must be >= 0{limit}", t.loc
        )
    if (left, right) == (0, 0):
        return x
    wanted = t.pointwise("sub", t.arange(n + left + right), left)
    return gathered(t, x, axis, _EDGE_POSITIONS[mode](t, wanted, n), n)


def _pad_dim(t: Tracer, x: TileValue, axis: int, left: int, right: int, value: Any) -> TileValue:
    n = static_whole(t, x.node, axis, "F.pad")
    length = n + left + right
    if length <= 0:
        raise DeviceCodeError(f"F.pad: ({left}, {right}) leaves no elements of {n}", t.loc)
    if (left, right) == (0, 0):
        return x
    if left <= 0 and right <= 0:  # a crop: the slice it is
        return slice_dim(t, x, axis, slice(-left, n + right))
    wanted = t.pointwise("sub", t.arange(length), left)
    inside = t.pointwise("bitwise_and", t.pointwise("ge", wanted, 0), t.pointwise("lt", wanted, n))
    taken = gathered(t, x, axis, wanted, n)
    fill = 0 if value is None else value
    return t.where(along(t, inside, taken.node.shape, axis, broadcast=False), taken, fill)


def gathered(t: Tracer, x: TileValue, axis: int, wanted: TileValue, n: int) -> TileValue:
    """``x`` read at the positions ``wanted`` (1-D, a new whole dim) along ``axis``; lanes
    whose position lies outside ``[0, n)`` are never used (a pad's, a piece's elsewhere):
    a register gather reads them clamped, a load masks them (``tile_gather.gather``'s
    ``bound``)."""
    shape = tuple(wanted.node.shape[0] if i == axis else d for i, d in enumerate(x.node.shape))
    placed = along(t, wanted, shape, axis)
    reread = long_line(x.node.shape, axis) or long_line(shape, axis)
    return gather(t, x, axis, placed, reread=reread, bound=n)

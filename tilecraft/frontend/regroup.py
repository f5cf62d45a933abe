"""Reshapes that merge or split whole dims, and ``torch.cat`` of two tiles (stage: frontend; in: a
tile and the wanted shape; out: ``VIEW`` nodes with ``reshape`` set, emitted as ``tl.reshape``).

A tile's dims are padded to powers of two in registers, so ``tl.reshape`` keeps the meaning of a
merge ``[b, c] -> [b * c]`` only when every dim after the first of the group is exactly a power of
two (then the padded block ``[P(b), c]`` is the padded block ``[P(b * c)]``, valid elements first,
and ``i * c + j < b * c`` exactly when ``i < b``); a split is the same in reverse. Only whole
dims of static extent (``:`` slices, ``tc.zeros([.., 128])``) regroup: a tile dim's block changes
with the config, so merging it would need a dim tilecraft cannot name. ``torch.cat([a, b], d)``
is ``tl.join`` (a new last dim of 2), a permute that puts it before ``d``, and a merge of the two.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tilecraft.errors import UnsupportedOpError
from tilecraft.ir.nodes import Dim, Node, Op, Sym, SymKind

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue

_HINT = (
    "whole dims of static size regroup when every dim after the first of a merged group is a "
    "power of two; tile dims keep their place. Otherwise store the parts with sliced indices "
    "(out[t, :half] = a; out[t, half:] = b)"
)


def _static(d: Dim) -> int | None:
    """The extent of a dim that may regroup (a whole static extent), else None."""
    if isinstance(d, int):
        return d
    if d.kind is SymKind.RDIM and not d.extent_args:
        return int(d.extent)
    return None


def _same(have: Dim, want: Any) -> bool:
    """A whole static dim asked for by its size keeps its sym."""
    return isinstance(want, int) and not isinstance(have, int) and _static(have) == want


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _take_group(src: list[Dim], target: list[Any], i: int, j: int) -> tuple[int, int] | None:
    """Ends of the smallest groups ``src[i:a]`` / ``target[j:b]`` of equal static size."""
    a, b = i + 1, j + 1
    sizes_s, sizes_t = _static(src[i]), target[j]
    if sizes_s is None or not isinstance(sizes_t, int):
        return None
    ps, pt = sizes_s, sizes_t
    while ps != pt:
        if ps < pt and a < len(src) and (s := _static(src[a])) is not None:
            ps, a = ps * s, a + 1
        elif pt < ps and b < len(target) and isinstance(target[b], int):
            pt, b = pt * target[b], b + 1
        else:
            return None
    ok_src = all(_pow2(_static(d) or 0) for d in src[i + 1 : a])
    ok_dst = all(_pow2(int(d)) for d in target[j + 1 : b])
    return (a, b) if ok_src and ok_dst else None


def regroup(t: Tracer, node: Node, target: list[Any], what: str) -> TileValue:
    """``node`` (no size-1 dims) reshaped to ``target`` (syms and ints > 1, no -1)."""
    src = list(node.shape)
    out: list[Dim] = []
    used: list[Sym] = []
    i = j = 0
    while i < len(src) or j < len(target):
        if i < len(src) and j < len(target) and (src[i] is target[j] or _same(src[i], target[j])):
            out.append(src[i])
            i, j = i + 1, j + 1
            continue
        ends = _take_group(src, target, i, j) if i < len(src) and j < len(target) else None
        if ends is None:
            raise UnsupportedOpError(
                f"{what}: a tile {list(node.shape)} cannot become {target}", t.loc, hint=_HINT
            )
        for d in target[j : ends[1]]:
            dim = t.size_dim(d, used)
            if isinstance(dim, Sym):
                used.append(dim)
            out.append(dim)
        i, j = ends
    return t.wrap(t.emit(Op.VIEW, [node], tuple(out), node.dtype, reshape=True))


def resolve_minus_one(node: Node, target: list[Any]) -> list[Any]:
    """``-1`` in a reshape's target: what the static dims leave (tile dims match tile dims)."""
    if sum(1 for d in target if isinstance(d, int) and d == -1) != 1:
        return target
    have = math.prod(s for d in node.shape if (s := _static(d)) is not None)
    known = math.prod(d for d in target if isinstance(d, int) and d != -1)
    rest = have // known if known and have % known == 0 else -1
    return [rest if isinstance(d, int) and d == -1 else d for d in target]


def cat(t: Tracer, tensors: Any, dim: int = 0) -> TileValue:
    """Two tiles of one shape along a whole dim whose size is a power of two (or 1)."""
    from tilecraft.frontend import views

    if not isinstance(tensors, (list, tuple)) or len(tensors) != 2:
        raise UnsupportedOpError(
            "torch.cat of other than two tiles", t.loc, hint="concatenate pairwise, or " + _HINT
        )
    a, b = (t.value_node(x) for x in tensors)
    axis = t._axis(a, dim)
    size = _static(a.shape[axis])
    if a.shape != b.shape or size is None or not _pow2(size):
        raise UnsupportedOpError(
            f"torch.cat of tiles {list(a.shape)} and {list(b.shape)} along dim {axis}",
            t.loc,
            hint="both tiles need one shape, and the dim must be a whole dim whose size is a "
            "power of two; otherwise store the parts with sliced indices "
            "(out[t, :half] = a; out[t, half:] = b)",
        )
    joined = views.join(t, t.wrap(a), t.wrap(b)).node  # [..., 2]: a at 0, b at 1
    rank = joined.ndim
    perm = [*range(axis), rank - 1, *range(axis, rank - 1)]  # [..., 2, n, ...]
    moved = views.permute(t, t.wrap(joined), perm).node
    wanted = [*a.shape[:axis], 2 * size, *a.shape[axis + 1 :]]
    shape: list[Dim] = []
    used = [d for d in wanted if isinstance(d, Sym)]
    for d in wanted:
        shape.append(d if not isinstance(d, int) else t.size_dim(d, used))
    return t.wrap(t.emit(Op.VIEW, [moved], tuple(shape), moved.dtype, reshape=True))

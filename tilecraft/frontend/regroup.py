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
from tilecraft.frontend import rdims
from tilecraft.ir.nodes import Dim, Node, Op, Sym, SymKind

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue

_HINT = (
    "whole dims of static size regroup when every dim after the first of a merged group is a "
    "power of two; tile dims keep their place. Otherwise view the host tensor before the loop "
    "(xv = x.view(m, n // g, g), then xv[tm, :, :]; an output likewise: out.view(...)), or "
    "store the parts with sliced indices (out[t, :half] = a; out[t, half:] = b)"
)


def static_size(d: Dim) -> int | None:
    """The extent of a dim that may regroup (a whole static extent), else None."""
    if isinstance(d, int):
        return d
    if d.kind is SymKind.RDIM and not d.extent_args:
        return int(d.extent)
    return None


def _same(have: Dim, want: Any) -> bool:
    """A whole static dim asked for by its size keeps its sym."""
    return isinstance(want, int) and not isinstance(have, int) and static_size(have) == want


def pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _take_group(src: list[Dim], target: list[Any], i: int, j: int) -> tuple[int, int] | None:
    """Ends of the smallest groups ``src[i:a]`` / ``target[j:b]`` of equal static size."""
    a, b = i + 1, j + 1
    sizes_s, sizes_t = static_size(src[i]), target[j]
    if sizes_s is None or not isinstance(sizes_t, int):
        return None
    ps, pt = sizes_s, sizes_t
    while ps != pt:
        if ps < pt and a < len(src) and (s := static_size(src[a])) is not None:
            ps, a = ps * s, a + 1
        elif pt < ps and b < len(target) and isinstance(target[b], int):
            pt, b = pt * target[b], b + 1
        else:
            return None
    ok_src = all(pow2(static_size(d) or 0) for d in src[i + 1 : a])
    ok_dst = all(pow2(int(d)) for d in target[j + 1 : b])
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
            dynamic = any(isinstance(d, Sym) and d.extent_args for d in src)
            raise UnsupportedOpError(
                f"{what}: a tile {list(node.shape)} cannot become {target}",
                t.loc,
                hint="with static_shapes=False whole dims have run-time sizes, which cannot "
                "regroup: compile this kernel with static_shapes=True. " + _HINT
                if dynamic
                else _HINT,
            )
        for d in target[j : ends[1]]:
            dim = t.size_dim(d, used)
            if isinstance(dim, Sym):
                used.append(dim)
            out.append(dim)
        i, j = ends
    # a new dim named like a kept one of its extent ([B, 4, 16] viewed [B, 4, 4, 4]: the split's
    # first 4 and the kept 4) takes the next free whole dim: names in a tile stay distinct
    shape = rdims.distinct(t, tuple(out))
    return t.wrap(t.emit(Op.VIEW, [node], shape, node.dtype, reshape=True))


def resolve_minus_one(node: Node, target: list[Any]) -> list[Any]:
    """``-1`` in a reshape's target: the one tile dim the target leaves unnamed when the static
    dims match exactly (``[T, 32, 2] -> (-1, 64)``), else what the static dims leave."""
    if sum(1 for d in target if isinstance(d, int) and d == -1) != 1:
        return target
    have = math.prod(s for d in node.shape if (s := static_size(d)) is not None)
    # the target's whole static dims count whether named by size or by sym (flatten(2) of
    # [T, 3, 4, 2] names the 3 by its sym: -1 is 8, not 24)
    known = math.prod(
        d if isinstance(d, int) else (static_size(d) or 1)
        for d in target
        if not (isinstance(d, int) and d == -1)
    )
    unnamed = [d for d in node.shape if static_size(d) is None and not any(d is w for w in target)]
    rest: Any = -1
    if len(unnamed) == 1 and have == known:
        rest = unnamed[0]
    elif not unnamed and known and have % known == 0:
        rest = have // known
    return [rest if isinstance(d, int) and d == -1 else d for d in target]

"""Loops split at a diagonal (stage: codegen; in: a tile ``LOOP`` node whose body selects with a
comparison of its own indices against an enclosing tile's; out: the loop's two ranges and, for
the part where the comparison is the same in every lane, the fact that decides it).

Causal attention compares each key with each query, ``torch.where(tm.index[:, None] >=
tn.index[None, :], s, -inf)``, in every block of its key loop; yet only the blocks that cross
the diagonal mix kept and dropped scores. Below it (every key before the query block's first
row) the select keeps everything. The loop runs in two: blocks wholly below the query tile,
where :mod:`~tilecraft.codegen.known` folds the comparison and the select to its kept operand,
then the rest, as written. A loop that starts at the enclosing tile's begin (an attention
backward's query loop from the key block on) splits the other way: the blocks wholly past the
enclosing tile come second. (H200, edits of the generated code measured before this was built:
causal attention 2x32x4096x128 0.80 -> 0.763 ms, 8x16x2048x64 0.311 -> 0.297; a triangular
matmul whose select only feeds a dot operand 0.149 -> 0.155, so such loops stay whole;
``benchmarks/results/peel_s17.md``.)
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tilecraft.codegen.known import known_order, known_value
from tilecraft.config.space import outer_tile
from tilecraft.ir.nodes import Node, Op, Sym, walk
from tilecraft.ir.tile_order import compared_tiles

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext, SymState


@dataclasses.dataclass(frozen=True)
class Diagonal:
    """Where a loop over ``inner`` splits: ``first_below`` — its first part holds the blocks
    wholly below the ``outer`` tile (a loop from 0 up to the outer tile's end); otherwise its
    second part holds the blocks wholly past it (a loop from the outer tile's begin on)."""

    inner: Sym
    outer: Sym
    first_below: bool


def find_diagonal(ctx: EmitContext, loop: Node) -> Diagonal | None:
    """The diagonal ``loop`` splits at, or None: no select compares its indices with an
    enclosing tile's, or every such select only feeds dot operands, or the loop is one a split
    would break (warp-specialized: Triton 3.6 specializes one loop per kernel)."""
    inner: Sym = loop.attrs["sym"]
    if (
        not ctx.plan.config.diagonal_splits
        or inner.scalar
        or ctx.plan.range(loop.attrs.get("range_slot", -1)).warp_specialize
    ):
        return None
    if any(ctx.homes.homed(c) for c in loop.attrs.get("carried", [])):
        return None
    nodes = list(walk(loop.body or []))
    consumers: dict[int, list[Node]] = {}
    for node in nodes:
        for i in node.inputs:
            consumers.setdefault(i.id, []).append(node)
    for node in nodes:
        pair = compared_tiles(node.inputs[0]) if node.op is Op.WHERE else None
        if (
            pair is None
            or inner not in pair
            or all(c.op is Op.DOT for c in consumers.get(node.id, []))
        ):
            continue
        (outer,) = [s for s in pair if s is not inner] or [inner]
        if outer is inner or outer.scalar or id(outer) not in ctx.syms:
            continue
        first_below = outer_tile(inner.begin) is not outer
        if not first_below and outer_tile(inner.extent) is outer:
            continue  # [outer.begin, outer.end): every block is on the diagonal
        if not first_below and ctx.state(outer).mask is not None:
            continue  # past the tile's masked lanes (beyond its extent) the order is unknown
        diagonal = Diagonal(inner, outer, first_below)
        with ordered(ctx, diagonal, 0 if first_below else 1):
            if known_value(ctx, node.inputs[0], {}) is not None:
                return diagonal  # (``k - q < window``: the order alone does not decide it)
    return None


def split_point(ctx: EmitContext, diagonal: Diagonal, st: SymState) -> str:
    """The first offset of the loop's second part: below the outer tile, the last block start
    at or before its offset; past it, the first block start at or after its end (clamped to
    the loop's range)."""
    outer = ctx.state(diagonal.outer)
    begin, block = st.begin, st.block
    if diagonal.first_below and begin == "0":
        return f"tl.minimum({outer.offset} // {block} * {block}, {st.end})"
    if diagonal.first_below:
        whole = f"tl.maximum({outer.offset} - ({begin}), 0) // {block} * {block}"
    else:
        past = f"{outer.offset} + {outer.block} - ({begin})"
        whole = f"tl.cdiv(tl.maximum({past}, 0), {block}) * {block}"
    return f"tl.minimum({begin} + {whole}, {st.end})"


@contextlib.contextmanager
def ordered(ctx: EmitContext, diagonal: Diagonal, part: int) -> Iterator[None]:
    """While ``part`` (0 or 1) of the split loop is emitted: where that part is the one wholly
    off the diagonal, the order of the two tiles' indices (``ctx.ordered``: every index of the
    first tile below every index of the second)."""
    if part != (0 if diagonal.first_below else 1):
        yield
        return
    lower, upper = (
        (diagonal.inner, diagonal.outer)
        if diagonal.first_below
        else (diagonal.outer, diagonal.inner)
    )
    with known_order(ctx, lower, upper):
        yield


__all__ = ["Diagonal", "find_diagonal", "ordered", "split_point"]

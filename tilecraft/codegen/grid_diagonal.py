"""Programs on either side of a diagonal (stage: codegen; in: a device loop whose straight-line
body compares two of its grid tiles' indices; out: the body emitted under an ``if`` on the
program's offsets, once for each side where the comparison is the same in every lane, once as
written for the programs that cross it).

A causal fill ``tc.store(s, [tp, ti, tj], -inf, extra_mask=tj.index[None, :] >
ti.index[:, None])``, a ``torch.tril`` or a select between two grid tiles masks every lane by a
comparison Triton cannot prove constant along a row: its stores (and loads) stay one element a
thread, where an unmasked one is a 16-byte vector. Yet only the programs whose tiles cross the
diagonal mix both outcomes. A program whose first tile lies wholly below the second
(``offset_a + BLOCK_a <= offset_b``) emits the body with that order known, so
:mod:`~tilecraft.codegen.known` folds the comparison, its selects and masks to constants; the
other side likewise; the rest run the body as written. (H200, the causal fill of [4, 16,
2048, 2048] bf16 scores: measured in ``benchmarks/results/grid_diagonal_s29.md``.) Loops split
at a diagonal inside a program are :mod:`~tilecraft.codegen.diagonal`'s.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from tilecraft.codegen.known import known_order, known_value
from tilecraft.codegen.schedule import emit_block
from tilecraft.ir.nodes import Node, Op, Sym, walk
from tilecraft.ir.tile_order import compared_tiles

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext

_BRANCHING = (Op.LOOP, Op.WHILE, Op.IF)


def grid_diagonal(ctx: EmitContext) -> tuple[Sym, Sym] | None:
    """Two grid tiles of the loop that some comparison in its body orders, where knowing their
    order decides it, or None (also for a body with loops or branches of its own, or a split
    loop's kernels: their code after the body is not emitted per side)."""
    loop = ctx.loop
    nodes = list(walk(loop.body))
    if ctx.split is not None or any(n.op in _BRANCHING for n in nodes):
        return None
    grid = {id(s) for s in loop.grid_syms}
    for node in nodes:
        pair = compared_tiles(node)
        if pair is None:
            continue
        a, b = pair
        if a is b or id(a) not in grid or id(b) not in grid or a.scalar or b.scalar:
            continue
        with known_order(ctx, a, b):
            if known_value(ctx, node, {}) is not None:
                return a, b
    return None


def emit_grid_body(ctx: EmitContext, body: list[Node]) -> None:
    """The grid loop's body: as written, or per side of a diagonal (the module docstring)."""
    pair = grid_diagonal(ctx)
    if pair is None:
        emit_block(ctx, body)
        return
    a, b = pair
    sides: list[tuple[str, tuple[Sym, Sym] | None]] = [
        (f"if {_below(ctx, a, b)}:", (a, b)),
        (f"elif {_below(ctx, b, a)}:", (b, a)),
        ("else:", None),
    ]
    for header, order in sides:
        ctx.w.line(header)
        with ctx.w.indented(), _ordered(ctx, order):
            ctx.scopes.append({})
            emit_block(ctx, body)
            ctx.w.line("pass")  # a side whose stores all fold away may have nothing else
            ctx.scopes.pop()


def _below(ctx: EmitContext, lower: Sym, upper: Sym) -> str:
    """Whether every index of this program's ``lower`` tile is below every one of ``upper``'s
    (masked lanes past the extent included: their indices are still the block's)."""
    lo, up = ctx.state(lower), ctx.state(upper)
    return f"{lo.offset} + {lo.block} <= {up.offset}"


def _ordered(
    ctx: EmitContext, order: tuple[Sym, Sym] | None
) -> contextlib.AbstractContextManager[None]:
    """While emitting one side: ``order``'s first tile wholly below its second."""
    return contextlib.nullcontext() if order is None else known_order(ctx, *order)


__all__ = ["emit_grid_body", "grid_diagonal"]

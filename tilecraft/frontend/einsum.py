"""``torch.einsum`` on tiles (stage: frontend; in: the equation and its operand tiles; out: the
views, sums and ``tl.dot`` of :mod:`~tilecraft.frontend.dots` it stands for).

The forms kernels write: one operand permuted and summed (``"ij->ji"``, ``"bij->bi"``), and two
operands contracted over one index, each with one free index and at most one batch index shared
with the output (``"md,nd->mn"``, ``"bhd,bkd->bhk"``, ``"mk,kn->mn"``): a ``tl.dot``. Indices in
one operand only and not in the output are summed first. Any other pair of operands is what
einsum means by definition, a broadcast product summed over the indices the output lacks
(``"ij,j->i"``, ``"bi,bi->b"``, ``"i,j->ij"``): no ``tl.dot`` fits a mat-vec or a row-wise dot,
and the product costs one tile of every index. Anything else (three operands, ``...``, an index
repeated within an operand) is an error naming the equation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilecraft.errors import UnsupportedOpError
from tilecraft.frontend import dots, views
from tilecraft.frontend.product_sums import product_sum
from tilecraft.ir.nodes import Sym, SymKind

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


def einsum(t: Tracer, equation: str, *operands: Any) -> Any:
    """``torch.einsum`` of one operand (a permutation, sums) or two, with explicit output
    subscripts: contracted over one index, a matmul (``tl.dot``); any other pair (a mat-vec
    ``"ij,j->i"``, a row-wise dot ``"bi,bi->b"``, an outer product ``"i,j->ij"``, or a
    contracted dim too short for ``tl.dot``) an elementwise product summed over the indices
    not in the output."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    inputs, out = _parse(t, equation, operands)
    tiles = [_sum_private(t, x, i, inputs, out) for i, x in enumerate(operands)]
    if len(tiles) == 1:
        x, subs = tiles[0]
        return views.permute(t, x, [subs.index(c) for c in out])
    (a, sa), (b, sb) = tiles
    contracted = [c for c in sa if c in sb and c not in out]
    batch = [c for c in sa if c in sb and c in out]
    free_a, free_b = [c for c in sa if c not in sb], [c for c in sb if c not in sa]
    if len(contracted) != 1 or len(batch) > 1 or len(free_a) != 1 or len(free_b) != 1:
        # not one matmul (a mat-vec, a row-wise dot, an outer product): no tl.dot to use
        return product_sum(t, (a, sa), (b, sb), out)
    (k,) = contracted
    if _below_dot(t, a, sa.index(k)):
        return product_sum(t, (a, sa), (b, sb), out)
    a = views.permute(t, a, [sa.index(c) for c in (*batch, free_a[0], k)])
    b = views.permute(t, b, [sb.index(c) for c in (*batch, k, free_b[0])])
    product = dots.matmul(t, a, b, op="torch.einsum")
    order = [*batch, free_a[0], free_b[0]]
    return views.permute(t, product, [order.index(c) for c in out])


def _below_dot(t: Tracer, x: Any, axis: int) -> bool:
    """Whether the contracted dim is a whole static one too short for ``tl.dot`` (padded to
    a power of two, under ``dots.min_k``: ``"ij,jk->ik"`` with a j of 4), whose product and
    sum is the einsum still."""
    node = t.value_node(x)
    d = node.shape[axis]
    if isinstance(d, Sym) and (d.kind is not SymKind.RDIM or d.extent_args):
        return False  # a tile's block, or a size known at run time: the dot decides
    n = d if isinstance(d, int) else int(d.extent)
    return 1 << max(n - 1, 0).bit_length() < dots.min_k(node.dtype)


def _parse(t: Tracer, equation: str, operands: tuple[Any, ...]) -> tuple[list[str], str]:
    eq = equation.replace(" ", "")
    if "->" not in eq or "." in eq:
        raise _unsupported(equation, "explicit output subscripts and no '...'")
    lhs, out = eq.split("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise _unsupported(equation, f"{len(inputs)} operands named, {len(operands)} given")
    if len(inputs) > 2:
        raise _unsupported(equation, "one or two operands")
    for subs, x in zip(inputs, operands, strict=True):
        if len(set(subs)) != len(subs) or t.value_node(x).ndim != len(subs):
            raise _unsupported(equation, "one subscript per dim of each operand, none repeated")
    if len(set(out)) != len(out) or any(c not in lhs for c in out):
        raise _unsupported(equation, "output subscripts that appear among the operands', once")
    return inputs, out


def _sum_private(t: Tracer, x: Any, k: int, inputs: list[str], out: str) -> tuple[Any, str]:
    """Operand ``k`` summed over its indices that no other operand and not the output has."""
    subs = inputs[k]
    others = "".join(s for j, s in enumerate(inputs) if j != k) + out
    private = [i for i, c in enumerate(subs) if c not in others]
    if not private:
        return x, subs
    kept = "".join(c for i, c in enumerate(subs) if i not in private)
    return t.reduce("sum", x, private, False), kept


def _unsupported(equation: str, what: str) -> UnsupportedOpError:
    return UnsupportedOpError(
        f"torch.einsum({equation!r}) in device code: supported are {what}",
        hint="write it with permute / torch.sum / @ on tiles",
    )

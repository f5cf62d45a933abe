"""Contractions as a broadcast product summed (stage: frontend; in: two operand tiles with
einsum subscripts; out: the elementwise product of the operands placed index by index, summed
over the indices the output lacks).

What einsum means by definition, and what tilecraft computes where no ``tl.dot`` fits: a
mat-vec ``"ij,j->i"``, a row-wise dot ``"bi,bi->b"``, a contraction too short for ``tl.dot`` (a
4x4 Kalman covariance), more than one batch dim (``c @ blk @ c.T`` over a 4-D tile of 8x8
blocks). Used by :mod:`~tilecraft.frontend.einsum` and by ``@`` (:mod:`~tilecraft.frontend.dots`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilecraft.frontend import views
from tilecraft.ir import dtypes

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


def product_sum(t: Tracer, a: tuple[Any, str], b: tuple[Any, str], out: str) -> Any:
    """Two operands placed on every index of the equation (output indices first), multiplied
    elementwise and summed over the rest, in fp32 for half precision and rounded once to the
    operands' promoted dtype (as torch's matmul-based einsum accumulates)."""
    order = out + "".join(c for c in dict.fromkeys(a[1] + b[1]) if c not in out)
    dtype = dtypes.promote(t.dtype_of(a[0]), t.dtype_of(b[0]))
    compute = dtypes.compute_dtype(dtype) if dtype.is_floating_point else dtype
    wa, wb = (t.to_dtype(_placed(t, x, subs, order), compute) for x, subs in (a, b))
    product = t.pointwise("mul", wa, wb)
    summed = list(range(len(out), len(order)))
    return t.to_dtype(t.reduce("sum", product, summed) if summed else product, dtype)


def _placed(t: Tracer, x: Any, subs: str, order: str) -> Any:
    """``x`` (indexed by ``subs``) permuted into ``order``'s sequence, a size-1 dim for each
    index of ``order`` it lacks, so that the two operands broadcast index by index."""
    kept = sorted(range(len(subs)), key=lambda i: order.index(subs[i]))
    x = views.permute(t, x, kept) if kept != list(range(len(subs))) else x
    for pos, c in enumerate(order):
        if c not in subs:
            x = views.unsqueeze(t, x, pos)
    return x

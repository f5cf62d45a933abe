"""Torch functions that are a few pointwise ops (stage: frontend; in: the tracer and the call's
operands; out: traced values).

Each builds the torch formula from the pointwise table's ops (``ir/pointwise.py``), so its
rounding follows the formula PyTorch documents: ``torch.lerp``'s two-sided form, ``softplus``'s
threshold, ``nan_to_num``'s dtype limits. Registered in :mod:`~tilecraft.frontend.lowerings`.
"""

from __future__ import annotations

from typing import Any

import torch

from tilecraft.errors import UnsupportedOpError
from tilecraft.frontend.views import unsqueeze
from tilecraft.ir import dtypes


def lerp(t: Any, start: Any, end: Any, weight: Any) -> Any:
    """``start + weight * (end - start)`` for weights under 0.5, else ``end - (end - start) *
    (1 - weight)`` (torch's form: exact at both ends)."""
    diff = t.pointwise("sub", end, start)
    low = t.pointwise("add", start, t.pointwise("mul", weight, diff))
    high = t.pointwise("sub", end, t.pointwise("mul", diff, t.pointwise("sub", 1.0, weight)))
    if isinstance(weight, (int, float)):
        return low if abs(weight) < 0.5 else high
    return t.where(t.pointwise("lt", t.pointwise("abs", weight), 0.5), low, high)


def addcmul(t: Any, x: Any, a: Any, b: Any, *, value: float = 1) -> Any:
    """``x + value * a * b``."""
    return t.pointwise("add", x, t.pointwise("mul", value, t.pointwise("mul", a, b)))


def addcdiv(t: Any, x: Any, a: Any, b: Any, *, value: float = 1) -> Any:
    """``x + value * a / b``."""
    return t.pointwise("add", x, t.pointwise("mul", value, t.pointwise("truediv", a, b)))


def nan_to_num(
    t: Any, x: Any, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Any:
    """NaN to ``nan``, infinities to ``posinf`` / ``neginf`` (default: the dtype's largest
    and smallest finite values); integer tiles unchanged."""
    dtype = t.value_node(x).dtype
    if not dtype.is_floating_point:
        return x
    info = torch.finfo(dtype)
    big = info.max if posinf is None else posinf
    small = info.min if neginf is None else neginf
    out = t.where(t.pointwise("isnan", x), nan, x)
    out = t.where(t.pointwise("eq", x, float("inf")), big, out)
    return t.where(t.pointwise("eq", x, float("-inf")), small, out)


def sign(t: Any, x: Any) -> Any:
    """``torch.sign``: 1, -1 or 0 in ``x``'s dtype (NaN and -0.0 give 0, as in torch); a bool
    tile is itself."""
    dtype = t.value_node(x).dtype
    if dtype == torch.bool:
        return x
    above = t.to_dtype(t.pointwise("gt", x, 0), dtype)
    return t.pointwise("sub", above, t.to_dtype(t.pointwise("lt", x, 0), dtype))


def softplus(t: Any, x: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """``log1p(exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold``."""
    scaled = t.pointwise("mul", x, beta)
    soft = t.pointwise("truediv", t.pointwise("log1p", t.pointwise("exp", scaled)), beta)
    return t.where(t.pointwise("gt", scaled, threshold), x, soft)


def mish(t: Any, x: Any, inplace: bool = False) -> Any:
    """``x * tanh(softplus(x))``."""
    return t.pointwise("mul", x, t.pointwise("tanh", softplus(t, x)))


def hardsigmoid(t: Any, x: Any, inplace: bool = False) -> Any:
    """``min(max(x + 3, 0), 6) / 6``."""
    return t.pointwise("truediv", _relu6_shifted(t, x), 6.0)


def hardswish(t: Any, x: Any, inplace: bool = False) -> Any:
    """``x * min(max(x + 3, 0), 6) / 6``."""
    return t.pointwise("truediv", t.pointwise("mul", x, _relu6_shifted(t, x)), 6.0)


def hardtanh(
    t: Any, x: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Any:
    """``min(max(x, min_val), max_val)`` (NaN stays NaN, as in torch)."""
    return t.pointwise("minimum", t.pointwise("maximum", x, min_val), max_val)


def relu6(t: Any, x: Any, inplace: bool = False) -> Any:
    """``min(max(x, 0), 6)``."""
    return hardtanh(t, x, 0.0, 6.0)


def _relu6_shifted(t: Any, x: Any) -> Any:
    """``min(max(x + 3, 0), 6)``."""
    return t.pointwise("minimum", t.pointwise("maximum", t.pointwise("add", x, 3.0), 0.0), 6.0)


def square(t: Any, x: Any) -> Any:
    """``x * x``."""
    return t.pointwise("mul", x, x)


def masked_fill(t: Any, x: Any, mask: Any, value: Any) -> Any:
    """``value`` where ``mask``, else ``x``, in ``x``'s dtype: the value is cast to it, ``x``
    never leaves it (an int32 x kept through fp32 lost its low bits)."""
    dtype = t.value_node(x).dtype
    return t.where(mask, t.to_dtype(value, dtype), x)


def any_true(t: Any, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """``torch.any``: whether some element is nonzero (the max of ``x != 0``), a bool."""
    return t.reduce("max", t.pointwise("ne", x, 0), dim, keepdim)


def all_true(t: Any, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """``torch.all``: whether every element is nonzero (the min of ``x != 0``), a bool."""
    return t.reduce("min", t.pointwise("ne", x, 0), dim, keepdim)


def vector_norm(
    t: Any, x: Any, ord: float = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Any:
    """``torch.linalg.vector_norm`` for ``ord`` 2, 1, inf and -inf: half precision computes in
    fp32 and rounds once."""
    if dtype is not None:
        x = t.to_dtype(x, dtype)
    result = t.dtype_of(x)
    xf = t.to_dtype(x, dtypes.compute_dtype(result))
    if ord == 2:
        out = t.pointwise("sqrt", t.reduce("sum", t.pointwise("mul", xf, xf), dim, keepdim))
    elif ord == 1:
        out = t.reduce("sum", t.pointwise("abs", xf), dim, keepdim)
    elif ord in (float("inf"), float("-inf")):
        out = t.reduce("max" if ord > 0 else "min", t.pointwise("abs", xf), dim, keepdim)
    else:
        raise UnsupportedOpError(
            f"torch.linalg.vector_norm with ord={ord!r}",
            hint="ord 2, 1, inf and -inf compile; write others from torch.sum and torch.pow",
        )
    return t.to_dtype(out, result)


def one_hot(t: Any, x: Any, num_classes: int = -1) -> Any:
    """``F.one_hot``: int64 ``x[..., None] == arange(num_classes)``; ``num_classes`` must be
    given (the largest label is not known when the kernel compiles)."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise UnsupportedOpError(
            f"F.one_hot with num_classes={num_classes!r} in device code",
            hint="pass the class count as an int: F.one_hot(labels, num_classes=c)",
        )
    labels = unsqueeze(t, x, -1)
    hits = t.pointwise("eq", labels, t.arange(num_classes, dtype=torch.int64))
    return t.to_dtype(hits, torch.int64)

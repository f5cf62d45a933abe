"""Torch functions that are a few pointwise ops (stage: frontend; in: the tracer and the call's
operands; out: traced values).

Each builds the torch formula from the pointwise table's ops (``ir/pointwise.py``), so its
rounding follows the formula PyTorch documents: ``torch.lerp``'s two-sided form, ``softplus``'s
threshold, ``nan_to_num``'s dtype limits. Registered in :mod:`~tilecraft.frontend.lowerings`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from tilecraft.errors import DeviceCodeError, UnsupportedOpError
from tilecraft.frontend.grid_blocks import refuse_grid_blocks
from tilecraft.frontend.views import unsqueeze
from tilecraft.ir import dtypes
from tilecraft.language.tunables import DynamicInt


def lerp(t: Any, start: Any, end: Any, weight: Any) -> Any:
    """``start + weight * (end - start)`` for weights under 0.5, else ``end - (end - start) *
    (1 - weight)`` (torch's form: exact at both ends), in the compute dtype, rounded once."""

    def build(s: Any, e: Any, w: Any) -> Any:
        diff = t.pointwise("sub", e, s)
        low = t.pointwise("add", s, t.pointwise("mul", w, diff))
        high = t.pointwise("sub", e, t.pointwise("mul", diff, t.pointwise("sub", 1.0, w)))
        if isinstance(w, (int, float)):
            return low if abs(w) < 0.5 else high
        return t.where(t.pointwise("lt", t.pointwise("abs", w), 0.5), low, high)

    return promoted_opmath(t, (start, end, weight), build)


def addcmul(t: Any, x: Any, a: Any, b: Any, *, value: float = 1) -> Any:
    """``x + value * a * b`` (half precision in fp32, rounded once, as torch's kernel)."""

    def build(xw: Any, aw: Any, bw: Any) -> Any:
        return t.pointwise("add", xw, t.pointwise("mul", value, t.pointwise("mul", aw, bw)))

    return promoted_opmath(t, (x, a, b), build)


def addcdiv(t: Any, x: Any, a: Any, b: Any, *, value: float = 1) -> Any:
    """``x + value * a / b`` (half precision in fp32, rounded once, as torch's kernel)."""

    def build(xw: Any, aw: Any, bw: Any) -> Any:
        return t.pointwise("add", xw, t.pointwise("mul", value, t.pointwise("truediv", aw, bw)))

    return promoted_opmath(t, (x, a, b), build)


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


# The activations below compute half precision in fp32 and round once, as torch's kernels do:
# step by step in fp16, softplus(12) overflowed at exp(12) (inf where torch gives 12.0)


def softplus(t: Any, x: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """``log1p(exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold``."""
    return in_opmath(t, x, lambda xf: _softplus(t, xf, beta, threshold))


def _softplus(t: Any, x: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    scaled = t.pointwise("mul", x, beta)
    soft = t.pointwise("truediv", t.pointwise("log1p", t.pointwise("exp", scaled)), beta)
    return t.where(t.pointwise("gt", scaled, threshold), x, soft)


def mish(t: Any, x: Any, inplace: bool = False) -> Any:
    """``x * tanh(softplus(x))``."""
    return in_opmath(t, x, lambda xf: t.pointwise("mul", xf, t.pointwise("tanh", _softplus(t, xf))))


def hardsigmoid(t: Any, x: Any, inplace: bool = False) -> Any:
    """``min(max(x + 3, 0), 6) / 6``."""
    return in_opmath(t, x, lambda xf: t.pointwise("truediv", _relu6_shifted(t, xf), 6.0))


def hardswish(t: Any, x: Any, inplace: bool = False) -> Any:
    """``x * min(max(x + 3, 0), 6) / 6``."""
    return in_opmath(
        t,
        x,
        lambda xf: t.pointwise("truediv", t.pointwise("mul", xf, _relu6_shifted(t, xf)), 6.0),
    )


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
    if _overflows(value, dtype):  # torch refuses too (int8's 300 wrapped to 44, fp16's 1e6: inf)
        raise DeviceCodeError(
            f"masked_fill: value {value!r} cannot be converted to {dtype} without overflow",
            t.loc,
            hint=f"fill with a value {dtype} holds, or cast the tile first (x.to(...))",
        )
    return t.where(mask, t.to_dtype(value, dtype), x)


def _overflows(value: Any, dtype: torch.dtype) -> bool:
    """Whether a Python number lies outside ``dtype``'s range (infinities and NaN fit floats)."""
    if isinstance(value, (bool, DynamicInt)) or not isinstance(value, (int, float)):
        return False  # (a run-time int's compare would trace an op)
    if dtype == torch.bool:
        return False
    if dtype.is_floating_point:
        return math.isfinite(value) and abs(value) > torch.finfo(dtype).max
    info = torch.iinfo(dtype)
    return not math.isfinite(value) or not info.min <= value <= info.max


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
    if not result.is_floating_point:  # (computed in the int dtype it wrapped: int8 norm 0)
        raise UnsupportedOpError(
            f"a vector norm of a {result} tile: torch.linalg.vector_norm takes floating point "
            "tiles only (torch raises too)",
            hint="convert first: x.float().norm(...), or pass dtype=torch.float32",
        )
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


def clamp_min(t: Any, x: Any, min: Any) -> Any:  # noqa: A002
    """``torch.clamp(x, min=min)``."""
    return t.pointwise("maximum", x, min)


def clamp_max(t: Any, x: Any, max: Any) -> Any:  # noqa: A002
    """``torch.clamp(x, max=max)``."""
    return t.pointwise("minimum", x, max)


def _nan_ignoring(t: Any, a: Any, b: Any, kind: str) -> Any:
    """``kind`` (maximum / minimum) of ``a`` and ``b``, a NaN only where both are (C's fmax)."""
    both = t.pointwise(kind, a, b)
    return t.where(t.pointwise("isnan", a), b, t.where(t.pointwise("isnan", b), a, both))


def fmax(t: Any, a: Any, b: Any) -> Any:
    """The larger of ``a`` and ``b``, a NaN only where both are (C's fmax)."""
    return _nan_ignoring(t, a, b, "maximum")


def fmin(t: Any, a: Any, b: Any) -> Any:
    """The smaller of ``a`` and ``b``, a NaN only where both are (C's fmin)."""
    return _nan_ignoring(t, a, b, "minimum")


def _float_result(t: Any, *values: Any) -> torch.dtype:
    """The dtype a float-only op of ``values`` gives (ints promote to the default float)."""
    dtype = t.promotion_of(values[0])
    for v in values[1:]:
        dtype = dtypes.promote(dtype, t.promotion_of(v))
    return dtype if isinstance(dtype, torch.dtype) and dtype.is_floating_point else torch.float32


def in_opmath(t: Any, x: Any, build: Callable[[Any], Any]) -> Any:
    """``build`` of ``x`` in its compute dtype (fp32 for half precision), rounded once back; an
    integer ``x`` as it is."""
    dtype = t.dtype_of(x)
    if not dtype.is_floating_point:
        return build(x)
    return t.to_dtype(build(t.to_dtype(x, dtypes.compute_dtype(dtype))), dtype)


def promoted_opmath(t: Any, values: tuple[Any, ...], build: Callable[..., Any]) -> Any:
    """``build`` of ``values`` in the compute dtype of their promoted dtype (fp32 for half
    precision), rounded once to it; integer operands as they are (``addcmul`` of ints)."""
    dtype = t.promotion_of(values[0])
    for v in values[1:]:
        dtype = dtypes.promote(dtype, t.promotion_of(v))
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        return build(*values)
    compute = dtypes.compute_dtype(dtype)
    wide = [v if isinstance(v, (int, float)) else t.to_dtype(v, compute) for v in values]
    return t.to_dtype(build(*wide), dtype)


def float_opmath(t: Any, values: tuple[Any, ...], build: Callable[..., Any]) -> Any:
    """``build`` of ``values`` (tiles in the compute dtype, numbers as they are), rounded once
    to the float dtype torch gives a float-only op of them (ints promote to fp32)."""
    dtype = _float_result(t, *values)
    compute = dtypes.compute_dtype(dtype)
    wide = [v if isinstance(v, (int, float)) else t.to_dtype(v, compute) for v in values]
    return t.to_dtype(build(*wide), dtype)


def logit(t: Any, x: Any, eps: float | None = None) -> Any:
    """``log(z / (1 - z))`` for ``z`` = ``x`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""

    def build(z: Any) -> Any:
        if eps is not None:
            z = t.pointwise("minimum", t.pointwise("maximum", z, eps), 1.0 - eps)
        return t.pointwise("log", t.pointwise("truediv", z, t.pointwise("sub", 1.0, z)))

    return float_opmath(t, (x,), build)


def xlogy(t: Any, x: Any, y: Any) -> Any:
    """``x * log(y)``, 0 where ``x == 0`` unless ``y`` is NaN."""

    def build(xf: Any, yf: Any) -> Any:
        prod = t.pointwise("mul", xf, t.pointwise("log", yf))
        return t.where(t.pointwise("isnan", yf), yf, t.where(t.pointwise("eq", xf, 0), 0.0, prod))

    return float_opmath(t, (x, y), build)


def _log_add(t: Any, a: Any, b: Any, base2: bool) -> Any:
    """log(e^a + e^b) (base 2: log2(2^a + 2^b)) as torch: max + log1p(exp(-|a - b|)); equal
    infinities give themselves (inf - inf is NaN)."""

    def build(af: Any, bf: Any) -> Any:
        m = t.pointwise("maximum", af, bf)
        gap = t.pointwise("neg", t.pointwise("abs", t.pointwise("sub", af, bf)))
        if base2:
            tail = t.pointwise(
                "mul", t.pointwise("log1p", t.pointwise("exp2", gap)), 1.4426950408889634
            )
        else:
            tail = t.pointwise("log1p", t.pointwise("exp", gap))
        same_inf = t.pointwise("and", t.pointwise("isinf", af), t.pointwise("eq", af, bf))
        return t.where(same_inf, af, t.pointwise("add", m, tail))

    return float_opmath(t, (a, b), build)


def logaddexp(t: Any, a: Any, b: Any) -> Any:
    """``log(exp(a) + exp(b))`` without overflow."""
    return _log_add(t, a, b, base2=False)


def logaddexp2(t: Any, a: Any, b: Any) -> Any:
    """``log2(2**a + 2**b)`` without overflow."""
    return _log_add(t, a, b, base2=True)


def heaviside(t: Any, x: Any, values: Any) -> Any:
    """``values`` where ``x == 0``, else 1 where ``x > 0`` and 0 below."""
    dtype = dtypes.promote(t.promotion_of(x), t.promotion_of(values))
    step = t.to_dtype(t.pointwise("gt", x, 0), dtype)
    return t.where(t.pointwise("eq", x, 0), t.to_dtype(values, dtype), step)


def isclose(
    t: Any, x: Any, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> Any:
    """torch's steps in the inputs' dtype: equal (infinities of one sign included), NaN with
    NaN under ``equal_nan``, else a finite ``|x - other| <= atol + |rtol * other|``."""
    p = t.pointwise
    close = p("eq", x, other)
    if equal_nan:
        close = p("or", close, p("and", p("isnan", x), p("isnan", other)))
    actual = p("abs", p("sub", x, other))
    allowed = p("add", p("abs", p("mul", other, rtol)), atol)
    return p("or", close, p("and", p("isfinite", actual), p("le", actual, allowed)))


def rsub(t: Any, x: Any, other: Any, alpha: Any = 1) -> Any:
    """``other - alpha * x``."""
    return t.pointwise("sub", other, x if alpha == 1 else t.pointwise("mul", x, alpha))


def sinc(t: Any, x: Any) -> Any:
    """``sin(pi x) / (pi x)``, 1 at 0."""

    def build(xf: Any) -> Any:
        px = t.pointwise("mul", xf, math.pi)
        return t.where(
            t.pointwise("eq", xf, 0), 1.0, t.pointwise("truediv", t.pointwise("sin", px), px)
        )

    return float_opmath(t, (x,), build)


def deg2rad(t: Any, x: Any) -> Any:
    """``x * pi / 180``."""
    return t.pointwise("mul", x, math.pi / 180)


def rad2deg(t: Any, x: Any) -> Any:
    """``x * 180 / pi``."""
    return t.pointwise("mul", x, 180 / math.pi)


def ndtr(t: Any, x: Any) -> Any:
    """The standard normal CDF, ``erfc(-x / sqrt(2)) / 2``."""

    def build(xf: Any) -> Any:
        return t.pointwise(
            "mul", t.pointwise("erfc", t.pointwise("mul", xf, -0.7071067811865476)), 0.5
        )

    return float_opmath(t, (x,), build)


def entr(t: Any, x: Any) -> Any:
    """``-x log(x)`` for ``x > 0``, 0 at 0, -inf below (NaN stays NaN)."""

    def build(xf: Any) -> Any:
        pos = t.pointwise("neg", t.pointwise("mul", xf, t.pointwise("log", xf)))
        zero_or_neg = t.where(t.pointwise("eq", xf, 0), 0.0, -math.inf)
        out = t.where(t.pointwise("gt", xf, 0), pos, zero_or_neg)
        return t.where(t.pointwise("isnan", xf), xf, out)

    return float_opmath(t, (x,), build)


def round_decimals(t: Any, x: Any, decimals: int) -> Any:
    """``torch.round(x, decimals=d)``: round(x * 10^d) / 10^d (x / 10^-d, times it, for d < 0)."""
    if not t.dtype_of(x).is_floating_point:
        return x
    scale = 10.0 ** abs(decimals)

    def build(xf: Any) -> Any:
        if decimals > 0:
            return t.pointwise(
                "div_exact", t.pointwise("round", t.pointwise("mul", xf, scale)), scale
            )
        return t.pointwise("mul", t.pointwise("round", t.pointwise("div_exact", xf, scale)), scale)

    return in_opmath(t, x, build)


def identity(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """The tile itself (a tile is a value: no copy, no layout, no autograd to detach from)."""
    return x


def norm(
    t: Any,
    x: Any,
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    out: Any = None,
    dtype: Any = None,
) -> Any:
    """``Tensor.norm`` / ``torch.norm``: ``p`` 2 (``"fro"``), 1, inf or -inf, as
    ``torch.linalg.vector_norm`` (torch.norm passes ``out=``: None in device code)."""
    if out is not None:
        raise UnsupportedOpError(
            "torch.norm(..., out=...) in device code", hint="assign the result: n = x.norm(...)"
        )
    if p == "nuc":
        raise UnsupportedOpError(
            "Tensor.norm(p='nuc') in device code", hint="only vector norms compile"
        )
    return vector_norm(t, x, 2 if p in ("fro", None) else p, dim, keepdim, dtype=dtype)


def math_dtype(dtype: torch.dtype) -> torch.dtype:
    """Softmax and logsumexp run in fp32, fp64 inputs in fp64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def softmax_impl(t: Any, x: Any, dim: int, dtype: Any, log: bool, op: str) -> Any:
    """``dtype``: as torch, the input cast to it first (``dtype=torch.float64`` of an fp32
    tile was computed in fp32, then widened)."""
    refuse_grid_blocks(t, x, dim, op)
    if dtype is not None:
        if not dtype.is_floating_point:
            raise UnsupportedOpError(
                f"{op}(dtype={dtype}): torch computes it in a floating dtype only", t.loc
            )
        x = t.to_dtype(x, dtype)
    node = t.value_node(x)
    out_dtype = node.dtype
    xf = t.to_dtype(x, math_dtype(node.dtype))
    m = t.reduce("max", xf, dim, True)
    shifted = t.pointwise("sub", xf, m)
    e = t.pointwise("exp", shifted)
    s = t.reduce("sum", e, dim, True)
    if log:
        out = t.pointwise("sub", shifted, t.pointwise("log", s))
    else:
        out = t.pointwise("truediv", e, s)
    return t.to_dtype(out, out_dtype)


T = torch.Tensor
S = torch.special
LOWERINGS: list[tuple[tuple[Any, ...], Any]] = [
    ((torch.clamp_min, T.clamp_min), clamp_min),
    ((torch.clamp_max, T.clamp_max), clamp_max),
    ((torch.fmax, T.fmax), fmax),
    ((torch.fmin, T.fmin), fmin),
    ((torch.logit, T.logit, S.logit), logit),
    ((torch.xlogy, T.xlogy, S.xlogy), xlogy),
    ((torch.logaddexp, T.logaddexp), logaddexp),
    ((torch.logaddexp2, T.logaddexp2), logaddexp2),
    ((torch.heaviside, T.heaviside), heaviside),
    ((torch.rsub,), rsub),
    ((torch.isclose, T.isclose), isclose),
    ((torch.sinc, T.sinc, S.sinc), sinc),
    ((torch.deg2rad, T.deg2rad), deg2rad),
    ((torch.rad2deg, T.rad2deg), rad2deg),
    ((S.ndtr,), ndtr),
    ((S.entr,), entr),
    (
        (T.clone, torch.clone, T.contiguous, T.detach, torch.detach, torch.positive, T.positive),
        identity,
    ),
    ((T.norm, torch.norm), norm),
]

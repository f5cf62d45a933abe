"""``torch.nn.functional`` activations, normalizations and similarities on tiles (stage:
frontend; in: the tracer and the call's operands; out: traced values).

Each follows the formula PyTorch's kernels use (``leaky_relu``'s select, ``selu``'s constants,
``logsigmoid``'s stable form, ``rms_norm``'s cast before the weight), computed in fp32 for half
precision and rounded once, as torch's opmath does. :data:`LOWERINGS` lists the torch callables
each serves; :mod:`~tilecraft.frontend.lowerings` registers them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tilecraft.errors import UnsupportedOpError
from tilecraft.frontend import composites, dots
from tilecraft.frontend.composites import in_opmath
from tilecraft.frontend.grid_blocks import refuse_grid_blocks
from tilecraft.frontend.values import HostTensor
from tilecraft.frontend.views import chunk, transpose, unsqueeze
from tilecraft.ir import dtypes

F = torch.nn.functional
T = torch.Tensor
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def leaky_relu(t: Any, x: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    """``x`` where ``x > 0``, else ``negative_slope * x``."""
    return in_opmath(
        t, x, lambda v: t.where(t.pointwise("gt", v, 0), v, t.pointwise("mul", v, negative_slope))
    )


def _elu_like(t: Any, x: Any, alpha: float, scale: float, input_scale: float) -> Any:
    """torch's elu kernel: ``scale x`` above 0, else ``alpha scale expm1(input_scale x)``."""

    def build(v: Any) -> Any:
        neg = t.pointwise("expm1", t.pointwise("mul", v, input_scale))
        return t.where(
            t.pointwise("gt", v, 0),
            t.pointwise("mul", v, scale),
            t.pointwise("mul", neg, alpha * scale),
        )

    return in_opmath(t, x, build)


def elu(t: Any, x: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """``x`` above 0, else ``alpha * expm1(x)``."""
    return _elu_like(t, x, alpha, 1.0, 1.0)


def selu(t: Any, x: Any, inplace: bool = False) -> Any:
    """``scale * elu(x, alpha)`` with SELU's constants."""
    return _elu_like(t, x, _SELU_ALPHA, _SELU_SCALE, 1.0)


def celu(t: Any, x: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """``x`` above 0, else ``alpha * expm1(x / alpha)``."""
    return _elu_like(t, x, alpha, 1.0, 1.0 / alpha)


def logsigmoid(t: Any, x: Any) -> Any:
    """``min(x, 0) - log1p(exp(-|x|))`` (no overflow for large ``|x|``)."""

    def build(v: Any) -> Any:
        tail = t.pointwise("log1p", t.pointwise("exp", t.pointwise("neg", t.pointwise("abs", v))))
        return t.pointwise("sub", t.pointwise("minimum", v, 0.0), tail)

    return in_opmath(t, x, build)


def softsign(t: Any, x: Any) -> Any:
    """``x / (1 + |x|)``."""
    return in_opmath(
        t, x, lambda v: t.pointwise("truediv", v, t.pointwise("add", t.pointwise("abs", v), 1.0))
    )


def tanhshrink(t: Any, x: Any) -> Any:
    """``x - tanh(x)``."""
    return in_opmath(t, x, lambda v: t.pointwise("sub", v, t.pointwise("tanh", v)))


def _as_element(t: Any, x: Any, value: float) -> float:
    """``value`` rounded to ``x``'s dtype, as torch's kernels take their scalar arguments (a bf16
    0.3 is 0.30078: hardshrink(0.3, 0.3) is 0 in bf16)."""
    dtype = t.dtype_of(x)
    return float(torch.tensor(value, dtype=dtype)) if dtype.is_floating_point else value


def threshold(t: Any, x: Any, threshold: float, value: float, inplace: bool = False) -> Any:
    """``value`` where ``x <= threshold``, else ``x`` (a NaN stays NaN: it is not ``<=``)."""
    # torch's CPU kernel compares with the fp32 threshold (bf16 0.1 > 0.1), where comparison
    # ops round a float to the tile's dtype first: the tile widened to fp32 keeps it unrounded
    dtype = t.dtype_of(x)
    wide = t.to_dtype(x, dtypes.compute_dtype(dtype)) if dtype.is_floating_point else x
    at_most = t.pointwise("le", wide, threshold)
    return t.where(at_most, t.to_dtype(value, dtype), x)


def softshrink(t: Any, x: Any, lambd: float = 0.5) -> Any:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0 (NaN stays NaN)."""

    def build(v: Any) -> Any:
        inner = t.where(
            t.pointwise("lt", v, -lambd), t.pointwise("add", v, lambd), t.pointwise("mul", v, 0.0)
        )
        return t.where(t.pointwise("gt", v, lambd), t.pointwise("sub", v, lambd), inner)

    return in_opmath(t, x, build)


def hardshrink(t: Any, x: Any, lambd: float = 0.5) -> Any:
    """0 where ``-lambd <= x <= lambd``, else ``x``."""
    lambd = _as_element(t, x, lambd)
    inside = t.pointwise("and", t.pointwise("ge", x, -lambd), t.pointwise("le", x, lambd))
    return t.where(inside, t.to_dtype(0, t.dtype_of(x)), x)


def rrelu(
    t: Any,
    x: Any,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
) -> Any:
    """Evaluation mode only: ``leaky_relu`` with slope ``(lower + upper) / 2``."""
    if training:
        raise UnsupportedOpError(
            "F.rrelu(training=True) in device code (its slopes are random)",
            hint="draw the slopes with tc.rand(shape, seed, offset) and use torch.where",
        )
    return leaky_relu(t, x, (lower + upper) / 2)


def prelu(t: Any, x: Any, weight: Any) -> Any:
    """``x`` above 0, else ``weight * x``; a 1-D ``weight`` of several elements runs along dim 1
    (the channels), as torch broadcasts it."""
    w = weight
    rank = t.value_node(x).ndim
    if not isinstance(w, (int, float)) and t.value_node(w).ndim == 1 and rank > 2:
        for _ in range(rank - 2):
            w = unsqueeze(t, w, -1)
    return t.where(t.pointwise("gt", x, 0), x, t.pointwise("mul", w, x))


def softmin(t: Any, x: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """``softmax(-x, dim)``."""
    neg = t.pointwise("neg", x)
    return composites.softmax_impl(t, neg, -1 if dim is None else dim, dtype, False, "F.softmin")


def dropout(t: Any, x: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """The identity where it is one (``training=False`` or ``p == 0``); a random mask is
    ``tc.rand``'s."""
    if not training or p == 0:
        return x
    raise UnsupportedOpError(
        "F.dropout(training=True) in device code (torch's random stream depends on the launch)",
        hint="keep = tc.rand([tm, tn], seed, offset) >= p; out = torch.where(keep, x / (1 - p), 0.0)",
    )


def normalize(
    t: Any, x: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
) -> Any:
    """``x / max(norm_p(x, dim), eps)``, the norm in ``x``'s dtype as torch computes it."""
    refuse_grid_blocks(t, x, dim, "F.normalize")
    norm = composites.vector_norm(t, x, p, dim, True)
    return t.pointwise("truediv", x, t.pointwise("maximum", norm, eps))


def _norm_dims(t: Any, x: Any, normalized_shape: Any) -> list[int]:
    count = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    ndim = t.value_node(x).ndim
    return list(range(ndim - count, ndim))


def _affine(t: Any, param: Any) -> Any:
    """A norm's weight or bias: a host tensor (``F.layer_norm(x, [h], w, b)`` as eager code
    writes it) is loaded whole, its dims the normalized ones; a tile stays as it is."""
    if isinstance(param, HostTensor):
        return t.load(param, tuple(slice(None) for _ in range(param.ndim)))
    return param


def layer_norm(
    t: Any, x: Any, normalized_shape: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> Any:
    """Over the last ``len(normalized_shape)`` dims: ``(x - mean) * rsqrt(var + eps) * weight +
    bias`` (biased variance), in fp32 for half precision; a host weight / bias is read whole."""
    dims = _norm_dims(t, x, normalized_shape)
    refuse_grid_blocks(t, x, dims, "F.layer_norm")
    weight, bias = _affine(t, weight), _affine(t, bias)

    def build(v: Any) -> Any:
        mean = t.mean(v, dims, True)
        diff = t.pointwise("sub", v, mean)
        var = t.mean(t.pointwise("mul", diff, diff), dims, True)
        out = t.pointwise("mul", diff, t.pointwise("rsqrt", t.pointwise("add", var, eps)))
        if weight is not None:
            out = t.pointwise("mul", out, weight)
        return out if bias is None else t.pointwise("add", out, bias)

    return in_opmath(t, x, build)


def rms_norm(t: Any, x: Any, normalized_shape: Any, weight: Any = None, eps: Any = None) -> Any:
    """``x * rsqrt(mean(x^2) + eps) * weight`` over the last ``len(normalized_shape)`` dims in
    fp32, rounded once to ``x``'s dtype (torch's fused order, whatever the weight's dtype; a
    host weight is read whole); ``eps`` defaults to fp32's epsilon."""
    dims = _norm_dims(t, x, normalized_shape)
    refuse_grid_blocks(t, x, dims, "F.rms_norm")
    weight = _affine(t, weight)
    dtype = t.dtype_of(x)
    compute = dtypes.compute_dtype(dtype)
    eps = torch.finfo(compute).eps if eps is None else eps

    def build(v: Any) -> Any:
        mean_sq = t.mean(t.pointwise("mul", v, v), dims, True)
        out = t.pointwise("mul", v, t.pointwise("rsqrt", t.pointwise("add", mean_sq, eps)))
        return out if weight is None else t.pointwise("mul", out, t.to_dtype(weight, compute))

    return in_opmath(t, x, build)


def cosine_similarity(t: Any, x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """``sum((x1 / max(|x1|, eps)) * (x2 / max(|x2|, eps)), dim)``, as torch computes it."""
    refuse_grid_blocks(t, x1, dim, "F.cosine_similarity")
    refuse_grid_blocks(t, x2, dim, "F.cosine_similarity")
    n1 = t.pointwise("maximum", composites.vector_norm(t, x1, 2, dim, True), eps)
    n2 = t.pointwise("maximum", composites.vector_norm(t, x2, 2, dim, True), eps)
    both = t.pointwise("mul", t.pointwise("truediv", x1, n1), t.pointwise("truediv", x2, n2))
    return t.reduce("sum", both, dim, False)


def linear(t: Any, x: Any, weight: Any, bias: Any = None) -> Any:
    """``x @ weight.T + bias`` (``weight`` as stored, [out, in]) in fp32, rounded once to the
    operands' dtype; ``x`` 2-D (a 3-D one: a batched product, then the bias)."""
    w_t = transpose(t, weight, -1, -2)
    if bias is None or t.value_node(x).ndim != 2:
        out = dots.matmul(t, x, w_t, op="F.linear")
        return out if bias is None else t.pointwise("add", out, bias)
    dtype = dots.operand_dtype(t.dtype_of(x), t.dtype_of(weight))
    acc = dots.matmul(t, x, w_t, op="F.linear", out_dtype=torch.float32)
    return t.to_dtype(t.pointwise("add", acc, t.to_dtype(bias, torch.float32)), dtype)


def glu(t: Any, x: Any, dim: int = -1) -> Any:
    """``F.glu``: the first half of ``dim`` times the sigmoid of the second (a whole dim whose
    size is a power of two)."""
    a, b = chunk(t, x, 2, dim, op="F.glu (its halves)")
    return t.pointwise("mul", a, t.pointwise("sigmoid", b))


def sigmoid(t: Any, x: Any) -> Any:
    """``torch.sigmoid``."""
    return t.pointwise("sigmoid", x)


def tanh(t: Any, x: Any) -> Any:
    """``torch.tanh``."""
    return t.pointwise("tanh", x)


LOWERINGS: list[tuple[tuple[Any, ...], Callable[..., Any]]] = [
    ((F.leaky_relu,), leaky_relu),
    ((F.elu,), elu),
    ((F.selu, torch.selu), selu),
    ((F.celu, torch.celu), celu),
    ((F.logsigmoid,), logsigmoid),
    ((F.softsign,), softsign),
    ((F.tanhshrink,), tanhshrink),
    ((F.threshold,), threshold),
    ((F.softshrink,), softshrink),
    ((F.hardshrink, torch.hardshrink, T.hardshrink), hardshrink),
    ((F.rrelu,), rrelu),
    ((F.prelu, torch.prelu), prelu),
    ((F.softmin,), softmin),
    ((F.dropout,), dropout),
    ((F.normalize,), normalize),
    ((F.layer_norm,), layer_norm),
    ((F.rms_norm,), rms_norm),
    ((F.cosine_similarity, torch.cosine_similarity), cosine_similarity),
    ((F.linear,), linear),
    ((F.glu,), glu),
    ((F.sigmoid,), sigmoid),
    ((F.tanh,), tanh),
]

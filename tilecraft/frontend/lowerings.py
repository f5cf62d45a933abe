"""The registry of torch functions that device code may call (stage: frontend).

Each entry maps one or more torch callables (functions, ``Tensor`` methods, operators) to a
builder that traces it into IR with the :class:`~tilecraft.frontend.tracer.Tracer`. This is the one
place that lists what device code supports; anything else is an ``UnsupportedOpError`` naming the op.
Pointwise ops come from the table in :mod:`tilecraft.ir.pointwise`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tilecraft.errors import DeviceCodeError, ShapeError, UnsupportedOpError
from tilecraft.frontend import (
    activations,
    composites,
    concat,
    dots,
    einsum,
    float_bits,
    losses,
    scans,
    sequences,
    sorting,
    splits,
    tile_gather,
    tile_shifts,
    views,
)
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import shape_str, whole_length
from tilecraft.ir.pointwise import POINTWISE
from tilecraft.language.tunables import DynamicInt

Handler = Callable[..., Any]
_REGISTRY: dict[Any, Handler] = {}
T = torch.Tensor
F = torch.nn.functional


def lowering(*fns: Any) -> Callable[[Handler], Handler]:
    """Register ``handler(tracer, *args, **kwargs)`` as the device meaning of ``fns``."""

    def register(handler: Handler) -> Handler:
        for fn in fns:
            _REGISTRY[fn] = handler
        return handler

    return register


def lookup(fn: Any) -> Handler | None:
    return _REGISTRY.get(fn)


def registry_items() -> list[tuple[Any, Handler]]:
    """Every registered torch callable with its builder (for the generated docs/ops.md)."""
    return list(_REGISTRY.items())


def pointwise_handlers() -> set[Handler]:
    """The builders of the pointwise table's torch functions (documented from the table)."""
    return {_REGISTRY[fn] for op in POINTWISE.values() for fn in op.torch_fns if fn in _REGISTRY}


def supported_ops() -> list[str]:
    return sorted({getattr(f, "__qualname__", getattr(f, "__name__", str(f))) for f in _REGISTRY})


def _register_pointwise() -> None:
    for name, op in POINTWISE.items():

        def handler(
            t: Any, *args: Any, _name: str = name, _arity: int = op.arity, **kwargs: Any
        ) -> Any:
            alpha = kwargs.pop("alpha", None)
            kwargs.pop("out", None)
            if kwargs.get("approximate") == "tanh" and _name == "gelu":
                return t.pointwise("gelu_tanh", args[0])
            kwargs.pop("approximate", None)
            kwargs.pop("inplace", None)
            decimals = kwargs.pop("decimals", 0) if _name == "round" else 0
            if decimals:
                return composites.round_decimals(t, args[0], decimals)
            mode = kwargs.pop("rounding_mode", None) if _name == "truediv" else None
            if mode in ("floor", "trunc"):
                return _rounded_div(t, mode, *args[:2])
            if kwargs:
                raise UnsupportedOpError(f"torch.{_name}: keyword arguments {sorted(kwargs)}")
            if len(args) != _arity:
                raise UnsupportedOpError(
                    f"torch.{_name} takes {_arity} tensor operands, got {len(args)}"
                )
            if alpha is not None and _name in ("add", "sub"):
                args = (args[0], _times_alpha(t, args[0], args[1], alpha))
            if _name == "pow":
                return _pow(t, args[0], args[1])
            if _name == "bitwise_not" and _kind_of(t, args[0]) == torch.uint8:
                return t.pointwise("bitwise_xor", args[0], 255)  # (the interpreter's ~ overflows)
            return t.pointwise(_name, *args)

        for fn in op.torch_fns:
            _REGISTRY[fn] = handler


def _times_alpha(t: Any, x: Any, other: Any, alpha: Any) -> Any:
    """``alpha * other`` of ``torch.add(x, other, alpha=...)``, in the dtype the sum takes:
    two numbers stay a weak scalar (uint8 255 + 3 * 2 wraps to 5), a tile is promoted first
    (int64 x + 2 * an int8 y must not wrap in int8)."""
    if isinstance(other, (int, float)) and isinstance(alpha, (int, float)):
        return other * alpha
    dtype = dtypes.promote(t.promotion_of(x), t.promotion_of(other))
    return t.pointwise("mul", t.to_dtype(other, dtype), alpha)


def _kind_of(t: Any, x: Any) -> Any:
    """A value's dtype for these choices: a tile's, else Python's type for a scalar."""
    return t.value_node(x).dtype if not isinstance(x, (bool, int, float)) else type(x)


def _integer(t: Any, x: Any) -> bool:
    dtype = _kind_of(t, x)
    return dtype in (bool, int) or (isinstance(dtype, torch.dtype) and not dtype.is_floating_point)


def _rounded_div(t: Any, mode: str, a: Any, b: Any) -> Any:
    """``torch.div(a, b, rounding_mode=mode)``: floor or trunc; integers stay integers."""
    if mode == "floor":
        return t.pointwise("floordiv", a, b)
    return t.pointwise("truncdiv_int" if _integer(t, a) and _integer(t, b) else "truncdiv", a, b)


def _pow(t: Any, x: Any, e: Any) -> Any:
    """``x ** e``: a constant exponent by :func:`_pow_scalar`; integers to integer powers
    exactly (pow_int); else torch's float pow (negative bases to integer powers, 0 ** 0)."""
    if isinstance(e, bool):
        e = int(e)  # x ** True is x ** 1, as in torch (a bool constant failed to compile)
    if isinstance(e, DynamicInt):  # an int known at run time: a device scalar exponent
        return t.pointwise("pow_int" if _integer(t, x) else "pow", x, e)
    if isinstance(e, (int, float)):
        dtype = _kind_of(t, x)
        if isinstance(e, int) and e < 0 and _integer(t, x):
            raise DeviceCodeError(
                f"an integer tile to the power {e}: torch refuses integers to negative "
                "integer powers",
                t.loc,
                hint=f"make one side a float: x.to(torch.float32) ** {e}, or x ** {float(e)}",
            )
        if isinstance(e, float) and _integer(t, x):
            x = t.to_dtype(x, torch.float32)  # int ** 2.0 is a float (int8 100 ** 2.0: 1e4)
        elif dtype in (torch.float16, torch.bfloat16):  # x ** -2 of 300: not 1 / inf
            return t.to_dtype(_pow_scalar(t, t.to_dtype(x, torch.float32), e), dtype)
        return _pow_scalar(t, x, e)
    return t.pointwise("pow_int" if _integer(t, x) and _integer(t, e) else "pow", x, e)


def _pow_scalar(t: Any, x: Any, e: float) -> Any:
    """Constant exponents: small integers by repeated multiplication (exact, right for negative
    bases and int dtypes), square roots by sqrt; other exponents as exp(log(x) * e)."""
    if float(e).is_integer() and 1 <= abs(e) <= 16:
        result, base, k = None, x, int(abs(e))
        while k:  # square-and-multiply
            if k & 1:
                result = base if result is None else t.pointwise("mul", result, base)
            k >>= 1
            if k:
                base = t.pointwise("mul", base, base)
        return result if e > 0 else t.pointwise("reciprocal", result)
    if e == 0:  # 1 everywhere, also for inf and NaN (x * 0 + 1 was NaN there)
        return _REGISTRY[torch.ones_like](t, x)
    if e == 0.5:
        return t.pointwise("sqrt", x)
    if e == -1:
        return t.pointwise("reciprocal", x)
    if e == -0.5:
        return t.pointwise("rsqrt", x)
    integer_power = _integer(t, x) and isinstance(e, int) and e >= 0
    return t.pointwise("pow_int" if integer_power else "pow", x, e)


_register_pointwise()


def _dim_arg(args: tuple[Any, ...], kwargs: dict[str, Any], pos: int = 0) -> Any:
    return kwargs.pop("dim", args[pos] if len(args) > pos else None)


@lowering(torch.sum, T.sum)
def _sum(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """Over ``dim`` (int, list or None), ``keepdim``, ``dtype`` (the input cast to it first, as
    torch: an fp16 tile summed with ``dtype=torch.float32`` past 65504 was inf); floats
    accumulate in fp32, ints give int64; the result has ``dtype`` (an int32 sum wraps, as
    torch's: it stayed int64, so ``s < 0`` of a wrapped sum was False)."""
    dim = _dim_arg(args, kwargs)
    keepdim = kwargs.pop("keepdim", args[1] if len(args) > 1 else False)
    dtype = kwargs.pop("dtype", None)
    if dtype is None:
        return t.reduce("sum", x, dim, keepdim)
    return t.to_dtype(t.reduce("sum", t.to_dtype(x, dtype), dim, keepdim), dtype)


@lowering(torch.nansum, T.nansum)
def _nansum(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.sum`` with NaNs counted as zero."""
    kept = t.where(t.pointwise("ne", x, x), 0, x) if t.value_node(x).dtype.is_floating_point else x
    return _sum(t, kept, *args, **kwargs)


@lowering(torch.count_nonzero, T.count_nonzero)
def _count_nonzero(t: Any, x: Any, dim: Any = None) -> Any:
    """The int64 count of nonzero elements over ``dim`` (int, list or None)."""
    return t.reduce("sum", t.to_dtype(t.pointwise("ne", x, 0), torch.int64), dim, False)


@lowering(torch.mean, T.mean)
def _mean(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """Over ``dim`` (int, list or None), ``keepdim``, ``dtype`` (the input cast to it first, as
    torch; it was ignored); accumulates in fp32."""
    dim = _dim_arg(args, kwargs)
    keepdim = kwargs.pop("keepdim", args[1] if len(args) > 1 else False)
    dtype = kwargs.pop("dtype", None)
    return t.mean(t.to_dtype(x, dtype) if dtype is not None else x, dim, keepdim)


def _reducer(kind: str) -> Handler:
    def handler(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        """Over ``dim`` (int, list or None) with ``keepdim``; half precision in fp32."""
        dim = _dim_arg(args, kwargs)
        keepdim = kwargs.pop("keepdim", args[1] if len(args) > 1 else False)
        if kind in ("argmax", "argmin"):
            _refuse_empty(t, f"torch.{kind}", x, dim)
        return t.reduce(kind, x, dim, keepdim)

    return handler


def _refuse_empty(t: Any, name: str, x: Any, dim: Any) -> None:
    """A reduction with indices over a dim known to be empty raises, as in torch (it returned
    index 0, an index into nothing). ``amax`` / ``amin`` there give their identities (-inf /
    +inf for floats), where torch raises: a softmax of empty rows computes a row max that only
    empty rows use, and returns the empty result torch.softmax does."""
    node = t.value_node(x)
    dims = range(node.ndim) if dim is None else [t._axis(node, d) for d in _dims_of(dim)]
    for axis in dims:
        d = node.shape[axis]
        if (d if isinstance(d, int) else whole_length(d)) == 0:
            raise ShapeError(
                f"{name} over dim {axis} of {shape_str(node.shape)}, which has no elements "
                "(torch raises too: there is no identity to return)",
                t.loc,
                hint="skip the reduction where the dim is empty (`if n > 0:` in host code)",
            )


def _dims_of(dim: Any) -> list[Any]:
    return list(dim) if isinstance(dim, (list, tuple)) else [dim]


lowering(torch.amax, T.amax)(_reducer("max"))
lowering(torch.amin, T.amin)(_reducer("min"))
lowering(torch.argmax, T.argmax)(_reducer("argmax"))
lowering(torch.argmin, T.argmin)(_reducer("argmin"))


@lowering(torch.prod, T.prod)
def _prod(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """Over ``dim`` (an int; every dim without one) with ``keepdim``; integers and bools in
    int64 as in torch (or ``dtype=``), half precision in fp32."""
    dim = _dim_arg(args, kwargs)
    keepdim = kwargs.pop("keepdim", args[1] if len(args) > 1 else False)
    dtype = kwargs.pop("dtype", None)
    if dtype is None and not t.dtype_of(x).is_floating_point:
        dtype = torch.int64
    out = t.to_dtype(x, dtype) if dtype is not None else x
    ndim = t.value_node(out).ndim
    for d in range(ndim - 1, -1, -1) if dim is None else [dim]:
        out = scans.reduce(t, _times, out, d, other=1, keep_dims=bool(keepdim) and dim is not None)
    return out


def _times(a: Any, b: Any) -> Any:
    return a * b


def _max_min(kind: str) -> Handler:
    def handler(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        """``(values, indices)`` over an int ``dim``; over all dims without one; elementwise of two tiles."""
        dim = _dim_arg(args, kwargs)
        if dim is not None and not isinstance(dim, int):  # torch.max(a, b) is elementwise
            return t.pointwise("maximum" if kind == "max" else "minimum", x, dim)
        if dim is None:
            return t.reduce(kind, x, None)
        _refuse_empty(t, f"torch.{kind}", x, dim)  # (values and indices)
        keepdim = kwargs.pop("keepdim", args[1] if len(args) > 1 else False)
        values = t.reduce(kind, x, dim, keepdim)
        indices = t.reduce("arg" + kind, x, dim, keepdim)
        return (
            torch.return_types.max((values, indices))
            if kind == "max"
            else torch.return_types.min((values, indices))
        )

    return handler


lowering(torch.max, T.max)(_max_min("max"))
lowering(torch.min, T.min)(_max_min("min"))


@lowering(torch.var, T.var)
def _var(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """Over ``dim`` with ``correction`` / ``unbiased`` and ``keepdim``; two-pass, in fp32."""
    dtype = t.value_node(x).dtype
    var = _variance(t, x, *args, **kwargs)
    return t.to_dtype(var, dtype) if dtype.is_floating_point else var


def _spread_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any, bool]:
    """(dim, correction, unbiased, keepdim) of a var / std call, positional forms as torch's:
    ``var(x, unbiased)``, ``var(x, dim, unbiased, keepdim)`` (they were read from keywords
    only: ``var(x, 1, False)`` divided by n - 1)."""
    if args and isinstance(args[0], bool):  # var(x, False): the whole tile, biased
        kwargs.setdefault("unbiased", args[0])
        args = ()
    dim = _dim_arg(args, kwargs)
    correction = kwargs.pop("correction", None)
    unbiased = kwargs.pop("unbiased", args[1] if len(args) > 1 else None)
    keepdim = kwargs.pop("keepdim", args[2] if len(args) > 2 else False)
    return dim, correction, unbiased, keepdim


def _variance(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """The variance in fp32 (fp64 for fp64 ``x``), before any cast back."""
    dim, correction, unbiased, keepdim = _spread_args(args, kwargs)
    if correction is None:
        correction = 0 if unbiased is False else 1
    dtype = t.value_node(x).dtype
    wide = dtype.is_floating_point and dtype.itemsize >= 4
    xf = x if wide else t.to_dtype(x, torch.float32)  # fp16's squares overflow past 256
    mean = t.mean(xf, dim, True)
    diff = t.pointwise("sub", xf, mean)
    total = t.reduce("sum", t.pointwise("mul", diff, diff), dim, keepdim)
    node = t.value_node(xf)
    dims = dim if isinstance(dim, (list, tuple)) else [dim] if dim is not None else range(node.ndim)
    count = t.element_count(node, [t._axis(node, d) for d in dims], keepdim)
    # torch divides by max(0, n - correction): a dim of 0 (or 1, unbiased) elements gives 0 / 0
    dof = (
        max(0, count - correction)
        if isinstance(count, int)
        else t.pointwise("maximum", t.pointwise("sub", count, correction), 0)
    )
    return t.pointwise("truediv", total, dof)


@lowering(torch.std, T.std)
def _std(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """``sqrt(var)``, with ``var``'s ``dim`` / ``correction`` / ``unbiased`` / ``keepdim``;
    the root taken before the cast back (an fp16 std of 20000 has a variance past fp16)."""
    dtype = t.value_node(x).dtype
    std = t.pointwise("sqrt", _variance(t, x, *args, **kwargs))
    return t.to_dtype(std, dtype) if dtype.is_floating_point else std


def _with_mean(spread: Handler) -> Handler:
    def handler(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        dim, _, _, keepdim = _spread_args(args, dict(kwargs))
        mean = t.mean(x, dim, keepdim)
        return spread(t, x, *args, **kwargs), mean

    handler.__doc__ = f"``({spread.__name__.strip('_')}, mean)`` over ``dim``, as torch gives them."
    return handler


lowering(torch.var_mean)(_with_mean(_var))
lowering(torch.std_mean)(_with_mean(_std))


@lowering(torch.softmax, F.softmax, T.softmax, torch.special.softmax)
def _softmax(t: Any, x: Any, dim: Any = None, *args: Any, **kwargs: Any) -> Any:
    """Along ``dim`` (default -1), optional ``dtype``; computed in fp32 with the max subtracted."""
    dim = kwargs.pop("dim", dim)
    dim = -1 if dim is None else dim
    return composites.softmax_impl(t, x, dim, kwargs.get("dtype"), False, "torch.softmax")


@lowering(torch.log_softmax, F.log_softmax, T.log_softmax, torch.special.log_softmax)
def _log_softmax(t: Any, x: Any, dim: Any = None, *args: Any, **kwargs: Any) -> Any:
    """Along ``dim`` (default -1), optional ``dtype``; computed in fp32."""
    dim = kwargs.pop("dim", dim)
    dim = -1 if dim is None else dim
    return composites.softmax_impl(t, x, dim, kwargs.get("dtype"), True, "torch.log_softmax")


@lowering(torch.logsumexp, T.logsumexp, torch.special.logsumexp)
def _logsumexp(t: Any, x: Any, dim: Any, keepdim: bool = False) -> Any:
    """Along ``dim`` with ``keepdim``; computed in fp32 with the max subtracted (an infinite
    max is not subtracted: a row of -inf gives -inf, as torch does, not NaN)."""
    node = t.value_node(x)
    xf = t.to_dtype(x, composites.math_dtype(node.dtype))
    m = t.reduce("max", xf, dim, True)
    m = t.where(t.pointwise("eq", t.pointwise("abs", m), float("inf")), 0.0, m)
    s = t.reduce("sum", t.pointwise("exp", t.pointwise("sub", xf, m)), dim, keepdim)
    mk = m if keepdim else t.reduce("max", m, dim, False)
    out = node.dtype if node.dtype.is_floating_point else torch.float32  # ints: as torch
    return t.to_dtype(t.pointwise("add", t.pointwise("log", s), mk), out)


def _cumulative(kind: str) -> Handler:
    def handler(t: Any, x: Any, dim: Any = None, *, dtype: Any = None, **kwargs: Any) -> Any:
        """Along ``dim`` (never chunked); ints give int64, half precision scans in fp32."""
        dim = kwargs.pop("axis", dim)
        if dim is None or kwargs:
            raise UnsupportedOpError(f"torch.cum{kind} needs dim= (and no other keywords)")
        return scans.cumulative(t, kind, x, dim, dtype)

    return handler


lowering(torch.cumsum, T.cumsum)(_cumulative("sum"))
lowering(torch.cumprod, T.cumprod)(_cumulative("prod"))


@lowering(torch.logcumsumexp, T.logcumsumexp)
def _logcumsumexp(t: Any, x: Any, dim: int) -> Any:
    """Along ``dim`` (never chunked); overflow-free (``m + log1p(exp(min - m))``), half
    precision in fp32."""
    return scans.log_cumulative_sum_exp(t, x, dim)


def _extreme(kind: str) -> Handler:
    def handler(t: Any, x: Any, dim: int) -> Any:
        """``(values, indices)`` along ``dim`` (never chunked); ties take the later index."""
        return scans.cumulative_extreme(t, kind, x, dim)

    return handler


lowering(torch.cummax, T.cummax)(_extreme("max"))
lowering(torch.cummin, T.cummin)(_extreme("min"))


@lowering(torch.rand_like, torch.rand, torch.randn_like, torch.randn, torch.bernoulli)
def _torch_random(t: Any, *args: Any, **kwargs: Any) -> Any:
    """Not supported in device code: use ``tc.rand(shape, seed, offset)``."""
    raise UnsupportedOpError(
        "torch's random functions in device code (their stream depends on the launch)",
        hint="use tc.rand(shape, seed, offset): the same numbers for every config and in ref mode",
    )


@lowering(torch.where)
def _where(t: Any, cond: Any, a: Any, b: Any) -> Any:
    """``torch.where(cond, a, b)`` with broadcasting and type promotion."""
    return t.where(cond, a, b)


@lowering(torch.clamp, T.clamp, torch.clip, T.clip)
def _clamp(t: Any, x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    """``min`` / ``max`` as scalars or tiles."""
    out = x
    if min is not None:
        out = t.pointwise("maximum", out, min)
    if max is not None:
        out = t.pointwise("minimum", out, max)
    return out


@lowering(T.to, T.type)
def _to(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """A dtype cast (``.to(dtype)``, ``.to(other)``); devices are ignored."""
    dtype = kwargs.pop("dtype", None)
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
        elif hasattr(a, "dtype") and not isinstance(a, (str, torch.device)):
            dtype = a.dtype
    if dtype is not None and dtype not in dtypes.TRITON_DTYPES:
        raise UnsupportedOpError(
            f".to({dtype}): device code has no {dtype} values",
            hint=f"compute in a supported dtype ({dtypes.supported_names()}); a complex value "
            "as its real and imaginary parts in two float tiles",
        )
    return x if dtype is None else t.to_dtype(x, dtype)


for _method, _dtype in (
    (T.float, torch.float32),
    (T.half, torch.float16),
    (T.bfloat16, torch.bfloat16),
    (T.double, torch.float64),
    (T.int, torch.int32),
    (T.long, torch.int64),
    (T.short, torch.int16),
    (T.char, torch.int8),
    (T.byte, torch.uint8),
    (T.bool, torch.bool),
):
    lowering(_method)(lambda t, x, _d=_dtype: t.to_dtype(x, _d))


@lowering(T.type_as)
def _type_as(t: Any, x: Any, other: Any) -> Any:
    """A cast to ``other``'s dtype."""
    return t.to_dtype(x, other.dtype)


lowering(T.unsqueeze, torch.unsqueeze)(views.unsqueeze)
lowering(T.squeeze, torch.squeeze)(views.squeeze)
lowering(T.permute, torch.permute)(views.permute)
lowering(T.transpose, torch.transpose, T.swapaxes, torch.swapaxes, T.t, torch.t)(views.transpose)
lowering(T.expand)(views.expand)
lowering(T.expand_as)(views.expand_as)
lowering(torch.broadcast_to, T.broadcast_to)(views.expand)
lowering(torch.stack)(concat.stack)
lowering(torch.cat, torch.concat, torch.concatenate)(concat.cat)
lowering(torch.chunk, T.chunk)(splits.chunk)
lowering(torch.split, T.split)(splits.split)
lowering(torch.unbind, T.unbind)(splits.unbind)
lowering(torch.gather, T.gather)(tile_gather.user_gather)
lowering(torch.take_along_dim, T.take_along_dim)(tile_gather.take_along_dim)
lowering(torch.roll, T.roll)(tile_gather.roll)
lowering(torch.flip, T.flip)(tile_gather.flip)
lowering(F.pad)(tile_shifts.pad)
lowering(torch.sort, T.sort)(sorting.sort)
lowering(torch.argsort, T.argsort)(sorting.argsort)
lowering(torch.topk, T.topk)(sorting.topk)
lowering(torch.median, T.median)(sorting.median)
lowering(torch.einsum)(einsum.einsum)
lowering(torch.lerp, T.lerp)(composites.lerp)
lowering(torch.addcmul, T.addcmul)(composites.addcmul)
lowering(torch.addcdiv, T.addcdiv)(composites.addcdiv)
lowering(torch.nan_to_num, T.nan_to_num)(composites.nan_to_num)
lowering(torch.sign, T.sign, torch.sgn, T.sgn)(composites.sign)
lowering(F.softplus)(composites.softplus)
lowering(F.mish)(composites.mish)
lowering(F.hardsigmoid)(composites.hardsigmoid)
lowering(F.hardswish)(composites.hardswish)
lowering(F.hardtanh)(composites.hardtanh)
lowering(F.relu6)(composites.relu6)
lowering(torch.square, T.square)(composites.square)
lowering(T.masked_fill, torch.masked_fill)(composites.masked_fill)
lowering(torch.any, T.any)(composites.any_true)
lowering(torch.all, T.all)(composites.all_true)
lowering(torch.linalg.vector_norm)(composites.vector_norm)
lowering(F.one_hot)(composites.one_hot)
for _fns, _handler in (
    *composites.LOWERINGS,
    *activations.LOWERINGS,
    *tile_gather.LOWERINGS,
    *sequences.LOWERINGS,
    *float_bits.LOWERINGS,
    *losses.LOWERINGS,
    *dots.LOWERINGS,
):
    lowering(*_fns)(_handler)


@lowering(T.flatten, torch.flatten)
def _flatten(t: Any, x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    """The dims ``start_dim..end_dim`` merged into one (a reshape: whole dims of static size)."""
    shape = list(t.value_node(x).shape)
    lo, hi = (d % len(shape) if shape else 0 for d in (start_dim, end_dim))
    return views.reshape(t, x, *shape[:lo], -1, *shape[hi + 1 :]) if hi > lo else x


@lowering(T.unflatten, torch.unflatten)
def _unflatten(t: Any, x: Any, dim: int, sizes: Any) -> Any:
    """Dim ``dim`` split into ``sizes`` (one may be -1): a reshape, as ``Tensor.view``."""
    shape = list(t.value_node(x).shape)
    at = dim % len(shape) if shape else 0
    return views.reshape(t, x, *shape[:at], *sizes, *shape[at + 1 :])


@lowering(T.reshape, torch.reshape, T.view)
def _reshape(t: Any, x: Any, *shape: Any) -> Any:
    """Adds or drops size-1 dims; merges or splits whole dims of static size where every dim
    after the first of a group is a power of two (``x[t, :].view(t, g, 128)``); tile dims keep
    their place; not a dtype view."""
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        return views.bitcast(t, x, shape[0])
    return views.reshape(t, x, *shape)


@lowering(torch.zeros_like, torch.ones_like, torch.full_like, torch.empty_like)
def _like(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - dispatch below
    raise AssertionError


def _like_factory(fill: Any) -> Handler:
    def handler(t: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        """A register tile of ``x``'s shape, optional ``dtype``."""
        node = t.value_node(x)
        value = args[0] if fill is None else fill
        dtype = kwargs.get("dtype") or node.dtype
        return t.full(list(node.shape), value, dtype)

    return handler


_REGISTRY[torch.zeros_like] = _like_factory(0.0)
_REGISTRY[torch.empty_like] = _like_factory(0.0)
_REGISTRY[torch.ones_like] = _like_factory(1.0)
_REGISTRY[torch.full_like] = _like_factory(None)

"""``torch.frexp`` and ``torch.ldexp`` on tiles (stage: frontend; in: the tracer and the call's
operands; out: traced values).

Both work on a float's bits, so they are exact where a formula through ``log2`` / ``exp2``
would round: ``frexp`` reads the exponent field of the value viewed as an integer (a subnormal
scaled into the normal range first) and writes ``2**-1`` into it for the mantissa; ``ldexp``
by an integer exponent scales as C's ``scalbn`` does (musl's steps: at most two scalings by a
large power of two, then one by ``2**n`` built from its bits), so the result rounds once, as
torch's CPU kernel (``std::ldexp``) does, where ``x * 2.0 ** e`` overflows ``2**e`` first
(``ldexp(2**-100, 200)`` is ``2**100``, not inf). Half precision computes in fp32 (each of its
values is an fp32 value, and fp32's range holds every result before the one rounding), fp64 in
fp64. Registered in :mod:`~tilecraft.frontend.lowerings`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import UnsupportedOpError
from tilecraft.frontend.views import bitcast
from tilecraft.ir import dtypes

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue


@dataclasses.dataclass(frozen=True)
class _Format:
    """An IEEE binary format's fields: the integer of its width, mantissa bits, bias."""

    ints: torch.dtype
    mantissa: int
    bias: int

    @property
    def exp_mask(self) -> int:
        return 2 * self.bias + 1  # the exponent field's bits, all ones (inf and NaN)

    @property
    def keep_sign_mantissa(self) -> int:
        """Every bit but the exponent field's, as a signed integer of the format's width."""
        width = 8 * self.ints.itemsize
        unsigned = (1 << width) - 1 - (self.exp_mask << self.mantissa)
        return unsigned - (1 << width)  # the sign bit is set: negative as a signed int


_FP32 = _Format(torch.int32, 23, 127)
_FP64 = _Format(torch.int64, 52, 1023)


def _format(dtype: torch.dtype) -> tuple[torch.dtype, _Format]:
    """The dtype computed in (fp32 for half precision) and its format."""
    return (torch.float64, _FP64) if dtype == torch.float64 else (torch.float32, _FP32)


def frexp(t: Tracer, x: Any, *, out: Any = None) -> Any:
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent``, ``|mantissa|`` in
    ``[0.5, 1)`` in ``x``'s dtype and an int32 exponent; zeros, infinities and NaN are their own
    mantissa with exponent 0, as in torch. Exact: read from the value's bits."""
    dtype = t.dtype_of(x)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise UnsupportedOpError(
            f"torch.frexp of a {dtype} value: it takes float tiles only (as torch does)",
            t.loc,
            hint="cast first: torch.frexp(x.to(torch.float32))",
        )
    compute, fmt = _format(dtype)
    xc = _widened(t, x, compute)
    p = t.pointwise
    field = _exponent_field(t, xc, fmt)
    # a subnormal scaled by 2**(mantissa + 1) is normal: its field says its exponent
    sub = p("and", p("eq", field, 0), p("ne", xc, 0))
    scaled = t.where(sub, p("mul", xc, float(2 ** (fmt.mantissa + 1))), xc)
    bits = bitcast(t, scaled, fmt.ints)
    shift = t.where(sub, fmt.mantissa + 1, 0)
    exponent = p("sub", p("sub", _exponent_field(t, scaled, fmt), fmt.bias - 1), shift)
    half = p("bitwise_or", p("bitwise_and", bits, fmt.keep_sign_mantissa), _field(fmt, -1))
    mantissa = bitcast(t, half, compute)
    special = p("or", p("eq", xc, 0), p("logical_not", p("isfinite", xc)))
    mantissa = t.where(special, xc, mantissa)
    exponent = t.where(special, 0, t.to_dtype(exponent, torch.int32))
    result: tuple[Any, Any] = (t.to_dtype(mantissa, dtype), t.to_dtype(exponent, torch.int32))
    return torch.return_types.frexp(result)


def _widened(t: Tracer, x: Any, compute: torch.dtype) -> TileValue:
    """``x`` in ``compute``, exactly: a bf16 tile by its bits (its 16 bits are an fp32's top
    half), as the interpreter's bf16 cast flushes subnormals to zero."""
    if t.dtype_of(x) != torch.bfloat16:
        return t.to_dtype(x, compute)
    bits = t.to_dtype(bitcast(t, x, torch.int16), torch.int32)
    return bitcast(t, t.pointwise("lshift", bits, 16), torch.float32)


def _exponent_field(t: Tracer, xc: Any, fmt: _Format) -> TileValue:
    """The biased exponent field of ``xc``'s bits."""
    bits = bitcast(t, xc, fmt.ints)
    return t.pointwise("bitwise_and", t.pointwise("rshift", bits, fmt.mantissa), fmt.exp_mask)


def _field(fmt: _Format, exponent: int) -> int:
    """The bits of ``2**exponent`` (a normal power of two) in ``fmt``."""
    return (exponent + fmt.bias) << fmt.mantissa


def ldexp(t: Tracer, x: Any, other: Any, *, out: Any = None) -> Any:
    """``x * 2**other``: an integer ``other`` scales exactly, rounding once (C's ``scalbn``,
    as torch's CPU kernel; an int64 exponent past int32 saturates where that kernel wraps it),
    a float ``other`` multiplies by ``exp2(other)`` as torch does; the result is the promoted
    float dtype (fp32 for ints)."""
    result = dtypes.promote(t.promotion_of(x), t.promotion_of(other))
    if not isinstance(result, torch.dtype) or not result.is_floating_point:
        result = torch.float32
    e_dtype = t.dtype_of(other)
    if e_dtype.is_floating_point:  # torch: x * pow(2, other), the power in other's dtype
        return t.to_dtype(t.pointwise("mul", x, t.pointwise("exp2", other)), result)
    compute, fmt = _format(result)
    scaled = _scalbn(t, _widened(t, t.to_dtype(x, result), compute), other, fmt)
    return t.to_dtype(scaled, result)


def _scalbn(t: Tracer, y: Any, n: Any, fmt: _Format) -> TileValue:
    """musl's ``scalbn``: ``y * 2**n`` rounded once. A large ``n`` first scales by
    ``2**(bias)`` (or ``2**-(bias - 1 - mantissa - 1)``, which keeps a result that stays
    normal exact and lets only the last step round) at most twice, then by ``2**n`` for the
    ``n`` left in the normal range, built from its bits."""
    p = t.pointwise
    hi, lo = fmt.bias, 1 - fmt.bias
    down = fmt.bias - 1 - (fmt.mantissa + 1)  # 102 for fp32, 969 for fp64
    limit = 4 * fmt.bias  # past this the result is 0 or inf whatever y is: no int overflow
    wide = t.to_dtype(n, torch.int64)  # an int8 exponent holds no limit
    n = t.to_dtype(p("minimum", p("maximum", wide, -limit), limit), fmt.ints)
    for _ in range(2):
        big, small = p("gt", n, hi), p("lt", n, lo)
        y = t.where(big, p("mul", y, 2.0**hi), t.where(small, p("mul", y, 2.0**-down), y))
        n = t.where(big, p("sub", n, hi), t.where(small, p("add", n, down), n))
    n = p("minimum", p("maximum", n, lo), hi)
    power = bitcast(t, p("lshift", p("add", n, fmt.bias), fmt.mantissa), t.dtype_of(y))
    return p("mul", y, power)


T = torch.Tensor
LOWERINGS: list[tuple[tuple[Any, ...], Any]] = [
    ((torch.frexp, T.frexp), frexp),
    ((torch.ldexp, T.ldexp), ldexp),
]

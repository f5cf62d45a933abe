"""Transcendental functions for Triton's interpreter (stage: runtime; called by the code that
``codegen/pointwise.py`` emits for the ``atan`` ... ``lgamma`` ops of ``ir/pointwise.py``).

GPU targets call libdevice / ocml for these (exact to an ulp or two); the interpreter has no
libdevice (its calls return None), so a kernel run there computes them from the functions it
has: sin, cos, exp, log, sqrt, erf, in fp64 (rounded once to the operand's dtype). Where a
short approximation is not exact enough for fp64 (atan, erfinv), Newton steps on a function the
interpreter computes exactly (numpy's sin/cos/erf) refine it, so kernels match torch to a few
ulp.
(No annotations: Triton resolves the names a jitted function mentions as kernel globals.)
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _const(x, value):  # type: ignore[no-untyped-def]
    """``value`` in ``x``'s dtype (a bare float literal is fp32: pi / 2 lost digits in fp64)."""
    return tl.full(x.shape, value, x.dtype)


@triton.jit
def _atan64(x):  # type: ignore[no-untyped-def]
    """Cephes' atanf (a cubic in z^2 after reduction to |z| <= tan(pi / 8)), then one Newton
    step on tan(y) = x for fp64's digits where cos(y) keeps them (|x| < 1e6)."""
    a = tl.abs(x)
    big = a > 2.414213562373095
    mid = a > 0.4142135623730950
    base = tl.where(
        big, _const(x, 1.5707963267948966), tl.where(mid, _const(x, 0.7853981633974483), 0.0)
    )
    z = tl.where(big, -1.0 / a, tl.where(mid, (a - 1.0) / (a + 1.0), a))
    z2 = z * z
    p = ((8.05374449538e-2 * z2 - 1.38776856032e-1) * z2 + 1.99777106478e-1) * z2
    y = base + (p - 3.33329491539e-1) * z2 * z + z
    refined = y - tl.cos(y) * (tl.sin(y) - a * tl.cos(y))
    y = tl.where(a < 1e6, refined, y)
    y = tl.where(a == float("inf"), _const(x, 1.5707963267948966), y)
    return tl.where(x < 0, -y, tl.where(x == x, y, x))


@triton.jit
def _atan2_64(y, x):  # type: ignore[no-untyped-def]
    """C's atan2: the angle of (x, y), signed zeros and infinities as C gives them."""
    pi = _const(y, 3.141592653589793)
    both_inf = (tl.abs(x) == float("inf")) & (tl.abs(y) == float("inf"))
    xs = tl.where(both_inf, tl.where(x < 0, -1.0, 1.0), x)
    ys = tl.where(both_inf, tl.where(y < 0, -1.0, 1.0), y)
    # the smaller magnitude over the larger, so the quotient neither overflows nor loses digits
    steep = tl.abs(ys) > tl.abs(xs)
    r = tl.where(steep, _atan64(xs / ys), _atan64(ys / xs))
    y_neg = (ys < 0) | ((ys == 0) & (1.0 / ys < 0))
    half = tl.where(y_neg, -0.5 * pi, 0.5 * pi)
    x_neg = (xs < 0) | ((xs == 0) & (1.0 / xs < 0))
    flat = tl.where(x_neg, tl.where(y_neg, r - pi, r + pi), r)
    zero = tl.where(x_neg, tl.where(y_neg, -pi, pi), ys)  # y == 0: +-0 or +-pi
    out = tl.where(steep, half - r, flat)
    out = tl.where(ys == 0, tl.where(xs != xs, xs, zero), out)
    return tl.where((x != x) | (y != y), x + y, out)


@triton.jit
def _asin64(x):  # type: ignore[no-untyped-def]
    return _atan2_64(x, tl.sqrt((1.0 - x) * (1.0 + x)))


@triton.jit
def _acos64(x):  # type: ignore[no-untyped-def]
    return _atan2_64(tl.sqrt((1.0 - x) * (1.0 + x)), x)


@triton.jit
def _tan64(x):  # type: ignore[no-untyped-def]
    return tl.sin(x) / tl.cos(x)


@triton.jit
def _expm1(a):  # type: ignore[no-untyped-def]
    """exp(a) - 1 exact for small ``a`` ((u - 1) a / log(u), Kahan)."""
    u = tl.exp(a)
    return tl.where(u == 1.0, a, tl.where(u == float("inf"), u, (u - 1.0) * (a / tl.log(u))))


@triton.jit
def _tanh64(x):  # type: ignore[no-untyped-def]
    """u / (u + 2) for u = expm1(2|x|), exact near 0; 1 past |x| = 20, where fp64's u / (u + 2)
    rounds to 1 anyway (and u would overflow past 355); the sign of -0.0 kept."""
    a = tl.abs(x)
    u = _expm1(2.0 * a)
    t = tl.where(a > 20.0, 1.0, u / (u + 2.0))
    return tl.where(x < 0, -t, tl.where(x == x, tl.where(a == 0.0, x, t), x))


@triton.jit
def _sinh64(x):  # type: ignore[no-untyped-def]
    """(u + u / (u + 1)) / 2 for u = expm1(|x|), exact near 0; exp(|x| - ln 2) where exp
    overflows before sinh does."""
    a = tl.abs(x)
    u = _expm1(a)
    s = tl.where(a > 20.0, tl.exp(a - 0.6931471805599453), 0.5 * (u + u / (u + 1.0)))
    return tl.where(x < 0, -s, tl.where(x == x, s, x))


@triton.jit
def _cosh64(x):  # type: ignore[no-untyped-def]
    a = tl.abs(x)
    e = tl.exp(a)
    return tl.where(a > 20.0, tl.exp(a - 0.6931471805599453), 0.5 * (e + 1.0 / e))


@triton.jit
def _log1p(x):  # type: ignore[no-untyped-def]
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.where(u == float("inf"), u, tl.log(u) * (x / (u - 1.0))))


@triton.jit
def _asinh64(x):  # type: ignore[no-untyped-def]
    a = tl.abs(x)
    small = _log1p(a + a * a / (1.0 + tl.sqrt(1.0 + a * a)))
    s = tl.where(a > 1e15, tl.log(a) + 0.6931471805599453, small)
    return tl.where(x < 0, -s, tl.where(x == x, s, x))


@triton.jit
def _acosh64(x):  # type: ignore[no-untyped-def]
    t = x - 1.0
    near = _log1p(t + tl.sqrt(t * (x + 1.0)))
    out = tl.where(x > 1e15, tl.log(x) + 0.6931471805599453, near)
    return tl.where(x < 1.0, float("nan"), out)


@triton.jit
def _atanh64(x):  # type: ignore[no-untyped-def]
    a = tl.abs(x)
    s = 0.5 * _log1p(2.0 * a / (1.0 - a))
    return tl.where(x < 0, -s, tl.where(x == x, s, x))


@triton.jit
def _erfc64(x):  # type: ignore[no-untyped-def]
    """1 - erf(x) below 3 (at most 5 of fp64's 16 digits lost), the continued fraction above."""
    f = x
    for k in tl.static_range(60, 0, -1):
        f = x + (k * 0.5) / f
    tail = tl.exp(-x * x) / (f * 1.7724538509055159)
    return tl.where(x < 3.0, 1.0 - tl.erf(x), tail)


@triton.jit
def _erfinv64(x):  # type: ignore[no-untyped-def]
    """Giles' single-precision erfinv, then two Newton steps on erf(y) = x (exact erf)."""
    w = -tl.log((1.0 - x) * (1.0 + x))
    lo = w - 2.5
    p = 3.43273939e-07 + 2.81022636e-08 * lo
    p = -3.5233877e-06 + p * lo
    p = -4.39150654e-06 + p * lo
    p = 0.00021858087 + p * lo
    p = -0.00125372503 + p * lo
    p = -0.00417768164 + p * lo
    p = 0.246640727 + p * lo
    p = 1.50140941 + p * lo
    hi = tl.sqrt(w) - 3.0
    q = 0.000100950558 - 0.000200214257 * hi
    q = 0.00134934322 + q * hi
    q = -0.00367342844 + q * hi
    q = 0.00573950773 + q * hi
    q = -0.0076224613 + q * hi
    q = 0.00943887047 + q * hi
    q = 1.00167406 + q * hi
    q = 2.83297682 + q * hi
    y = tl.where(w < 5.0, p, q) * x
    for _ in tl.static_range(2):
        step = (tl.erf(y) - x) / (1.1283791670955126 * tl.exp(-y * y))
        y = tl.where(step == step, y - step, y)
    return tl.where(tl.abs(x) == 1.0, x * float("inf"), y)


@triton.jit
def _lanczos_lgamma(z):  # type: ignore[no-untyped-def]
    """log Gamma(z) for z >= 0.5 (Lanczos, g = 7, nine terms: ~1e-15 relative)."""
    w = z - 1.0
    a = _const(z, 0.99999999999980993)
    a += _const(z, 676.5203681218851) / (w + 1.0)
    a += _const(z, -1259.1392167224028) / (w + 2.0)
    a += _const(z, 771.32342877765313) / (w + 3.0)
    a += _const(z, -176.61502916214059) / (w + 4.0)
    a += _const(z, 12.507343278686905) / (w + 5.0)
    a += _const(z, -0.13857109526572012) / (w + 6.0)
    a += _const(z, 9.9843695780195716e-6) / (w + 7.0)
    a += _const(z, 1.5056327351493116e-7) / (w + 8.0)
    t = w + 7.5
    return _const(z, 0.9189385332046728) + (w + 0.5) * tl.log(t) - t + tl.log(a)


@triton.jit
def _lgamma64(x):  # type: ignore[no-untyped-def]
    """Lanczos for x >= 0.5, the reflection formula below (poles give inf, as torch)."""
    reflect = x < 0.5
    g = _lanczos_lgamma(tl.where(reflect, 1.0 - x, x))
    # sin(pi x) from x's distance to the nearest integer: exactly 0 at the poles
    r = x - tl.floor(x + 0.5)
    s = tl.abs(tl.sin(_const(x, 3.141592653589793) * r))
    out = tl.where(reflect, tl.log(_const(x, 3.141592653589793) / s) - g, g)
    out = tl.where((x == 1.0) | (x == 2.0), 0.0, out)
    return tl.where(tl.abs(x) == float("inf"), tl.abs(x), out)


# The functions generated code calls: computed in fp64 whatever the operand's dtype (the
# interpreter's fp64 costs nothing extra; fp32's Lanczos sum lost 4 digits near lgamma's roots),
# then rounded once to it.


@triton.jit
def atan(x):  # type: ignore[no-untyped-def]
    return _atan64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def atan2(y, x):  # type: ignore[no-untyped-def]
    return _atan2_64(y.to(tl.float64), x.to(tl.float64)).to(y.dtype)


@triton.jit
def asin(x):  # type: ignore[no-untyped-def]
    return _asin64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def acos(x):  # type: ignore[no-untyped-def]
    return _acos64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def tan(x):  # type: ignore[no-untyped-def]
    return _tan64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def tanh(x):  # type: ignore[no-untyped-def]
    return _tanh64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def sinh(x):  # type: ignore[no-untyped-def]
    return _sinh64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def cosh(x):  # type: ignore[no-untyped-def]
    return _cosh64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def asinh(x):  # type: ignore[no-untyped-def]
    return _asinh64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def acosh(x):  # type: ignore[no-untyped-def]
    return _acosh64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def atanh(x):  # type: ignore[no-untyped-def]
    return _atanh64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def erfc(x):  # type: ignore[no-untyped-def]
    return _erfc64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def erfinv(x):  # type: ignore[no-untyped-def]
    return _erfinv64(x.to(tl.float64)).to(x.dtype)


@triton.jit
def lgamma(x):  # type: ignore[no-untyped-def]
    return _lgamma64(x.to(tl.float64)).to(x.dtype)

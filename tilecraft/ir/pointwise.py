"""The pointwise op table: one entry per elementwise op, with its Triton emission and its eager
meaning. Tracing (frontend) registers torch functions from it; codegen emits from it.

``template`` is formatted with the operands' Triton expressions, already cast to the compute
dtype. ``float_only`` ops promote integer inputs to float32 as torch does; ``bool_result`` ops
(comparisons) produce torch.bool.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

import torch

from tilecraft.ir import philox


@dataclasses.dataclass(frozen=True)
class PointwiseOp:
    name: str
    arity: int
    template: str
    eager: Callable[..., Any]
    torch_fns: tuple[Any, ...] = ()
    float_only: bool = False
    bool_result: bool = False
    int_only: bool = False  # bitwise ops: integer or bool operands only
    # roundings: an integer or bool operand is returned as it is (torch.floor of an int32 is
    # that int32; through fp32, INT_MAX became INT_MIN)
    int_identity: bool = False
    reached_by: str = ""  # how user code reaches an op no torch function names (docs/ops.md)
    # the emission for fp32 operands where Triton's default rounds otherwise than torch: its
    # fp32 ``/`` is div.full.f32 (within 2 ulp), so floor(21.0 / 7.0) could be 2. Floors of
    # quotients divide exactly (tl.math.div_rn); plain ``/`` stays div.full.f32, as
    # torch.compile's does (div_rn there cost 7-22% on softmax and Welford rows, exact_div_s24)
    fp32_template: str = ""
    # the emission for float operands where Triton's operator differs from torch's: its unary
    # minus is 0 - x, +0.0 for x = 0.0 (torch.neg gives -0.0; 1 / -x then had the wrong sign)
    float_template: str = ""
    # 32-bit registers per element that the op's expansion holds at once beyond its operands,
    # for ops far heavier than one instruction (config/resources.py counts them where the op
    # runs): tl.rand's Philox rounds keep four counter words per element (Gumbel sampling over
    # 8192-wide chunks at 16 warps, 16 elements a thread: ptxas 104 registers, 41 predicted
    # without them); libdevice's erff evaluates its polynomial branches side by side (a GEMM
    # epilogue gelu(acc + bias) at 128x256 tiles, 8 warps, sm_90: 158 registers with the bias
    # alone, 169 with tanh's gelu, 255 and 56 bytes spilled with erf's)
    expansion_registers: float = 0.0
    # the emission where both operands are provably >= 0 (ir/int_ranges.nonnegative): an int
    # floor division or modulo is Triton's truncating ``//`` / ``%`` there, without the sign
    # fix-up (a tile's positions // a block size)
    nonneg_template: str = ""
    logical: bool = False  # torch.logical_*: operands are taken as their truth (x != 0)
    # the emission for float operands on GPU targets where the interpreter's form is exact only
    # there: Triton's float ``%`` is numpy's fmod in the interpreter but LLVM's frem on GPUs,
    # which NVPTX lowers to x - y * trunc(x / y) (1e10 % 3 gave 256 on an H200; torch 1), so
    # GPUs take libdevice's / ocml's exact fmod (the interpreter has no libdevice)
    device_template: str = ""
    # ops that read a float's bits: fp16 operands stay fp16 (widened to fp32 on an H100, a NaN
    # lost its sign bit: cvt.f32.f16 gives the canonical NaN)
    reads_bits: bool = False


POINTWISE: dict[str, PointwiseOp] = {}


def _op(
    name: str, arity: int, template: str, eager: Callable[..., Any], *fns: Any, **kw: Any
) -> None:
    POINTWISE[name] = PointwiseOp(name, arity, template, eager, tuple(fns), **kw)


T = torch.Tensor
# unary
_op(
    "neg",
    1,
    "-{0}",
    torch.neg,
    torch.neg,
    T.neg,
    T.__neg__,
    operator.neg,
    float_template="({0} * -1.0)",
)
_op("abs", 1, "tl.abs({0})", torch.abs, torch.abs, T.abs, T.__abs__, abs)
_op("exp", 1, "tl.exp({0})", torch.exp, torch.exp, T.exp, float_only=True)
_op("exp2", 1, "tl.exp2({0})", torch.exp2, torch.exp2, T.exp2, torch.special.exp2, float_only=True)
_op("log", 1, "tl.log({0})", torch.log, torch.log, T.log, float_only=True)
_op("log2", 1, "tl.log2({0})", torch.log2, torch.log2, T.log2, float_only=True)
# log1p: log(u) * x / (u - 1) for u = 1 + x (Goldberg), exact to a few ulp where log(1 + x)
# loses every digit of a tiny x (1e-8 gave 0); no libdevice, so the interpreter runs it too
_LOG1P = (
    "tl.where(1.0 + {0} == 1.0, {0}, tl.where(1.0 + {0} == float('inf'), 1.0 + {0}, "
    "tl.log(1.0 + {0}) * ({0} / ((1.0 + {0}) - 1.0))))"
)
_op("log1p", 1, _LOG1P, torch.log1p, torch.log1p, T.log1p, torch.special.log1p, float_only=True)
_op("sqrt", 1, "tl.sqrt({0})", torch.sqrt, torch.sqrt, T.sqrt, float_only=True)
_op("rsqrt", 1, "tl.rsqrt({0})", torch.rsqrt, torch.rsqrt, T.rsqrt, float_only=True)
_op("sin", 1, "tl.sin({0})", torch.sin, torch.sin, T.sin, float_only=True)
_op("cos", 1, "tl.cos({0})", torch.cos, torch.cos, T.cos, float_only=True)
_op(
    "erf",
    1,
    "tl.erf({0})",
    torch.erf,
    torch.erf,
    T.erf,
    torch.special.erf,
    float_only=True,
    expansion_registers=1,
)


def _libm(name: str, arity: int, eager: Any, *fns: Any, registers: float = 2.0) -> None:
    """A function GPUs take from libdevice / ocml (exact to an ulp or two), computed in the
    interpreter by ``runtime/triton_math.py`` (which has no libdevice)."""
    args = ", ".join(f"{{{i}}}" for i in range(arity))
    _op(
        name,
        arity,
        f"_tc_math.{name}({args})",
        eager,
        *fns,
        float_only=True,
        device_template=f"_tc_libdevice.{name}({args})",
        expansion_registers=registers,
    )


_libm("tan", 1, torch.tan, torch.tan, T.tan)
_libm("atan", 1, torch.atan, torch.atan, T.atan, torch.arctan, T.arctan)
_libm("asin", 1, torch.asin, torch.asin, T.asin, torch.arcsin, T.arcsin)
_libm("acos", 1, torch.acos, torch.acos, T.acos, torch.arccos, T.arccos)
_libm("sinh", 1, torch.sinh, torch.sinh, T.sinh)
_libm("cosh", 1, torch.cosh, torch.cosh, T.cosh)
_libm("asinh", 1, torch.asinh, torch.asinh, T.asinh, torch.arcsinh, T.arcsinh)
_libm("acosh", 1, torch.acosh, torch.acosh, T.acosh, torch.arccosh, T.arccosh)
# tanh was 2 sigmoid(2x) - 1: exact to an absolute ulp of 1, no relative accuracy near 0
# (tanh(1e-8) gave 0, tanh(x) / x was 1.19 at 1e-7)
_libm("tanh", 1, torch.tanh, torch.tanh, T.tanh)
_libm("atanh", 1, torch.atanh, torch.atanh, T.atanh, torch.arctanh, T.arctanh)
_libm("erfc", 1, torch.erfc, torch.erfc, T.erfc, torch.special.erfc)
_libm("erfinv", 1, torch.erfinv, torch.erfinv, T.erfinv, torch.special.erfinv, registers=4)
_libm("lgamma", 1, torch.lgamma, torch.lgamma, T.lgamma, torch.special.gammaln, registers=4)
_libm("atan2", 2, torch.atan2, torch.atan2, T.atan2, torch.arctan2, T.arctan2)
_op(
    "floor",
    1,
    "tl.floor({0})",
    torch.floor,
    torch.floor,
    T.floor,
    float_only=True,
    int_identity=True,
)
_op("ceil", 1, "tl.ceil({0})", torch.ceil, torch.ceil, T.ceil, float_only=True, int_identity=True)
_TRUNC = "tl.where({0} < 0, tl.ceil({0}), tl.floor({0}))"
_op(
    "trunc",
    1,
    _TRUNC,
    torch.trunc,
    torch.trunc,
    T.trunc,
    torch.fix,
    T.fix,
    float_only=True,
    int_identity=True,
)
# torch.round: half to even, from floor and exact arithmetic only (x - floor(x) is exact; no
# x + 0.5, which rounds above 2^23 in fp32), so the interpreter (no libdevice) computes it too
_ROUND = (
    "(tl.floor({0}) + tl.where({0} - tl.floor({0}) > 0.5, 1.0, tl.where({0} - tl.floor({0}) "
    "== 0.5, tl.floor({0}) - 2.0 * tl.floor(tl.floor({0}) * 0.5), 0.0)))"
)
_op("round", 1, _ROUND, torch.round, torch.round, T.round, float_only=True, int_identity=True)
_SIGMOID = torch.sigmoid, T.sigmoid, torch.special.expit
_op("sigmoid", 1, "tl.sigmoid({0})", torch.sigmoid, *_SIGMOID, float_only=True)
# expm1: (u - 1) * x / log(u) for u = exp(x) (Kahan), exact to a few ulp where exp(x) - 1 loses
# a tiny x's digits, as log1p above
_EXPM1 = (
    "tl.where(tl.exp({0}) == 1.0, {0}, tl.where(tl.exp({0}) - 1.0 == -1.0, -1.0, "
    "tl.where(tl.exp({0}) == float('inf'), tl.exp({0}), "
    "(tl.exp({0}) - 1.0) * ({0} / tl.log(tl.exp({0}))))))"
)
_op("expm1", 1, _EXPM1, torch.expm1, torch.expm1, T.expm1, torch.special.expm1, float_only=True)
_op(
    "log10",
    1,
    "(tl.log({0}) * 0.4342944819032518)",
    torch.log10,
    torch.log10,
    T.log10,
    float_only=True,
)
_op(
    "frac",
    1,
    "({0} - tl.where({0} < 0, tl.ceil({0}), tl.floor({0})))",
    torch.frac,
    torch.frac,
    T.frac,
    float_only=True,
)
# the sign bit, as torch.signbit and copysign read it: -0.0 has it, and a NaN may
# (runtime/triton_helpers.py: by bits)
_op(
    "signbit",
    1,
    "_tc_sign_bit({0})",
    torch.signbit,
    torch.signbit,
    T.signbit,
    float_only=True,
    bool_result=True,
    reads_bits=True,
)
_op(
    "copysign",
    2,
    "_tc_copy_sign({0}, {1})",
    torch.copysign,
    torch.copysign,
    T.copysign,
    float_only=True,
    reads_bits=True,
)
# correctly rounded in fp32, as CUDA torch's is: ``number / tile`` is ``reciprocal * number``
# in torch (Tensor.__rtruediv__), and a rounding after it (an equalization LUT's
# round(cdf * (255.0 / n))) must see the same reciprocal; rare enough that div_rn costs nothing
_op(
    "reciprocal",
    1,
    "(1.0 / {0})",
    torch.reciprocal,
    torch.reciprocal,
    T.reciprocal,
    float_only=True,
    fp32_template="tl.math.div_rn(1.0, {0})",
)
_op(
    "relu",
    1,
    "tl.maximum({0}, 0, propagate_nan=tl.PropagateNan.ALL)",
    torch.relu,
    torch.relu,
    T.relu,
    torch.nn.functional.relu,
)
_op(
    "silu",
    1,
    "({0} * tl.sigmoid({0}))",
    torch.nn.functional.silu,
    torch.nn.functional.silu,
    float_only=True,
)
_op(
    "gelu",
    1,
    "(0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476)))",
    torch.nn.functional.gelu,
    torch.nn.functional.gelu,
    float_only=True,
    expansion_registers=1,  # its erf's
)
_op(
    "gelu_tanh",
    1,
    "(0.5 * {0} * (1.0 + (2.0 * tl.sigmoid(1.5957691216057308 * ({0} + 0.044715 * {0} * {0} * {0})) - 1.0)))",
    lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    float_only=True,
    reached_by='`torch.nn.functional.gelu(x, approximate="tanh")`',
)
_op(
    "logical_not",
    1,
    "({0} == 0)",
    torch.logical_not,
    torch.logical_not,
    T.logical_not,
    bool_result=True,
)
_op("isnan", 1, "({0} != {0})", torch.isnan, torch.isnan, T.isnan, bool_result=True)
_op(
    "isinf",
    1,
    "(tl.abs({0}) == float('inf'))",
    torch.isinf,
    torch.isinf,
    T.isinf,
    bool_result=True,
)
_op(
    "isfinite",
    1,
    "(({0} == {0}) & (tl.abs({0}) != float('inf')))",
    torch.isfinite,
    torch.isfinite,
    T.isfinite,
    bool_result=True,
)
# binary
_op(
    "add",
    2,
    "({0} + {1})",
    torch.add,
    torch.add,
    T.add,
    T.__add__,
    T.__radd__,
    T.__iadd__,
    operator.add,
)
_op("sub", 2, "({0} - {1})", torch.sub, torch.sub, T.sub, T.__sub__, T.__isub__, operator.sub)
_op(
    "mul",
    2,
    "({0} * {1})",
    torch.mul,
    torch.mul,
    T.mul,
    T.__mul__,
    T.__rmul__,
    T.__imul__,
    operator.mul,
)
_op(
    "truediv",
    2,
    "({0} / {1})",
    torch.div,
    torch.div,
    torch.true_divide,
    T.div,
    T.__truediv__,
    T.__itruediv__,
    operator.truediv,
    float_only=True,
)
# torch floors (Python semantics); Triton's // and % truncate like C (and its float % is C's
# fmod), so the forms correct the result when the signs differ. Floats follow torch's kernels:
# the remainder from fmod (x - y * floor(x / y) lost every digit of 1e10 % 3), the floored
# quotient from (x - fmod) / y rounded to the nearest integer (runtime/triton_helpers.py). The
# tracer picks the _int variant by the result dtype.
_FLOOR = T.__floordiv__, operator.floordiv
_MOD = "tl.where(((R) != 0) & (((R) < 0) != ({1} < 0)), R + {1}, R)"
_C_MOD, _EXACT_FMOD = "{0} % {1}", "_tc_fmod({0}, {1})"
_op(
    "floordiv",
    2,
    f"_tc_floordiv({{0}}, {{1}}, {_C_MOD})",
    torch.floor_divide,
    torch.floor_divide,
    *_FLOOR,
    device_template=f"_tc_floordiv({{0}}, {{1}}, {_EXACT_FMOD})",
)
_op(
    "mod",
    2,
    _MOD.replace("R", _C_MOD),
    torch.remainder,
    torch.remainder,
    T.__mod__,
    operator.mod,
    device_template=_MOD.replace("R", _EXACT_FMOD),
)


# torch.div(rounding_mode="trunc"): C's truncating / for ints; floats divide exactly, then trunc
def _trunc_div(a: Any, b: Any) -> Any:
    return torch.div(a, b, rounding_mode="trunc")


_op("truncdiv_int", 2, "({0} // {1})", _trunc_div, int_only=True)
# a correctly rounded quotient where a rounding follows (torch.round(x, decimals=-1): 145 / 10
# must be 14.5, a tie, not div.full.f32's neighbour); no torch function names it
_op(
    "div_exact",
    2,
    "({0} / {1})",
    operator.truediv,
    float_only=True,
    fp32_template="tl.math.div_rn({0}, {1})",
    reached_by="`torch.round(x, decimals=d)`",
)
_op(
    "truncdiv",
    2,
    "tl.where({0} / {1} < 0, tl.ceil({0} / {1}), tl.floor({0} / {1}))",
    _trunc_div,
    float_only=True,
    fp32_template="tl.where(tl.math.div_rn({0}, {1}) < 0, tl.ceil(tl.math.div_rn({0}, {1})), "
    "tl.floor(tl.math.div_rn({0}, {1})))",
)
_op(
    "floordiv_int",
    2,
    "tl.where((({0} % {1}) != 0) & (({0} < 0) != ({1} < 0)), {0} // {1} - 1, {0} // {1})",
    torch.floor_divide,
    nonneg_template="({0} // {1})",
)
_op("mod_int", 2, _MOD.replace("R", _C_MOD), torch.remainder, nonneg_template="({0} % {1})")
# x ** y with a tensor or run-time exponent (constant ones: frontend/lowerings._pow_scalar);
# the tracer picks pow_int when both operands are integers
_POW = torch.pow, T.pow, T.__pow__, operator.pow
# GPUs: libdevice / ocml's pow (an ulp, C's special cases, as torch's CUDA powf);
# the interpreter: _tc_pow_float's exp2(y log2|x|) in fp64 (in fp32 it was 36 ulp off)
_op(
    "pow",
    2,
    "_tc_pow_float({0}, {1})",
    torch.pow,
    *_POW,
    float_only=True,
    device_template="_tc_libdevice.pow({0}, {1})",
    expansion_registers=2,
)
_op("pow_int", 2, "_tc_pow_int({0}, {1})", torch.pow, int_only=True, expansion_registers=2)
# hypot: scaled by the larger magnitude (no overflow at 1e30, no underflow at 1e-30); an
# infinite operand gives inf even beside NaN, as C's hypot
_HYPOT_M = "tl.maximum(tl.abs({0}), tl.abs({1}))"
# the scale divided by: 1 where the result is 0 or inf anyway (no 0 / 0 or inf / inf in lanes
# the where discards: the interpreter warned of invalid values at hypot(0, 0))
_HYPOT_D = f"tl.where(({_HYPOT_M} == 0) | ({_HYPOT_M} == float('inf')), 1.0, {_HYPOT_M})"
# (each operand compared: tl.maximum(inf, nan) is NaN in the interpreter, numpy's maximum)
_HYPOT_INF = "(tl.abs({0}) == float('inf')) | (tl.abs({1}) == float('inf'))"
_HYPOT = (
    f"tl.where({_HYPOT_INF}, float('inf'), tl.where({_HYPOT_M} == 0, 0.0, "
    f"{_HYPOT_M} * tl.sqrt(({{0}} / {_HYPOT_D}) * ({{0}} / {_HYPOT_D}) "
    f"+ ({{1}} / {_HYPOT_D}) * ({{1}} / {_HYPOT_D}))))"
)
_op("hypot", 2, _HYPOT, torch.hypot, torch.hypot, T.hypot, float_only=True)
_op(
    "maximum",
    2,
    "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    torch.maximum,
    torch.maximum,
    T.maximum,
)
_op(
    "minimum",
    2,
    "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    torch.minimum,
    torch.minimum,
    T.minimum,
)
_op("eq", 2, "({0} == {1})", torch.eq, torch.eq, T.eq, T.__eq__, operator.eq, bool_result=True)
_op("ne", 2, "({0} != {1})", torch.ne, torch.ne, T.ne, T.__ne__, operator.ne, bool_result=True)
_op("lt", 2, "({0} < {1})", torch.lt, torch.lt, T.lt, T.__lt__, operator.lt, bool_result=True)
_op("le", 2, "({0} <= {1})", torch.le, torch.le, T.le, T.__le__, operator.le, bool_result=True)
_op("gt", 2, "({0} > {1})", torch.gt, torch.gt, T.gt, T.__gt__, operator.gt, bool_result=True)
_op("ge", 2, "({0} >= {1})", torch.ge, torch.ge, T.ge, T.__ge__, operator.ge, bool_result=True)
_op(
    "and",
    2,
    "({0} & {1})",
    torch.logical_and,
    torch.logical_and,
    T.logical_and,
    bool_result=True,
    logical=True,
)
_op(
    "or",
    2,
    "({0} | {1})",
    torch.logical_or,
    torch.logical_or,
    T.logical_or,
    bool_result=True,
    logical=True,
)
# random numbers: (seed, global element number) -> U[0, 1); built by tc.rand, no torch function
_op("philox_rand", 2, "tl.rand({0}, {1})", philox.rand, expansion_registers=4)
_op(
    "xor",
    2,
    "({0} ^ {1})",
    torch.logical_xor,
    torch.logical_xor,
    T.logical_xor,
    bool_result=True,
    logical=True,
)
# bitwise ops (integer and bool tiles; on bools they are the logical ops, as in torch)
_op(
    "bitwise_not",
    1,
    "(~{0})",
    torch.bitwise_not,
    torch.bitwise_not,
    T.bitwise_not,
    T.__invert__,
    operator.invert,
    int_only=True,
)
_op(
    "bitwise_and",
    2,
    "({0} & {1})",
    torch.bitwise_and,
    torch.bitwise_and,
    T.bitwise_and,
    T.__and__,
    T.__rand__,
    T.__iand__,
    operator.and_,
    int_only=True,
)
_op(
    "bitwise_or",
    2,
    "({0} | {1})",
    torch.bitwise_or,
    torch.bitwise_or,
    T.bitwise_or,
    T.__or__,
    T.__ror__,
    T.__ior__,
    operator.or_,
    int_only=True,
)
_op(
    "bitwise_xor",
    2,
    "({0} ^ {1})",
    torch.bitwise_xor,
    torch.bitwise_xor,
    T.bitwise_xor,
    T.__xor__,
    T.__rxor__,
    T.__ixor__,
    operator.xor,
    int_only=True,
)
_op(
    "lshift",
    2,
    "({0} << {1})",
    torch.bitwise_left_shift,
    torch.bitwise_left_shift,
    T.bitwise_left_shift,
    T.__lshift__,
    T.__rlshift__,
    operator.lshift,
    int_only=True,
)
_op(
    "rshift",
    2,
    "({0} >> {1})",
    torch.bitwise_right_shift,
    torch.bitwise_right_shift,
    T.bitwise_right_shift,
    T.__rshift__,
    T.__rrshift__,
    operator.rshift,
    int_only=True,
)
# C remainder (the sign of the dividend): Triton's % on ints and floats alike
_op("fmod", 2, "({0} % {1})", torch.fmod, torch.fmod, T.fmod, device_template=_EXACT_FMOD)

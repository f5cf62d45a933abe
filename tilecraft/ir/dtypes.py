"""Dtype rules shared by tracing and codegen: torch promotion, Triton names, neutral elements."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

TRITON_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "tl.float32",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
    torch.float8_e4m3fn: "tl.float8e4nv",
    torch.float8_e5m2: "tl.float8e5",
}
# OCP fp8 formats (Triton's fp8e4nv / fp8e5): loads, stores, casts (see codegen/fp8.py), dots
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)

LOW_PRECISION = (torch.float16, torch.bfloat16)


def is_integer(dtype: torch.dtype) -> bool:
    """An integer dtype (not bool): what positions, counts and loop bounds are held in."""
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def supported_names() -> str:
    """The dtypes device code holds, as an error's hint lists them (``float32, bfloat16, ...``)."""
    return ", ".join(str(d).removeprefix("torch.") for d in TRITON_DTYPES)


def triton_dtype(dtype: torch.dtype) -> str:
    try:
        return TRITON_DTYPES[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} is not supported in device code") from None


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half-precision math is done in fp32 (as torch does inside its kernels); the interpreter has
    no bf16 arithmetic either."""
    return torch.float32 if dtype in LOW_PRECISION or dtype in FP8 else dtype


def _example(value: Any) -> Any:
    if isinstance(value, torch.dtype):
        return torch.empty((1,), dtype=value)
    return value


@dataclasses.dataclass(frozen=True)
class ZeroDim:
    """A 0-d tensor operand (a tensor argument of shape ``[]``): in torch's promotion it ranks
    below tensors with dims and above Python scalars (int8 x - a 0-d int32 tensor is int8)."""

    dtype: torch.dtype


def promote(*operands: Any) -> torch.dtype:
    """torch's result dtype for operands given as dtypes (tensors), :class:`ZeroDim` (0-d
    tensors) or Python scalars (weak)."""
    tensors = [o for o in operands if isinstance(o, torch.dtype)]
    zero_dims = [o.dtype for o in operands if isinstance(o, ZeroDim)]
    scalars = [o for o in operands if not isinstance(o, (torch.dtype, ZeroDim))]
    if not tensors and zero_dims:  # only 0-d tensors (and scalars): they rank as tensors
        tensors, zero_dims = zero_dims, []
    if not tensors:
        return torch.result_type(torch.tensor(scalars[0]), scalars[1] if len(scalars) > 1 else 0)
    result = tensors[0]
    for t in tensors[1:]:
        result = torch.promote_types(result, t)
    for z in zero_dims:
        result = torch.result_type(_example(result), torch.empty((), dtype=z))
    for s in scalars:
        result = torch.result_type(_example(result), s)
    return result


def scalar_dtype(value: Any) -> torch.dtype:
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64 if not -(2**31) <= value < 2**31 else torch.int32
    return torch.float32


def fit_literal(value: Any, dtype: torch.dtype, loc: Any = None) -> Any:
    """An int literal in an integer dtype wraps around as in torch (``int32 + 2**40``); one past
    int64 cannot be represented at all (torch raises too): a located error."""
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    if not -(2**63) <= value < 2**64:
        from tilecraft.errors import DeviceCodeError

        raise DeviceCodeError(
            f"integer literal {value} does not fit in 64 bits", loc, hint="use a smaller constant"
        )
    if dtype.is_floating_point or dtype == torch.bool:
        return value
    bits = torch.iinfo(dtype).bits
    wrapped = value & ((1 << bits) - 1)
    signed = torch.iinfo(dtype).min < 0
    return wrapped - (1 << bits) if signed and wrapped >= 1 << (bits - 1) else wrapped


def neutral(kind: str, dtype: torch.dtype) -> str:
    """The identity element of a reduction, as Triton source."""
    if kind == "sum":
        return "0"
    if kind == "prod":
        return "1"
    big = kind in ("min", "argmin")
    if dtype.is_floating_point:
        return "float('inf')" if big else "float('-inf')"
    if dtype == torch.bool:
        return "1" if big else "0"
    info = torch.iinfo(dtype)
    return str(info.max if big else info.min)


def float_literal(value: float) -> str:
    if math.isinf(value):
        return "float('inf')" if value > 0 else "float('-inf')"
    if math.isnan(value):
        return "float('nan')"
    return repr(float(value))


def literal(value: bool | int | float, dtype: torch.dtype) -> str:
    """``value`` as a literal of ``dtype``: Triton's ``tl.full`` of an integer type takes an int
    (``tl.full([n], 1.0, tl.int32)`` fails to compile on the GPU; the interpreter accepts it)."""
    if dtype == torch.bool:
        return "1" if value else "0"
    return float_literal(float(value)) if dtype.is_floating_point else str(int(value))

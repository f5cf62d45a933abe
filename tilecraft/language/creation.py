"""Tile creation and device ops: ``zeros``, ``full``, ``arange``, ``dot`` (memory ops and atomics
are in :mod:`tilecraft.language.memory_ops`).

Inside a traced device loop each call is handed to the tracer, which builds IR; anywhere else
(ref mode) it has its eager torch meaning, which is the reference semantics.
"""

from __future__ import annotations

from typing import Any

import torch

from tilecraft.ir.dtypes import FP8
from tilecraft.language import _context
from tilecraft.language.loops import RefTile


def _ref_device() -> Any:
    """In ref mode, new tiles go to the device of the kernel's tensors."""
    host = _context.host()
    return getattr(host, "device", None)


def _ref_size(d: Any) -> int:
    if isinstance(d, RefTile):
        return d.end - d.begin
    return int(d)


def zeros(shape: Any, dtype: torch.dtype = torch.float32, device: Any = None) -> Any:
    """A tile of zeros; ``shape`` lists tiles, ints or sizes."""
    return full(shape, 0.0, dtype, device)


def full(shape: Any, value: Any, dtype: torch.dtype = torch.float32, device: Any = None) -> Any:
    """A tile filled with ``value``."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("full", shape, value, dtype)
    shape = shape if isinstance(shape, (list, tuple)) else [shape]
    return torch.full(
        [_ref_size(d) for d in shape], value, dtype=dtype, device=device or _ref_device()
    )


def arange(*args: Any, dtype: torch.dtype | None = None, device: Any = None) -> Any:
    """``arange(end)`` / ``arange(begin, end)`` / ``arange(begin, end, step)`` with compile-time
    bounds; int32 unless ``dtype`` says otherwise."""
    dtype = dtype or torch.int32
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("arange", *args, dtype=dtype)
    return torch.arange(*[int(a) for a in args], dtype=dtype, device=device or _ref_device())


def dot(a: Any, b: Any, acc: Any = None, out_dtype: torch.dtype | None = None) -> Any:
    """Matrix product of two 2-D (or 3-D, batched) tiles in fp32 (int8 ones exactly, in int32),
    into ``acc`` when given; the result has ``out_dtype`` when given, else ``acc``'s dtype,
    else the operands' (fp32 for fp8 operands, int32 for int8 ones: an int8 result would wrap, and a
    K loop's sum of wrapped blocks would depend on the block size). The inner dim is at least
    16 (32 for 8-bit operands)."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("dot", a, b, acc=acc, out_dtype=out_dtype)
    exact = a.dtype == torch.int8 and b.dtype == torch.int8
    # fp64 products stay fp64, as compiled (tl.dot of fp64 operands accumulates in fp64)
    fp64 = torch.float64 in (a.dtype, b.dtype)
    wide = torch.int64 if exact else torch.float64 if fp64 else torch.float32
    result = torch.matmul(a.to(wide), b.to(wide))
    if acc is not None:
        return (acc.to(wide) + result).to(out_dtype or acc.dtype)
    if out_dtype is None:
        both_fp8 = a.dtype in FP8 and b.dtype in FP8
        out_dtype = torch.float32 if both_fp8 else _promote_dot(a.dtype, b.dtype, FP8)
        out_dtype = torch.int32 if exact else out_dtype
    return result.to(out_dtype)


def _promote_dot(a: torch.dtype, b: torch.dtype, fp8: tuple[torch.dtype, ...]) -> torch.dtype:
    """torch's promotion, except that an fp8 operand takes the other's dtype (as device code)."""
    if a in fp8 or b in fp8:
        return b if a in fp8 else a
    return torch.promote_types(a, b)

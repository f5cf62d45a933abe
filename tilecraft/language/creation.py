"""Tile creation and device ops: ``zeros``, ``full``, ``arange``, ``dot``, ``atomic_*``.

Inside a traced device loop each call is handed to the tracer, which builds IR; anywhere else
(ref mode) it has its eager torch meaning, which is the reference semantics.
"""

from __future__ import annotations

from typing import Any

import torch

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


def _ref_index(t: torch.Tensor, index: Any) -> Any:
    items = index if isinstance(index, tuple) else (index,)
    return tuple(i.as_index() if isinstance(i, RefTile) else i for i in items)


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


def arange(*args: Any, dtype: torch.dtype = torch.int32, device: Any = None) -> Any:
    """``arange(end)`` / ``arange(begin, end)`` with a compile-time length."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("arange", *args, dtype=dtype)
    return torch.arange(*[int(a) for a in args], dtype=dtype, device=device or _ref_device())


def dot(a: Any, b: Any, acc: Any = None, out_dtype: torch.dtype | None = None) -> Any:
    """Matrix product of two 2-D tiles, accumulated in fp32 (into ``acc`` when given)."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("dot", a, b, acc=acc, out_dtype=out_dtype)
    result = torch.matmul(a.to(torch.float32), b.to(torch.float32))
    if acc is not None:
        return (acc.to(torch.float32) + result).to(acc.dtype)
    return result.to(out_dtype or torch.promote_types(a.dtype, b.dtype))


def _atomic(kind: str, target: Any, index: Any, value: Any) -> Any:
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("atomic", kind, target, index, value)
    idx = _ref_index(target, index)
    view = target[idx]
    value = torch.as_tensor(value, dtype=target.dtype, device=target.device)
    if kind == "add":
        target[idx] = view + value
    elif kind == "max":
        target[idx] = torch.maximum(view, value)
    elif kind == "min":
        target[idx] = torch.minimum(view, value)
    else:
        target[idx] = value.expand_as(view)
    return view


def atomic_add(target: Any, index: Any, value: Any) -> Any:
    """``target[index] += value`` atomically; returns the previous values."""
    return _atomic("add", target, index, value)


def atomic_max(target: Any, index: Any, value: Any) -> Any:
    """``target[index] = max(target[index], value)`` atomically."""
    return _atomic("max", target, index, value)


def atomic_min(target: Any, index: Any, value: Any) -> Any:
    """``target[index] = min(target[index], value)`` atomically."""
    return _atomic("min", target, index, value)


def atomic_xchg(target: Any, index: Any, value: Any) -> Any:
    """``target[index] = value`` atomically; returns the previous values."""
    return _atomic("xchg", target, index, value)

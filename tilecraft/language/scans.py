"""Scans and reductions with a user's combine function: ``associative_scan`` and ``reduce``
(stage: language; inside a traced device loop they build IR, elsewhere they run eagerly).

``fn(lhs, rhs)`` combines two values elementwise with torch ops and must be associative. Half-
precision inputs are combined in fp32 (as device code does) and rounded once at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tilecraft.frontend.scans import call_combine
from tilecraft.language import _context


def _upcast(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def associative_scan(fn: Callable[..., Any], values: Any, dim: int, reverse: bool = False) -> Any:
    """Inclusive scan of ``values`` along ``dim`` with ``fn`` (``tl.associative_scan``).
    ``values`` may be a tuple of same-shape tiles: ``fn(lhs0, .., lhsK, rhs0, .., rhsK)`` (or
    ``fn(lhs_tuple, rhs_tuple)``, torch's convention) then returns a tuple too, and so does the
    scan (a linear recurrence ``h = a * h + b`` scans ``(a, b)`` with ``(a1 * a2, a2 * b1 + b2)``)."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("associative_scan", fn, values, dim, reverse=reverse)
    tiles = tuple(values) if isinstance(values, (tuple, list)) else (values,)
    columns = list(zip(*(_upcast(v).unbind(dim) for v in tiles), strict=True))
    order = columns[::-1] if reverse else columns
    acc, out = order[0], [order[0]]
    for part in order[1:]:
        combined = call_combine(fn, list(acc), list(part))
        acc = tuple(combined) if len(tiles) > 1 else (combined,)
        out.append(acc)
    out = out[::-1] if reverse else out
    results = tuple(torch.stack([o[i] for o in out], dim).to(v.dtype) for i, v in enumerate(tiles))
    return results if isinstance(values, (tuple, list)) else results[0]


def reduce(
    fn: Callable[[Any, Any], Any],
    values: Any,
    dim: int,
    other: float | int | bool = 0,
    keep_dims: bool = False,
) -> Any:
    """Reduce ``values`` along ``dim`` with ``fn`` (``tl.reduce``). ``other`` is the value that
    padded elements of a tile hold: the identity of ``fn`` (0 for +, 1 for *, -inf for max)."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("reduce", fn, values, dim, other=other, keep_dims=keep_dims)
    parts = _upcast(values).unbind(dim)
    acc = parts[0]
    for p in parts[1:]:
        acc = fn(acc, p)
    acc = acc.to(values.dtype)
    return acc.unsqueeze(dim) if keep_dims else acc

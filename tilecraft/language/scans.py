"""Scans and reductions with a user's combine function: ``associative_scan`` and ``reduce``
(stage: language; inside a traced device loop they build IR, elsewhere they run eagerly).

``fn(lhs, rhs)`` combines two values elementwise with torch ops and must be associative. Half-
precision inputs are combined in fp32 (as device code does) and rounded once at the end. Eagerly
(ref mode, the autotuner's accuracy baseline) both combine in a tree of ``log2(n)`` levels, as
compiled code does, not one element after another: rounding then grows with the tree's depth, not
with the length. (A logcumsumexp over rows of 131072 fp32 values combined in sequence was 4.3e-3
off the exact result, the compiled scan 2.3e-4; measured against the sequential baseline, the
accurate configs failed the tuner's check and a 2-wide one, 46x slower, passed.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tilecraft.errors import UnsupportedOpError
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
    # along the last dim, later elements first for a reverse scan (fn(later, earlier), as the
    # compiled scan combines them)
    runs = [_upcast(v).movedim(dim, -1) for v in tiles]
    runs = [r.flip(-1) for r in runs] if reverse else runs
    n, step = runs[0].shape[-1], 1
    while step < n:  # Hillis-Steele: element i takes in the run ending at i - step
        combined = call_combine(
            fn, [r[..., : n - step] for r in runs], [r[..., step:] for r in runs]
        )
        parts = tuple(combined) if len(tiles) > 1 else (combined,)
        runs = [
            torch.cat([r[..., :step], torch.as_tensor(c).to(r.dtype).expand_as(r[..., step:])], -1)
            for r, c in zip(runs, parts, strict=True)
        ]
        step *= 2
    runs = [r.flip(-1) for r in runs] if reverse else runs
    results = tuple(r.movedim(-1, dim).to(v.dtype) for r, v in zip(runs, tiles, strict=True))
    return results if isinstance(values, (tuple, list)) else results[0]


def reduce(
    fn: Callable[[Any, Any], Any],
    values: Any,
    dim: int,
    other: float | int | bool | None = None,
    keep_dims: bool = False,
) -> Any:
    """Reduce one tile ``values`` along ``dim`` with ``fn(a, b)`` (``tl.reduce``; not a tuple of
    tiles: a value with its index is ``torch.max(x, dim)``). A partial tile's padded elements
    are left out (each lane carries a valid flag); ``other``, the identity of ``fn`` (0 for +,
    1 for *, -inf for max), makes them hold it instead, which costs nothing (Helion's
    ``hl.reduce(..., other=)``)."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("reduce", fn, values, dim, other=other, keep_dims=keep_dims)
    if isinstance(values, (tuple, list)):  # (ref mode: the message compiled code gives)
        raise UnsupportedOpError(
            f"tc.reduce of a {type(values).__name__} of {len(values)} tiles: it reduces one tile",
            hint="a value with its index is torch.max(x, dim) / torch.min(x, dim); several "
            "statistics are one reduction each (tc.associative_scan takes tuples)",
        )
    run = _upcast(values).movedim(dim, -1)
    if run.shape[-1] == 0:  # nothing to combine: other (0 without one), as compiled code gives
        empty = torch.full(run.shape[:-1], other or 0, dtype=values.dtype, device=values.device)
        return empty.unsqueeze(dim) if keep_dims else empty
    while run.shape[-1] > 1:  # neighbours pairwise, in order: a tree as the compiled one
        pairs = run.shape[-1] // 2
        combined = torch.as_tensor(fn(run[..., 0 : 2 * pairs : 2], run[..., 1 : 2 * pairs : 2]))
        run = torch.cat([combined.to(run.dtype), run[..., 2 * pairs :]], -1)
    acc = run[..., 0].to(values.dtype)
    return acc.unsqueeze(dim) if keep_dims else acc

"""Shape ops on tiles that Triton has and torch spells differently: ``join`` and ``split``
(stage: language; inside a traced device loop they build IR, elsewhere they are eager torch)."""

from __future__ import annotations

from typing import Any

import torch

from tilecraft.language import _context


def join(a: Any, b: Any) -> Any:
    """One tile with a new last dim of size 2: ``a`` at index 0, ``b`` at 1 (``tl.join``)."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("join", a, b)
    a, b = torch.broadcast_tensors(a, b)
    dtype = torch.promote_types(a.dtype, b.dtype)
    return torch.stack([a.to(dtype), b.to(dtype)], dim=-1)


def split(x: Any) -> tuple[Any, Any]:
    """The two halves of a last dim of size 2 (``tl.split``); the inverse of :func:`join`."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("split", x)  # type: ignore[no-any-return]
    if x.shape[-1] != 2:
        raise ValueError(f"tc.split needs a last dim of 2, got shape {list(x.shape)}")
    return x[..., 0], x[..., 1]

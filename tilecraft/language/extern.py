"""The escape hatch to plain Triton: ``triton_call`` (stage: language; inside a traced device loop
it builds IR, elsewhere it runs the user's eager ``ref=``).

A ``@triton.jit`` function receives the tiles as Triton blocks (padded to powers of two, padding
lanes holding what the masked loads gave them, usually 0) and returns one block of the declared
``out_shape`` / ``out_dtype``. It is the way to use a Triton feature tilecraft does not cover.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from tilecraft.errors import UnsupportedOpError
from tilecraft.language import _context


def triton_call(
    fn: Any,
    *args: Any,
    out_shape: Sequence[Any],
    out_dtype: torch.dtype,
    ref: Callable[..., Any] | None = None,
) -> Any:
    """Call the user's ``@triton.jit`` function ``fn`` on tiles (and Python numbers); it returns
    one tile of ``out_shape`` (tiles or ints) and ``out_dtype``. Its source is put into the
    generated module (and the standalone export). Ref mode runs ``ref(*args)`` (eager torch)."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call(
            "triton_call", fn, *args, out_shape=out_shape, out_dtype=out_dtype, ref=ref
        )
    name = getattr(fn, "__name__", None) or type(fn).__name__
    if ref is None:
        raise UnsupportedOpError(
            f"tc.triton_call({name}) in ref mode: a Triton function has no eager meaning",
            hint=f"pass ref=<an eager torch function with the same meaning as {name}>, "
            "e.g. tc.triton_call(fn, x, out_shape=[tm, n], out_dtype=x.dtype, ref=torch.sin)",
        )
    result = ref(*args)
    return result.to(out_dtype) if isinstance(result, torch.Tensor) else result

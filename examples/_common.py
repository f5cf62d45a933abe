"""Shared helpers of the example modules: the ``call`` hook type and its default."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Call = Callable[..., Any]


def default_call(kernel: Any, *args: Any) -> Any:
    """Launch ``kernel`` with its default config (what ``kernel(*args)`` does)."""
    return kernel(*args)


def randn(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, gen: torch.Generator
) -> torch.Tensor:
    """Normal random data made on the CPU (reproducible across devices), moved to ``device``."""
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)

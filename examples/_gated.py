"""What SwiGLU and GEGLU share: shapes, dtypes and inputs ``(gate, up)`` of ``(tokens, intermediate)``."""

from __future__ import annotations

import torch

from examples._common import randn

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BENCH_SHAPES = [(4096, 14336), (8192, 11008), (32768, 4096), (4608, 40920), (1000, 1000), (1, 7)]
TEST_SHAPES = [(37, 100), (1, 7), (64, 64), (3, 600)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(gate, up)``."""
    gen = torch.Generator().manual_seed(seed)
    return randn(shape, dtype, device, gen) * 2, randn(shape, dtype, device, gen)

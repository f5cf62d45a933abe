"""Elementwise add of two ``[m, n]`` tensors over a 2-D tile grid. Shape: ``(m, n)``."""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn


@tc.kernel(static_shapes=True)
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] + y[tm, tn]
    return out


KERNELS = {"add": add}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BENCH_SHAPES = [(4096, 4096), (8192, 8192), (32768, 4096), (4608, 40920), (1000, 1000), (1, 7)]
TEST_SHAPES = [(37, 100), (1, 7), (64, 64), (3, 600)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return randn(shape, dtype, device, gen), randn(shape, dtype, device, gen)


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    return call(add, *inputs)

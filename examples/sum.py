"""Sums of an ``[m, n]`` tensor over the last dim (per row) and over the first dim (per column),
accumulated in fp32. Shape: ``(m, n)``."""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn


@tc.kernel(static_shapes=True)
def sum_last(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = x.new_empty([m])
    for tm in tc.tile(m):
        out[tm] = torch.sum(x[tm, :].to(torch.float32), dim=-1).to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def sum_first(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = x.new_empty([n])
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            acc += torch.sum(x[tm, tn].to(torch.float32), dim=0)
        out[tn] = acc.to(out.dtype)
    return out


KERNELS = {"sum_last": sum_last, "sum_first": sum_first}
DTYPES = [torch.float32, torch.bfloat16]
BENCH_SHAPES = [(4096, 4096), (32768, 8192), (8192, 32000), (4608, 40920), (1000, 1000), (1, 7)]
TEST_SHAPES = [(37, 100), (1, 7), (64, 64), (1000, 3)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (randn(shape, dtype, device, gen),)


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    return xf.sum(-1).to(x.dtype), xf.sum(0).to(x.dtype)


def run(
    inputs: tuple[torch.Tensor, ...], call: Call = default_call
) -> tuple[torch.Tensor, torch.Tensor]:
    return call(sum_last, *inputs), call(sum_first, *inputs)

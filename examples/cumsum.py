"""Cumulative sum along long rows, chunk by chunk: each program scans its rows one ``[rows, chunk]``
tile at a time with ``torch.cumsum`` and carries the running total across chunks (fp32 math).
Shape: ``(rows, n)``."""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn


@tc.kernel(static_shapes=True)
def cumsum_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        carry = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            v = x[tm, tn].to(torch.float32)
            out[tm, tn] = (torch.cumsum(v, dim=1) + carry[:, None]).to(out.dtype)
            carry = carry + v.sum(1)
    return out


KERNELS = {"cumsum_rows": cumsum_rows}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BENCH_SHAPES = [(4096, 4096), (1024, 131072), (32, 1048576), (4608, 40920), (1000, 1000)]
TEST_SHAPES = [(37, 300), (1, 7), (5, 1000)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (randn(shape, dtype, device, gen),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.float().cumsum(dim=1).to(x.dtype)


def peer(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, dim=1)


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    return call(cumsum_rows, *inputs)

"""Row softmax of an ``[m, n]`` tensor (fp32 math, output in the input dtype). Shape: ``(m, n)``."""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn


@tc.kernel(static_shapes=True)
def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        row_max = torch.amax(xt, dim=-1)
        e = torch.exp(xt - row_max[:, None])
        out[tm, :] = (e / torch.sum(e, dim=-1)[:, None]).to(out.dtype)
    return out


KERNELS = {"softmax": softmax}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BENCH_SHAPES = [
    (4096, 4096),
    (32768, 8192),
    (8192, 32000),
    (4096, 128256),
    (4608, 40920),
    (1000, 1000),
]
TEST_SHAPES = [(37, 100), (1, 7), (64, 64), (5, 3000)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (randn(shape, dtype, device, gen) * 3,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    return call(softmax, *inputs)

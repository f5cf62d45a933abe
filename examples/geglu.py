"""GEGLU forward: ``gelu_tanh(gate) * up`` (fp32 math). Shape: ``(tokens, intermediate)``."""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn


@tc.kernel(static_shapes=True)
def geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    m, n = gate.size()
    out = torch.empty_like(gate)
    for tm, tn in tc.tile([m, n]):
        g = torch.nn.functional.gelu(gate[tm, tn].to(torch.float32), approximate="tanh")
        out[tm, tn] = (g * up[tm, tn].to(torch.float32)).to(out.dtype)
    return out


KERNELS = {"geglu": geglu}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BENCH_SHAPES = [(4096, 14336), (8192, 11008), (32768, 4096), (4608, 40920), (1000, 1000), (1, 7)]
TEST_SHAPES = [(37, 100), (1, 7), (64, 64), (3, 600)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(gate, up)``."""
    gen = torch.Generator().manual_seed(seed)
    return randn(shape, dtype, device, gen) * 2, randn(shape, dtype, device, gen)


def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    g = torch.nn.functional.gelu(gate.float(), approximate="tanh")
    return (g * up.float()).to(gate.dtype)


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    return call(geglu, *inputs)

"""GEGLU forward: ``gelu_tanh(gate) * up`` (fp32 math). Shape: ``(tokens, intermediate)``."""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call
from examples._gated import BENCH_SHAPES, DTYPES, TEST_SHAPES, make_inputs


@tc.kernel(static_shapes=True)
def geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    m, n = gate.size()
    out = torch.empty_like(gate)
    for tm, tn in tc.tile([m, n]):
        g = torch.nn.functional.gelu(gate[tm, tn].to(torch.float32), approximate="tanh")
        out[tm, tn] = (g * up[tm, tn].to(torch.float32)).to(out.dtype)
    return out


__all__ = ["BENCH_SHAPES", "DTYPES", "KERNELS", "TEST_SHAPES", "make_inputs", "reference", "run"]
KERNELS = {"geglu": geglu}


def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    g = torch.nn.functional.gelu(gate.float(), approximate="tanh")
    return (g * up.float()).to(gate.dtype)


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    return call(geglu, *inputs)

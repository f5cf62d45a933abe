"""SwiGLU forward: ``silu(gate) * up`` (fp32 math). Shape: ``(tokens, intermediate)``."""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call
from examples._gated import BENCH_SHAPES, DTYPES, TEST_SHAPES, make_inputs


@tc.kernel(static_shapes=True)
def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    m, n = gate.size()
    out = torch.empty_like(gate)
    for tm, tn in tc.tile([m, n]):
        g = gate[tm, tn].to(torch.float32)
        out[tm, tn] = (torch.nn.functional.silu(g) * up[tm, tn].to(torch.float32)).to(out.dtype)
    return out


__all__ = ["BENCH_SHAPES", "DTYPES", "KERNELS", "TEST_SHAPES", "make_inputs", "reference", "run"]
KERNELS = {"swiglu": swiglu}


def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.silu(gate.float()) * up.float()).to(gate.dtype)


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    return call(swiglu, *inputs)

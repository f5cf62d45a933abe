"""GEGLU forward: ``gelu_tanh(gate) * up`` (fp32 math). Shape: ``(tokens, intermediate)``."""

from __future__ import annotations

import math
from typing import Any

import torch

import tilecraft as tc
from examples._common import Call, default_call
from examples._gated import BENCH_SHAPES, DTYPES, TEST_SHAPES, make_inputs

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@tc.kernel(static_shapes=True)
def geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    m, n = gate.size()
    out = torch.empty_like(gate)
    for tm, tn in tc.tile([m, n]):
        g = torch.nn.functional.gelu(gate[tm, tn].to(torch.float32), approximate="tanh")
        out[tm, tn] = (g * up[tm, tn].to(torch.float32)).to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def geglu_bwd(
    grad_out: torch.Tensor, gate: torch.Tensor, up: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(d_gate, d_up)`` of ``gelu_tanh(gate) * up``."""
    m, n = gate.size()
    grad_gate = torch.empty_like(gate)
    grad_up = torch.empty_like(up)
    for tm, tn in tc.tile([m, n]):
        g = gate[tm, tn].to(torch.float32)
        dy = grad_out[tm, tn].to(torch.float32)
        t = torch.tanh(_SQRT_2_OVER_PI * (g + 0.044715 * g * g * g))
        grad_up[tm, tn] = (dy * 0.5 * g * (1.0 + t)).to(grad_up.dtype)
        dt = (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * g * g)
        d_gelu = 0.5 * (1.0 + t) + 0.5 * g * dt
        grad_gate[tm, tn] = (dy * up[tm, tn].to(torch.float32) * d_gelu).to(grad_gate.dtype)
    return grad_gate, grad_up


def _backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    gate, up, _ = ctx.saved_tensors
    return geglu_bwd(grad_out.contiguous(), gate, up)  # type: ignore[no-any-return]


geglu.register_backward(_backward)  # the default setup saves (gate, up, out)

__all__ = ["BENCH_SHAPES", "DTYPES", "KERNELS", "TEST_SHAPES", "make_inputs", "reference", "run"]
KERNELS = {"geglu": geglu}


def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    g = torch.nn.functional.gelu(gate.float(), approximate="tanh")
    return (g * up.float()).to(gate.dtype)


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    return call(geglu, *inputs)

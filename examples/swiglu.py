"""SwiGLU forward: ``silu(gate) * up`` (fp32 math). Shape: ``(tokens, intermediate)``."""

from __future__ import annotations

from typing import Any

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


@tc.kernel(static_shapes=True)
def swiglu_bwd(
    grad_out: torch.Tensor, gate: torch.Tensor, up: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(d_gate, d_up)``: silu'(g) = s * (1 + g * (1 - s)) with s = sigmoid(g)."""
    m, n = gate.size()
    grad_gate = torch.empty_like(gate)
    grad_up = torch.empty_like(up)
    for tm, tn in tc.tile([m, n]):
        g = gate[tm, tn].to(torch.float32)
        dy = grad_out[tm, tn].to(torch.float32)
        s = torch.sigmoid(g)
        grad_up[tm, tn] = (dy * g * s).to(grad_up.dtype)
        d_silu = s * (1.0 + g * (1.0 - s))
        grad_gate[tm, tn] = (dy * up[tm, tn].to(torch.float32) * d_silu).to(grad_gate.dtype)
    return grad_gate, grad_up


def _backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    gate, up, _ = ctx.saved_tensors
    return swiglu_bwd(grad_out.contiguous(), gate, up)  # type: ignore[no-any-return]


swiglu.register_backward(_backward)  # the default setup saves (gate, up, out)

__all__ = ["BENCH_SHAPES", "DTYPES", "KERNELS", "TEST_SHAPES", "make_inputs", "reference", "run"]
KERNELS = {"swiglu": swiglu}


def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.silu(gate.float()) * up.float()).to(gate.dtype)


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    return call(swiglu, *inputs)

"""Fused dropout + residual add + LayerNorm, as in a transformer block's output:
``h = dropout(x, p) + residual``, ``out = layer_norm(h) * weight + bias``; returns ``(out, h)``.
The dropout mask comes from ``tc.rand`` (Philox keyed by the seed and each element's position), so
every config, and the eager reference, drop the same elements. Shape: ``(rows, hidden)``.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn

EPS = 1e-5
P = 0.1
SEED = 1234


@tc.kernel(static_shapes=True)
def dropout_add_layer_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    seed: int = SEED,
    p: float = P,
    eps: float = EPS,
) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    out = torch.empty_like(x)
    h_out = torch.empty_like(x)
    for tm in tc.tile(m):
        keep = tc.rand([tm, n], seed) >= p
        dropped = torch.where(keep, x[tm, :].to(torch.float32) / (1.0 - p), 0.0)
        h = dropped + residual[tm, :].to(torch.float32)
        h_out[tm, :] = h.to(h_out.dtype)
        mu = torch.mean(h, dim=-1)
        centered = h - mu[:, None]
        r = torch.rsqrt(torch.mean(centered * centered, dim=-1) + eps)
        y = centered * r[:, None] * weight[None, :].to(torch.float32)
        out[tm, :] = (y + bias[None, :].to(torch.float32)).to(out.dtype)
    return out, h_out


KERNELS = {"dropout_add_layer_norm": dropout_add_layer_norm}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BENCH_SHAPES = [(4096, 4096), (32768, 4096), (8192, 8192), (4608, 40920), (1000, 1000)]
TEST_SHAPES = [(37, 100), (1, 7), (9, 1000)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, ...]:
    """``(x, residual, weight, bias)``."""
    gen = torch.Generator().manual_seed(seed)
    x, residual = randn(shape, dtype, device, gen), randn(shape, dtype, device, gen)
    weight = (1.0 + 0.5 * randn(shape[-1:], torch.float32, device, gen)).to(dtype)
    return x, residual, weight, randn(shape[-1:], dtype, device, gen)


def reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 math; the mask is the same Philox stream, computed eagerly by ``tc.rand``."""
    keep = tc.rand(list(x.shape), SEED).to(x.device) >= P
    h = torch.where(keep, x.float() / (1.0 - P), 0.0) + residual.float()
    out = torch.nn.functional.layer_norm(h, h.shape[-1:], weight.float(), bias.float(), EPS)
    return out.to(x.dtype), h.to(x.dtype)


def run(
    inputs: tuple[torch.Tensor, ...], call: Call = default_call
) -> tuple[torch.Tensor, torch.Tensor]:
    return call(dropout_add_layer_norm, *inputs)

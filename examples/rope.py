"""Rotary position embedding (RoPE) on ``x[tokens, heads, head_dim]``, in the two layouts models
use: rotate-half (``x[..., :half]`` pairs with ``x[..., half:]``, as in Llama) and interleaved
(``x[..., 0::2]`` pairs with ``x[..., 1::2]``, as in GPT-J). ``cos`` and ``sin`` are fp32
``[tokens, head_dim // 2]`` tables. Shape: ``(tokens, heads, head_dim)``.

Both kernels slice the head dim with constant bounds in their loads and stores.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn


@tc.kernel(static_shapes=True)
def rope_rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    tokens, heads, d = x.size()
    half = tc.specialize(d // 2)
    out = torch.empty_like(x)
    for tt, th in tc.tile([tokens, heads]):
        x1 = x[tt, th, :half].to(torch.float32)
        x2 = x[tt, th, half:].to(torch.float32)
        c = cos[tt, None, :]
        s = sin[tt, None, :]
        out[tt, th, :half] = (x1 * c - x2 * s).to(out.dtype)
        out[tt, th, half:] = (x2 * c + x1 * s).to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    tokens, heads, _ = x.size()
    out = torch.empty_like(x)
    for tt, th in tc.tile([tokens, heads]):
        even = x[tt, th, 0::2].to(torch.float32)
        odd = x[tt, th, 1::2].to(torch.float32)
        c = cos[tt, None, :]
        s = sin[tt, None, :]
        out[tt, th, 0::2] = (even * c - odd * s).to(out.dtype)
        out[tt, th, 1::2] = (odd * c + even * s).to(out.dtype)
    return out


KERNELS = {"rope_rotate_half": rope_rotate_half, "rope_interleaved": rope_interleaved}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BENCH_SHAPES = [(8192, 32, 128), (4096, 8, 64), (16384, 8, 128), (1000, 40, 80)]
TEST_SHAPES = [(37, 3, 64), (5, 2, 24), (1, 1, 128)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x, cos, sin)``: the tables are those of positions ``0..tokens-1`` (base 10000)."""
    tokens, _, d = shape
    gen = torch.Generator().manual_seed(seed)
    x = randn(shape, dtype, device, gen)
    inv_freq = 10000.0 ** (-torch.arange(0, d // 2, dtype=torch.float32) * 2 / d)
    angles = torch.arange(tokens, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return x, angles.cos().to(device), angles.sin().to(device)


def reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rotate-half result, interleaved result)`` in fp32, cast to ``x``'s dtype."""
    xf, c, s = x.float(), cos[:, None, :], sin[:, None, :]
    half = x.shape[-1] // 2
    x1, x2 = xf[..., :half], xf[..., half:]
    rotated = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    even, odd = xf[..., 0::2], xf[..., 1::2]
    interleaved = torch.stack([even * c - odd * s, odd * c + even * s], dim=-1).flatten(-2)
    return rotated.to(x.dtype), interleaved.to(x.dtype)


def run(
    inputs: tuple[torch.Tensor, ...], call: Call = default_call
) -> tuple[torch.Tensor, torch.Tensor]:
    return call(rope_rotate_half, *inputs), call(rope_interleaved, *inputs)

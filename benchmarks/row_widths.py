"""Kernels for ``benchmarks.compare_configs`` (session 24): how wide a 2-D pointwise tile's
rows must be on an H200, by the bytes each access reads or writes per row. Three kernels over
one [M, N] tensor tiled [rows, cols]: an fp32 scale (4-byte loads and stores), a bf16 scale
(2-byte) and an fp8 -> bf16 cast (1-byte loads, 2-byte stores). Timed with
``benchmarks.compare_configs benchmarks.row_widths:KERNEL 8192,8192 --inputs
benchmarks.row_widths:INPUTS default "default.replace(...)"`` (results: rows2d_s24.md)."""

from __future__ import annotations

import torch

import tilecraft as tc


@tc.kernel(static_shapes=True)
def scale2d(x: torch.Tensor) -> torch.Tensor:
    """out = 2 x + 1, same dtype, one program per [rows, cols] tile."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] * 2 + 1
    return out


@tc.kernel(static_shapes=True)
def fp8_to_bf16(x: torch.Tensor) -> torch.Tensor:
    """out = bf16(x) for an fp8 e4m3 x."""
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.bfloat16, device=x.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn].to(torch.bfloat16)
    return out


def _random(shape: tuple[int, ...], device: str, dtype: torch.dtype) -> tuple[torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(0)
    return (torch.randn(shape, generator=gen).to(device=device, dtype=dtype),)


def fp32(shape: tuple[int, ...], device: str) -> tuple[torch.Tensor]:
    return _random(shape, device, torch.float32)


def bf16(shape: tuple[int, ...], device: str) -> tuple[torch.Tensor]:
    return _random(shape, device, torch.bfloat16)


def fp8(shape: tuple[int, ...], device: str) -> tuple[torch.Tensor]:
    return _random(shape, device, torch.float8_e4m3fn)

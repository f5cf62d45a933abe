"""Floors of fp32 quotients divide exactly (ir/pointwise.py: fp32_template): Triton's fp32
``/`` is div.full.f32 (within 2 ulp), so ``21.0 // 7.0`` could floor to 2 (on the H200, 7480
of 1M floor divisions and remainders of exact multiples came out wrong before). ``//`` and
``%`` of fp32 emit ``tl.math.div_rn``; plain ``/`` stays Triton's (2 ulp, as torch.compile's
code); fp64 keeps ``/`` (exact in Triton; div_rn takes fp32 only). Generated code, interpreter
numerics, cross-compiles, and on the GPU floors bit-exact against eager CUDA PyTorch."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target


@tc.kernel(static_shapes=True)
def divisions(
    x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per element: x / y, x // y, x % y, 1 / y, and round(x / 7)."""
    n = x.size(0)
    quot, floor, rem, inv, rounded = (torch.empty_like(x) for _ in range(5))
    for tn in tc.tile(n):
        a, b = x[tn], y[tn]
        quot[tn] = a / b
        floor[tn] = a // b
        rem[tn] = a % b
        inv[tn] = torch.reciprocal(b)
        rounded[tn] = torch.round(a / 7.0)
    return quot, floor, rem, inv, rounded


def _eager(
    x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return x / y, x // y, x % y, torch.reciprocal(y), torch.round(x / 7.0)


def _inputs(n: int, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact multiples (21 / 7 must floor to 3), ties after division (3.5 * 7 / 7), and random
    values."""
    gen = torch.Generator(device="cpu").manual_seed(0)
    k = torch.randint(-50, 50, (n,), generator=gen).to(dtype)
    y = torch.randint(1, 13, (n,), generator=gen).to(dtype)
    x = torch.where(
        torch.arange(n) % 3 == 0, k * y, torch.randn(n, generator=gen, dtype=dtype) * 40
    )
    x = torch.where(torch.arange(n) % 3 == 1, (k + 0.5) * 7.0, x)
    return x.to(device), y.to(device)


def test_floors_and_remainders_come_from_fmod_and_plain_division_stays() -> None:
    """``//`` and ``%`` of floats follow torch's kernels (fmod, then the quotient rounded to
    the nearest integer: exact for exact multiples and for large quotients, where
    ``x - y * floor(x / y)`` lost every digit of ``1e10 % 3``); ``/`` stays Triton's; the
    reciprocal is correctly rounded."""
    x, y = _inputs(64, torch.float32, "cpu")
    bound = divisions.bind((x, y))
    code = bound.to_triton_code(bound.config_spec.default())
    statements = [line for line in code.splitlines() if not line.strip().startswith("#")]
    # the interpreter's % is numpy's exact fmod; GPU targets take libdevice's (Triton's float %
    # there is frem: x - y * trunc(x / y), 1e10 % 3 gave 256 on the H200)
    assert sum("_tc_floordiv(a, b, a % b)" in line for line in statements) == 1, code
    assert any("(a % b)" in line for line in statements), code
    # 1 / y correctly rounded, as torch's reciprocal (number / tile is reciprocal * number)
    assert "tl.math.div_rn(1.0, b)" in code, code
    assert "div_rn(a" not in code and "tl.floor(a / b)" not in code, code
    gpu = BoundKernel(divisions, divisions.bind_arguments((x, y), {}), Target.parse("cuda:90"))
    gpu_code = gpu.to_triton_code(gpu.config_spec.default()).split("@triton.jit")[1]
    gpu_statements = [ln for ln in gpu_code.splitlines() if not ln.strip().startswith("#")]
    assert any("_tc_floordiv(a, b, _tc_fmod(a, b))" in ln for ln in gpu_statements), gpu_code
    assert not any("a % b" in ln for ln in gpu_statements), gpu_code


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_divisions_match_eager_in_the_interpreter(dtype: torch.dtype) -> None:
    x, y = _inputs(300, dtype, "cpu")
    for have, want in zip(divisions(x, y), _eager(x, y), strict=True):
        torch.testing.assert_close(have, want, rtol=0, atol=0)


@pytest.mark.crosscompile
def test_divisions_cross_compile() -> None:
    x, y = _inputs(4096, torch.float32, "cpu")
    assert_defaults_cross_compile(divisions, (x, y))


@pytest.mark.gpu
def test_floors_are_bit_exact_against_eager_cuda() -> None:
    """Floor division and remainder match eager CUDA PyTorch bit for bit; quotients and
    reciprocals within Triton's 2 ulp."""
    x, y = _inputs(1 << 20, torch.float32, "cuda")
    quot, floor, rem, inv, rounded = divisions(x, y)
    want = _eager(x, y)
    torch.testing.assert_close(floor, want[1], rtol=0, atol=0)
    torch.testing.assert_close(rem, want[2], rtol=0, atol=0)
    torch.testing.assert_close(quot, want[0], rtol=2.5e-7, atol=0)
    torch.testing.assert_close(inv, want[3], rtol=2.5e-7, atol=0)

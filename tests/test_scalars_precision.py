"""Python float arguments with fp16/bf16/fp64 tensors run in the interpreter (a scalar argument is
a Python number there), and the autotuner's accuracy check follows the precision the kernel
computes in (fp64 inputs with fp32 math inside are accepted)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.kernels import rms_norm, rms_norm_ref
from tilecraft.autotune.compare import tolerance_for
from tilecraft.autotune.discover import kernel_tolerances

CONFIG = tc.Config(block_sizes=[16])


@tc.kernel(config=CONFIG)
def scale_shift(x: torch.Tensor, a: float) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] * a + 1.5
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_float_argument_with_any_tensor_dtype(dtype: torch.dtype, device: str) -> None:
    """In fp64 math a float argument is the double it was passed as: ``x * 0.1`` was off by
    1.5e-8 relative (fp32's 0.1), which 0.5 (exact in fp32) could not show."""
    x = torch.randn(40, device=device).to(dtype)
    for a in (0.5, 0.1, 1 / 3):
        want = x * a + 1.5  # eager, in the tensor's dtype
        rtol, atol = (1e-15, 0.0) if dtype == torch.float64 else tolerance_for(dtype)
        torch.testing.assert_close(scale_shift(x, a), want, rtol=rtol, atol=atol)
    code = scale_shift.bind((x, 0.5)).to_triton_code(CONFIG)
    assert ("a: tl.float64" in code) == (dtype == torch.float64)


@tc.kernel(static_shapes=True)
def both_widths(x: torch.Tensor, y: torch.Tensor, c: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * c + (y[t] * c).to(torch.float64)
    return out


def test_a_float_argument_in_fp32_and_fp64_math(device: str) -> None:
    """The double goes to fp64 math; fp32 math reads it rounded to fp32, as eager's fp32 ops."""
    x = torch.randn(33, dtype=torch.float64, device=device)
    y = torch.randn(33, dtype=torch.float32, device=device)
    want = x * 0.1 + (y * 0.1).double()
    torch.testing.assert_close(both_widths(x, y, 0.1), want, rtol=1e-15, atol=1e-15)


@pytest.mark.crosscompile
def test_double_arguments_cross_compile_for_nvidia_and_amd() -> None:
    from tests.cross_targets import assert_defaults_cross_compile

    x, y = torch.empty(4096, dtype=torch.float64), torch.empty(4096)
    assert_defaults_cross_compile(both_widths, (x, y, 0.1))


def test_fp64_inputs_with_fp32_math_are_accepted(device: str) -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(37, 100, generator=g, dtype=torch.float64).to(device)
    w = torch.randn(100, generator=g, dtype=torch.float64).to(device)
    bound = rms_norm.bind((x, w))
    tolerances = kernel_tolerances(bound, (x, w))
    assert tolerances is not None and tolerances[torch.float64] == tolerance_for(torch.float32)
    out = rms_norm(x, w)  # discovery must accept a config (it raised NoWorkingConfigError)
    torch.testing.assert_close(out, rms_norm_ref(x, w), rtol=1e-4, atol=1e-5)


def test_pure_fp64_kernel_keeps_fp64_tolerance() -> None:
    x = torch.randn(40, dtype=torch.float64)
    assert kernel_tolerances(scale_shift.bind((x, 0.5)), (x, 0.5)) is None

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
def test_float_argument_with_any_tensor_dtype(dtype: torch.dtype) -> None:
    x = torch.randn(40).to(dtype)
    want = (x.double() * 0.5 + 1.5).to(dtype)
    rtol, atol = tolerance_for(dtype)
    torch.testing.assert_close(scale_shift(x, 0.5), want, rtol=rtol, atol=atol)
    code = scale_shift.bind((x, 0.5)).to_triton_code(CONFIG)
    if dtype == torch.float64:
        assert "tl.cast(a, tl.float64)" in code


def test_fp64_inputs_with_fp32_math_are_accepted() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(37, 100, generator=g, dtype=torch.float64)
    w = torch.randn(100, generator=g, dtype=torch.float64)
    bound = rms_norm.bind((x, w))
    tolerances = kernel_tolerances(bound, (x, w))
    assert tolerances is not None and tolerances[torch.float64] == tolerance_for(torch.float32)
    out = rms_norm(x, w)  # discovery must accept a config (it raised NoWorkingConfigError)
    torch.testing.assert_close(out, rms_norm_ref(x, w), rtol=1e-4, atol=1e-5)


def test_pure_fp64_kernel_keeps_fp64_tolerance() -> None:
    x = torch.randn(40, dtype=torch.float64)
    assert kernel_tolerances(scale_shift.bind((x, 0.5)), (x, 0.5)) is None

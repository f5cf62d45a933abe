"""Tensors host code makes: ``tc.arange`` / ``tc.zeros`` in host code follow the kernel's device
(they were CPU tensors, so on a GPU every config failed with Triton's "Pointer argument cannot
be accessed from Triton (cpu tensor?)"), and a torch factory call without a device, read by
device code, is one clear error naming the tensor at trace time."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ArgumentError
from tilecraft.frontend.trace import trace_kernel


@tc.kernel(static_shapes=True)
def power_sums(x: torch.Tensor, k: int) -> torch.Tensor:
    """sum_n x[r, n] ** j for j < k, with the exponents made in host code by tc.arange."""
    r, n = x.size()
    powers = tc.arange(k).to(torch.float32)
    out = torch.empty([r, k], dtype=torch.float32, device=x.device)
    for tr in tc.tile(r):
        xt = x[tr, :]
        out[tr, :] = torch.sum(torch.pow(xt[:, :, None], powers[None, None, :]), dim=1)
    return out


@tc.kernel(static_shapes=True)
def power_sums_cpu_exponents(x: torch.Tensor, k: int) -> torch.Tensor:
    r, n = x.size()
    powers = torch.arange(k, dtype=torch.float32)  # no device=: a CPU tensor
    out = torch.empty([r, k], dtype=torch.float32, device=x.device)
    for tr in tc.tile(r):
        xt = x[tr, :]
        out[tr, :] = torch.sum(torch.pow(xt[:, :, None], powers[None, None, :]), dim=1)
    return out


def _reference(x: torch.Tensor, k: int) -> torch.Tensor:
    exps = torch.arange(k, dtype=torch.float32, device=x.device)
    return torch.pow(x[:, :, None], exps).sum(dim=1)


def test_host_tc_arange_follows_the_kernels_device(device: str) -> None:
    x = torch.rand(6, 40, device=device) + 0.5
    for _ in range(2):  # the second call takes the prebuilt launcher's path
        torch.testing.assert_close(power_sums(x, 5), _reference(x, 5), rtol=1e-5, atol=1e-4)


def test_tracing_for_a_gpu_marks_host_tensors_and_refuses_cpu_ones() -> None:
    x = torch.rand(6, 40)
    traced = trace_kernel(power_sums.source, (x, 5), {}, "cuda", static_shapes=True)
    assert traced.host_tensors
    with pytest.raises(ArgumentError) as info:
        trace_kernel(power_sums_cpu_exponents.source, (x, 5), {}, "cuda", static_shapes=True)
    text = str(info.value)
    assert "'powers' is on cpu" in text and "kernel's tensors are on cuda" in text, text
    assert "device=x.device" in text and "test_host_devices.py" in text, text


@pytest.mark.gpu
def test_a_host_cpu_tensor_is_named_on_the_gpu() -> None:
    x = torch.rand(6, 40, device="cuda")
    with pytest.raises(ArgumentError, match="'powers' is on cpu"):
        power_sums_cpu_exponents(x, 5)

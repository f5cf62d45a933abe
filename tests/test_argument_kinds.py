"""Arguments of kinds users pass (fuzz round 55b): a plain tensor subclass runs as a tensor (it
was taken for a tracer's tensor and every torch function in device code failed), a nested
tensor on a kernel that already ran is named (torch's "Internal error ... file an issue"), and
a module passed where device code indexes a tensor names the argument and the module."""

from __future__ import annotations

import warnings

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ArgumentError, DeviceCodeError


class Tagged(torch.Tensor):
    """A library's tensor with metadata: no dispatch of its own."""


@tc.kernel
def tanh_rows(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = torch.tanh(x[t]) * 2
    return out


@tc.kernel
def scale_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :] * w[None, :]
    return out


def test_a_tensor_subclass_runs_as_a_tensor(device: str) -> None:
    x = torch.randn(16, device=device)
    got = tanh_rows(x.as_subclass(Tagged))
    assert type(got) is Tagged  # as eager torch.empty_like keeps it
    torch.testing.assert_close(got.as_subclass(torch.Tensor), torch.tanh(x) * 2)


def test_a_nested_tensor_is_named_on_a_warm_kernel(device: str) -> None:
    tanh_rows(torch.randn(8, device=device))  # the fast path holds a launcher now
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nested = torch.nested.nested_tensor([torch.randn(3), torch.randn(4)], device=device)
    with pytest.raises(ArgumentError, match="argument 'x' is a nested tensor"):
        tanh_rows(nested)


def test_a_module_for_a_tensor_names_the_argument_and_its_tensor(device: str) -> None:
    norm = torch.nn.LayerNorm(8).to(device)
    with pytest.raises(DeviceCodeError, match="'w' is a LayerNorm module, not a tensor") as info:
        scale_rows(torch.randn(4, 8, device=device), norm)
    assert "`w.weight`" in str(info.value) and "test_argument_kinds.py" in str(info.value)

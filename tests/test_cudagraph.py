"""CUDA graphs: a warmed-up kernel captures and replays; a first call during capture is refused."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ArgumentError
from tilecraft.runtime import bound as kernel_module


@tc.kernel
def scale_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :] * w[None, :]
    return out


def test_first_call_during_capture_says_warm_up(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    scale_rows.reset()
    x, w = torch.randn(6, 32, device=device), torch.randn(32, device=device)
    monkeypatch.setattr(kernel_module, "capturing", lambda device_type: True)
    with pytest.raises(ArgumentError, match="inside CUDA graph capture") as info:
        scale_rows(x, w)
    assert "warm up first" in str(info.value) and "test_cudagraph.py" in str(info.value)
    monkeypatch.setattr(kernel_module, "capturing", lambda device_type: False)
    torch.testing.assert_close(scale_rows(x, w), x * w)  # the warm-up call
    monkeypatch.setattr(kernel_module, "capturing", lambda device_type: True)
    torch.testing.assert_close(scale_rows(x, w), x * w)  # warmed up: no config to choose


@pytest.mark.gpu
def test_capture_and_replay_after_warm_up() -> None:
    scale_rows.reset()
    x, w = torch.randn(64, 128, device="cuda"), torch.randn(128, device="cuda")
    scale_rows(x, w)  # warm-up: config discovered and compiled outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = scale_rows(x, w)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x * w)


@pytest.mark.gpu
def test_first_call_inside_real_capture_is_refused() -> None:
    scale_rows.reset()
    x, w = torch.randn(64, 128, device="cuda"), torch.randn(128, device="cuda")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(ArgumentError, match="warm up first"), torch.cuda.graph(graph):
        scale_rows(x, w)

"""Tensors a kernel takes from elsewhere than its arguments (a module's buffer or Parameter, a
global; fuzz round 55b). One it writes is written once by a call that tunes
(tilecraft/write_guard.py): the tuner's runs use clones of the arguments, but wrote the caller's
own buffer each time (a running mean 2.71x too large after one call on a cold cache). One that
requires grad is refused where gradients are on (the output had no grad_fn: the parameter
silently got no gradient)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft import write_guard
from tilecraft.errors import ArgumentError

COUNTS = torch.zeros(8)


@tc.kernel
def track_mean(x: torch.Tensor, bn: torch.nn.Module) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    rm = bn.running_mean
    for tn in tc.tile(n):
        mu = torch.mean(x[:, tn], dim=0)
        rm[tn] = 0.9 * rm[tn] + 0.1 * mu
        out[:, tn] = x[:, tn] - rm[tn][None, :]  # reads what it wrote: each run from one state
    return out


@tc.kernel
def count_calls(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    counts = COUNTS
    for t in tc.tile(x.size(0)):
        counts[t] = counts[t] + 1.0
        out[t] = x[t] * counts[t]
    return out


@pytest.mark.parametrize("effort", ["none", "quick"])
def test_a_tuned_call_writes_the_callers_buffers_once(
    monkeypatch: pytest.MonkeyPatch, device: str, effort: str
) -> None:
    monkeypatch.setenv("TILECRAFT_FORCE_AUTOTUNE", "1")
    monkeypatch.setattr(track_mean, "autotune_effort", effort)
    x = torch.randn(5, 8, device=device)
    bn = torch.nn.BatchNorm1d(8).to(device)
    running = 0.1 * x.mean(0)
    out = track_mean(x, bn)
    torch.testing.assert_close(bn.running_mean, running)
    torch.testing.assert_close(out, x - running)


def test_a_global_written_by_device_code_counts_one_call(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    monkeypatch.setenv("TILECRAFT_FORCE_AUTOTUNE", "1")
    monkeypatch.setattr(count_calls, "autotune_effort", "quick")
    COUNTS.zero_()
    x = torch.randn(8)
    torch.testing.assert_close(count_calls(x.to(device)).cpu(), x)
    torch.testing.assert_close(count_calls(x.to(device)).cpu(), 2 * x)
    assert COUNTS.tolist() == [2.0] * 8


def test_the_guard_restores_what_a_run_wrote_and_hands_back_outputs() -> None:
    own, other, made = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    write_guard.note_foreign(other)  # as a trace notes a module's buffer
    with write_guard.undone((own,)) as guard:
        for t in (own, other, made):
            guard.before_write(t)
            t += 1
        returned = guard.handed_back((other, own, made))
    assert other.tolist() == [0.0] * 4 and own.tolist() == [1.0] * 4
    assert returned[0].tolist() == [1.0] * 4 and returned[1] is own
    assert returned[2] is made and made.tolist() == [1.0] * 4  # a run's own output: not copied
    assert write_guard.active() is None


class Gate(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n))


@tc.kernel
def gated(x: torch.Tensor, mod: torch.nn.Module) -> torch.Tensor:
    out = torch.empty_like(x)
    w = mod.weight
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * torch.sigmoid(w[t])
    return out


def test_a_parameter_read_through_an_attribute_is_refused_with_gradients_on(device: str) -> None:
    gate = Gate(8).to(device)
    x = torch.randn(8, device=device)
    with pytest.raises(ArgumentError, match="'w', a tensor that requires grad") as info:
        gated(x, gate)
    assert "test_foreign_tensors.py" in str(info.value) and "torch.no_grad()" in str(info.value)
    with torch.no_grad():  # inference: no gradient is wanted
        torch.testing.assert_close(gated(x, gate), x * torch.sigmoid(gate.weight))
    gate.weight.requires_grad_(False)  # a frozen layer
    torch.testing.assert_close(gated(x, gate), x * torch.sigmoid(gate.weight))


GATE = torch.nn.Parameter(torch.randn(8))


@tc.kernel
def gated_with_backward(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    w = GATE
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * torch.sigmoid(w[t])
    return out


gated_with_backward.register_backward(lambda ctx, g: g)


def test_a_global_parameter_is_refused_on_the_autograd_path(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """An input that requires grad runs the kernel's op (its backward returns gradients of
    arguments only): the global parameter's gradient was lost there too."""
    monkeypatch.setitem(globals(), "GATE", torch.nn.Parameter(torch.randn(8, device=device)))
    x = torch.randn(8, device=device, requires_grad=True)
    with pytest.raises(ArgumentError, match="'w', a tensor that requires grad"):
        gated_with_backward(x)
    with torch.no_grad():
        torch.testing.assert_close(gated_with_backward(x), x * torch.sigmoid(GATE))

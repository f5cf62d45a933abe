"""Optimizer-style kernels whose state lives in containers (fuzz round 52c): the host code is
traced on meta copies of every argument, containers' items included (``host_meta.as_meta``), so
host code that updates a state dict runs once per call, a lazily made buffer is a real tensor,
``state[p]`` finds its parameter and ``p.grad`` is there; list items keep their alignment; a
list argument's disk-cache key holds its layouts, not its values; a dict's parameter that
requires grad is refused, as a list's is."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune import cache
from tilecraft.errors import ArgumentError


@tc.kernel(static_shapes=True)
def counted_momentum_(p: torch.Tensor, g: torch.Tensor, state: dict, lr: float) -> None:
    state["step"] += 1  # host code, as torch.optim bumps its step
    if "buf" not in state:  # lazily made state, as torch.optim's momentum buffer
        state["buf"] = torch.zeros_like(p)
    buf = state["buf"]
    scale = lr / state["step"]
    for t in tc.tile(p.numel()):
        b = buf[t] * 0.9 + g[t]
        buf[t] = b
        p[t] = p[t] - scale * b


def test_host_updates_of_a_state_dict_run_once_a_call(device: str) -> None:
    """The trace ran the host code on the caller's dict: the step was bumped twice by the
    first call, and a lazily made buffer was left a meta tensor (every later call failed)."""
    p, want = torch.zeros(40, device=device), torch.zeros(40, device=device)
    buf = torch.zeros(40, device=device)
    state: dict = {"step": 0}
    for step in range(1, 4):
        g = torch.randn(40, device=device)
        counted_momentum_(p, g, state, 0.5)
        buf = buf * 0.9 + g
        want -= 0.5 / step * buf
        assert state["step"] == step
        assert state["buf"].device.type == device
        torch.testing.assert_close(p, want)


Moments = namedtuple("Moments", ["m", "v"])


@dataclasses.dataclass
class Ema:
    shadow: torch.Tensor
    updates: int = 0


@tc.kernel(static_shapes=True)
def moments_(g: torch.Tensor, moments: Moments) -> None:
    m, v = moments.m, moments.v
    for t in tc.tile(g.numel()):
        m[t] = m[t] * 0.5 + g[t]
        v[t] = v[t] * 0.5 + g[t] * g[t]


@tc.kernel(static_shapes=True)
def ema_(p: torch.Tensor, ema: Ema) -> None:
    ema.updates += 1
    shadow = ema.shadow
    for t in tc.tile(p.numel()):
        shadow[t] = shadow[t] * 0.9 + p[t] * 0.1


@tc.kernel(static_shapes=True)
def sgd_by_param_(params: list[torch.Tensor], state: dict, lr: float) -> None:
    for p in params:
        g = p.grad  # the parameter's gradient, and its state by the parameter itself
        buf = state[p]
        for t in tc.tile(p.numel()):
            b = buf[t] * 0.9 + g[t]
            buf[t] = b
            p[t] = p[t] - lr * b


def test_named_tuples_records_and_state_keyed_by_parameter(device: str) -> None:
    """A namedtuple crashed copying the arguments; a dataclass's counter was bumped twice; a
    dict keyed by the parameters raised KeyError(meta tensor) and ``p.grad`` was None."""
    g = torch.randn(16, device=device)
    mom = Moments(torch.zeros(16, device=device), torch.zeros(16, device=device))
    moments_(g, mom)
    torch.testing.assert_close(mom.m, g)
    torch.testing.assert_close(mom.v, g * g)
    record = Ema(torch.zeros(16, device=device))
    for _ in range(2):
        ema_(g, record)
    assert record.updates == 2
    torch.testing.assert_close(record.shadow, g * 0.1 * 1.9)
    with torch.no_grad():
        params = [torch.randn(8, device=device) for _ in range(2)]
    for p in params:
        p.grad = torch.randn(8, device=device)
    want = [p - 0.1 * p.grad for p in params]
    state = {p: torch.zeros(8, device=device) for p in params}
    sgd_by_param_(params, state, 0.1)
    for got, w in zip(params, want, strict=True):
        torch.testing.assert_close(got, w)
    others = [torch.randn(8, device=device) for _ in range(2)]  # another model, one layout
    for p in others:
        p.grad = torch.randn(8, device=device)
    sgd_by_param_(others, {p: torch.zeros(8, device=device) for p in others}, 0.1)
    assert len(sgd_by_param_._bound) == 1  # a dict keyed by tensors: by their layouts


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16], indexing="tensor_descriptor"))
def scale_items_(grads: list[torch.Tensor], s: float) -> None:
    for g in grads:
        for t in tc.tile(g.numel()):
            g[t] = g[t] * s


def test_list_items_off_a_16_byte_boundary_get_no_descriptor(device: str) -> None:
    """flat.split(25) of fp32: items 100 bytes apart got TMA descriptors ('base must be
    16-byte aligned'; a misaligned TMA access on Hopper)."""
    flat = torch.randn(100, device=device)
    want = flat * 2.0
    scale_items_(list(flat.split(25)), 2.0)
    torch.testing.assert_close(flat, want)


def test_a_list_arguments_cache_key_holds_layouts_not_values(device: str) -> None:
    """Its repr was the key: every process tuned again and never found its config."""
    grads = [torch.randn(8, device=device) for _ in range(2)]
    key = cache.specialization_key(scale_items_.bind((grads, 2.0)))
    others = [torch.randn(8, device=device) for _ in range(2)]
    assert key == cache.specialization_key(scale_items_.bind((others, 2.0)))
    assert "tensor(" not in key, key


@tc.kernel(static_shapes=True)
def sgd_group_(group: dict, lr: float) -> None:
    p, g = group["p"], group["g"]
    for t in tc.tile(p.numel()):
        p[t] = p[t] - lr * g[t]


def test_a_dicts_parameter_that_requires_grad_is_refused(device: str) -> None:
    """Written silently outside no_grad (a list's was refused, eager refuses it)."""
    p = torch.nn.Parameter(torch.randn(8, device=device))
    with pytest.raises(ArgumentError, match="argument 'group'"):
        sgd_group_({"p": p, "g": torch.randn(8, device=device)}, 0.1)


class _Optimizer:
    def __init__(self) -> None:
        self.step = torch.zeros(1)


OPTIMIZER = _Optimizer()


@tc.kernel(static_shapes=True)
def sgd_inverse_step_(p: torch.Tensor, g: torch.Tensor, lr: float) -> None:
    OPTIMIZER.step += 1  # host code bumps a global object's tensor
    step = OPTIMIZER.step
    for t in tc.tile(p.numel()):
        p[t] = p[t] - lr / step[0] * g[t]


def test_host_updates_of_a_globals_tensor_run_once_a_call(device: str) -> None:
    """The trace bumped the real counter too (twice after one call), and tuning ran the host
    code once per candidate: every candidate 'differed' (NoWorkingConfigError). The trace
    skips such updates; tuning runs the heuristic default, with a warning."""
    OPTIMIZER.step = torch.zeros(1, device=device)
    p, g = torch.zeros(8, device=device), torch.ones(8, device=device)
    want = torch.zeros(8, device=device)
    with pytest.warns(RuntimeWarning, match="updates state tuning cannot copy"):
        sgd_inverse_step_(p, g, 1.0)
    for step in range(2, 4):
        sgd_inverse_step_(p, g, 1.0)
        assert OPTIMIZER.step.item() == step
    for step in range(1, 4):
        want -= 1.0 / step
    torch.testing.assert_close(p, want)


@tc.kernel(static_shapes=True)
def scaled_by_a_one_element_tensor(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.numel()):
        out[t] = x[t] * scale
    return out


def test_a_one_element_tensor_used_whole_names_its_element(device: str) -> None:
    """The hint said to load a tile (scale[tile, :]) of a [1] step size."""
    from tilecraft.errors import DeviceCodeError

    with pytest.raises(DeviceCodeError, match="used as a value") as info:
        scaled_by_a_one_element_tensor(torch.randn(8, device=device), torch.ones(1, device=device))
    assert "scale[0]" in str(info.value)


class _Averager(torch.nn.Module):
    def __init__(self, n: int, device: str):
        super().__init__()
        self.register_buffer("shadow", torch.zeros(n, device=device))
        self.steps = 0


@tc.kernel(static_shapes=True)
def average_into(m: torch.nn.Module, x: torch.Tensor, decay: float) -> None:
    m.steps += 1
    shadow = m.shadow
    for t in tc.tile(x.size(0)):
        shadow[t] = shadow[t] * decay + x[t] * (1 - decay)


def test_a_module_attribute_set_in_host_code_changes_once_a_call(device: str) -> None:
    """``m.steps += 1`` ran on the caller's module while traced and again by the call (2
    after the first call); the trace puts such attributes back, and the kernel runs untuned
    (each candidate would bump them again), saying why (fuzz 52c)."""
    m = _Averager(64, device)
    x = torch.ones(64, device=device)
    with pytest.warns(RuntimeWarning, match=r"_Averager\.steps ="):
        average_into(m, x, 0.5)
    assert m.steps == 1 and float(m.shadow[0]) == 0.5
    average_into(m, x, 0.5)
    assert m.steps == 2 and float(m.shadow[0]) == 0.75

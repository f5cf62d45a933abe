"""Tensors a kernel reads that are not its tensor arguments (fuzz round 52a): a module's weight
or a global the host code takes, a dict's or a record's items. The specialization key covers
arguments; each launch checks the layouts the code baked in for the others and traces another
variant when they changed (``runtime/host_paths.same_layouts``), and a dict is keyed by its
items' layouts, never by a tensor's values (``runtime/signature.value_key``)."""

from __future__ import annotations

import dataclasses
import types

import pytest
import torch
from torch import nn

import tilecraft as tc
from tilecraft.errors import ShapeError


@tc.kernel(static_shapes=True)
def scale_by_taps(x: torch.Tensor, conv: nn.Conv2d) -> torch.Tensor:
    n, c, _, _ = x.shape
    w = conv.weight
    out = torch.empty_like(x)
    for tn, tc_ in tc.tile([n, c]):
        s = w[tc_, :, 0, 0].float().sum(dim=1)
        out[tn, tc_, :, :] = x[tn, tc_, :, :] * s[None, :, None, None]
    return out


def test_a_module_weight_laid_out_again_is_read_with_its_new_strides(device: str) -> None:
    """conv.to(memory_format=torch.channels_last) between two calls: the second read the
    weight with the first call's strides (every output wrong, max error 0.82)."""
    conv = nn.Conv2d(4, 4, 3).to(device)
    x = torch.randn(2, 4, 5, 5, device=device)
    with torch.no_grad():
        for _ in range(2):
            want = x * conv.weight[:, :, 0, 0].sum(1)[None, :, None, None]
            torch.testing.assert_close(scale_by_taps(x, conv), want)
            conv.to(memory_format=torch.channels_last)


TABLE = torch.randn(4, 6)


@tc.kernel(static_shapes=True)
def add_table(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    w = TABLE.to(x.device)  # host code reads the global live
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] + w[tm, tn]
    return out


def test_a_global_rebound_to_another_layout_or_shape(device: str) -> None:
    """Rebound to its transpose: the old strides (silently wrong); to fewer rows: a read past
    its end (garbage where eager raises)."""
    global TABLE
    saved = TABLE
    try:
        x = torch.randn(4, 6, device=device)
        torch.testing.assert_close(add_table(x), x + TABLE.to(device))
        TABLE = torch.randn(6, 4).t()
        torch.testing.assert_close(add_table(x), x + TABLE.to(device))
        TABLE = torch.randn(2, 6)
        with pytest.raises(ShapeError, match="tensor 'w' has size 2 along dim 0"):
            add_table(x)
    finally:
        TABLE = saved


@tc.kernel(static_shapes=False)
def linear_of(x: torch.Tensor, lin: nn.Linear) -> torch.Tensor:
    m, k = x.shape
    w = lin.weight
    n = w.size(0)
    out = torch.empty(m, n, dtype=torch.float32, device=x.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc += x[tm, tk] @ w[tn, tk].t()
        out[tm, tn] = acc
    return out


def test_dynamic_shapes_trace_again_for_a_weight_no_longer_unit_stride(device: str) -> None:
    """With static_shapes=False a weight whose stride of 1 moved raised, with a hint to use
    static_shapes=True (then silently wrong)."""
    lin = nn.Linear(8, 6, bias=False).to(device)
    x = torch.randn(5, 8, device=device)
    with torch.no_grad():
        torch.testing.assert_close(linear_of(x, lin), x @ lin.weight.t(), atol=1e-4, rtol=1e-4)
        lin.weight = nn.Parameter(torch.randn(8, 6, device=device).t())
        torch.testing.assert_close(linear_of(x, lin), x @ lin.weight.t(), atol=1e-4, rtol=1e-4)


@tc.kernel(static_shapes=True)
def decay_(state: dict[str, torch.Tensor], g: torch.Tensor) -> None:
    buf = state["buf"]
    m, n = g.shape
    for tm, tn in tc.tile([m, n]):
        buf[tm, tn] = buf[tm, tn] * 0.5 + g[tm, tn]


@dataclasses.dataclass
class State:
    buf: torch.Tensor


@pytest.mark.parametrize("wrap", ["dict", "namespace", "dataclass"])
def test_a_containers_tensors_are_keyed_by_layout_not_values(device: str, wrap: str) -> None:
    """A dict argument was keyed by its repr: two zero buffers of one shape and other strides
    shared one compile (22 of 24 wrong), and each step's new values traced again."""
    make = {
        "dict": lambda b: {"buf": b},
        "namespace": lambda b: types.SimpleNamespace(buf=b),
        "dataclass": State,
    }[wrap]
    kernel = decay_ if wrap == "dict" else _decay_record
    g = torch.randn(4, 6, device=device)
    for buf in (torch.zeros(4, 6, device=device), torch.zeros(6, 4, device=device).t()):
        state = make(buf)
        kernel(state, g)
        torch.testing.assert_close(buf, g)
    steady = make(torch.zeros(4, 6, device=device))
    before = len(kernel._bound)
    for _ in range(4):
        kernel(steady, torch.randn(4, 6, device=device))
    assert len(kernel._bound) <= before + 1  # one layout: one specialization, whatever values


@tc.kernel(static_shapes=True)
def _decay_record(state: object, g: torch.Tensor) -> None:
    buf = state.buf  # type: ignore[attr-defined]
    m, n = g.shape
    for tm, tn in tc.tile([m, n]):
        buf[tm, tn] = buf[tm, tn] * 0.5 + g[tm, tn]

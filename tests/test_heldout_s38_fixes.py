"""Fixes from session 38's held-out kernels: a loop-carried value started from a Python number
takes the wider dtype the loop gives it (farthest point sampling's ``far = 0`` then an argmax),
the interpreter computes masked-off lanes without NumPy warnings (a padded row's 0 / 0), and a
kernel whose device loop sits in a helper it calls is told so."""

from __future__ import annotations

import warnings

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError


@tc.kernel(static_shapes=True)
def farthest_steps(x: torch.Tensor) -> torch.Tensor:
    b, n = x.size()
    idx = torch.empty([b, 4], dtype=torch.int64, device=x.device)
    for tb in tc.tile(b, block_size=1):
        row = x[tb.begin, :]
        far = 0
        for i in tc.grid(4):
            row = row - x[tb.begin, far]  # reads at the previous argmax
            far = torch.argmax(row.abs(), dim=0)
            idx[tb.begin, i] = far
    return idx


def test_a_carry_started_from_a_python_int_takes_the_argmaxs_int64(device: str) -> None:
    x = torch.rand(3, 37, device=device)
    got = farthest_steps(x)
    assert got.dtype == torch.int64
    torch.testing.assert_close(got, farthest_steps.run_ref(x))


@tc.kernel(static_shapes=True)
def running_sum(x: torch.Tensor) -> torch.Tensor:
    b, n = x.size()
    out = torch.empty([b], dtype=torch.float64, device=x.device)
    for tb in tc.tile(b, block_size=1):
        acc = 0.0
        for tn in tc.tile(n):
            acc = acc + torch.sum(x[tb.begin, tn])
        out[tb.begin] = acc
    return out


def test_a_carry_started_from_a_python_float_takes_fp64() -> None:
    x = torch.rand(5, 100, dtype=torch.float64)
    torch.testing.assert_close(running_sum(x), x.sum(1))


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[4]))
def scale_rows(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    b, v = logits.size()
    out = torch.empty_like(logits)
    for tb in tc.tile(b):
        out[tb, :] = logits[tb, :] / temperature[tb][:, None]
    return out


def test_padded_rows_divide_without_warnings(device: str) -> None:
    x, t = torch.randn(3, 100, device=device), torch.rand(3, device=device) + 0.5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = scale_rows(x, t)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], caught[0].message
    torch.testing.assert_close(got, x / t[:, None])


def _double_into(src: torch.Tensor, dst: torch.Tensor) -> None:
    for t in tc.tile(src.size(0)):
        dst[t] = src[t] * 2.0


def test_a_device_loop_in_a_called_helper_is_named() -> None:
    with pytest.raises(DeviceCodeError, match="'_double_into' it calls has one") as info:

        @tc.kernel
        def doubled(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            _double_into(x, out)
            return out

    assert "move the `for ... in tc.tile(...)` loop of '_double_into'" in str(info.value)

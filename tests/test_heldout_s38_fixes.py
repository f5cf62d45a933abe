"""Fixes from session 38's held-out kernels: a loop-carried value started from a Python number
takes the wider dtype the loop gives it (farthest point sampling's ``far = 0`` then an argmax),
the interpreter computes masked-off lanes without NumPy warnings (a padded row's 0 / 0), and a
kernel whose device loop sits in a helper it calls is told so."""

from __future__ import annotations

import math
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


def test_a_carry_started_from_a_python_float_takes_fp64(device: str) -> None:
    x = torch.rand(5, 100, dtype=torch.float64, device=device)
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


@tc.kernel(static_shapes=True)
def scale_by_rsqrt(x: torch.Tensor, bias_correction: float) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = x[tn] / math.sqrt(bias_correction) + math.floor(bias_correction * 10)
    return out


def test_math_functions_of_a_run_time_float_argument(device: str) -> None:
    """A float argument is a run-time scalar in device code: ``math.sqrt`` of it is torch's."""
    x = torch.randn(100, device=device)
    for bc in (0.3, 0.71):
        want = x / math.sqrt(bc) + math.floor(bc * 10)
        torch.testing.assert_close(scale_by_rsqrt(x, bc), want)


def _flux(v: torch.Tensor, a: float, b: float) -> torch.Tensor:
    return math.sqrt(a) * v + max(a, b) + _floor_of(a * 10)


def _floor_of(a: float) -> int:
    return math.floor(a)


@tc.kernel(static_shapes=True)
def flux_by_helper(x: torch.Tensor, a: float, b: float) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = _flux(x[tn], a, b)
    return out


def test_math_and_max_of_run_time_floats_in_helper_functions(device: str) -> None:
    """math.sqrt / max of float arguments worked in the kernel's body, not in a helper it
    calls (or one that helper calls): 'float(...) of a device value' (fuzz 54a)."""
    x = torch.randn(10, device=device)
    for a, b in ((0.25, 0.5), (0.81, 0.3)):
        want = math.sqrt(a) * x + max(a, b) + math.floor(a * 10)
        torch.testing.assert_close(flux_by_helper(x, a, b), want)


@tc.kernel(static_shapes=True)
def rms_by_math(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = math.sqrt(x[tn] * x[tn])
    return out


def test_math_of_a_tile_is_refused_at_its_line() -> None:
    """Python's math takes one number: ``math.sqrt(tile)`` compiled elementwise while ref mode
    (and so the tuner's accuracy baseline) raised 'only one element tensors' (fuzz 54a)."""
    from tilecraft.errors import DeviceCodeError

    with pytest.raises(DeviceCodeError, match=r"test_heldout_s38_fixes.py:\d+: math.sqrt\(\)") as e:
        rms_by_math(torch.randn(40))
    assert "torch.sqrt(x) elementwise" in str(e.value)


@tc.kernel(static_shapes=False)
def row_topk(x: torch.Tensor, k_holder: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    k = k_holder.size(0)
    out = torch.empty([m, k], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m, block_size=1):
        vals, _ = torch.topk(x[tm.begin, :], k, dim=0)
        out[tm.begin, :] = vals
    return out


def test_a_run_time_k_of_topk_says_to_specialize_it() -> None:
    with pytest.raises(DeviceCodeError, match=r"torch.topk: k \(5 at this call\) is a run-time"):
        row_topk(torch.randn(4, 32), torch.ones(5))


def test_a_device_loop_in_a_local_helper_is_named() -> None:
    def fill(dst: torch.Tensor) -> None:
        for t in tc.tile(dst.size(0)):
            dst[t] = 1.0

    with pytest.raises(DeviceCodeError, match="'fill' it calls has one"):

        @tc.kernel
        def ones(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            fill(out)
            return out

"""Host values that change between launches of one device loop (a host ``for`` relaunching it)
or between calls of a ``static_shapes=False`` kernel are run-time values in device code: a grid
bound written inline (``tc.tile(m - off)``), a bool flag, and arithmetic or ordering on a
run-time int (``n // 2``, ``i > 0``). Each was baked in from the first launch (wrong values;
found by fuzzing) and is checked here against eager PyTorch."""

from __future__ import annotations

import math

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError


@tc.kernel(static_shapes=True)
def shifted_sums(x: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.zeros_like(x)
    for i in range(3):
        off = i * 2
        for t in tc.tile(m - off):
            out[t] = out[t] + x[t.index + off] + 10.0
    return out


@tc.kernel(static_shapes=True)
def flagged_steps(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for i in range(4):
        flag = i == 1
        scale = i * 3
        for t in tc.tile(x.size(0)):
            if flag:
                out[t] = out[t] + x[t]
            elif (i == 3) & (i != 0):
                out[t] = out[t] + 0.5
            if i > 2:
                out[t] = out[t] + scale // 2
            else:
                out[t] = out[t] - 100.0
    return out


@tc.kernel(static_shapes=False)
def half_offsets(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for t in tc.tile(n):
        half = n // 2
        if n > 9:
            out[t] = x[t] + half
        else:
            out[t] = x[t] - half
    return out


def test_a_relaunched_loop_reads_its_bounds_each_launch(device: str) -> None:
    x = torch.randn(9, generator=torch.Generator().manual_seed(1)).to(device)
    want = torch.zeros_like(x)
    for i in range(3):
        want[: 9 - 2 * i] += x[2 * i :] + 10.0
    torch.testing.assert_close(shifted_sums(x), want)


def test_a_flag_and_ints_a_host_loop_changes_are_run_time_values(device: str) -> None:
    x = torch.randn(7, generator=torch.Generator().manual_seed(2)).to(device)
    want = torch.zeros_like(x)
    for i in range(4):
        want += x if i == 1 else 0.5 if i == 3 else 0.0
        want += (i * 3) // 2 if i > 2 else -100.0
    torch.testing.assert_close(flagged_steps(x), want)


def test_arithmetic_on_a_run_time_size_is_computed_at_run_time(device: str) -> None:
    """10 and 12 share a specialization: ``n // 2`` was 5 for both."""
    for n in (8, 10, 12, 13):
        x = torch.randn(n, generator=torch.Generator().manual_seed(n)).to(device)
        want = x + n // 2 if n > 9 else x - n // 2
        torch.testing.assert_close(half_offsets(x), want)


@tc.kernel(static_shapes=True)
def prefix_double(x: torch.Tensor, frac: float) -> torch.Tensor:
    """A grid bound the host derives from a float argument (floats are not in the key)."""
    k = int(x.size(0) * frac)
    out = torch.zeros_like(x)
    for t in tc.tile(k):
        out[t] = x[t] * 2.0
    return out


@tc.kernel(static_shapes=True)
def signed_branch(x: torch.Tensor, a: float) -> torch.Tensor:
    out = torch.empty_like(x)
    if a > 0:
        for t in tc.tile(x.size(0)):
            out[t] = x[t] * a
    else:
        for t in tc.tile(x.size(0)):
            out[t] = x[t] - a
    return out


@tc.kernel(static_shapes=True)
def copy_then_prefix(x: torch.Tensor, frac: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t]
    for t in tc.tile(int(x.size(0) * frac)):
        out[t] = out[t] * 2.0
    return out


def test_host_code_that_reads_a_float_gets_a_variant_per_path(device: str) -> None:
    """The second call's loop length (or branch) came from the first call's float: elements
    left 0, or a KeyError inside tilecraft."""
    x = torch.randn(12, generator=torch.Generator().manual_seed(3)).to(device)
    for frac in (0.5, 1.0, 0.5, 0.25):
        want = torch.zeros_like(x)
        k = int(12 * frac)
        want[:k] = x[:k] * 2.0
        torch.testing.assert_close(prefix_double(x, frac), want)
    for a in (2.0, -1.0, 3.0):
        want = x * a if a > 0 else x - a
        torch.testing.assert_close(signed_branch(x, a), want)


def test_other_bounds_after_an_earlier_launch_is_a_located_error(device: str) -> None:
    """The first loop already ran: the call cannot start again, so it says what to do."""
    import pytest

    from tilecraft.errors import DeviceCodeError

    x = torch.randn(12, generator=torch.Generator().manual_seed(4)).to(device)
    want = x.clone()
    want[:6] *= 2.0
    torch.testing.assert_close(copy_then_prefix(x, 0.5), want)
    with pytest.raises(DeviceCodeError, match="device loop 1 got other bounds.*float"):
        copy_then_prefix(x, 1.0)


@tc.kernel(static_shapes=True)
def signed_shift(x: torch.Tensor, temp: float) -> torch.Tensor:
    shift = int(math.floor(temp))  # an int from a float: in no specialization key
    positive = temp > 0
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        if positive:
            out[t] = x[t] + shift
        else:
            out[t] = x[t] * 3 + shift
    return out


@tc.kernel(static_shapes=False)
def size_parity(x: torch.Tensor) -> torch.Tensor:
    even = x.size(0) % 2 == 0  # a bool from a dynamic size: baked per bucket
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        if even:
            out[t] = x[t] * 2
        else:
            out[t] = x[t] * 0
    return out


def test_host_ints_and_bools_device_code_reads_are_checked_at_each_launch(device: str) -> None:
    """``shift = int(floor(temp))`` and ``positive = temp > 0`` were baked on the first call
    and reused by later ones (floats are not keyed); so was ``even = n % 2 == 0`` within a
    dynamic-shape bucket (fuzzing, session 34). Each launch now compares them: another
    variant is traced."""
    x = torch.ones(4, device=device)
    for temp in (1.0, -3.5, 2.5, -0.5, 1.5):
        want = x + math.floor(temp) if temp > 0 else x * 3 + math.floor(temp)
        torch.testing.assert_close(signed_shift(x, temp), want)
    for n in (16, 9, 10, 15):
        y = torch.ones(n, device=device)
        torch.testing.assert_close(size_parity(y), y * (2 if n % 2 == 0 else 0))


@tc.kernel(static_shapes=True)
def negated_steps(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for i in range(3):  # a host loop: i is a launch argument
        for t in tc.tile(x.size(0)):
            out[t] = out[t] + x[t] * -i + (i**2) + (~i)
    return out


def test_every_operator_on_a_run_time_int_is_computed_at_run_time(device: str) -> None:
    """``x * -i``, ``i ** 2`` and ``~i`` folded the first launch's i (0) into the compile:
    DynamicInt had only + - * // % / (fuzzing, session 34)."""
    x = torch.ones(5, device=device)
    want = sum(x * -i + i**2 + ~i for i in range(3))
    torch.testing.assert_close(negated_steps(x), want)


@tc.kernel(static_shapes=True)
def scale_views_(grads: list[torch.Tensor], inv_scale: float) -> None:
    for g in grads:
        flat = g.view(-1)
        for tn in tc.tile(flat.numel()):
            flat[tn] = flat[tn] * inv_scale


@tc.kernel(static_shapes=True)
def scale_rows_(grads: list[torch.Tensor], inv_scale: float) -> None:
    for g in grads:
        rows = g.view(g.size(0), -1)
        for tm in tc.tile(rows.size(0)):
            rows[tm, :] = rows[tm, :] * inv_scale


def test_a_relaunch_checks_only_what_the_loop_names(device: str) -> None:
    """A host loop's views of tensors whose shapes differ (an optimizer's parameter list):
    the loop reads only the view, so the tensor it was made from may change; the error
    named that tensor ('g'), which the loop never reads."""
    grads = [torch.randn(4, 6, device=device), torch.randn(2, 12, device=device)]
    want = [g * 0.5 for g in grads]
    scale_views_(grads, 0.5)  # 'g' changed shape, 'flat' did not
    for got, w in zip(grads, want, strict=True):
        torch.testing.assert_close(got, w)
    with pytest.raises(DeviceCodeError, match=r"'rows' changed: shape \(4, 6\) then \(2, 12\)"):
        scale_rows_([torch.randn(4, 6, device=device), torch.randn(2, 12, device=device)], 0.5)

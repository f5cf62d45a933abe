"""Host values that change between launches of one device loop (a host ``for`` relaunching it)
or between calls of a ``static_shapes=False`` kernel are run-time values in device code: a grid
bound written inline (``tc.tile(m - off)``), a bool flag, and arithmetic or ordering on a
run-time int (``n // 2``, ``i > 0``). Each was baked in from the first launch (wrong values;
found by fuzzing) and is checked here against eager PyTorch."""

from __future__ import annotations

import torch

import tilecraft as tc


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
            elif i > 2:
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
    want = x - 200.0 + (9 // 2)
    torch.testing.assert_close(flagged_steps(x), want)


def test_arithmetic_on_a_run_time_size_is_computed_at_run_time(device: str) -> None:
    """10 and 12 share a specialization: ``n // 2`` was 5 for both."""
    for n in (8, 10, 12, 13):
        x = torch.randn(n, generator=torch.Generator().manual_seed(n)).to(device)
        want = x + n // 2 if n > 9 else x - n // 2
        torch.testing.assert_close(half_offsets(x), want)

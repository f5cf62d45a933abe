"""Clamping a scalar the ways users write it: Python's ``max`` / ``min`` on device scalars lower
to ``tl.maximum`` / ``tl.minimum`` (a tile is refused with the torch forms to use); in ref mode
``torch.clamp`` / ``torch.where`` / ``torch.maximum`` take the Python ints ``tile.begin``
arithmetic gives there, as compiled code takes the scalars. Errors point at the user's line,
with no frame at another line of the kernel's file."""

from __future__ import annotations

import inspect
import traceback
from typing import Any

import pytest
import torch
from test_scalar_if_bounds import _run, _window_eager

import tilecraft as tc
from tilecraft.errors import DeviceCodeError
from tilecraft.runtime.ref import ref_call


@tc.kernel(static_shapes=True)
def window_sums_max(x: torch.Tensor, window: int) -> torch.Tensor:
    """Each row of a tile gets the sum of x over [max(tile begin - window + 1, 0), tile end)."""
    n = x.size(0)
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tm in tc.tile(n):
        lo = max(tm.begin - window + 1, 0)
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(lo, tm.end):
            acc = acc + torch.sum(x[tn].to(torch.float32))
        out[tm] = acc
    return out


@tc.kernel(static_shapes=True)
def window_sums_clamp(x: torch.Tensor, window: int) -> torch.Tensor:
    """``window_sums_max`` with ``torch.clamp(..., min=0)``."""
    n = x.size(0)
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tm in tc.tile(n):
        lo = torch.clamp(tm.begin - window + 1, min=0)
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(lo, tm.end):
            acc = acc + torch.sum(x[tn].to(torch.float32))
        out[tm] = acc
    return out


@pytest.mark.parametrize("kernel", [window_sums_max, window_sums_clamp])
def test_clamped_loop_bound_in_both_modes(kernel: Any) -> None:
    x = torch.randn(45, generator=torch.Generator().manual_seed(4))
    for blocks in ([8, 4], [16, 16]):
        got = _run(kernel, tc.Config(block_sizes=blocks), x, 9)
        torch.testing.assert_close(got, _window_eager(x, 9, blocks[0]), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kernel.run_ref(x, 9), _window_eager(x, 9, 45))


def test_builtin_max_lowers_to_a_maximum() -> None:
    code = window_sums_max.bind((torch.randn(45), 9)).to_triton_code(tc.Config(block_sizes=[8, 4]))
    assert "lo = tl.maximum(" in code, code


@tc.kernel(static_shapes=True)
def centered_sums(x: torch.Tensor, half: int) -> torch.Tensor:
    """out[i] = x[max(i - half, 0) : min(i + half + 1, n)].sum() with every clamp form: the
    builtins, torch.clamp / torch.maximum / torch.minimum and torch.where on scalars."""
    n = x.size(0)
    out = torch.empty([n, 3], dtype=torch.float32, device=x.device)
    for tb in tc.grid(n):
        lo = max(tb - half, 0)
        hi = min(tb + half + 1, n, tb + 2 * half + 1)
        acc = 0.0
        for tn in tc.tile(lo, hi):
            acc = acc + torch.sum(x[tn].to(torch.float32))
        out[tb, 0] = acc
        lo = torch.maximum(tb - half, torch.clamp(tb - 2 * half, min=0))
        hi = min(torch.minimum(tb + half + 1, tb + 2 * half + 1), n)
        acc = 0.0
        for tn in tc.tile(torch.clamp(lo, min=0), hi):
            acc = acc + torch.sum(x[tn].to(torch.float32))
        out[tb, 1] = acc
        lo = torch.where(tb < half, 0, tb - half)
        acc = 0.0
        for tn in tc.tile(lo, torch.clamp(tb + half + 1, max=n)):
            acc = acc + torch.sum(x[tn].to(torch.float32))
        out[tb, 2] = acc
    return out


def test_every_clamp_form_agrees_in_both_modes() -> None:
    x = torch.randn(23, generator=torch.Generator().manual_seed(5))
    sums = torch.stack([x[max(i - 4, 0) : min(i + 5, 23)].sum() for i in range(23)])
    want = sums[:, None].expand(23, 3)
    torch.testing.assert_close(centered_sums.run_ref(x, 4), want)
    for blocks in ([4, 4, 4], [8, 2, 16]):
        got = _run(centered_sums, tc.Config(block_sizes=blocks), x, 4)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_ref_call_takes_python_numbers_where_torch_wants_tensors() -> None:
    assert ref_call(torch.clamp, -3, min=0) == 0
    assert ref_call(torch.clamp, 7, max=5) == 5 and isinstance(ref_call(torch.clamp, 7, max=5), int)
    assert ref_call(torch.where, True, 1, 2) == 1
    assert ref_call(torch.maximum, 2, 5) == 5 and ref_call(torch.minimum, 2.5, 5) == 2.5
    t = torch.tensor([-1.0, 2.0])
    assert torch.equal(ref_call(torch.maximum, t, 0), torch.tensor([0.0, 2.0]))  # a tensor stays
    assert torch.equal(ref_call(torch.clamp, t, min=0.5), torch.tensor([0.5, 2.0]))
    with pytest.raises(TypeError, match="clamp"):  # nothing to fix: torch's own error
        ref_call(torch.clamp, "a", min=0)
    # a number stays weak: beside a 0-d bf16 value it does not promote to fp32
    half = torch.tensor(1.0, dtype=torch.bfloat16)
    assert ref_call(torch.maximum, 0.5, half).dtype == torch.bfloat16


@tc.kernel(static_shapes=True)
def running_max(x: torch.Tensor) -> torch.Tensor:
    """Row maxima with the running max started as a Python float (torch.maximum(float, tile))."""
    r, c = x.size()
    out = torch.empty([r], dtype=torch.float32, device=x.device)
    for i in tc.grid(r):
        m = float("-inf")
        for tcol in tc.tile(c):
            m = torch.maximum(m, torch.amax(x[i, tcol].to(torch.float32)))
        out[i] = m
    return out


def test_a_python_float_carried_into_torch_maximum_runs_in_ref_mode() -> None:
    x = torch.randn(6, 50)
    torch.testing.assert_close(running_max.run_ref(x), x.amax(1))
    torch.testing.assert_close(_run(running_max, tc.Config(block_sizes=[16]), x), x.amax(1))


@tc.kernel(static_shapes=True)
def max_of_a_tile(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for tm in tc.tile(n):
        v = x[tm]
        out[tm] = max(v, 0.0)
    return out


@tc.kernel(static_shapes=True)
def and_of_scalars(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for tb in tc.grid(n):
        v = x[tb]
        if v > 0 and tb > 1:
            v = v * 2
        out[tb] = v
    return out


def _line_of(kernel: Any, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _frames_in_this_file(exc: BaseException) -> list[int]:
    return [
        f.lineno or 0 for f in traceback.extract_tb(exc.__traceback__) if f.filename == __file__
    ]


@pytest.mark.parametrize(
    ("kernel", "line", "words"),
    [
        (max_of_a_tile, "max(v, 0.0)", ["max() of a tile", "torch.maximum", "torch.amax"]),
        (and_of_scalars, "if v > 0 and tb > 1", ["scalar device value", "&", "torch.where"]),
    ],
)
def test_errors_name_the_builtin_and_point_at_the_users_line(
    kernel: Any, line: str, words: list[str]
) -> None:
    with pytest.raises(DeviceCodeError) as info:
        kernel.bind((torch.randn(8),))
    text = str(info.value)
    lineno = _line_of(kernel, line)
    assert f"test_scalar_min_max.py:{lineno}" in text, text
    assert all(w in text for w in words), text
    # the traceback's frames in this file: the bind above, the device loop, the user's line
    call = next(f.lineno for f in traceback.extract_tb(info.tb) if f.name.startswith("test_"))
    allowed = {call, _line_of(kernel, "for t"), lineno}
    frames = _frames_in_this_file(info.value)
    assert lineno in frames and set(frames) <= allowed, (frames, allowed)

"""The autotuner's accuracy baseline runs the kernel body in ref mode in the caller's process:
a ``while`` on data that never ends must not hold the caller, so it runs under a time limit
and tuning goes on with configs checked for running only (each under its own limit)."""

from __future__ import annotations

import time

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune.discover import baseline_or_none


@tc.kernel(static_shapes=True)
def halving_forever(x: torch.Tensor) -> torch.Tensor:
    """Bisects until the interval is under 1e-30: fp32 never gets there (lo and hi stop at
    neighbouring floats), so the ``while`` never ends, in ref mode as in eager PyTorch."""
    n = x.size(0)
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        lo = x[tn.begin].to(torch.float32)
        hi = lo + 1.0
        while hi - lo > 1e-30:
            mid = (lo + hi) * 0.5
            hi = torch.where(mid > lo, mid, hi)
        out[tn] = x[tn] * 0.0 + hi
    return out


def test_a_baseline_that_never_ends_is_stopped_with_a_warning() -> None:
    x = torch.randn(37)
    bound = halving_forever.bind((x,))
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match=r"ran past 1s and was stopped: a `while`"):
        assert baseline_or_none(bound, (x,), {}, timeout_s=1.0) is None
    assert time.monotonic() - start < 30


def test_a_baseline_within_its_limit_is_kept() -> None:
    @tc.kernel(static_shapes=True)
    def double(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tn in tc.tile(x.size(0)):
            out[tn] = x[tn] * 2.0
        return out

    x = torch.randn(37)
    baseline = baseline_or_none(double.bind((x,)), (x,), {}, timeout_s=30.0)
    assert baseline is not None

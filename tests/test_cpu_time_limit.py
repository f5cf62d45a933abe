"""CPU discovery runs candidates in this process (Triton's interpreter) under a per-candidate time
limit: a candidate that runs too long is a "runtime timeout", not a hang of the caller."""

from __future__ import annotations

import signal
import time

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune.alarm import CandidateTimeout, time_limit
from tilecraft.autotune.classify import Category, NoWorkingConfigError
from tilecraft.autotune.discover import run_discovery


@tc.kernel
def row_sums(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = x.new_empty([m])
    for tm in tc.tile(m):
        out[tm] = torch.sum(x[tm, :], dim=-1)
    return out


def test_time_limit_interrupts_python_work() -> None:
    start = time.monotonic()
    with pytest.raises(CandidateTimeout), time_limit(0.05):
        while True:
            pass
    assert time.monotonic() - start < 5


def test_time_limit_restores_the_callers_alarm() -> None:
    calls: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda *a: calls.append(1))
    try:
        with time_limit(5.0):
            pass
        assert signal.getsignal(signal.SIGALRM) is not None
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        time.sleep(0.2)
        assert calls == [1]
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_candidates_past_a_tiny_limit_are_timeouts() -> None:
    x = torch.randn(64, 300)
    bound = row_sums.bind((x,))
    start = time.monotonic()
    with pytest.raises(NoWorkingConfigError) as info:
        run_discovery(bound, (x,), {}, timeout_s=1e-4, isolate=False, use_cache=False)
    assert time.monotonic() - start < 120
    categories = {a.category for a in info.value.attempts}
    assert categories == {Category.RUNTIME_TIMEOUT}
    assert "time limit" in str(info.value)


def test_a_callers_timer_keeps_its_deadline() -> None:
    """The caller's own SIGALRM timer was restored with its full delay after a candidate's
    limit: a 0.3 s watchdog fired at 0.41 s (fuzzing, session 34); now with what is left."""
    import signal
    import time

    from tilecraft.autotune.alarm import time_limit

    fired_at: list[float] = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired_at.append(time.monotonic()))
    try:
        start = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with time_limit(5.0):
            time.sleep(0.2)
        time.sleep(0.4)
        assert fired_at, "the caller's timer never fired"
        assert fired_at[0] - start < 0.45, fired_at[0] - start  # (held back: >= 0.5)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

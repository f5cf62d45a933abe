"""A time limit for a candidate run in this process (stage: autotune; in: seconds; out: a
context in which running past the limit raises :class:`CandidateTimeout`).

Triton's CPU interpreter runs kernels as Python in the caller's process, so a candidate that
runs for minutes (a huge tile stepped element by element) would hold the caller. On POSIX in the
main thread a ``SIGALRM`` timer interrupts it between Python bytecodes; elsewhere there is no
limit (README: what holds on CPU). The caller's own alarm, if any, is restored afterwards.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any


class CandidateTimeout(Exception):
    """A candidate config ran past its time limit (in-process, interpreter)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[list[bool]]:
    """Yields a list that holds ``True`` once the limit fired (the body may swallow the raise)."""
    fired: list[bool] = []
    usable = (
        seconds > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield fired
        return

    def on_alarm(signum: int, frame: Any) -> None:
        fired.append(True)
        raise CandidateTimeout(f"candidate ran past its time limit of {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    start = time.monotonic()
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_delay:  # the caller's timer, with the time this limit held it back taken off
            left = max(old_delay - (time.monotonic() - start), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)

"""The wall-clock budget of one tuning call (stage: autotune; in: the effort's seconds and a
clock; out: deadlines and where the time went).

``autotune_effort="quick"`` promises a first call of at most ``budget_s`` seconds, discovery
included: the budget starts before the accuracy baseline and the worker processes, every phase
is timed (``baseline``, ``discovery``, ``search``, ``final``), the search stops at
:meth:`Budget.search_deadline` (the budget less what re-timing the finalists needs), and the
re-timing itself is skipped when the budget is spent. The clock is injectable, so tests drive it
without sleeping.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

Clock = Callable[[], float]


class Budget:
    def __init__(self, total_s: float, clock: Clock = time.monotonic):
        self.total_s = float(total_s)
        self.clock = clock
        self.start = clock()
        self.phases: dict[str, float] = {}

    @property
    def deadline(self) -> float:
        return self.start + self.total_s

    def left(self) -> float:
        return self.deadline - self.clock()

    def spent(self) -> float:
        return self.clock() - self.start

    def search_deadline(self, reserve_s: float) -> float:
        """When the search must stop to leave ``reserve_s`` for the final re-timing."""
        return self.deadline - reserve_s

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = self.clock()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + self.clock() - began

    def summary(self) -> str:
        """``27.3 s of 30 s (baseline 1.2, discovery 6.3, search 18.1, final 0.7)``."""
        parts = ", ".join(f"{name} {seconds:.1f}" for name, seconds in self.phases.items())
        return f"{self.spent():.1f} s of {self.total_s:g} s" + (f" ({parts})" if parts else "")

"""Which runner a tuning job gets (stage: autotune; in: a bound kernel and its arguments; out: a
:class:`Runner`): isolated workers (:mod:`tilecraft.autotune.isolate`) when the kernel can be
handed to one, else, with a warning, the in-process runner (:mod:`tilecraft.autotune.runner`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tilecraft.autotune.baseline import Baseline
from tilecraft.autotune.classify import Attempt
from tilecraft.autotune.compare import Tolerances
from tilecraft.autotune.isolate import IsolatedRunner
from tilecraft.autotune.runner import InProcessRunner, IsolationUnavailable, Runner
from tilecraft.config.config import Config
from tilecraft.errors import user_stacklevel
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.settings import in_worker


class FallbackRunner(Runner):
    """An isolated runner that turns into an in-process one (with a warning) when workers cannot
    load the kernel."""

    def __init__(self, inner: Runner, make_fallback: Callable[[], Runner], name: str):
        self.inner, self.make_fallback, self.name = inner, make_fallback, name

    @property
    def isolated(self) -> bool:  # type: ignore[override]
        return self.inner.isolated

    def _fall_back(self, why: BaseException) -> None:
        _warn_in_process(self.name, str(why))
        self.inner.close()
        self.inner = self.make_fallback()

    def check(self, configs: Sequence[Config], **options: Any) -> list[Attempt | None]:
        try:
            return self.inner.check(configs, **options)
        except IsolationUnavailable as exc:
            self._fall_back(exc)
            return self.inner.check(configs, **options)

    def bench(self, config: Config, *, timeout_s: float, rep_ms: float = 100.0) -> Attempt:
        try:
            return self.inner.bench(config, timeout_s=timeout_s, rep_ms=rep_ms)
        except IsolationUnavailable as exc:
            self._fall_back(exc)
            return self.inner.bench(config, timeout_s=timeout_s, rep_ms=rep_ms)

    def close(self) -> None:
        self.inner.close()


def _warn_in_process(name: str, why: str) -> None:
    warnings.warn(
        f"tilecraft autotune: {name}: configs run in this process, without crash "
        f"isolation ({why}); define the kernel at module level to isolate them",
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )


def open_runner(
    bound: BoundKernel,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    baseline: Baseline | None,
    *,
    isolate: bool = True,
    workers: int = 1,
    tolerances: Tolerances | None = None,
) -> Runner:
    """Isolated workers when possible, else (with a warning) the in-process runner."""

    def in_process() -> Runner:
        return InProcessRunner(bound, args, kwargs, baseline, tolerances=tolerances)

    if not isolate or in_worker():  # no workers of workers (a module tuning at import time)
        return in_process()
    try:
        inner = IsolatedRunner(
            bound, args, kwargs, baseline, workers=workers, tolerances=tolerances
        )
    except IsolationUnavailable as exc:
        _warn_in_process(bound.kernel.__name__, str(exc))
        return in_process()
    return FallbackRunner(inner, in_process, bound.kernel.__name__)

"""The runner interface (check and benchmark configs) and its in-process fallback (stage:
autotune). :mod:`tilecraft.autotune.runners` picks isolated workers when it can.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tilecraft.autotune.alarm import CandidateTimeout, time_limit
from tilecraft.autotune.baseline import Baseline
from tilecraft.autotune.classify import Attempt, Category
from tilecraft.autotune.compare import Tolerances
from tilecraft.autotune.evaluate import check_config, failure, time_config
from tilecraft.config.config import Config
from tilecraft.runtime.device import reset_split_counters
from tilecraft.runtime.kernel import BoundKernel

OnResult = Callable[[Attempt], None]


class IsolationUnavailable(Exception):
    """The kernel or its arguments cannot be handed to a worker process."""


BenchIf = Callable[[Attempt], bool]


def attempt_from(config: Config, result: Mapping[str, Any]) -> Attempt:
    """An :class:`Attempt` from a worker's JSON result."""
    ok = bool(result.get("ok"))
    normalized = result.get("config")
    return Attempt(
        Config.from_dict(normalized) if ok and normalized is not None else config,
        None if ok else Category(result.get("category") or Category.UNKNOWN.value),
        str(result.get("reason", "")),
        float(result.get("elapsed_s", 0.0)),
        str(result.get("detail", "")),
        result.get("ms"),
        dict(result.get("resources") or {}),
        str(result.get("digest", "")),
    )


# a lean search goes this many candidates past the first that works (spilling) before it takes
# that one: a kernel whose every tile spills must not compile the whole candidate list
LEAN_LOOKAHEAD = 4


def prefix_has_ok(results: Sequence[Attempt | None], lean: bool = False) -> bool:
    """Whether the rank-ordered prefix of finished results already holds the first survivor
    (``lean``: the first that does not spill hard, ``Attempt.lean``, or the first that works
    once ``LEAN_LOOKAHEAD`` candidates after it did not work lean either)."""
    since_ok: int | None = None
    for r in results:
        if r is None:
            return False
        if r.lean if lean else r.ok:
            return True
        if since_ok is not None:
            since_ok += 1
        elif r.ok:
            since_ok = 0
        if since_ok == LEAN_LOOKAHEAD:
            return True
    return False


class Runner:
    """Checks (compile, run, compare) and benchmarks configs.

    ``check`` returns one entry per config, in order: an :class:`Attempt`, or ``None`` for a
    config that was not run (``first_ok`` found an earlier survivor, one that does not spill
    hard where ``lean`` is set, or the ``deadline``, a
    ``time.monotonic()`` value, passed). With ``bench_rep_ms`` each surviving config for which
    ``bench_if`` holds is also timed (``Attempt.ms``).
    """

    isolated = False

    def check(
        self,
        configs: Sequence[Config],
        *,
        timeout_s: float,
        first_ok: bool = False,
        lean: bool = False,
        bench_rep_ms: float | None = None,
        bench_if: BenchIf | None = None,
        on_result: OnResult | None = None,
        deadline: float | None = None,
    ) -> list[Attempt | None]:
        raise NotImplementedError

    def bench(self, config: Config, *, timeout_s: float, rep_ms: float = 100.0) -> Attempt:
        raise NotImplementedError

    def warm(self) -> bool:
        """Whether a benchmark can start now, without starting a worker process first."""
        return True

    def close(self) -> None:
        pass

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InProcessRunner(Runner):
    """The same checks in this process, one after another: the CPU interpreter's runner, and the
    fallback when the kernel cannot be re-imported by a worker. Each check has a time limit where
    ``alarm.time_limit`` can set one; there is no protection from crashes."""

    def __init__(
        self,
        bound: BoundKernel,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        baseline: Baseline | None,
        *,
        tolerances: Tolerances | None = None,
    ):
        self.bound, self.args, self.kwargs = bound, tuple(args), dict(kwargs)
        self.baseline, self.tolerances = baseline, tolerances

    def check(
        self,
        configs: Sequence[Config],
        *,
        timeout_s: float,
        first_ok: bool = False,
        lean: bool = False,
        bench_rep_ms: float | None = None,
        bench_if: BenchIf | None = None,
        on_result: OnResult | None = None,
        deadline: float | None = None,
    ) -> list[Attempt | None]:
        results: list[Attempt | None] = [None] * len(configs)
        for i, config in enumerate(configs):
            if deadline is not None and time.monotonic() > deadline:
                break
            attempt = self._check_one(config, timeout_s)
            if attempt.ok and bench_rep_ms is not None and (bench_if is None or bench_if(attempt)):
                timed = self.bench(attempt.config, timeout_s=timeout_s, rep_ms=bench_rep_ms)
                attempt = timed if not timed.ok else attempt
                attempt.ms = timed.ms
            results[i] = attempt
            if on_result is not None:
                on_result(attempt)
            if first_ok and prefix_has_ok(results[: i + 1], lean):
                break
        return results

    def _check_one(self, config: Config, timeout_s: float) -> Attempt:
        """One check under a time limit (where the platform allows one: see ``alarm.py``)."""
        start = time.perf_counter()
        try:
            with time_limit(timeout_s) as fired:
                result = check_config(
                    self.bound, config, self.args, self.kwargs, self.baseline,
                    tolerances=self.tolerances,
                )  # fmt: skip
        except CandidateTimeout:
            fired = [True]
        if fired:  # the interpreter may have wrapped the raise into another error
            reset_split_counters()  # the stopped launch's counts would poison the next one
            return Attempt(
                config, Category.RUNTIME_TIMEOUT, f"ran past the {timeout_s:g}s time limit",
                time.perf_counter() - start,
            )  # fmt: skip
        attempt = attempt_from(config, result)
        if not attempt.ok:
            reset_split_counters()
        return attempt

    def bench(self, config: Config, *, timeout_s: float, rep_ms: float = 100.0) -> Attempt:
        start = time.perf_counter()
        try:
            program = self.bound.compile_config(config)
            ms = time_config(self.bound, program, self.args, self.kwargs, rep_ms=rep_ms)
        except Exception as exc:
            return attempt_from(config, failure(exc, "run", start))
        return Attempt(config, None, "", time.perf_counter() - start, ms=ms)

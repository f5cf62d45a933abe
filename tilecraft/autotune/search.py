"""The search for the fastest config (stage: autotune; see docs/architecture.md).

``tune`` starts from the discovered working default and runs a pattern search (coordinate
descent): each generation is every neighbour of the current centre (block sizes x2 and /2,
reduction loops, num_warps, num_stages, user tunables), normalized and pruned by the static
estimate, compiled and checked in parallel worker processes and timed one at a time; the centre
moves to the generation's best while it improves. ``effort='full'`` adds random restarts (each a
local search from the best of a batch of random configs) until the budget is spent or four
restarts in a row found nothing faster. The best few are re-timed in interleaved rounds before the
final pick (each keeps the least time it showed), and the winner is cached.

Timing is ``triton.testing.do_bench``'s median on a GPU. On the CPU (Triton's interpreter) it is
wall-clock time of a few calls, which says nothing about GPU speed: it only exercises the search.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from tilecraft import write_guard
from tilecraft.autotune import cache
from tilecraft.autotune.baseline import Baseline, clone_args
from tilecraft.autotune.budget import Budget, Clock
from tilecraft.autotune.candidates import check, neighbors
from tilecraft.autotune.classify import Attempt, Category
from tilecraft.autotune.compare import Tolerances
from tilecraft.autotune.discover import (
    DEFAULT_TIMEOUT_S,
    UnknownRepros,
    baseline_or_none,
    cached_config,
    default_workers,
    discover_default,
    kernel_tolerances,
)
from tilecraft.autotune.progress import Reporter
from tilecraft.autotune.runner import Runner
from tilecraft.autotune.runners import open_runner
from tilecraft.config.config import Config
from tilecraft.config.pipelines import applies as pipeline_applies
from tilecraft.config.pipelines import pipeline_configs, pipeline_cost
from tilecraft.errors import ConfigError
from tilecraft.runtime.kernel import BoundKernel

SEARCH_ELEMS_PER_THREAD = 256  # the search prunes configs over this (the spec's random limit)
MIN_GAIN = 0.01  # the centre moves only for a gain of at least 1%
ADAPTIVE_FLOOR_S = 10.0  # after the first results, timeout = max(floor, factor * slowest ok)
ADAPTIVE_FACTOR = 5.0
SLOW_FACTOR = 1.25  # a config this much slower than the best is not re-timed as a finalist
FINAL_ROUNDS = 2  # interleaved re-timing rounds of the finalists (see _Search.final_pick)


@dataclasses.dataclass(frozen=True)
class Effort:
    budget_s: float
    rep_ms: float  # do_bench rep per config
    final_rep_ms: float  # re-timing of the finalists
    finalists: int
    restarts: bool
    patience: int = 0  # restarts stop after this many in a row bring no gain (budget permitting)
    pipelines: int = 4  # the resource model's top Hopper pipelines timed with the default
    per_generation: int | None = None  # configs compiled per generation: the model's top ones

    @property
    def final_reserve_s(self) -> float:
        """Budget kept for re-timing the finalists (do_bench warm-up + repetitions, each
        finalist once per round)."""
        return self.finalists * (2 * self.final_rep_ms / 1000 + 0.3 * FINAL_ROUNDS)


EFFORTS = {
    # quick: a short first timing pass (20 ms of repetitions; the finalists are re-timed at
    # 100 ms in all, over FINAL_ROUNDS rounds), at most 12 compiles per generation (the model's
    # top ones: about one round of compiles on 8 workers), finalists only within SLOW_FACTOR of
    # the best
    # its budget is 28 s of the 30 s a first call promises: a round of compiles cancelled at the
    # deadline kills its workers, and the finalists' re-timing or the winner's load after it
    # can take a second or two (H200, KL divergence: 29.6 s with a 30 s budget)
    "quick": Effort(
        budget_s=28.0,
        rep_ms=20.0,
        final_rep_ms=100.0,
        finalists=3,
        restarts=False,
        per_generation=12,
    ),
    "full": Effort(
        budget_s=180.0,
        rep_ms=100.0,
        final_rep_ms=250.0,
        finalists=5,
        restarts=True,
        patience=4,
        pipelines=8,
    ),
}


class _Search:
    def __init__(
        self,
        bound: BoundKernel,
        runner: Runner,
        reporter: Reporter,
        effort: Effort,
        *,
        deadline: float,
        timeout_s: float,
        seed: int,
        batch: int,
        on_unknown: UnknownRepros,
        budget: Budget | None = None,
    ):
        self.spec = bound.config_spec
        self.warp_size = bound.target.warp_size
        self.runner, self.reporter, self.effort = runner, reporter, effort
        self.deadline, self.timeout_s = deadline, timeout_s
        self.budget = budget
        self.clock: Clock = budget.clock if budget is not None else time.monotonic
        self.rng = random.Random(seed)
        self.batch = batch
        self.on_unknown = on_unknown
        self.seen: set[str] = set()
        self.timed: list[Attempt] = []
        self.ok_elapsed: list[float] = []

    def left(self) -> float:
        return self.deadline - self.clock()

    def timeout(self) -> float:
        if not self.ok_elapsed:
            return self.timeout_s
        adaptive = max(ADAPTIVE_FLOOR_S, ADAPTIVE_FACTOR * max(self.ok_elapsed))
        return min(self.timeout_s, adaptive)

    def best(self, pool: Sequence[Attempt] | None = None) -> Attempt | None:
        timed = [a for a in (self.timed if pool is None else pool) if a.ms is not None]
        return min(timed, key=lambda a: a.ms or 0.0) if timed else None

    def _record(self, attempt: Attempt) -> None:
        self.reporter.attempt(attempt)
        self.on_unknown(attempt, self.reporter)
        if attempt.ok:
            self.ok_elapsed.append(attempt.elapsed_s)
            if attempt.ms is not None:
                self.timed.append(attempt)

    def _worth_timing(self, attempt: Attempt) -> bool:
        """Prune by compiled resource usage: a config that spills is not timed once a config
        without spills has been."""
        best = self.best()
        spills = attempt.resources.get("spills", 0)
        return not (spills > 0 and best is not None and best.resources.get("spills", 0) == 0)

    def _predicted_to_spill(self, config: Config | None) -> Attempt | None:
        """Prune before compiling: a config the resource model predicts to spill is not tried
        once a config predicted not to has been timed (spilling configs are the slow ones, and
        their compiles are the long ones)."""
        best = self.best()
        if config is None or best is None:
            return None
        resources = self.spec.resolve(config, warn=False).resources
        if not resources.spills or self.spec.resolve(best.config, warn=False).resources.spills:
            return None
        return Attempt(
            config,
            Category.RESOURCE,
            f"static check: the resource model predicts {resources.registers} registers per "
            f"thread (limit {resources.register_limit}), and a config without spills was timed",
        )

    def generation(self, configs: Sequence[Config], past_deadline: bool = False) -> list[Attempt]:
        """Check and time ``configs``; with ``past_deadline`` even when the budget is spent."""
        fresh: list[Config] = []
        for config in configs:
            normalized, why = check(self.spec, config, self.warp_size, SEARCH_ELEMS_PER_THREAD)
            key = normalized.key() if normalized is not None else config.key()
            if key in self.seen:
                continue
            self.seen.add(key)
            why = why or self._predicted_to_spill(normalized)
            if normalized is None or why is not None:
                assert why is not None
                self.reporter.attempt(why)
            else:
                fresh.append(normalized)
        fresh = self._model_first(fresh)
        if not fresh or (self.left() <= 0 and not past_deadline):
            return []
        results = self.runner.check(
            fresh,
            timeout_s=self.timeout() if past_deadline else min(self.timeout(), max(self.left(), 1)),
            bench_rep_ms=self.effort.rep_ms,
            bench_if=self._worth_timing,
            on_result=self._record,
            deadline=None if past_deadline else self.deadline,
        )
        done = [r for r in results if r is not None]
        self.reporter.end_generation(self.best(), len(done))
        return done

    def _model_first(self, configs: list[Config]) -> list[Config]:
        """``configs`` in the resource model's order (predicted to fit before predicted to
        spill, then by the pipeline estimate for dot kernels on sm_90+), at most the effort's
        ``per_generation`` of them: the budget goes to the model's top candidates."""
        if not configs:
            return configs

        def rank(config: Config) -> tuple[float, float]:
            plan = self.spec.resolve(config, warn=False)
            spill = plan.resources.registers / max(plan.resources.register_limit, 1)
            cost = pipeline_cost(self.spec, plan) if pipeline_applies(self.spec) else 0.0
            return (max(spill, 1.0), cost)

        ranked = sorted(configs, key=rank)
        cap = self.effort.per_generation
        return ranked[:cap] if cap else ranked

    def local_search(self, start: Attempt) -> Attempt:
        """Coordinate descent over tiles, warps and stages; once those stop gaining, one
        generation of strategy moves (pid type, indexing, eviction, L2 grouping), and back to
        tiles if one of them gains."""
        centre = start
        strategies = False
        while self.left() > 0:
            moves = neighbors(self.spec, centre.config, strategies=strategies)
            step = self.best(self.generation(moves))
            if step is None or (step.ms or 0.0) >= (centre.ms or 0.0) * (1 - MIN_GAIN):
                if strategies:
                    break
                strategies = True
                continue
            centre, strategies = step, False
        return centre

    def run(self, default: Config) -> Attempt | None:
        with self._phase("search"):
            found = self._search(default)
        with self._phase("final"):
            return self.final_pick() if found else None

    def _phase(self, name: str) -> contextlib.AbstractContextManager[None]:
        return self.budget.phase(name) if self.budget is not None else contextlib.nullcontext()

    def _search(self, default: Config) -> bool:
        """The local search (and restarts); False when not even the default could be timed."""
        # the default is timed even when discovery spent the budget: a result (a shipped table's
        # entry) always carries the time of the config it returns; then the resource model's best
        # pipelines (sm_90+ dot kernels): the local search starts from the fastest of them
        timed = self.generation([default], past_deadline=True)
        timed += self.generation(pipeline_configs(self.spec)[: self.effort.pipelines])
        first = self.best(timed)
        if first is None:
            return False
        self.local_search(first)
        stale = 0  # restarts in a row that did not beat the best by MIN_GAIN
        while self.effort.restarts and self.left() > 0 and stale < self.effort.patience:
            before = self.best()
            seeds = [self.spec.random(self.rng) for _ in range(self.batch)]
            start = self.best(self.generation(seeds))
            if start is not None:
                self.local_search(start)
            after = self.best()
            gained = before is None or (
                after is not None and (after.ms or 0.0) < (before.ms or 0.0) * (1 - MIN_GAIN)
            )
            stale = 0 if gained else stale + 1
        return True

    def final_pick(self) -> Attempt | None:
        """Re-time the best few (those within SLOW_FACTOR of the best) in ``FINAL_ROUNDS``
        interleaved rounds, each round in the reverse order of the one before, and pick the
        least time each finalist ever showed (its search timing included); without re-timing
        when the budget is spent or no worker is left running (a worker killed at the deadline
        would take seconds to start again). Why interleaved and least: noise on a timing is one
        sided (the host falling behind the GPU, another process) and comes in bursts of seconds;
        timed once each, one after another, one finalist can take a whole burst and lose to a
        slower one (H200, column sum 65536x1024: quick kept 0.0517 ms over the search's 0.0440)."""
        ranked = sorted(self.timed, key=lambda a: a.ms or 0.0)[: self.effort.finalists]
        ranked = [a for a in ranked if (a.ms or 0.0) <= (ranked[0].ms or 0.0) * SLOW_FACTOR]
        if len(ranked) <= 1:
            return ranked[0] if ranked else None
        left = self.budget.left() if self.budget is not None else self.timeout_s
        if left <= 0 or not self.runner.warm():
            why = "the budget is spent" if left <= 0 else "no worker is running"
            self.reporter.line(f"finalists not re-timed: {why}")
            return ranked[0]
        least = {id(a): a.ms or 0.0 for a in ranked}
        failed: set[int] = set()
        for round_index in range(FINAL_ROUNDS):
            order = ranked if round_index % 2 == 0 else ranked[::-1]
            for attempt in order:
                if id(attempt) in failed:
                    continue
                again = self.runner.bench(
                    attempt.config,
                    timeout_s=min(self.timeout(), max(left, 1.0)),
                    rep_ms=self.effort.final_rep_ms / FINAL_ROUNDS,
                )
                if again.ok and again.ms is not None:
                    least[id(attempt)] = min(least[id(attempt)], again.ms)
                else:
                    failed.add(id(attempt))  # (a config that fails now is not picked)
        retimed = [dataclasses.replace(a, ms=least[id(a)]) for a in ranked if id(a) not in failed]
        return self.best(retimed) or ranked[0]


def run_tune(
    bound: BoundKernel,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    *,
    effort: str = "quick",
    budget_s: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    isolate: bool = True,
    workers: int | None = None,
    tolerances: Tolerances | None = None,
    use_cache: bool = True,
    seed: int = 0,
    stream: IO[str] | None = None,
    verbose: bool = True,
    clock: Clock = time.monotonic,
) -> TuneResult:
    """The fastest working config found within ``budget_s`` (``effort``: none | quick | full),
    with its time and the runner-up (``ms`` is None for discovery and cache hits).

    ``effort='none'`` is :func:`discover_default`. ``budget_s`` defaults to the kernel's
    ``autotune_budget_s`` option, else the effort's budget; ``tolerances`` to its
    ``autotune_tolerances`` option. Raises only ``NoWorkingConfigError``.
    """
    kwargs = dict(kwargs or {})
    name = bound.kernel.__name__
    if effort == "none":
        found = discover_default(
            bound, args, kwargs, timeout_s=timeout_s, isolate=isolate, workers=workers,
            tolerances=tolerances, use_cache=use_cache,
        )  # fmt: skip
        return TuneResult(found)
    if effort not in EFFORTS:
        raise ConfigError(f"autotune_effort={effort!r}: expected one of none, quick, full")
    # a cached result of a lesser effort does not answer a full tuning (the search runs)
    if use_cache and _effort_rank(effort) <= _effort_rank(cache.stored_effort(bound, "best")):
        hit = cached_config(bound, "best")
        if hit is not None:
            return TuneResult(hit)
    plan = EFFORTS[effort]
    if budget_s is None:
        budget_s = bound.kernel.options.get("autotune_budget_s")
    budget = Budget(plan.budget_s if budget_s is None else float(budget_s), clock)
    tolerances = tolerances if tolerances is not None else kernel_tolerances(bound, args)
    reporter = Reporter(name, budget_s=budget.total_s, stream=stream, verbose=verbose)
    n_workers = workers or default_workers(1 << 10, cap=8, args=args)
    with budget.phase("baseline"):
        baseline = baseline_or_none(bound, args, kwargs)
    with budget.phase("discovery"):
        runner = open_runner(
            bound, args, kwargs, baseline, isolate=isolate, workers=n_workers,
            tolerances=tolerances,
        )  # fmt: skip
    try:
        with budget.phase("discovery"):
            default = discover_default(
                bound, args, kwargs, timeout_s=timeout_s, use_cache=use_cache, runner=runner,
                reporter=reporter,
            )  # fmt: skip
        if baseline is None:  # check the search's configs against the working default's output
            runner.close()
            with budget.phase("baseline"):
                baseline = _baseline_from(bound, default, args, kwargs)
                runner = open_runner(
                    bound, args, kwargs, baseline, isolate=isolate, workers=n_workers,
                    tolerances=tolerances,
                )  # fmt: skip
        reporter.stage = "search"
        search = _Search(
            bound, runner, reporter, plan,
            deadline=budget.search_deadline(plan.final_reserve_s), timeout_s=timeout_s,
            seed=seed, batch=n_workers, on_unknown=UnknownRepros(bound, args, kwargs),
            budget=budget,
        )  # fmt: skip
        best = search.run(default)
    finally:
        runner.close()
        reporter.close()
    reporter.line(f"{name}: {effort} tuning took {budget.summary()}")
    config = best.config if best is not None else default
    if use_cache:
        cache.store(
            bound, "best", config, effort=effort, ms=best.ms if best else None,
            tried=reporter.tried, seconds=round(budget.spent(), 2),
        )  # fmt: skip
    reporter.final(config)
    second = _runner_up(search.timed, config)
    return TuneResult(
        config, best.ms if best else None, second.config if second else None,
        second.ms if second else None, reporter.tried, round(budget.spent(), 2),
    )  # fmt: skip


def tune(bound: BoundKernel, args: Sequence[Any], *rest: Any, **options: Any) -> Config:
    """The fastest working config (:func:`run_tune`'s options). Raises only
    ``NoWorkingConfigError``."""
    return run_tune(bound, args, *rest, **options).config


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """What a tuning run found: the winner, and the runner-up for a config table's record."""

    config: Config
    ms: float | None = None
    runner_up: Config | None = None
    runner_up_ms: float | None = None
    tried: int = 0
    seconds: float = 0.0


def _runner_up(timed: Sequence[Attempt], winner: Config) -> Attempt | None:
    others = [a for a in timed if a.ms is not None and a.config.key() != winner.key()]
    return min(others, key=lambda a: a.ms or 0.0) if others else None


def _baseline_from(
    bound: BoundKernel, config: Config, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Baseline | None:
    """The outputs of a config that was verified to run (in a worker), as the baseline."""
    try:
        a, kw = clone_args(args, dict(kwargs))
        with write_guard.undone((a, kw)) as guard:
            outputs = guard.handed_back(bound.run(bound.compile_config(config), *a, **kw))
    except Exception:
        return None
    return Baseline(outputs, a, kw, "the working default config")


def _effort_rank(effort: str | None) -> int:
    """An effort's place in EFFORTS (quick < full); -1 for none or an unknown one."""
    return list(EFFORTS).index(effort) if effort in EFFORTS else -1

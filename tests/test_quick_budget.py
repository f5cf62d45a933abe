"""Quick means quick (issue 11 item 6): the wall-clock budget of a tuning call, driven by a fake
clock and a runner that counts compiles (no timing assertions): the search stops compiling at
its deadline, each generation compiles only the resource model's top candidates, the finalists
are re-timed only while budget and a running worker remain, and the phases are reported.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import torch

import tilecraft as tc
from tilecraft.autotune.budget import Budget
from tilecraft.autotune.classify import Attempt, Category
from tilecraft.autotune.progress import Reporter
from tilecraft.autotune.search import EFFORTS, FINAL_ROUNDS, UnknownRepros, _Search
from tilecraft.config.pipelines import pipeline_configs
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))
import autotune_kernels as K  # noqa: E402

from examples.matmul import matmul  # noqa: E402


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingRunner:
    """Compiles ``batch`` configs at a time in ``compile_s`` of fake time each round, stops
    starting new ones at the deadline (as the isolated runner does), and times each config at a
    made-up speed; records every config compiled and every re-timing."""

    def __init__(self, clock: FakeClock, batch: int = 8, compile_s: float = 4.0, warm: bool = True):
        self.clock, self.batch, self.compile_s, self.is_warm = clock, batch, compile_s, warm
        self.generations: list[list[tc.Config]] = []
        self.benches: list[tc.Config] = []
        self.compiled = 0

    def check(self, configs: list[tc.Config], **options: Any) -> list[Attempt | None]:
        deadline = options.get("deadline")
        out: list[Attempt | None] = []
        started: list[tc.Config] = []
        for i, config in enumerate(configs):
            if i % self.batch == 0:  # a new round of parallel compiles
                if deadline is not None and self.clock() > deadline:
                    out.append(None)
                    continue
                self.clock.now += self.compile_s
            started.append(config)
            self.compiled += 1  # each config faster than all before: the search never settles
            attempt = Attempt(config, None, "", self.compile_s, ms=100.0 / self.compiled)
            options["on_result"](attempt)
            out.append(attempt)
        out += [None] * (len(configs) - len(out))
        self.generations.append(started)
        return out

    def bench(self, config: tc.Config, **options: Any) -> Attempt:
        self.benches.append(config)
        self.clock.now += 0.3
        return Attempt(config, None, "", 0.3, ms=1.0)

    def warm(self) -> bool:
        return self.is_warm


def _search(
    bound: BoundKernel, runner: CountingRunner, budget: Budget, stream: io.StringIO
) -> _Search:
    effort = EFFORTS["quick"]
    return _Search(
        bound, runner, Reporter(bound.kernel.__name__, stream=stream),  # type: ignore[arg-type]
        effort, deadline=budget.search_deadline(effort.final_reserve_s), timeout_s=10, seed=0,
        batch=runner.batch, on_unknown=UnknownRepros(bound, (), {}), budget=budget,
    )  # fmt: skip


def _matmul(target: str = "cuda:90") -> BoundKernel:
    a = torch.empty(4096, 4096, dtype=torch.bfloat16)
    return BoundKernel(matmul, matmul.bind_arguments((a, a), {}), target=Target.parse(target))


def test_budget_phases_with_a_fake_clock() -> None:
    clock = FakeClock()
    budget = Budget(30, clock)
    with budget.phase("baseline"):
        clock.now += 1.5
    with budget.phase("discovery"):
        clock.now += 6.0
    with budget.phase("discovery"):
        clock.now += 1.0
    assert budget.spent() == 8.5 and budget.left() == 21.5
    assert budget.search_deadline(2.0) == clock.now + 21.5 - 2.0
    assert budget.summary() == "8.5 s of 30 s (baseline 1.5, discovery 7.0)"


def test_search_stops_compiling_at_the_deadline() -> None:
    clock = FakeClock()
    budget = Budget(30, clock)
    clock.now += 8.0  # baseline, workers and discovery spent 8 s of the 30
    runner = CountingRunner(clock)
    bound = _matmul()
    stream = io.StringIO()
    best = _search(bound, runner, budget, stream).run(bound.config_spec.plain_default())
    assert best is not None
    effort = EFFORTS["quick"]
    rounds = sum(-(-len(g) // runner.batch) for g in runner.generations)
    search_s = 30 - 8 - effort.final_reserve_s
    # the search ran to its deadline (it kept finding faster configs), and every round of
    # compiles started before it: at most one round ends past it
    assert search_s <= rounds * runner.compile_s <= search_s + runner.compile_s
    assert budget.spent() <= 30 + runner.compile_s
    assert all(len(g) <= (effort.per_generation or 0) for g in runner.generations)
    assert set(budget.phases) == {"search", "final"}
    assert "generation" in stream.getvalue()  # progress shown per generation


def test_finalists_retimed_only_with_budget_and_a_running_worker() -> None:
    bound = _matmul()
    spec = bound.config_spec
    close = [spec.plain_default(), *pipeline_configs(spec)[:2]]
    for warm, spent_before, retimed in (
        (True, 0.0, True),
        (False, 0.0, False),
        (True, 40.0, False),
    ):
        clock = FakeClock()
        budget = Budget(30, clock)
        runner = CountingRunner(clock, compile_s=1.0, warm=warm)
        search = _search(bound, runner, budget, stream := io.StringIO())
        search.timed += [Attempt(c, None, "", 1.0, ms=1.0 + 0.01 * i) for i, c in enumerate(close)]
        clock.now += spent_before
        assert search.final_pick() is not None
        assert bool(runner.benches) is retimed, (warm, spent_before)
        if retimed:
            assert len(close) <= EFFORTS["quick"].finalists
            assert len(runner.benches) == len(close) * FINAL_ROUNDS
        else:
            assert "finalists not re-timed" in stream.getvalue()


def test_finalists_exclude_clearly_slower_configs() -> None:
    bound = _matmul()
    clock = FakeClock()
    runner = CountingRunner(clock)
    search = _search(bound, runner, Budget(30, clock), io.StringIO())
    spec = bound.config_spec
    fast, slow = spec.plain_default(), spec.default()
    search.timed += [Attempt(fast, None, "", 1.0, ms=1.0), Attempt(slow, None, "", 1.0, ms=2.0)]
    assert search.final_pick() is not None
    assert runner.benches == []  # one finalist left: nothing to re-time


class BurstyRunner(CountingRunner):
    """Times each config at its true speed, except during a burst of host noise: the
    re-timings numbered in ``burst`` (0-based, in the order they run) take twice as long."""

    def __init__(self, clock: FakeClock, true_ms: dict[str, float], burst: set[int]):
        super().__init__(clock)
        self.true_ms, self.burst = true_ms, burst

    def bench(self, config: tc.Config, **options: Any) -> Attempt:
        n = len(self.benches)
        self.benches.append(config)
        ms = self.true_ms[config.key()] * (2.0 if n in self.burst else 1.0)
        return Attempt(config, None, "", 0.3, ms=ms)


def test_final_pick_survives_a_burst_of_noise_on_one_finalist() -> None:
    """The fastest finalist's first re-timing lands in a burst of host noise (the search had
    timed the finalists within 2%, in the wrong order): timed once each it would lose to a 10%
    slower config; over interleaved rounds, each keeping its least time, it wins."""
    bound = _matmul()
    spec = bound.config_spec
    fast, slower, slowest = [spec.plain_default(), *pipeline_configs(spec)[:2]]
    true_ms = {fast.key(): 1.0, slower.key(): 1.1, slowest.key(): 1.2}
    clock = FakeClock()
    # the search's times: all three within 2%, the fast one timed last
    timed = [(slower, 1.20), (slowest, 1.21), (fast, 1.22)]
    for burst in ({2}, {0, 1, 2}):  # the fast one is timed third in the first round
        runner = BurstyRunner(clock, true_ms, burst)
        search = _search(bound, runner, Budget(30, clock), io.StringIO())
        search.timed += [Attempt(c, None, "", 1.0, ms=ms) for c, ms in timed]
        pick = search.final_pick()
        assert pick is not None and pick.config == fast, burst
        assert pick.ms == 1.0
        # the rounds alternate their order: the first round's last is the second round's first
        order = [c.key() for c in runner.benches]
        assert order[:3] == order[3:][::-1] and len(order) == 3 * FINAL_ROUNDS


def test_final_pick_drops_a_finalist_that_fails_when_retimed() -> None:
    bound = _matmul()
    spec = bound.config_spec
    good, flaky = spec.plain_default(), pipeline_configs(spec)[0]

    class FailingRunner(CountingRunner):
        def bench(self, config: tc.Config, **options: Any) -> Attempt:
            self.benches.append(config)
            if config == flaky:
                return Attempt(config, Category.RUNTIME_FAULT, "illegal memory access", 0.3)
            return Attempt(config, None, "", 0.3, ms=1.5)

    clock = FakeClock()
    runner = FailingRunner(clock)
    search = _search(bound, runner, Budget(30, clock), io.StringIO())
    search.timed += [Attempt(flaky, None, "", 1.0, ms=1.0), Attempt(good, None, "", 1.0, ms=1.1)]
    pick = search.final_pick()
    assert pick is not None and pick.config == good and pick.ms == 1.1
    assert runner.benches.count(flaky) == 1  # not re-timed after it failed


def test_generations_compile_the_models_top_candidates_first() -> None:
    """Configs the resource model predicts to spill go last (and past the cap, not at all)."""
    x = torch.empty(64, 8192, device="cpu")
    w = torch.empty(8192, device="cpu")
    bound = BoundKernel(
        K.rms_norm, K.rms_norm.bind_arguments((x, w), {}), target=Target.parse("cuda:90")
    )
    spec = bound.config_spec
    fits = spec.normalize(tc.Config(block_sizes=[1], num_warps=8), warn=False)
    spills = spec.normalize(tc.Config(block_sizes=[32], num_warps=1), warn=False)
    clock = FakeClock()
    search = _search(bound, CountingRunner(clock), Budget(30, clock), io.StringIO())
    assert search._model_first([spills, fits]) == [fits, spills]
    many = [fits.replace(num_stages=s) for s in range(1, 20)]
    assert len(search._model_first(many)) == EFFORTS["quick"].per_generation

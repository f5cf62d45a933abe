"""The autotuner's search, cache, progress output and robustness sweep (tilecraft.autotune).

CPU only: kernels run in Triton's interpreter, so timings only exercise the search logic.
"""

from __future__ import annotations

import io
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune import cache
from tilecraft.autotune.candidates import neighbors
from tilecraft.autotune.classify import Attempt, Category
from tilecraft.autotune.runner import Runner
from tilecraft.autotune.search import tune

sys.path.insert(0, str(Path(__file__).parent))
import autotune_kernels as K  # noqa: E402
from autotune_kernels import faults, rms_inputs, runs_correctly  # noqa: E402


@pytest.fixture(autouse=True)
def _on_the_device(device: str) -> Iterator[None]:
    """Tensors the tests make land on the GPU where there is one (else the CPU interpreter), so
    the autotuner is tested where it runs."""
    torch.set_default_device(device)
    yield
    torch.set_default_device(None)


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TILECRAFT_TEST_FAULT", "TILECRAFT_FORCE_AUTOTUNE", "TILECRAFT_AUTOTUNE_LOG"):
        monkeypatch.delenv(name, raising=False)


# -- cache ---------------------------------------------------------------------------------
def test_cache_round_trip_ls_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    config = bound.config_spec.default()
    path = cache.store(bound, "best", config, ms=1.0)
    assert path.exists() and path.parent == cache.cache_root()
    assert cache.load(bound, "best") == config and cache.load(bound, "default") is None
    other = K.rms_norm.bind(rms_inputs(38, 100))  # another specialization
    assert cache.load(other, "best") is None
    assert cache.key_for(bound) != cache.key_for(other)
    assert "0x" not in cache.specialization_key(bound)
    assert [e.kernel for e in cache.ls()] == ["rms_norm"] and cache.ls("other") == []
    monkeypatch.setenv("TILECRAFT_FORCE_AUTOTUNE", "1")
    from tilecraft.autotune.discover import cached_config

    assert cached_config(bound, "best") is None
    monkeypatch.delenv("TILECRAFT_FORCE_AUTOTUNE")
    assert cached_config(bound, "best") == bound.config_spec.normalize(config)
    assert cache.clear() == 1 and cache.ls() == []
    cache.store(bound, "default", config, rank=2, heuristic_ok=False)
    (entry,) = cache.ls()
    assert (
        entry.heuristic_ok is False and "heuristic default failed; candidate 2" in entry.describe()
    )


# -- search --------------------------------------------------------------------------------
def test_tune_quick_within_budget(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log = tmp_path / "tune.csv"
    monkeypatch.setenv("TILECRAFT_AUTOTUNE_LOG", str(log))
    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    stream = io.StringIO()
    start = time.perf_counter()
    config = tune(bound, (x, w), effort="quick", budget_s=20, stream=stream)
    assert time.perf_counter() - start < 40  # budget + discovery + final re-timing
    assert bound.config_spec.normalize(config) == config
    assert runs_correctly(K.rms_norm, config, x, w)
    text = stream.getvalue()
    assert "generation 1" in text
    assert "quick tuning took" in text and "(baseline " in text and "discovery " in text
    assert f"tilecraft: best config for rms_norm: {config!r}" in text.splitlines()[-1]
    rows = log.read_text().splitlines()
    assert rows[0].startswith("time,kernel,stage") and len(rows) > 3
    assert {e.kind for e in cache.ls()} == {"default", "best"}
    assert tune(bound, (x, w), effort="quick", stream=io.StringIO()) == config  # cached


def test_tune_survives_hanging_and_crashing_neighbours(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    spec = bound.config_spec
    default = spec.normalize(spec.default())
    near = [spec.normalize(c) for c in neighbors(spec, default)]
    monkeypatch.setenv(
        "TILECRAFT_TEST_FAULT", faults(hang=near[:1], crash=near[1:2], fault=near[2:3])
    )
    log = io.StringIO()
    config = tune(bound, (x, w), budget_s=10, timeout_s=2.0, workers=2, stream=log)
    assert config.key() not in {c.key() for c in near[:3]}
    assert runs_correctly(K.rms_norm, config, x, w)
    assert "best config for rms_norm" in log.getvalue()


def test_tune_none_is_discovery() -> None:
    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    assert tune(bound, (x, w), effort="none") == bound.config_spec.normalize(
        bound.config_spec.default()
    )
    with pytest.raises(tc.TilecraftError):
        tune(bound, (x, w), effort="fast")


# -- progress and fuzz ---------------------------------------------------------------------
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_reporter_bar_lines_and_csv(tmp_path: Path) -> None:
    from tilecraft.autotune.progress import Reporter

    log = tmp_path / "log.csv"
    reporter = Reporter("k", budget_s=5, stream=_Terminal(), log_path=log)
    reporter.stage = "search"
    ok = Attempt(tc.Config(block_sizes=[8]), None, ms=1.5)
    bad = Attempt(tc.Config(block_sizes=[16]), Category.RUNTIME_FAULT, "illegal address")
    reporter.attempt(ok)
    reporter.attempt(bad)
    reporter.end_generation(ok, 2)
    assert reporter.final(ok.config) == f"best config for k: {ok.config!r}"
    rows = [line.split(",") for line in log.read_text().splitlines()]
    assert rows[0][:5] == ["time", "kernel", "stage", "generation", "status"]
    assert [r[4] for r in rows[1:]] == ["ok", "runtime fault"] and rows[1][3] == "1"


@pytest.mark.parametrize("n", [2, pytest.param(200, marks=pytest.mark.slow)])
def test_random_configs_of_every_example_never_raise(n: int) -> None:
    """Random configs of every example kernel through the static checks and the in-process
    check: a failure is always a classified result, never an exception."""
    import random

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from examples import EXAMPLES
    from tilecraft.autotune.candidates import check
    from tilecraft.autotune.discover import baseline_or_none
    from tilecraft.autotune.evaluate import check_config

    seen: dict[str, int] = {}
    for module in EXAMPLES.values():
        for kernel in module.KERNELS.values():

            def call(k: tc.Kernel, *args: object, kernel: tc.Kernel = kernel) -> object:
                if k is kernel:
                    bound = k.bind(args)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # a known ref-mode bug: no baseline
                        baseline = baseline_or_none(bound, args, {})
                    for seed in range(n):
                        spec = bound.config_spec
                        config, why = check(spec, spec.random(random.Random(seed)))
                        if config is None:
                            assert why is not None and why.category is not None
                            continue
                        result = check_config(bound, config, args, {}, baseline)
                        status = "ok" if result["ok"] else Category(result["category"]).value
                        seen[status] = seen.get(status, 0) + 1
                return k.run_ref(*args)

            with torch.device("cpu"):  # the examples draw from a CPU generator
                inputs = module.make_inputs(module.TEST_SHAPES[0], torch.float32, "cpu", 0)
            device = torch.get_default_device()
            module.run(tuple(t.to(device) for t in inputs), call)
    assert seen.get("ok", 0) > 0


def test_select_config_for_the_runtime_hook() -> None:
    from tilecraft.autotune import select_config

    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    config = select_config(bound, (x, w))  # effort "none": discovery only
    assert config == bound.config_spec.normalize(bound.config_spec.default())
    assert [e.kind for e in cache.ls()] == ["default"]


class _FlatRunner(Runner):
    """Every config works and takes 1 ms: no restart can ever gain."""

    isolated = False

    def __init__(self) -> None:
        self.checked = 0

    def check(self, configs: list[tc.Config], **kw: object) -> list[Attempt]:
        self.checked += len(configs)
        results = [Attempt(c, None, ms=1.0) for c in configs]
        on_result = kw.get("on_result")
        for r in results:
            if callable(on_result):
                on_result(r)
        return results

    def bench(self, config: tc.Config, **kw: object) -> Attempt:
        return Attempt(config, None, ms=1.0)


def test_full_effort_stops_restarting_without_gains() -> None:
    from tilecraft.autotune.discover import UnknownRepros
    from tilecraft.autotune.progress import Reporter
    from tilecraft.autotune.search import EFFORTS, _Search

    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    runner = _FlatRunner()
    reporter = Reporter("rms_norm", stream=io.StringIO(), verbose=False)
    search = _Search(
        bound, runner, reporter, EFFORTS["full"], deadline=time.monotonic() + 600,
        timeout_s=5, seed=0, batch=2, on_unknown=UnknownRepros(bound, (x, w), {}),
    )  # fmt: skip
    start = time.monotonic()
    best = search.run(bound.config_spec.default())
    assert best is not None and time.monotonic() - start < 30  # far inside the 600 s budget
    default = bound.config_spec.default()
    neighbours = len(neighbors(bound.config_spec, default))
    neighbours += len(neighbors(bound.config_spec, default, strategies=True))
    # the default, one local search (core + strategy moves), then `patience` restarts of 2 seeds
    # and their local searches
    assert runner.checked <= 1 + neighbours + EFFORTS["full"].patience * (2 + 2 * neighbours)


def test_cached_config_that_no_longer_compiles_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilecraft.autotune.discover import cached_config

    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    config = bound.config_spec.normalize(bound.config_spec.default())
    cache.store(bound, "best", config)
    assert cached_config(bound, "best") == config
    assert config.key() in bound._programs  # validated by compiling: the first call reuses it

    def broken(_config: tc.Config) -> None:
        raise RuntimeError("codegen changed")

    monkeypatch.setattr(bound, "compile_config", broken)
    with pytest.warns(UserWarning, match="cached best config .* no longer works"):
        assert cached_config(bound, "best") is None
    assert cache.load(bound, "best") is None  # removed: the next call searches again


def test_search_prunes_configs_the_model_predicts_to_spill() -> None:
    """Once a config predicted to fit has been timed, a neighbour the resource model predicts to
    spill is rejected before it is compiled (its reason names the model)."""
    from tilecraft.autotune.progress import Reporter
    from tilecraft.autotune.search import EFFORTS, UnknownRepros, _Search
    from tilecraft.runtime.kernel import BoundKernel
    from tilecraft.targets.target import Target

    x = torch.empty(64, 8192, device="cpu")
    w = torch.empty(8192, device="cpu")
    bound = BoundKernel(
        K.rms_norm, K.rms_norm.bind_arguments((x, w), {}), target=Target.parse("cuda:90")
    )
    spec = bound.config_spec
    fits = spec.resolve(tc.Config(block_sizes=[1], num_warps=8))
    spills = spec.resolve(tc.Config(block_sizes=[32], num_warps=1))
    assert not fits.resources.spills and spills.resources.spills

    class NoRunner:  # nothing may be compiled or run here
        def check(self, configs: object, **options: object) -> list[object]:
            raise AssertionError(f"would compile {configs}")

    search = _Search(
        bound,
        NoRunner(),  # type: ignore[arg-type]
        Reporter("rms_norm", stream=io.StringIO()),
        EFFORTS["quick"],
        deadline=time.monotonic() + 60,
        timeout_s=10,
        seed=0,
        batch=4,
        on_unknown=UnknownRepros(bound, (x, w), {}),
    )
    assert search._predicted_to_spill(spills.config) is None  # nothing timed yet: no pruning
    search.timed.append(Attempt(fits.config, None, "", 0.1, ms=1.0))
    why = search._predicted_to_spill(spills.config)
    assert why is not None and "resource model predicts" in why.reason
    assert search.generation([spills.config]) == []


def test_a_spent_budget_still_returns_a_timed_config() -> None:
    """Discovery can spend a tiny budget on its own (a plan job with budget_s=15 on a slow
    kernel): the result still carries the returned config's time, which a shipped table records."""
    from tilecraft.autotune.search import run_tune

    x, w = rms_inputs()
    bound = K.rms_norm.bind((x, w))
    result = run_tune(bound, (x, w), effort="quick", budget_s=1e-3, use_cache=False, verbose=False)
    assert result.ms is not None and result.ms > 0
    assert runs_correctly(K.rms_norm, result.config, x, w)

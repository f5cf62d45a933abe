"""Deploying tuned kernels: Config.save/load, Kernel.autotune, ``configs=[...]``, shipped config
tables (exact, nearest, fallback) and ``TILECRAFT_NO_AUTOTUNE=1``.

CPU: kernels run in Triton's interpreter; timings are faked where a test needs a known winner.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune import cache, select
from tilecraft.autotune.table import ConfigTable, lookup, make_entry
from tilecraft.errors import ConfigError

sys.path.insert(0, str(Path(__file__).parent))
import deploy_kernels as D  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: str) -> Iterator[None]:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TILECRAFT_TEST_FAULT", "TILECRAFT_FORCE_AUTOTUNE", "TILECRAFT_NO_AUTOTUNE"):
        monkeypatch.delenv(name, raising=False)
    torch.set_default_device(device)
    for k in (D.add, D.add_listed, D.row_sum):
        k.reset()
        k.config_table = None
    yield
    torch.set_default_device(None)


def pair(n: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(n)
    x, y = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    return x.to(torch.get_default_device(), dtype), y.to(torch.get_default_device(), dtype)


# -- Config.save / load ----------------------------------------------------------------------
def test_config_save_load_round_trips_every_field(tmp_path: Path) -> None:
    config = tc.Config(
        block_sizes=[64, 16], reduction_loops=[None, 32], num_warps=8, num_stages=3,
        pid_type="persistent_interleaved", indexing=["block_ptr", "pointer"],
        load_eviction_policies=["first", ""], l2_groupings=[4], loop_orders=[[1, 0]],
        flatten_loops=[True], range_unroll_factors=[2], range_num_stages=[3],
        range_multi_buffers=[False], range_flattens=[True], range_warp_specializes=[None],
        maxnreg=128, num_sm_multiplier=2, split=4, mode="fast",
    )  # fmt: skip
    path = config.save(tmp_path / "sub" / "best.json")
    loaded = tc.Config.load(path)
    assert loaded == config and loaded.key() == config.key()
    assert loaded.user_values == {"split": 4, "mode": "fast"}
    assert loaded.loop_orders == ((1, 0),) and loaded.range_warp_specializes == (None,)
    data = json.loads(path.read_text())
    assert data["format"] == "tilecraft.Config" and data["version"] == 1
    assert data["fields"]["num_sm_multiplier"] == 2  # every field is spelled out
    assert tc.Config.load(tc.Config().save(tmp_path / "d.json")) == tc.Config()


def test_config_load_rejects_other_versions_and_fields(tmp_path: Path) -> None:
    path = tc.Config(num_warps=4).save(tmp_path / "c.json")
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "version": 99}))
    with pytest.raises(ConfigError, match="version 99"):
        tc.Config.load(path)
    path.write_text(json.dumps({**data, "fields": {"num_wraps": 4}}))
    with pytest.raises(ConfigError, match="num_wraps"):
        tc.Config.load(path)
    with pytest.raises(ConfigError, match="cannot read"):
        tc.Config.load(tmp_path / "missing.json")


# -- Kernel.autotune -------------------------------------------------------------------------
def test_kernel_autotune_returns_a_config_the_kernel_then_runs() -> None:
    x, y = pair(300)
    config = D.add.autotune((x, y), effort="quick", budget_s=4)
    assert isinstance(config, tc.Config)
    bound = D.add.bind((x, y))
    assert bound.default_program().config == config
    torch.testing.assert_close(D.add(x, y), x + y)
    assert "best" in {e.kind for e in cache.ls()}
    with pytest.raises(ConfigError, match="effort='none'"):
        D.add.autotune((x, y), effort="none")


# -- configs=[...] ---------------------------------------------------------------------------
def test_listed_configs_keep_the_fastest(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilecraft.autotune import runner, runners

    timed: list[int] = []

    def fake_time(bound: Any, program: Any, *a: Any, **kw: Any) -> float:
        block = program.config.block_sizes[0]
        timed.append(block)
        return {1: 3.0, 4: 1.0, 16: 2.0}[block]

    monkeypatch.setattr(runner, "time_config", fake_time)
    # in this process (also on a GPU), so that the fake timing applies
    in_process = runners.open_runner
    monkeypatch.setattr(
        select, "open_runner", lambda *a, **kw: in_process(*a, **{**kw, "isolate": False})
    )
    x, y = pair(100)
    torch.testing.assert_close(D.add_listed(x, y), x + y)
    assert D.add_listed.bind((x, y)).default_program().config.block_sizes == (4,)
    assert sorted(timed) == [1, 4, 16]  # each listed config was timed, nothing else
    assert any(e.kind.startswith("listed-") for e in cache.ls())
    D.add_listed.reset()  # a new process: the winner comes from the cache, nothing is timed
    timed.clear()
    D.add_listed(x, y)
    assert timed == []


def test_listed_configs_are_isolated_and_accuracy_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = pair(64)
    bound = D.add_listed.bind((x, y))
    spec = bound.config_spec
    keys = [spec.resolve(c, warn=False).config.key() for c in D.LISTED]
    monkeypatch.setenv("TILECRAFT_TEST_FAULT", f"wrong:{keys[0]};crash:{keys[2]}")
    chosen = select.fastest_listed(bound, (x, y), {}, isolate=True, use_cache=False)
    assert chosen is not None and chosen.block_sizes == (4,)  # the only listed one that works


# -- config tables ---------------------------------------------------------------------------
def _table_with(path: Path, *entries: tuple[tc.Kernel, tuple[Any, ...], tc.Config]) -> Path:
    table = ConfigTable(path)
    for kernel, args, config in entries:
        table.put(make_entry(kernel.bind(args), config, ms=1.0))
    table.write()
    return path


def test_table_exact_nearest_and_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small, big = pair(1000), pair(1 << 20)
    path = _table_with(
        tmp_path / "t.json",
        (D.add, small, tc.Config(block_sizes=[32], num_warps=2)),
        (D.add, big, tc.Config(block_sizes=[1024], num_warps=4)),
    )
    D.add.config_table = path
    exact = lookup(D.add.bind(small))
    assert exact is not None and exact.exact and exact.config.block_sizes == (32,)
    near = lookup(D.add.bind(pair(1500)))  # nearest shape: 1000
    assert near is not None and not near.exact and near.config.block_sizes == (32,)
    near_big = lookup(D.add.bind(pair(600_000)))
    assert near_big is not None and near_big.config.block_sizes == (1024,)
    assert lookup(D.add.bind(pair(1000, torch.float16))) is None  # no entry of this dtype
    # a plain call takes the table's config without discovering anything
    monkeypatch.setattr(select, "tune", _forbidden("tune"))
    x, y = pair(1500)
    torch.testing.assert_close(D.add(x, y), x + y)
    assert D.add.bind((x, y)).default_program().config.block_sizes == (32,)


def test_table_skips_an_entry_that_does_not_validate(tmp_path: Path) -> None:
    path = _table_with(
        tmp_path / "t.json",
        (D.add, pair(1000), tc.Config(block_sizes=[32])),
        (D.add, pair(4000), tc.Config(block_sizes=[64])),
    )
    data = json.loads(path.read_text())
    data["entries"][0]["config"]["fields"]["bogus"] = 1  # the nearest entry no longer reads
    path.write_text(json.dumps(data))
    D.add.config_table = path
    found = lookup(D.add.bind(pair(1100)))
    assert found is not None and found.config.block_sizes == (64,)


def test_table_errors_name_the_kernel(tmp_path: Path) -> None:
    D.add.config_table = tmp_path / "missing.json"
    with pytest.raises(ConfigError, match="add: config_table: .*does not exist"):
        lookup(D.add.bind(pair(10)))
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    D.add.config_table = tmp_path / "bad.json"
    with pytest.raises(ConfigError, match="not a tilecraft config table"):
        lookup(D.add.bind(pair(10)))


def test_table_beside_the_module_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shipped_mod.py").write_text(
        textwrap.dedent(
            """
            import torch
            import tilecraft as tc

            @tc.kernel
            def double(x: torch.Tensor) -> torch.Tensor:
                out = torch.empty_like(x)
                for t in tc.tile(x.size(0)):
                    out[t] = x[t] * 2
                return out
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("shipped_mod")
    x = pair(200)[0]
    table = ConfigTable(tmp_path / "shipped_mod.tilecraft.json")
    table.put(make_entry(mod.double.bind((x,)), tc.Config(block_sizes=[8])))
    table.write()
    monkeypatch.setattr(select, "tune", _forbidden("tune"))
    torch.testing.assert_close(mod.double(x), x * 2)
    assert mod.double.bind((x,)).default_program().config.block_sizes == (8,)


# -- TILECRAFT_NO_AUTOTUNE -------------------------------------------------------------------
def _forbidden(what: str) -> Any:
    def fail(*a: Any, **kw: Any) -> Any:
        raise AssertionError(f"{what} must not be called")

    return fail


def test_no_autotune_starts_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    from tilecraft.autotune import isolate

    monkeypatch.setenv("TILECRAFT_NO_AUTOTUNE", "1")
    monkeypatch.setattr(isolate.Worker, "start", _forbidden("a worker start"))
    monkeypatch.setattr(isolate.IsolatedRunner, "__init__", _forbidden("an isolated runner"))
    monkeypatch.setattr(multiprocessing.Process, "start", _forbidden("a process start"))
    if torch.get_default_device().type == "cpu":  # (on a GPU, Triton runs ptxas as a process)
        monkeypatch.setattr(subprocess, "Popen", _forbidden("subprocess.Popen"))
    for name in ("tune", "fastest_listed"):
        monkeypatch.setattr(select, name, _forbidden(name))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (100, 300):  # two specializations: one warning for the kernel
            x = pair(n)[0].reshape(-1, 10 if n == 100 else 30)
            torch.testing.assert_close(D.row_sum(x), x.sum(-1))
    fallbacks = [w for w in caught if "TILECRAFT_NO_AUTOTUNE" in str(w.message)]
    assert len(fallbacks) == 1 and "row_sum" in str(fallbacks[0].message)
    bound = D.row_sum.bind((x,))
    spec = bound.config_spec
    assert bound.default_program().config == spec.resolve(spec.default(), warn=False).config


def test_no_autotune_prefers_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = pair(128)
    bound = D.add.bind((x, y))
    cache.store(bound, "best", tc.Config(block_sizes=[16]))
    monkeypatch.setenv("TILECRAFT_NO_AUTOTUNE", "1")
    monkeypatch.setattr(select, "tune", _forbidden("tune"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cache hit is not a fallback: no warning
        torch.testing.assert_close(D.add(x, y), x + y)
    assert bound.default_program().config.block_sizes == (16,)

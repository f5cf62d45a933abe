"""The cache never fails a call: an unwritable cache folder (or TILECRAFT_CACHE_DIR naming a file)
runs uncached with one warning; the repro writer never raises; concurrent tuners of one key
coordinate through a file lock (the second waits, then reuses the first's result)."""

from __future__ import annotations

import threading
import time
import warnings
from pathlib import Path

import pytest
import torch
from kernels import plus_one

import tilecraft as tc
from tilecraft.autotune import cache
from tilecraft.autotune.classify import Attempt, Category
from tilecraft.autotune.lock import tuning_lock
from tilecraft.autotune.repro import write_repro
from tilecraft.autotune.select import select_config
from tilecraft.runtime import cache_dir, module


@pytest.fixture
def cache_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "not-a-folder"
    path.write_text("")
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(path))
    monkeypatch.setattr(cache_dir, "_warned", set())
    monkeypatch.setattr(module, "_loaded", {})  # generate and write code again
    plus_one.reset()
    return path


def test_cache_dir_is_a_file_runs_uncached_with_one_warning(cache_is_a_file: Path) -> None:
    x = torch.randn(37)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.equal(plus_one(x), x + 1)
        plus_one.reset()
        assert torch.equal(plus_one(x), x + 1)
    notes = [str(w.message) for w in caught if "not writable" in str(w.message)]
    assert len(notes) == 2  # one per folder (code, autotune), not one per call
    assert all("TILECRAFT_CACHE_DIR" in n for n in notes)
    assert cache.load(plus_one.bind((x,)), "default") is None


def test_store_into_unwritable_cache_returns_none(cache_is_a_file: Path) -> None:
    x = torch.randn(8)
    with pytest.warns(RuntimeWarning, match="not writable"):
        assert cache.store(plus_one.bind((x,)), "default", tc.Config(block_sizes=[8])) is None


def test_repro_writer_never_raises(cache_is_a_file: Path) -> None:
    x = torch.randn(8)
    bound = plus_one.bind((x,))
    attempt = Attempt(tc.Config(block_sizes=[8]), Category.UNKNOWN, "boom")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = write_repro(bound, (x,), {}, [attempt], "an unknown error")
    assert path is not None and path.exists() and "boom" in path.read_text()
    path.unlink()


def test_second_tuner_waits_and_reuses_the_first_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    x = torch.randn(40)
    bound = plus_one.bind((x,))
    chosen = tc.Config(block_sizes=[8], num_warps=2)  # not what discovery would pick first
    holding = threading.Event()

    def first_tuner() -> None:
        with tuning_lock(bound) as held:
            assert held
            holding.set()
            time.sleep(0.5)
            cache.store(bound, "default", chosen, rank=0, heuristic_ok=True)

    thread = threading.Thread(target=first_tuner)
    thread.start()
    holding.wait()
    start = time.monotonic()
    got = select_config(bound, (x,), {})
    thread.join()
    assert time.monotonic() - start >= 0.4  # it waited for the first tuner
    assert got == bound.config_spec.normalize(chosen)


def test_lock_wait_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    bound = plus_one.bind((torch.randn(16),))
    with tuning_lock(bound) as first:
        outcome: list[bool] = []

        def other() -> None:
            with tuning_lock(bound, wait_s=0.2) as held:
                outcome.append(held)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(5)
    assert first and outcome == [False]
    with tuning_lock(bound, wait_s=0.2) as again:
        assert again

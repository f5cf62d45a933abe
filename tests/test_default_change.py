"""benchmarks/default_change.py: the before/after table of example defaults a heuristic change
moved, checked on the CPU (the interpreter, wall-clock timing)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import benchmarks.default_change as dc
import tilecraft as tc
from examples import EXAMPLES

TABLE = Path(dc.__file__).parent / "default_change_h11d.json"


def _wall_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def test_the_recorded_table_names_real_examples_and_configs() -> None:
    entries = json.loads(TABLE.read_text())
    assert entries
    for entry in entries:
        module = EXAMPLES[entry["example"]]
        assert tuple(entry["shape"]) in [tuple(s) for s in module.BENCH_SHAPES]
        assert isinstance(eval(entry["before"], {"tc": tc}), tc.Config)  # noqa: S307


def test_a_row_on_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OUT", str(tmp_path))
    monkeypatch.setattr(dc, "bench_ms", _wall_ms)
    entry = {
        "example": "sum",
        "shape": [37, 100],
        "call": 1,
        "before": "tc.Config(block_sizes=[16, 32])",
    }
    row = dc.measure(entry, "cpu")
    assert row["kernel"] == "sum_first" and row["shape"] == "37x100"
    assert "block_sizes=[16, 32]" in row["before"] and row["after"].startswith("tc.Config(")
    assert row["before_ms"] > 0 and row["after_ms"] > 0 and row["max_err"] < 1e-2


def test_recording_the_calls_discovers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's run() is replayed only to find the measured call: its kernel calls go to
    ref mode (a real call discovers configs for every kernel of the module: on the H200 that
    took the whole run's time limit before the first row)."""

    def no_discovery(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a kernel was compiled/discovered while recording calls")

    monkeypatch.setattr(tc.Kernel, "__call__", no_discovery)
    kernel, args = dc.example_call(EXAMPLES["sum"], (37, 100), 1, "cpu")
    assert kernel.__name__ == "sum_first" and args[0].shape == (37, 100)


def test_a_generalization_case_row_on_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A row may name a generalization case (``"case"``) instead of an example: its call's
    arguments come from replaying the case's run, and the row times that call's kernel."""
    monkeypatch.setenv("OUT", str(tmp_path))
    monkeypatch.setattr(dc, "bench_ms", _wall_ms)
    entry = {
        "case": "column_sum_tall",
        "shape": [700, 40],
        "before": "tc.Config(block_sizes=[64, 16], num_warps=4)",
    }
    row = dc.measure(entry, "cpu")
    assert row["example"] == "column_sum_tall" and row["kernel"] == "column_sum"
    assert row["shape"] == "700x40" and "block_sizes=[64, 16]" in row["before"]
    assert row["before_ms"] > 0 and row["after_ms"] > 0 and row["max_err"] < 1e-2

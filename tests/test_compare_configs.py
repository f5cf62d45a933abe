"""benchmarks/compare_configs.py's plumbing in the interpreter (its timings need a GPU; here
bench_ms is replaced by one call): inputs from a generalization case and from an example's
recorded call, ``default.replace(...)`` expressions, and a failing config as a row of its own."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import compare_configs
from benchmarks.gen_kernels.reductions import column_sum
from examples.rms_norm import rms_norm_bwd


@pytest.fixture(autouse=True)
def _one_call_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    def bench_ms(fn: Any) -> float:
        fn()
        return 1.0

    monkeypatch.setattr(compare_configs, "bench_ms", bench_ms)


def test_gen_case_inputs_and_a_change_to_the_default() -> None:
    rows = compare_configs.compare(
        column_sum,
        (96, 40),
        ["default.replace(split_reductions=[2])", "tc.Config(block_sizes=[16, 16])"],
        "cpu",
        "gen:column_sum_tall",
    )
    assert [r["kind"] for r in rows] == ["default", "given", "given"]
    assert "split_reductions=[2]" in rows[1]["config"]
    assert all("error" not in r and r["max_err"] < 1e-3 for r in rows)


def test_a_failing_config_is_a_row_and_the_rest_still_run() -> None:
    rows = compare_configs.compare(
        rms_norm_bwd,
        (6, 300),
        ["tc.Config(block_sizes=[4], reduction_loops=[7])", "default.replace(num_warps=2)"],
        "cpu",
        "example:rms_norm:1",
    )
    assert "error" in rows[1] and "reduction_loops" in rows[1]["error"]
    assert "error" not in rows[2] and rows[2]["ms"] == 1.0

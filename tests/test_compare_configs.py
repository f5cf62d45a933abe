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


def test_gen_case_inputs_include_the_scalars_its_run_passes() -> None:
    """A case whose ``run`` passes hyperparameters after the tensors (AdamW's lr, betas, ...),
    and the second kernel of a two-kernel case, timed on the arguments the case gives it."""
    from benchmarks.gen_kernels import HELDOUT

    adam = HELDOUT["clipped_lazy_adam"].kernels[0]
    rows = compare_configs.compare(
        adam, (9, 20), ["default.replace(loop_orders=[[0, 1], [0, 1]])"], "cpu",
        "gen:clipped_lazy_adam",
    )  # fmt: skip
    assert all("error" not in r for r in rows) and rows[1]["max_err"] < 1e-5
    quantize = HELDOUT["int8_quant_per_tensor"].kernels[1]
    rows = compare_configs.compare(quantize, (7, 33), [], "cpu", "gen:int8_quant_per_tensor")
    assert rows[0]["kernel"] == "int8_quantize" and "error" not in rows[0]

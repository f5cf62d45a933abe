"""The benchmark runner's accounting, checked on CPU (timing itself needs a GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.common import write_results
from benchmarks.run import max_error, min_bytes


def test_min_bytes_counts_inputs_and_outputs() -> None:
    x = torch.randn(4, 8)  # 128 bytes
    w = torch.randn(8, dtype=torch.bfloat16)  # 16 bytes
    out = (torch.empty(4, 8), torch.empty(4))  # 128 + 16 bytes
    assert min_bytes((x, w, 1e-5), out) == 128 + 16 + 128 + 16


def test_max_error_over_nested_outputs() -> None:
    a, b = torch.zeros(3), torch.ones(2)
    assert max_error((a, b), (a + 0.5, b)) == 0.5


def test_max_error_counts_equal_infinities_and_nans_as_equal() -> None:
    inf, nan = float("inf"), float("nan")
    want = torch.tensor([-inf, inf, nan, 1.0])
    assert max_error(want.clone(), want) == 0.0
    assert max_error(torch.tensor([-inf, inf, nan, 1.25]), want) == 0.25
    assert max_error(torch.tensor([0.0, inf, nan, 1.0]), want) == inf  # -inf against 0
    assert max_error(torch.empty(0), torch.empty(0)) == 0.0


def test_results_written_as_markdown_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OUT", str(tmp_path))
    text = write_results("suite_test", [{"kernel": "k", "ms": 0.123456}], ["kernel", "ms"], "note")
    assert "| k | 0.123 |" in text
    data = json.loads((tmp_path / "suite_test.json").read_text())
    assert data["rows"] == [{"kernel": "k", "ms": 0.123456}] and "torch" in data["env"]


def test_bench_one_end_to_end_on_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The whole row (check, tune, four timings, ratios) for two modules, with wall-clock timing
    and torch.compile replaced (no GPU, no C++ toolchain needed): the runner's plumbing."""
    import dataclasses
    import time

    import benchmarks.run as run
    from examples import EXAMPLES
    from tilecraft.autotune import search

    def wall_ms(fn: object) -> float:
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        return (time.perf_counter() - start) * 1e3

    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(run, "bench_ms", wall_ms)
    monkeypatch.setattr(torch, "compile", lambda fn: fn)
    quick = dataclasses.replace(search.EFFORTS["quick"], budget_s=3.0)
    monkeypatch.setitem(search.EFFORTS, "quick", quick)
    row = run.bench_one("add", EXAMPLES["add"], (37, 100), "quick", 100.0, device="cpu")
    # bf16: the interpreter truncates where torch rounds (1 ulp of values up to ~8)
    assert row["max_err_default"] <= 0.0625 and row["max_err_tuned"] <= 0.0625
    assert row["gb_s"] > 0 and row["vs_compile"] > 0 and "add: tc.Config(" in row["configs"]
    row = run.bench_one("matmul", EXAMPLES["matmul"], (32, 64, 16), "quick", 100.0, device="cpu")
    assert "tflops" in row and "gb_s" not in row and row["max_err_tuned"] < 0.1


def test_add_row_reports_a_failing_case_and_keeps_partial_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.common import add_row

    monkeypatch.setenv("OUT", str(tmp_path))
    rows: list[dict[str, object]] = []
    results = ("partial_test", ["kernel", "ms", "error"], "")

    def broken() -> dict[str, object]:
        raise RuntimeError("no such kernel")

    add_row(rows, {"kernel": "a"}, lambda: {"kernel": "a", "ms": 1.0}, results)
    add_row(rows, {"kernel": "b"}, broken, results)
    assert rows[1] == {"kernel": "b", "error": "RuntimeError: no such kernel"}
    data = json.loads((tmp_path / "partial_test.json").read_text())
    assert [r["kernel"] for r in data["rows"]] == ["a", "b"]


def test_peak_dots_rows_on_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """benchmarks.peak_dots' rows (tune from an empty cache, check against fp32 math, time
    default / tuned / peer), with wall-clock timing and tiny shapes in the interpreter."""
    import time

    import benchmarks.peak_dots as peak

    def wall_ms(fn: object) -> float:
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        return (time.perf_counter() - start) * 1e3

    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peak, "bench_ms", wall_ms)
    row = peak.bench_matmul((16, 32, 48), "none", None, device="cpu")
    assert row["max_err"] < 0.05 and row["peer"] == "torch.mm" and row["tflops"] > 0
    assert row["pct_peak"].endswith("%") and "tc.Config(" in row["config"]
    row = peak.bench_attention((1, 2, 64, 64), True, "none", None, device="cpu")
    assert row["max_err"] < 0.05 and row["peer"] == "sdpa" and row["causal"] is True
    assert peak.attention_flops((1, 2, 64, 64), True) * 2 == peak.attention_flops(
        (1, 2, 64, 64), False
    )
    idents = [ident for ident, _ in peak.cases("all")]
    assert len(idents) == 8 + 12
    assert {"kernel": "matmul", "shape": "1x4096x14336"} in idents
    assert {"kernel": "attention", "shape": "1x16x16384x128", "causal": True} in idents


def test_code_ab_times_case_calls_with_the_tilecraft_on_the_path(tmp_path: Path) -> None:
    """benchmarks.code_ab on the CPU (the interpreter): one row per call, its error against the
    case's reference, and which tilecraft package ran (the A/B's two sides differ there)."""
    from benchmarks import code_ab

    out = tmp_path / "ab.json"
    assert code_ab.main(["new", str(out), "bilinear_upsample2x_fp32@0", "--device", "cpu"]) == 0
    (row,) = json.loads(out.read_text())
    assert row["label"] == "new" and row["case"] == "bilinear_upsample2x_fp32"
    assert row["max_err"] < 1e-5 and row["tilecraft"].endswith("tilecraft")


@pytest.mark.crosscompile
def test_ptx_counts_reads_a_cases_compiled_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """benchmarks/ptx_counts.py: registers, spills and the grouped store of the unfold's four
    shifted loads (one vector store of the windows' contiguous span) at a small shape, for
    sm_90."""
    from benchmarks.ptx_counts import counts

    (row,) = counts("unfold_1d_k4", (2, 3, 40), [], "cuda:90")  # 37 windows of 4 a row
    assert row["registers"] and row["spills"] == 0
    stores = [op for op in row["ops"] if op.startswith("st.global")]
    assert stores and not row["ops"].get("st.global.b16"), row
    # a case of two kernels: the backward gets the forward's mask (it got every input before)
    fwd, bwd = counts("dropout_packbits", (16, 96), [], "cuda:90")
    assert (fwd["kernel"], bwd["kernel"]) == ("dropout_packbits_fwd", "dropout_packbits_bwd")
    assert fwd["registers"] and bwd["registers"]


def test_heldout_registers_records_launches_and_summarizes_agreement() -> None:
    """benchmarks.heldout_registers: a case's launches at its GPU shape are recorded on meta
    tensors (handed to the cross-compile as CPU tensors of their strides), and the summary
    counts a spill the model missed."""
    from benchmarks.gen_kernels import HELDOUT
    from benchmarks.heldout_registers import launches, summary

    ((kernel, args),) = launches(HELDOUT["stft_magnitude"])
    assert kernel.__name__ == "stft_magnitude" and args[0].shape == (64, 160000)
    assert args[0].device.type == "cpu"
    rows = [
        {"kernel": "a", "predicted": 100, "ptxas": 90, "spill_bytes": 0, "limit": 255},
        {"kernel": "b", "predicted": 200, "ptxas": 255, "spill_bytes": 528, "limit": 255},
        {"kernel": "c", "predicted": 300, "ptxas": 255, "spill_bytes": 64, "limit": 255},
    ]
    row = summary(rows)
    assert row["ptxas"] == "spill agreement 2/3"
    assert "missed ['b']" in row["spill_bytes"] and "10 regs" in row["predicted"]


def test_heldout_registers_repredicts_stored_compiles_without_compiling() -> None:
    """``--repredict``: a stored row gets the current model's registers for its launch, config
    and generated kernel (the stored value kept beside it); a row naming a kernel the config no
    longer generates is left out; the stored dataset holds its 212 compiles."""
    import json

    import tilecraft as tc
    from benchmarks.gen_kernels import HELDOUT
    from benchmarks.heldout_registers import TARGET, launches, repredicted
    from tilecraft.config.resolve import predicted_registers
    from tilecraft.runtime.kernel import BoundKernel

    text = "tc.Config(block_sizes=[4, 8], reduction_loops=[None], num_warps=4, num_stages=1)"
    stored = {"case": "yarn_rope", "predicted": 1, "ptxas": 62, "spill_bytes": 0, "config": text}
    rows = repredicted([{**stored, "kernel": "_tc_yarn_rope_0"}, {**stored, "kernel": "nope"}])
    ((kernel, args),) = launches(HELDOUT["yarn_rope"])
    spec = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=TARGET).config_spec
    config = spec.normalize(tc.Config(block_sizes=[4, 8], num_warps=4), warn=False)
    assert [r["kernel"] for r in rows] == ["_tc_yarn_rope_0"]
    assert rows[0]["stored_predicted"] == 1
    assert rows[0]["predicted"] == predicted_registers(spec, config, 4).per_thread > 1
    with open("benchmarks/results/ptxas_counts_s46.json") as f:
        data = json.load(f)["rows"]
    assert len(data) == 212 and all(r["ptxas"] > 0 for r in data)

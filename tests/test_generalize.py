"""The generalization benchmark: every user-style kernel against its eager reference at its tiny
shape (interpreter on CPU, the GPU where there is one), and the runner's rows end to end."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import benchmarks.generalize as gen
from benchmarks.gen_kernels import ALL_CASES, CASES, HELDOUT
from benchmarks.gen_kernels.norms import ln_bwd_reference
from benchmarks.run import max_error


def _as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)


def _wall_ms(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def test_at_least_eight_cases_with_distinct_kernels() -> None:
    assert len(CASES) >= 8
    kernels = [k for case in CASES.values() for k in case.kernels]
    assert len({id(k) for k in kernels}) == len(kernels)


def test_heldout_cases_are_not_suite_cases() -> None:
    assert len(HELDOUT) >= 26
    assert not set(HELDOUT) & set(CASES)
    suite_fns = {k.fn for case in CASES.values() for k in case.kernels}
    assert not suite_fns & {k.fn for case in HELDOUT.values() for k in case.kernels}


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_case_matches_its_reference(name: str, device: str) -> None:
    case = ALL_CASES[name]
    for shape in case.cpu_shapes:
        inputs = case.make_inputs(shape, device, 1)
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]  # (and numbers: a window)
        # (NaN entries, as logits with banned tokens carry, are not zeros)
        assert all(t.float().nan_to_num(0.0).abs().amax() > 0 for t in tensors), (
            "inputs must be random, never zeros"
        )
        want = _as_tuple(case.reference(*inputs))
        got = _as_tuple(case.run({k.__name__: k for k in case.kernels}, inputs))
        assert [g.shape for g in got] == [w.shape for w in want]
        assert [g.dtype for g in got] == [w.dtype for w in want]
        assert max(w.float().abs().amax().item() for w in want) > 0  # float8 has no CPU amax
        err = max_error(got, want)
        assert err <= case.atol, f"{name} at {shape}: max error {err} > {case.atol}"


def test_layer_norm_bwd_reference_agrees_with_autograd() -> None:
    grad_out, x, mean, rstd, weight = CASES["layer_norm_bwd_seed"].make_inputs((6, 50), "cpu", 2)
    xf, wf = x.float().requires_grad_(True), weight.float().requires_grad_(True)
    bias = torch.zeros(50, requires_grad=True)
    out = torch.nn.functional.layer_norm(xf, (50,), wf, bias, 1e-5)
    dx, dw, db = torch.autograd.grad(out, (xf, wf, bias), grad_out.float())
    got = ln_bwd_reference(grad_out, x, mean, rstd, weight)
    assert max_error(got, (dx.to(x.dtype), dw.to(x.dtype), db.to(x.dtype))) <= 0.1


def _cpu_runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Wall-clock timing instead of do_bench and no torch.compile (no GPU, no C++ toolchain)."""
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    monkeypatch.setattr(gen, "bench_best_ms", lambda fn, repeats: _wall_ms(fn))
    monkeypatch.setattr(torch, "compile", lambda fn: fn)


def test_row_end_to_end_on_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _cpu_runner(monkeypatch, tmp_path)
    case = CASES["column_sum_tall"]
    row = gen.measure(case, case.cpu_shapes[0], skip_quick=True, device="cpu")
    assert row["kernel"] == "column_sum_tall" and row["shape"] == "700x40"
    assert row["max_err"] <= case.atol
    for key in ("default_ms", "eager_ms", "torch_compile_ms", "compile_ms", "default_first_s"):
        assert row[key] > 0, key
    assert row["default_vs_compile"] == row["torch_compile_ms"] / row["default_ms"]
    assert "column_sum: tc.Config(" in row["default_config"] and "quick_ms" not in row
    assert row["cpu_load"] >= 0
    assert row["default_graph_ms"] is None and row["compile_graph_ms"] is None  # no CUDA graphs


def test_a_reference_torch_compile_fails_on_keeps_the_tilecraft_columns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _cpu_runner(monkeypatch, tmp_path)

    def failing_compile(fn: Any) -> Any:
        def run(*args: Any) -> Any:
            raise TypeError("list indices must be integers or slices, not NoneType")

        return run

    monkeypatch.setattr(gen.torch, "compile", failing_compile)
    case = CASES["column_sum_tall"]
    row = gen.measure(case, case.cpu_shapes[0], skip_quick=True, device="cpu")
    assert row["default_ms"] > 0 and row["eager_ms"] > 0 and row["max_err"] <= case.atol
    assert row["error"].startswith("torch.compile of the reference: TypeError: list indices")
    assert "torch_compile_ms" not in row and "default_vs_compile" not in row


def test_an_in_place_case_times_in_place_calls_on_a_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The EMA update copies its state in ``run`` and ``reference`` (correctness); the timed
    calls update a copy of the inputs in place on both sides, and the error is still measured
    against the untouched inputs."""
    _cpu_runner(monkeypatch, tmp_path)
    case = ALL_CASES["ema_update_inplace"]
    seen: list[tuple[str, torch.Tensor]] = []

    def timed_run(kernels: Any, inputs: Any) -> Any:
        seen.append(("run", inputs[0]))
        return case.timed_run(kernels, inputs)

    def timed_reference(*inputs: Any) -> Any:
        seen.append(("reference", inputs[0]))
        return case.timed_reference(*inputs)

    spied = dataclasses.replace(case, timed_run=timed_run, timed_reference=timed_reference)
    made = case.make_inputs(case.cpu_shapes[0], "cpu", 0)
    row = gen.measure(spied, case.cpu_shapes[0], skip_quick=True, device="cpu")
    assert {who for who, _ in seen} == {"run", "reference"}
    assert row["max_err"] <= case.atol
    # the copies the timed calls updated again and again have drifted from the inputs
    assert all(not torch.equal(ema, made[0]) for _, ema in seen)
    with pytest.raises(ValueError, match="go together"):
        dataclasses.replace(case, timed_reference=None)


def test_quick_row_on_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _cpu_runner(monkeypatch, tmp_path)
    case = CASES["rms_norm_full_row"]
    row = gen.measure(case, case.cpu_shapes[0], quick_budget=2.0, device="cpu")
    assert row["quick_ms"] > 0 and row["quick_wall_s"] > 0 and row["max_err"] <= case.atol
    assert "rms_norm_llama: tc.Config(" in row["quick_config"]


def test_main_writes_rows_and_turns_a_failure_into_an_error_row(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _cpu_runner(monkeypatch, tmp_path)

    def broken(shape: tuple[int, ...], device: str, seed: int) -> tuple[torch.Tensor, ...]:
        raise RuntimeError("input maker failed")

    bad = dataclasses.replace(CASES["kl_div_rows"], name="broken", make_inputs=broken)
    monkeypatch.setitem(gen.SETS["all"], "broken", bad)
    rows = gen.main(["--kernels", "broken", "kl_div_rows", "--skip-quick", "--device", "cpu"])
    assert rows[0] == {
        "kernel": "broken",
        "shape": "9x500",
        "error": "RuntimeError: input maker failed",
    }
    assert rows[1]["kernel"] == "kl_div_rows" and rows[1]["max_err"] <= CASES["kl_div_rows"].atol
    data = json.loads((tmp_path / "out" / "generalization.json").read_text())
    assert [r["kernel"] for r in data["rows"]] == ["broken", "kl_div_rows"]
    assert "| kl_div_rows | 9x500 |" in (tmp_path / "out" / "generalization.md").read_text()


def test_fresh_caches_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("TILECRAFT_CACHE_DIR", "/keep/me")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    with gen.fresh_caches():
        inner = os.environ["TILECRAFT_CACHE_DIR"]
        assert inner != "/keep/me" and os.path.isdir(os.path.dirname(inner))
        assert "TRITON_CACHE_DIR" in os.environ
    assert os.environ["TILECRAFT_CACHE_DIR"] == "/keep/me" and "TRITON_CACHE_DIR" not in os.environ


@pytest.mark.gpu
def test_gpu_row_at_benchmark_shape() -> None:
    """On the GPU: one full-size row (default config only) is correct and timed."""
    case = CASES["column_sum_tall"]
    row = gen.measure(case, case.gpu_shapes[0], skip_quick=True)
    assert row["max_err"] <= 0.05 and row["default_ms"] > 0 and row["torch_compile_ms"] > 0
    assert row["default_graph_ms"] > 0 and row["compile_graph_ms"] > 0


@pytest.mark.gpu
def test_graph_ms_of_a_call_that_cannot_be_captured_is_none() -> None:
    """A host sync inside the call breaks the capture: no graph time, and the device still works."""
    from benchmarks.common import graph_ms

    x = torch.randn(1024, device="cuda")
    assert graph_ms(lambda: x.sum().item()) is None
    assert (graph_ms(lambda: x * 2) or 0.0) > 0
    torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)


def test_isolated_kernel_keeps_parent_options_but_its_own_name() -> None:
    argv = ["--set", "heldout", "--kernels", "a", "b", "--skip-quick", "--name=x", "--isolate", "9"]
    assert gen._child_argv(argv) == ["--set", "heldout", "--skip-quick"]


def test_isolated_kernel_failure_and_timeout_become_error_rows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OUT", str(tmp_path))
    failed = gen._isolated_rows("column_sum_tall", ["--repeats", "many"], limit_s=120)
    assert len(failed) == 1 and failed[0]["kernel"] == "column_sum_tall"
    assert "exit status 2" in failed[0]["error"] and "--repeats" in failed[0]["error"]
    stopped = gen._isolated_rows("column_sum_tall", ["--device", "cpu"], limit_s=0.2)
    assert stopped == [{"kernel": "column_sum_tall", "error": "stopped after 0.2 s"}]


def test_a_child_stopped_mid_row_keeps_the_columns_it_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A reference whose torch.compile unrolls a 2048-step Python loop ran past the limit: the
    row keeps tilecraft's and eager's times and says which stage was cut."""

    def child(cmd: list[str], env: dict[str, str], timeout: float, **_: object) -> None:
        monkeypatch.setenv("TC_GENERALIZE_CHILD_OUT", env["TC_GENERALIZE_CHILD_OUT"])
        row = {"kernel": "gae_advantages", "shape": "2048x16384", "default_ms": 0.5}
        gen._reached(row, "eager timing")
        gen._reached({**row, "eager_ms": 9.0}, "torch.compile of the reference")
        raise subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(gen.subprocess, "run", child)
    monkeypatch.setenv("OUT", str(tmp_path))
    (row,) = gen._isolated_rows("gae_advantages", [], limit_s=60)
    assert row["default_ms"] == 0.5 and row["eager_ms"] == 9.0 and "stage" not in row
    assert row["error"] == "stopped after 60 s in torch.compile of the reference"

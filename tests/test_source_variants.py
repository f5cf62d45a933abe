"""benchmarks/source_variants.py's plumbing in the interpreter (bench_ms replaced by one call):
an edit reaches the compiled kernel (its output changes), an edit that matches nothing is an
error row, and the runtime's loader is restored afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tilecraft.runtime.bound as runtime_kernel
from benchmarks import source_variants

EXPERIMENTS = """
EXPERIMENTS = [dict(
    name="column sum",
    kernel="benchmarks.gen_kernels.reductions:column_sum",
    shape=(96, 40),
    inputs="gen:column_sum_tall",
    variants=[
        ("default", "default", []),
        ("shifted", "tc.Config(block_sizes=[32, 16])", [("0[.]0, tl[.]float32[)]", "100.0, tl.float32)")]),
        ("no match", "default", [("this text is not in any kernel", "")]),
    ],
)]
"""


@pytest.fixture(autouse=True)
def _one_call_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    def bench_ms(fn: Any) -> float:
        fn()
        return 1.0

    monkeypatch.setattr(source_variants, "bench_ms", bench_ms)


def test_edits_reach_the_kernel_and_a_dead_edit_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OUT", str(tmp_path))
    spec = tmp_path / "exp.py"
    spec.write_text(EXPERIMENTS)
    loader = runtime_kernel.load_source
    source_variants.main([str(spec), "--name", "sv", "--device", "cpu"])
    assert runtime_kernel.load_source is loader
    rows = {r["variant"]: r for r in json.loads((tmp_path / "sv.json").read_text())["rows"]}
    assert rows["default"]["max_err"] == 0
    assert rows["shifted"]["max_err"] >= 100.0  # the accumulators start at 100: the edit ran
    assert "matches nothing" in rows["no match"]["error"]


RECORDED = sorted(
    p
    for p in (Path(__file__).resolve().parents[1] / "benchmarks" / "experiments").glob("*.py")
    if not p.name.startswith("_")
)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_experiments_define_what_the_tool_reads(path: Path) -> None:
    """Each experiment file behind a results file can be run again: it defines EXPERIMENTS
    whose entries name a kernel, a shape and variants of (label, config expression, edits)
    with every edit a (regex, replacement) pair, and whose kernel resolves."""
    import runpy

    from benchmarks.compare_configs import _load

    experiments = runpy.run_path(str(path)).get("EXPERIMENTS")
    assert experiments, f"{path.name} defines no EXPERIMENTS"
    for exp in experiments:
        assert {"name", "kernel", "shape", "variants"} <= set(exp), exp.get("name")
        assert _load(exp["kernel"]) is not None
        for label, expr, edits in exp["variants"]:
            assert isinstance(label, str) and isinstance(expr, str)
            assert all(len(edit) == 2 for edit in edits), (path.name, label)

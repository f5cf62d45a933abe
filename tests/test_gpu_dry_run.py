"""The GPU dry run (benchmarks/gpu_dry_run.py): default programs compiled for sm_90 and launched
through Triton's binder on the CPU with a stand-in driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.crosscompile
def test_cases_reach_tritons_launcher_on_the_gpu_path(tmp_path: Path) -> None:
    """sgd_nesterov_amp_step's ``params`` tensor failed Triton's specializer on the H200 (every
    config); the glue kernel's program takes the GPU path too."""
    out = tmp_path / "dry.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(ROOT), TILECRAFT_CACHE_DIR=str(tmp_path / "cache"))
    cases = ["sgd_nesterov_amp_step", "multi_tensor_l2norm_clip"]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_dry_run", str(out), *cases],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["case"] for r in rows] == cases
    assert done.returncode == 0 and all(r["ok"] for r in rows), (rows, done.stderr[-2000:])


def test_the_dry_run_refuses_the_interpreter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_dry_run", "unused.jsonl"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "without TRITON_INTERPRET" in done.stderr

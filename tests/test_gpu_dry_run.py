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


def _dry_run(tmp_path: Path, cases: list[str], target: str) -> None:
    out = tmp_path / "dry.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(ROOT), TILECRAFT_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_dry_run", str(out), *cases, "--target", target],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["case"] for r in rows] == cases
    assert done.returncode == 0 and all(r["ok"] for r in rows), (rows, done.stderr[-2000:])


@pytest.mark.crosscompile
def test_cases_reach_tritons_launcher_on_the_gpu_path(tmp_path: Path) -> None:
    """sgd_nesterov_amp_step's ``params`` tensor failed Triton's specializer on the H200 (every
    config); the glue kernel's program takes the GPU path too."""
    _dry_run(tmp_path, ["sgd_nesterov_amp_step", "multi_tensor_l2norm_clip"], "cuda:90")


@pytest.mark.crosscompile
def test_gathers_compile_for_amd_without_permuted_pointers(tmp_path: Path) -> None:
    """Loads and stores of permuted pointers (the lane order NVIDIA's coalescing wants) failed
    Triton's AMD buffer-op pass: 'PassManager::run failed' for the default configs."""
    _dry_run(tmp_path, ["causal_conv1d_update", "bilinear_upsample2x_bf16"], "hip:gfx942")


def test_the_dry_run_refuses_the_interpreter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_dry_run", "unused.jsonl"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "without TRITON_INTERPRET" in done.stderr

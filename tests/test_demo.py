"""The README's main job: ``python -m examples.demo`` compiles, discovers a config and runs real
kernels; on a machine without a GPU it must pick the Triton interpreter itself (the examples
package imports triton before the demo's own code runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path of the demo")
def test_demo_runs_without_triton_interpret_in_the_environment(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TILECRAFT_CACHE_DIR"] = str(tmp_path)  # a fresh cache: discovery really runs
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "examples.demo"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "examples.layer_norm: OK" in done.stdout
    assert "no working config" not in done.stdout + done.stderr

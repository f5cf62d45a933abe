"""``tilecraft check``: cross-compiles an example kernel's configs for CUDA and HIP on a CPU."""

from __future__ import annotations

import json

import pytest

from tilecraft.cli import main

pytestmark = pytest.mark.crosscompile


def test_check_example_kernel_for_cuda_and_hip(capsys: pytest.CaptureFixture[str]) -> None:
    config = json.dumps({"block_sizes": [4], "reduction_loops": [256], "maxnreg": 128})
    code = main(
        [
            "check",
            "examples.rms_norm:rms_norm_fwd",
            "--target",
            "cuda:90",
            "--target",
            "hip:gfx942",
            "--config",
            config,
            "--shape",
            "256,1000",
            "--strict",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith(("cuda:90", "hip:gfx942"))]
    assert len(lines) == 2
    cuda, hip = lines
    assert " ok " in cuda and " ok " in hip
    assert "maxnreg=128" in cuda  # honored on CUDA ...
    assert "maxnreg" not in hip  # ... and dropped for HIP, whose options have no maxnreg
    assert "2 ok, 0 failed" in out


def test_check_reports_rejected_configs(capsys: pytest.CaptureFixture[str]) -> None:
    config = json.dumps({"block_sizes": [4, 4, 4]})
    main(["check", "examples.rms_norm:rms_norm_fwd", "--config", config, "--shape", "64,100"])
    out = capsys.readouterr().out
    assert "rejected: block_sizes has 3 entries" in out

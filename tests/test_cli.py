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
    assert " p/SM " in out  # programs per SM by the compiled registers


def test_check_reports_rejected_configs(capsys: pytest.CaptureFixture[str]) -> None:
    config = json.dumps({"block_sizes": [4, 4, 4]})
    main(["check", "examples.rms_norm:rms_norm_fwd", "--config", config, "--shape", "64,100"])
    out = capsys.readouterr().out
    assert "rejected: block_sizes has 3 entries" in out


def test_programs_per_sm_from_compiled_registers() -> None:
    """What `tilecraft check` prints as p/SM: programs an SM holds by the compiled kernel's
    threads, registers (allocated in steps of 8) and shared memory (sm_90: 2048 threads,
    65536 registers, 227 KB)."""
    import tilecraft as tc
    from tilecraft.targets.target import Target
    from tilecraft.tools.check import CheckRow
    from tilecraft.tools.crosscompile import CompileReport

    target = Target.parse("cuda:90")

    def row(warps: int, registers: int, shared: int = 0) -> CheckRow:
        report = CompileReport(
            target, ok=True, registers=registers, shared_bytes=shared, num_warps=warps
        )
        return CheckRow(target, tc.Config(block_sizes=[1], num_warps=warps), "k", report)

    assert row(16, 40).programs_per_sm == 3  # 65536 / (40 x 512)
    assert row(16, 32).programs_per_sm == 4  # by threads: 2048 / 512
    assert row(8, 59).programs_per_sm == 4  # 59 -> 64 registers: 65536 / (64 x 256)
    assert row(4, 32, shared=100_000).programs_per_sm == 2  # by shared memory
    rejected = CheckRow(target, tc.Config(block_sizes=[1]), "-", None, "bad config")
    assert rejected.programs_per_sm is None

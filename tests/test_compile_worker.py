"""The compile worker: a kernel made to hang Triton's compiler is killed at its own timeout and
the rest of the batch still compiles; its address space is capped, and a worker past the cap is
a report (tools/worker.py)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import pytest
import torch

import tilecraft as tc
from tilecraft.codegen.kernel import generate
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

pytestmark = pytest.mark.crosscompile


@tc.kernel
def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = torch.exp(x[t]) * 2.0 + torch.sin(x[t])
    return out


def _job(block: int) -> CompileJob:
    """``block`` elements per tile on one warp: 65536 (2048 per thread) keeps Triton's compiler
    busy for many minutes, the seed-000 "hang"; codegen renders the plan it is given, so a plan
    edited past resolve's repairs reaches the compiler as is."""
    target = Target.parse("cuda:90")
    bound = BoundKernel(scale, scale.bind_arguments((torch.randn(1 << 20),), {}), target=target)
    plan = bound.config_spec.resolve(tc.Config(block_sizes=[256], num_warps=1, num_stages=1))
    plan = dataclasses.replace(plan, block_sizes=(block,))
    loop = bound.traced.loops[0]
    return CompileJob.of(generate(loop, plan, "scale"), loop, target)


def test_hanging_compile_is_killed_and_the_batch_goes_on() -> None:
    jobs = [_job(256), _job(65536), _job(512)]
    start = time.monotonic()
    reports = run_compile_jobs(jobs, timeout_s=8)
    elapsed = time.monotonic() - start
    assert [r.ok for r in reports] == [True, False, True], [r.error[:200] for r in reports]
    assert reports[1].error_class == "compile_timeout"
    assert elapsed < 150  # two worker start-ups + one 8 s timeout, not the whole compile


def test_worker_caps_its_address_space() -> None:
    """The cap a worker sets (``TILECRAFT_COMPILE_MEMORY_GB``) is its RLIMIT_AS, which the
    compilers it runs inherit."""
    code = (
        "import resource; from tilecraft.tools import worker; worker._cap_memory(); "
        "print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    )
    env = {**os.environ, "TILECRAFT_COMPILE_MEMORY_GB": "3"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert int(done.stdout) == 3 << 30


def test_a_compile_past_the_memory_cap_is_a_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile that needs more than the cap (here any: 0.25 GB, under what the worker has
    mapped already) comes back as a failed report naming the MemoryError; the caller goes on (a
    ptxas once ran past 20 GB)."""
    monkeypatch.setenv("TILECRAFT_COMPILE_MEMORY_GB", "0.25")
    (report,) = run_compile_jobs([_job(256)], timeout_s=60)
    assert not report.ok and "MemoryError" in report.error, report

"""Cross-compiling a kernel's generated code for the real GPU targets, shared by test modules:
every kernel a config generates (a split's combine too) must compile for sm_90 and gfx942."""

from __future__ import annotations

from typing import Any

import tilecraft as tc
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

TARGETS = (Target.parse("cuda:90"), Target("hip", "gfx942", 64))


def assert_cross_compiles(kernel: tc.Kernel, args: tuple[Any, ...], config: tc.Config) -> None:
    """Compile every kernel ``config`` generates for ``args`` (meta tensors) on each target."""
    jobs = []
    for target in TARGETS:
        bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)
        _, _, traced, kernels = bound.generate(config)
        for main, loop in zip(kernels, traced.loops, strict=True):
            jobs += [CompileJob.of(k, loop, target) for k in (main, *main.companions)]
    for job, report in zip(jobs, run_compile_jobs(jobs, 300), strict=True):
        assert report.ok, f"{job.kernel_name} for {job.target.key}: {report.error}"


def assert_defaults_cross_compile(kernel: tc.Kernel, args: tuple[Any, ...]) -> None:
    """Each target's own default config for ``args`` compiles there (every device loop) and
    fits its shared memory (a compile that needs more than the target has fails at launch)."""
    from tilecraft.tools.check import check_kernel

    rows = check_kernel(kernel, args, list(TARGETS), lambda b: [b.config_spec.default()])
    assert rows, kernel.__name__
    for row in rows:
        assert row.report is not None and row.report.fits, (row.target, row.status, row.report)


def default_memory_ops(kernel: tc.Kernel, args: tuple[Any, ...]) -> list[str]:
    """The global load/store instructions (``ld.global.v4.b32``, ...) of the first device loop
    of ``kernel``'s sm_90 default for ``args``, in PTX order, compiled with 16-byte aligned
    pointers as a launch specializes torch's allocations (and, with dynamic shapes, its int
    arguments as a launch at these arguments specializes them). Compiled in a worker process: an
    in-process compile after interpreter runs can meet the interpreter's patches."""
    import re

    target = TARGETS[0]
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)
    _, _, traced, kernels = bound.generate(bound.config_spec.default())
    job = CompileJob.of(kernels[0], traced.loops[0], target)
    assert job.aligned  # every pointer 16-byte aligned, as a launch specializes it
    (report,) = run_compile_jobs([job], 300)
    assert report.ok, report.error
    return re.findall(r"(?:ld|st)\.global[\w.]*", report.ptx)

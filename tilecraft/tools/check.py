"""Static validation of a kernel's configs on real GPU targets, without a GPU (stage: tools).

For each config and target: generate, cross-compile in a worker process, and report ok / error
class, shared memory, registers, spills and whether it fits the target's limits. This is what
``tilecraft check`` prints and what the autotuner uses to prune before running anything.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from tilecraft.config.config import Config
from tilecraft.config.occupancy import programs_per_sm
from tilecraft.errors import ConfigError
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob, CompileReport
from tilecraft.tools.worker import run_compile_jobs


@dataclasses.dataclass
class CheckRow:
    target: Target
    config: Config
    kernel_name: str
    report: CompileReport | None
    error: str = ""
    predicted_registers: int | None = None  # the resource model's registers per thread

    @property
    def status(self) -> str:
        if self.report is None:
            return f"rejected: {self.error}"
        if not self.report.ok:
            return self.report.error_class
        return "ok" if not self.misfit else f"ok, does not fit: {self.misfit}"

    @property
    def misfit(self) -> str:
        """Why a compiled kernel exceeds the target's limits ('' when it fits)."""
        r = self.report
        if r is None or not r.ok:
            return ""
        limits = self.target.limits
        if r.shared_bytes is not None and r.shared_bytes > limits.max_shared_bytes:
            return f"shared memory {r.shared_bytes} > {limits.max_shared_bytes}"
        threads = (self.config.num_warps or 4) * self.target.warp_size
        if threads > limits.max_threads_per_block:
            return f"{threads} threads > {limits.max_threads_per_block} a block"
        if r.registers is not None and r.registers * threads > limits.registers_per_sm:
            return f"{r.registers} registers x {threads} threads > {limits.registers_per_sm}"
        return ""

    @property
    def programs_per_sm(self) -> int | None:
        """Programs one SM holds at once by the compiled kernel's registers and shared memory
        and its threads (None: not compiled). Memory-bound row loops keep about one chunk step
        per resident program in flight, so this is what their warps trade against."""
        r = self.report
        if r is None or not r.ok or r.registers is None:
            return None
        threads = (r.num_warps or self.config.num_warps or 4) * self.target.warp_size
        return programs_per_sm(self.target.limits, threads, r.registers, r.shared_bytes or 0)


def check_kernel(
    kernel: Any,
    args: tuple[Any, ...],
    targets: list[Target],
    configs_for: Any,
    timeout_s: float = 300.0,
) -> list[CheckRow]:
    """Cross-compile ``configs_for(bound)`` (a list of Configs per target's BoundKernel)."""
    planned = _planned(kernel, args, targets, configs_for, jobs=True)
    pending = [(row, job) for row, job in planned if job is not None]
    reports = _compile_parallel([job for _, job in pending], timeout_s)
    for (row, _), report in zip(pending, reports, strict=True):
        row.report = report
    return [row for row, _ in planned]


def predict_kernel(
    kernel: Any, args: tuple[Any, ...], targets: list[Target], configs_for: Any
) -> list[CheckRow]:
    """:func:`check_kernel`'s rows without compiling: each generated kernel's predicted
    registers (``report`` None; ``error`` for a config that does not resolve)."""
    return [row for row, _ in _planned(kernel, args, targets, configs_for, jobs=False)]


def _planned(
    kernel: Any, args: tuple[Any, ...], targets: list[Target], configs_for: Any, jobs: bool
) -> list[tuple[CheckRow, CompileJob | None]]:
    """A row per generated kernel of each config (with ``jobs``, its compile job), or per
    rejected config (no job)."""
    planned: list[tuple[CheckRow, CompileJob | None]] = []
    for target in targets:
        bound = _bind_for(kernel, args, target)
        for config in configs_for(bound):
            try:
                plan, _, traced, kernels = bound.generate(config)
            except ConfigError as exc:
                planned.append((CheckRow(target, config, "-", None, exc.message), None))
                continue
            # each loop's own prediction (the plan's is its worst loop's)
            per_loop = plan.resources.loop_registers
            if len(per_loop) != len(traced.loops):
                per_loop = (plan.resources.registers,) * len(traced.loops)
            for loop, main, predicted in zip(traced.loops, kernels, per_loop, strict=True):
                for generated in (main, *main.companions):  # a split loop's combine kernel too
                    row = CheckRow(
                        target, plan.config, generated.kernel_name, None,
                        predicted_registers=predicted,
                    )  # fmt: skip
                    job = CompileJob.of(generated, loop, target) if jobs else None
                    planned.append((row, job))
    return planned


def _bind_for(kernel: Any, args: tuple[Any, ...], target: Target) -> Any:
    """A BoundKernel whose config space and code are for ``target``."""
    from tilecraft.runtime.kernel import BoundKernel

    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)
    return bound


def _compile_parallel(jobs: list[CompileJob], timeout_s: float) -> list[CompileReport]:
    """Split the jobs over one worker process per core (each a batch with its own timeout)."""
    import concurrent.futures

    workers = max(1, min(os.cpu_count() or 1, len(jobs)))
    batches = [jobs[i::workers] for i in range(workers)]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda b: run_compile_jobs(b, timeout_s), batches))
    out: list[CompileReport] = [None] * len(jobs)  # type: ignore[list-item]
    for w, reports in enumerate(results):
        for k, report in enumerate(reports):
            out[w + k * workers] = report
    return out


def format_rows(rows: list[CheckRow]) -> str:
    header = (
        f"{'target':<14} {'kernel':<28} {'status':<34} {'smem':>7} {'model':>5} {'regs':>5} "
        f"{'spill':>5} {'p/SM':>4}  config"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        r = row.report
        smem = "" if r is None or r.shared_bytes is None else str(r.shared_bytes)
        regs = "" if r is None or r.registers is None else str(r.registers)
        spill = "" if r is None or r.spills is None else str(r.spills)
        model = "" if row.predicted_registers is None else str(row.predicted_registers)
        per_sm = "" if row.programs_per_sm is None else str(row.programs_per_sm)
        lines.append(
            f"{row.target.key:<14} {row.kernel_name:<28} {row.status[:34]:<34} {smem:>7} "
            f"{model:>5} {regs:>5} {spill:>5} {per_sm:>4}  {row.config!r}"
        )
        if len(row.status) > 34 or (r is not None and not r.ok):
            reason = (
                row.status
                if r is None or r.ok
                else f"{r.error_class}: {r.error.splitlines()[0][:300]}"
            )
            lines.append(f"{'':<14} -> {reason}")
    return "\n".join(lines)

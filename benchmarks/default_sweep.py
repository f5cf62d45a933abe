"""Every example's heuristic default, cross-compiled for real targets without a GPU: does it
compile, fit shared memory, and keep its values in registers?

``python -m benchmarks.default_sweep [--targets cuda:90 hip:gfx942] [--shapes bench|test]
[--examples NAME ...] [--cases suite|heldout|all] [--name N]`` binds each kernel call of each
example at its shapes (and with ``--cases``, of the generalization benchmark's kernels at their
GPU shapes: ``benchmarks.gen_kernels``) (on meta
tensors: nothing runs), resolves the default for each target, compiles it with Triton's own
pipeline (``tools/crosscompile.py``, in worker processes) and writes one row per call: registers
compiled and predicted, spilled bytes (VGPRs on AMD), shared memory. Exits 1 when a default does
not compile or needs more shared memory than the target has (its launch would fail); spills are
reported, not failures. ``memory_ops`` / ``narrow``: the global loads and stores of each
CUDA default by width, and its scalar ones under 4 bytes (the accesses to look at first).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from benchmarks.common import write_results
from benchmarks.default_change import case_calls, example_calls
from examples import EXAMPLES
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

COLUMNS = ["target", "example", "shape", "call", "kernel", "ok", "registers", "predicted",
           "spills", "shared", "max_shared", "memory_ops", "narrow", "config",
           "error"]  # fmt: skip
_GLOBAL_OP = re.compile(r"\b(ld|st)\.global((?:\.[\w:]+)*)")
_WIDTH = re.compile(r"\.(?:v(\d))?\.?[bfsu](8|16|32|64)$")


def memory_ops(ptx: str) -> tuple[str, int]:
    """The global loads and stores in ``ptx`` by bytes moved per thread and instruction
    (``"ld 16B x4, st 2B x32"``: each counted once in the code, not per execution), and how
    many are scalars under 4 bytes: a contiguous access Triton did not vectorize (a flip, a
    stride-2 or masked one) or a gather; sort a sweep by it to find both."""
    counts: dict[tuple[str, int], int] = {}
    narrow = 0
    for op, suffix in _GLOBAL_OP.findall(ptx):
        width = _WIDTH.search(suffix)
        if width is None:
            continue
        lanes, bits = int(width.group(1) or 1), int(width.group(2))
        size = lanes * bits // 8
        counts[op, size] = counts.get((op, size), 0) + 1
        narrow += lanes == 1 and bits < 32
    text = ", ".join(f"{op} {size}B x{n}" for (op, size), n in sorted(counts.items()))
    return text, narrow


def cpu_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Meta tensors as empty CPU tensors of the same shapes and strides (binding reads none)."""
    return tuple(
        torch.empty_strided(a.shape, a.stride(), dtype=a.dtype)
        if isinstance(a, torch.Tensor)
        else a
        for a in args
    )


Calls = list[tuple[Any, tuple[Any, ...]]]


def call_sources(
    examples: list[str], cases: str, which: str, only: tuple[str, ...] = ()
) -> list[tuple[str, str, Calls]]:
    """(name, shape, calls) of every example shape, then every case's GPU shapes; ``only``:
    those whose ``name|shape`` holds one of the texts (the others' calls are never made)."""
    out = []

    def add(name: str, shape: tuple[int, ...], calls: Callable[[], Calls]) -> None:
        text = "x".join(map(str, shape))
        if not only or any(o in f"{name}|{text}" for o in only):
            out.append((name, text, calls()))

    for name in examples:
        module = EXAMPLES[name]
        for shape in module.BENCH_SHAPES if which == "bench" else module.TEST_SHAPES:
            add(name, shape, partial(example_calls, module, shape, "meta"))
    if cases != "none":
        from benchmarks.generalize import SETS

        for name, case in SETS["all" if cases == "all" else cases].items():
            for shape in case.gpu_shapes:
                add(name, shape, partial(case_calls, case, shape))
    return out


def jobs_for(
    examples: list[str], target: Target, which: str, cases: str = "none"
) -> tuple[list[CompileJob], list[dict[str, Any]]]:
    """One compile job (and the start of its row) per device loop of every call."""
    jobs, rows = [], []
    for name, shape, calls in call_sources(examples, cases, which):
        for i, (kernel, args) in enumerate(calls):
            bound = BoundKernel(kernel, kernel.bind_arguments(cpu_args(args), {}), target=target)
            config = bound.config_spec.default()
            plan, _, traced, generated = bound.generate(config)
            for g, loop in zip(generated, traced.loops, strict=True):
                jobs.append(CompileJob.of(g, loop, target))
                rows.append(
                    {"target": target.key, "example": name, "call": i, "shape": shape,
                     "kernel": kernel.__name__, "predicted": plan.resources.registers,
                     "config": repr(config)}
                )  # fmt: skip
    return jobs, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=["cuda:90", "hip:gfx942"])
    parser.add_argument("--shapes", choices=["bench", "test"], default="bench")
    parser.add_argument("--examples", nargs="*", default=sorted(EXAMPLES))
    parser.add_argument("--cases", choices=["none", "suite", "heldout", "all"], default="none")
    parser.add_argument("--name", default="default_sweep")
    parser.add_argument("--timeout", type=float, default=3000.0, help="seconds for all compiles")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for key in args.targets:
        jobs, started = jobs_for(args.examples, Target.parse(key), args.shapes, args.cases)
        for row, report in zip(started, run_compile_jobs(jobs, args.timeout), strict=True):
            row.update(ok=report.ok and report.fits, registers=report.registers)
            row.update(spills=report.spills, shared=report.shared_bytes)
            row.update(max_shared=report.max_shared, error=report.error[:200])
            row["memory_ops"], row["narrow"] = memory_ops(report.ptx)
            rows.append(row)
    failed = [r for r in rows if not r["ok"]]
    spilled = [r for r in rows if r["spills"]]
    notes = f"{len(rows)} defaults: {len(failed)} fail to compile or fit, {len(spilled)} spill"
    write_results(args.name, rows, COLUMNS, notes, echo=False)
    print(notes)
    for r in failed + spilled:
        print(f"  {r['target']} {r['example']} {r['shape']} #{r['call']} {r['kernel']}: "
              f"ok={r['ok']} spills={r['spills']} {r['error']}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

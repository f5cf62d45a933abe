"""Registers, spills and memory / shuffle instruction counts of a held-out or suite case's
configs, cross-compiled for a real target without a GPU (``tilecraft.tools.crosscompile``).

``python -m benchmarks.ptx_counts CASE@SHAPE[@EXPR] ... [--target cuda:90] [--name N]`` prints
one row per config and device loop (``EXPR`` is Python over ``default``, the case's heuristic
default: ``"default.replace(block_sizes=[128, 128, 64])"``; none: the default) and writes
``$OUT`` or ``benchmarks/results/N.{md,json}``. Counts are of the PTX (per thread, static: a loop's body
counts once), for reading what a config compiles to when no GPU is at hand, never a timing.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from typing import Any

import tilecraft as tc
from benchmarks.common import write_results
from benchmarks.gen_kernels import ALL_CASES
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

_COUNTED = re.compile(
    r"(?:ld|st)\.(?:global|shared|local)[\w.]*|shfl\.sync\.\w+|bar\.sync|cp\.async[\w.]*"
)


def counts(
    case: str, shape: tuple[int, ...], exprs: list[str], target: str
) -> list[dict[str, Any]]:
    """One row per config: the config, registers, spill bytes and PTX instruction counts of
    every device loop's kernel."""
    c = ALL_CASES[case]
    kernel = c.kernels[0]
    args = c.make_inputs(shape, "meta", 0)
    tgt = Target.parse(target)
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=tgt)
    default = bound.config_spec.default()
    rows = []
    for expr in exprs or ["default"]:
        config = bound.config_spec.normalize(eval(expr, {"default": default, "tc": tc}), warn=False)
        _, _, traced, kernels = bound.generate(config)
        jobs = [CompileJob.of(k, loop, tgt) for k, loop in zip(kernels, traced.loops, strict=False)]
        for i, report in enumerate(run_compile_jobs(jobs, 600)):
            ops = Counter(_COUNTED.findall(report.ptx or ""))
            rows.append(
                {
                    "case": case,
                    "shape": "x".join(map(str, shape)),
                    "loop": i,
                    "config": str(config),
                    "registers": report.registers,
                    "spills": report.spills,
                    "ops": dict(sorted(ops.items())),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "specs", nargs="+", help="CASE@SHAPE or CASE@SHAPE@EXPR (SHAPE comma-separated)"
    )
    parser.add_argument("--target", default="cuda:90")
    parser.add_argument("--name", default="ptx_counts")
    parser.add_argument("--notes", default="")
    a = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for spec in a.specs:
        case, shape, *expr = spec.split("@", 2)
        rows += counts(case, tuple(int(s) for s in shape.split(",")), expr, a.target)
    for r in rows:
        r["ops"] = ", ".join(f"{k} {v}" for k, v in r["ops"].items())
    columns = ["case", "shape", "loop", "config", "registers", "spills", "ops"]
    write_results(a.name, rows, columns, notes=f"target {a.target}. {a.notes}".strip())


if __name__ == "__main__":
    main()

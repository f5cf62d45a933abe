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
    tgt = Target.parse(target)
    rows = []
    for kernel, args in _kernel_calls(c, shape):
        bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=tgt)
        rows += _config_rows(case, shape, bound, exprs, tgt)
    return rows


def _kernel_calls(c: Any, shape: tuple[int, ...]) -> list[tuple[Any, tuple[Any, ...]]]:
    """Each kernel of a case with the meta arguments the case calls it with: the case runs on
    meta inputs with every kernel's ref mode standing in for it (a second kernel gets the
    first's outputs: dropout's backward takes the forward's mask)."""
    inputs = c.make_inputs(shape, "meta", 0)
    if len(c.kernels) == 1:
        return [(c.kernels[0], inputs)]
    calls: list[tuple[Any, tuple[Any, ...]]] = []

    def recorder(kernel: Any) -> Any:
        def call(*args: Any) -> Any:
            calls.append((kernel, args))
            return kernel.run_ref(*args)

        return call

    c.run({k.__name__: recorder(k) for k in c.kernels}, inputs)
    return calls


def _config_rows(
    case: str, shape: tuple[int, ...], bound: BoundKernel, exprs: list[str], tgt: Target
) -> list[dict[str, Any]]:
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
                    "kernel": bound.kernel.__name__,
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
    columns = ["case", "shape", "kernel", "loop", "config", "registers", "spills", "ops"]
    write_results(a.name, rows, columns, notes=f"target {a.target}. {a.notes}".strip())


if __name__ == "__main__":
    main()

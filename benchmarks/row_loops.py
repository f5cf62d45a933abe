"""Rows per program x chunk width x warps x stages for kernels that walk their rows in a loop.

``python -m benchmarks.row_loops [--cases welford_layer_norm online_softmax_two_pass]``

A looped row reduction is latency-bound when each program runs many dependent iterations (load a
chunk, reduce it, merge) and few programs share an SM: the time is about iterations x memory
latency, not bytes / bandwidth. This sweep measures, on one GPU, how rows per program, the chunk
width, the warps and software pipelining (num_stages) move that time, next to the discovered
default, so that the heuristic's rule for such loops rests on measurements. Writes
``row_loops.{md,json}`` to ``$OUT`` or ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import bench_ms, write_results
from benchmarks.gen_kernels import CASES

ROWS = (1, 4, 16)
CHUNKS = (1024, 4096)
WARPS = (4, 16)
STAGES = (1, 3)


def sweep(case_name: str, device: str) -> list[dict[str, Any]]:
    case = CASES[case_name]
    (kernel,) = case.kernels
    shape = case.gpu_shapes[0]
    inputs = case.make_inputs(shape, device, 0)
    bound = kernel.bind(inputs)
    spec = bound.config_spec
    default = spec.default()
    configs = [("default", default)]
    n_blocks = len(default.block_sizes)
    for rows, chunk, warps, stages in itertools.product(ROWS, CHUNKS, WARPS, STAGES):
        blocks = [rows] + [chunk] * (n_blocks - 1)
        configs.append(("sweep", tc.Config(block_sizes=blocks, num_warps=warps, num_stages=stages)))
    rows_out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for label, config in configs:
        plan = spec.resolve(config, warn=False)
        if plan.config.key() in seen:
            continue
        seen.add(plan.config.key())
        row: dict[str, Any] = {"case": case_name, "shape": "x".join(map(str, shape)), "kind": label}
        row["config"] = repr(plan.config)
        row["pred_regs"] = plan.resources.registers
        try:
            program = bound.compile_config(plan.config)
            bound.run(program, *inputs)
            row["ms"] = round(bench_ms(lambda p=program: bound.run(p, *inputs)), 4)
        except Exception as exc:  # a config that fails is a row, not the end of the sweep
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
        rows_out.append(row)
    ref_ms = bench_ms(lambda: case.reference(*inputs))
    compiled = torch.compile(case.reference)
    compiled(*inputs)
    rows_out.append({"case": case_name, "kind": "eager", "ms": round(ref_ms, 4)})
    rows_out.append(
        {
            "case": case_name,
            "kind": "torch.compile",
            "ms": round(bench_ms(lambda: compiled(*inputs)), 4),
        }
    )
    return rows_out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cases", nargs="+", default=["welford_layer_norm", "online_softmax_two_pass"]
    )
    ns = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = [r for name in ns.cases for r in sweep(name, device)]
    columns = ["case", "shape", "kind", "config", "pred_regs", "ms", "error"]
    write_results("row_loops", rows, columns, "do_bench medians, bf16, one GPU")


if __name__ == "__main__":
    main()

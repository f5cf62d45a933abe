"""The row-does-not-fit schedule on a GPU (issue 11, item 4): the generalization benchmark's
seed-shaped LayerNorm backward (``benchmarks/gen_kernels/norms.py::ln_bwd_cta_partials``: per-CTA
``[n]`` fp32 accumulators over a nested row loop) timed with the heuristic default, with the
whole-row schedule (accumulators in registers, what the default was before), and with chunked
configs around the default (rows per step x chunk, CTA rows, stages), each checked
against eager PyTorch. Writes ``row_schedule.md``/``.json`` to $OUT or ``benchmarks/results/``.

``python -m benchmarks.row_schedule [--shape 4608x40920] [--quick]`` (GPU; 52 configs, about 4
minutes; ``--quick``: 12, about a minute).
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import bench_ms, write_results
from benchmarks.gen_kernels import CASES

CASE = CASES["layer_norm_bwd_seed"]
COLUMNS = ["schedule", "config", "ms", "vs_eager", "max_err", "predicted_regs", "programs"]


def candidates(default: tc.Config, quick: bool) -> list[tuple[str, tc.Config]]:
    """The default, the whole-row schedule, then chunked variants: row-step tiles of 2048-8192
    elements as 1-8 rows x a chunk (taller tiles update the rows in memory less often, wider ones
    re-read less of x and dy from L2), 16 elements per thread, CTAs of 32/64 rows, 1 or 3 stages."""
    cta = default.block_sizes[0]
    out = [
        ("default", default),
        ("default", default.replace(num_stages=3)),
        ("whole row", tc.Config(block_sizes=[cta, 1], reduction_loops=[None], num_warps=32)),
        ("whole row", tc.Config(block_sizes=[64, 1], reduction_loops=[None], num_warps=32)),
    ]
    sizes, steps, ctas, stages = (
        ((4096,), (1, 2, 4, 8), (cta, 64), (1,))
        if quick
        else ((2048, 4096, 8192), (1, 2, 4, 8), (cta, 64), (1, 3))
    )
    for size, rows, cta_rows, stage in itertools.product(sizes, steps, ctas, stages):
        warps = max(4, min(16, size // 512))
        config = tc.Config(
            block_sizes=[cta_rows, rows],
            reduction_loops=[size // rows],
            num_warps=warps,
            num_stages=stage,
        )
        out.append(("chunked", config))
    return out


def meta_inputs(shape: tuple[int, int] = (4608, 40920)) -> tuple[torch.Tensor, ...]:
    """The case's arguments at ``shape`` on the meta device: enough to generate and cross-compile
    (``tilecraft check ... --inputs benchmarks.row_schedule:meta_inputs``), nothing allocated."""
    m, n = shape
    rows = torch.empty(m, n, dtype=torch.bfloat16, device="meta")
    stats = torch.empty(m, device="meta")
    return rows, rows, stats, stats, torch.empty(n, dtype=torch.bfloat16, device="meta")


def measure(shape: tuple[int, ...], quick: bool) -> list[dict[str, Any]]:
    inputs = CASE.make_inputs(shape, "cuda", 0)
    kernel = CASE.kernels[0]
    bound = kernel.bind(inputs)
    spec = bound.config_spec
    ref = CASE.reference(*inputs)
    eager_ms = bench_ms(lambda: CASE.reference(*inputs))
    rows: list[dict[str, Any]] = [{"schedule": "eager", "ms": eager_ms, "vs_eager": 1.0}]
    seen: set[str] = set()
    for label, config in candidates(spec.default(), quick):
        plan = spec.resolve(config, warn=False)
        if plan.key() in seen:
            continue
        seen.add(plan.key())
        row: dict[str, Any] = {
            "schedule": label + (" (homes)" if plan.carried_homes else ""),
            "config": repr(plan.config),
            "predicted_regs": plan.resources.registers,
            "programs": plan.resources.programs[0],
        }
        try:
            program = bound.compile_config(plan.config)
            out = bound.run(program, *inputs)
            row["max_err"] = max(
                (o.float() - r.float()).abs().max().item() for o, r in zip(out, ref)
            )
            row["ms"] = bench_ms(lambda p=program: bound.run(p, *inputs))
            row["vs_eager"] = eager_ms / row["ms"]
        except Exception as exc:  # a config out of resources is a row, not the end of the run
            row["ms"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
        rows.append(row)
        print(row, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="4608x40920")
    parser.add_argument("--quick", action="store_true", help="a smaller grid of chunked configs")
    ns = parser.parse_args()
    shape = tuple(int(v) for v in ns.shape.split("x"))
    rows = measure(shape, ns.quick)
    notes = f"{CASE.name} at {ns.shape} bf16; max_err: largest abs error of dx, dw, db vs eager"
    write_results("row_schedule", rows, COLUMNS, notes)


if __name__ == "__main__":
    main()

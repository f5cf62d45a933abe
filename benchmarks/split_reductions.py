"""Split reductions on the GPU: each kernel at its heuristic default and at fixed configs with
``split_reductions`` 1 (not split) and larger, against eager PyTorch (and ``torch.mm``).

``python -m benchmarks.split_reductions [--cases colsum decode rms_long] [--name split_reductions]``

``default`` rows use the heuristic default (no discovery). Cases: the generalization benchmark's column sum over a tall-skinny 65536x1024 bf16 input
(grid over columns, loop over rows); decode GEMMs ``examples.matmul.matmul`` at M in
{1, 16, 64, 128} x K 4096 x N 14336 bf16 (split-K); ``examples.rms_norm.rms_norm_fwd`` over
8 rows of 2^20 (a rolled reduction dim split across programs). Every config's output is checked
against the reference before it is timed (``do_bench`` medians). Each row: the config, ms,
achieved GB/s (inputs + outputs) or TFLOP/s, and the speedup over the eager reference. Writes
``benchmarks/results/<name>.{md,json}`` (or under ``$OUT``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import add_row, bench_ms, write_results

COLUMNS = ["case", "shape", "config", "programs", "ms", "GB/s", "TFLOP/s", "vs_eager", "error"]
DECODE_M = (1, 16, 64, 128)


def _measure(
    case: str,
    kernel: Any,
    args: tuple[Any, ...],
    config: tc.Config | None,
    reference: Callable[[], Any],
    nbytes: int,
    flops: int = 0,
) -> dict[str, Any]:
    bound = kernel.bind(args)
    program = bound.compile_config(config or bound.config_spec.default())
    plan = program.plan
    got = bound.run(program, *args)
    expect = reference()
    got0 = got[0] if isinstance(got, tuple) else got
    exp0 = expect[0] if isinstance(expect, tuple) else expect
    torch.testing.assert_close(got0.float(), exp0.float(), rtol=2e-2, atol=2e-2)
    ms = bench_ms(lambda: bound.run(program, *args))
    eager_ms = bench_ms(reference)
    return {
        "case": case,
        "shape": "x".join(str(s) for s in args[0].shape)
        + (f" @ {args[1].shape[1]}" if flops else ""),
        "config": ("default " if config is None else "") + repr(plan.config),
        "programs": list(plan.resources.programs),
        "ms": ms,
        "GB/s": nbytes / ms / 1e6,
        "TFLOP/s": flops / ms / 1e9 if flops else "",
        "vs_eager": eager_ms / ms,
    }


def _colsum(rows: list[dict[str, Any]], name: str) -> None:
    from benchmarks.gen_kernels.reductions import column_sum

    x = torch.randn(65536, 1024, device="cuda", dtype=torch.bfloat16)
    configs: list[tc.Config | None] = [None]
    for rows_block, cols in ((512, 16), (256, 64), (64, 128)):
        for split in (1, 4, 16, 64):
            configs.append(
                tc.Config(block_sizes=[rows_block, cols], num_warps=8, split_reductions=[split])
            )
    for config in configs:
        add_row(
            rows,
            {"case": "colsum", "config": repr(config)},
            lambda c=config: _measure(
                "colsum", column_sum, (x,), c, lambda: x.float().sum(0), x.numel() * 2 + 1024 * 4
            ),
            (name, COLUMNS, ""),
        )


def _decode(rows: list[dict[str, Any]], name: str) -> None:
    from examples.matmul import matmul

    b = torch.randn(4096, 14336, device="cuda", dtype=torch.bfloat16) / 64
    for m in DECODE_M:
        a = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
        bm = max(16, min(128, 1 << (m - 1).bit_length()))
        configs: list[tc.Config | None] = [None]
        for bn, bk in ((64, 128), (128, 64)):
            for split in (1, 2, 4, 8, 16):
                configs.append(
                    tc.Config(
                        block_sizes=[bm, bn, bk],
                        num_warps=4,
                        num_stages=4,
                        split_reductions=[split],
                    )
                )
        nbytes = (a.numel() + b.numel() + m * 14336) * 2
        case, flops = f"decode M={m}", 2 * m * 4096 * 14336
        for config in configs:
            add_row(
                rows,
                {"case": case, "config": repr(config)},
                partial(
                    _measure, case, matmul, (a, b), config, partial(torch.mm, a, b), nbytes, flops
                ),
                (name, COLUMNS, ""),
            )


def _rms_long(rows: list[dict[str, Any]], name: str) -> None:
    from examples.rms_norm import EPS, rms_norm_fwd

    x = torch.randn(8, 1 << 20, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1 << 20, device="cuda", dtype=torch.bfloat16)

    def reference() -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)

    configs: list[tc.Config | None] = [None]
    for rows_block, chunk in ((1, 4096), (2, 4096), (1, 8192)):
        for split in (1, 16, 32, 64, 128):
            configs.append(
                tc.Config(
                    block_sizes=[rows_block],
                    reduction_loops=[chunk],
                    num_warps=8,
                    split_reductions=[split],
                )
            )
    for config in configs:
        add_row(
            rows,
            {"case": "rms_long", "config": repr(config)},
            lambda c=config: _measure(
                "rms_long", rms_norm_fwd, (x, w, EPS), c, reference, x.numel() * 4 + w.numel() * 2
            ),
            (name, COLUMNS, ""),
        )


CASES = {"colsum": _colsum, "decode": _decode, "rms_long": _rms_long}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--name", default="split_reductions", help="results file name")
    ns = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for case in ns.cases:
        CASES[case](rows, ns.name)
    write_results(ns.name, rows, COLUMNS, "split_reductions: default and fixed configs")


if __name__ == "__main__":
    main()

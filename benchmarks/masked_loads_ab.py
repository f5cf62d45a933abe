"""Loads masked by the ``where`` that keeps them (``ir/masked_loads.py``), on and off in one
process each (``python -m benchmarks.masked_loads_ab [--off] --name N``; writes ``N.{md,json}``
to $OUT or benchmarks/results/). Needs a CUDA GPU.

``--off`` replaces the IR pass by the identity before anything is traced, so the same contenders
compile as they did before it. Contenders: the masked mean pool (its default and two tilings),
the clipped lazy Adam's norm pass, and a pointwise ``where(on[:, None], x + 1, 0)`` over
16384x4096 bf16 with a third of the rows on; each timed as CUDA-graph replays (``graph_ms``).
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import graph_ms, write_results
from benchmarks.default_change import case_calls
from benchmarks.gen_kernels import HELDOUT

COLUMNS = ["variant", "kernel", "config", "graph_ms"]
CASE_CONFIGS = {
    "length_masked_mean_pool": [
        "default",
        "default.replace(block_sizes=[2, 128, 32])",
        "default.replace(block_sizes=[16, 32, 16])",
    ],
    "clipped_lazy_adam": ["default"],
}


@tc.kernel(static_shapes=True)
def touched_rows(x: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """Rows where ``on`` is set, plus one; zeros elsewhere."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = torch.where((on[tm] != 0)[:, None], x[tm, tn] + 1.0, 0.0)
    return out


def _rows(variant: str, label: str, kernel: Any, args: tuple[Any, ...], exprs: list[str]) -> list:
    bound = kernel.bind(args)
    default = bound.config_spec.default()
    rows = []
    for expr in exprs:
        config = eval(expr, {"tc": tc, "default": default})  # noqa: S307 - our own table
        program = bound.compile_config(config)
        call = functools.partial(bound.run, program, *args)
        call()
        rows.append({"variant": variant, "kernel": label, "config": repr(program.config),
                     "graph_ms": graph_ms(call)})  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--off", action="store_true", help="without the masked-loads pass")
    parser.add_argument("--name", default="masked_loads_ab")
    ns = parser.parse_args(argv)
    if ns.off:
        import tilecraft.frontend.trace as trace

        trace.mask_loads_by_where = lambda loop: loop
    variant = "unmasked" if ns.off else "masked"
    rows = []
    for name, exprs in CASE_CONFIGS.items():
        case = HELDOUT[name]
        inputs = case.make_inputs(case.gpu_shapes[0], "cuda", 0)
        kernel, args = case_calls(case, case.gpu_shapes[0], "cuda", inputs)[0]
        rows += _rows(variant, name, kernel, args, exprs)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    on = (torch.rand(16384, device="cuda", generator=g) < 0.33).to(torch.int8)
    rows += _rows(variant, "touched_rows 16384x4096", touched_rows, (x, on), ["default"])
    write_results(ns.name, rows, COLUMNS)


if __name__ == "__main__":
    main()

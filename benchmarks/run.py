"""The kernel-suite benchmark: tilecraft vs eager PyTorch vs torch.compile, in one run.

``python -m benchmarks.run [--kernels rms_norm softmax ...] [--quick] [--effort quick|full]
[--shape M,K,N ...]``

For every example module and benchmark shape: check tilecraft's outputs against the module's
reference, then time (``do_bench`` medians, random inputs) tilecraft with its discovered default
config, tilecraft tuned (``--effort``), the eager reference and ``torch.compile`` of it. Reports
achieved GB/s (the bytes of inputs + outputs, the minimum any implementation moves) as a share of
the measured copy bandwidth, or TFLOP/s for modules that define ``flops(shape)``, and the speedups.
Writes ``benchmarks/results/suite.{md,json}`` (or under ``$OUT``).
"""

from __future__ import annotations

import argparse
import time
from functools import partial
from typing import Any

import torch

from benchmarks.common import add_row, bench_ms, copy_bandwidth_gbs, write_results
from examples import EXAMPLES


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def min_bytes(inputs: tuple[Any, ...], outputs: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(inputs) + _tensors(outputs))


class TunedCall:
    """A ``call`` hook that runs each kernel with its tuned config (tuning once per
    specialization); records the seconds spent tuning and the winning configs."""

    def __init__(self, effort: str):
        self.effort = effort
        self.programs: dict[Any, Any] = {}
        self.tune_s = 0.0
        self.configs: dict[str, str] = {}

    def __call__(self, kernel: Any, *args: Any) -> Any:
        from tilecraft.autotune.search import tune

        bound = kernel.bind(args)
        program = self.programs.get(id(bound))
        if program is None:
            start = time.perf_counter()
            config = tune(bound, args, effort=self.effort)
            self.tune_s += time.perf_counter() - start
            self.configs[kernel.__name__] = repr(config)
            program = self.programs[id(bound)] = bound.compile_config(config)
        return bound.run(program, *args)


def max_error(got: Any, want: Any) -> float:
    """The largest absolute difference over every tensor pair; equal values (an infinity on
    both sides, a masked-out -inf) and NaN on both sides differ by 0."""
    pairs = zip(_tensors(got), _tensors(want), strict=True)
    return max((_difference(g.float().cpu(), w.float().cpu()) for g, w in pairs), default=0.0)


def _difference(g: torch.Tensor, w: torch.Tensor) -> float:
    same = (g == w) | (g.isnan() & w.isnan())
    return float(torch.where(same, 0.0, (g - w).abs()).max().item()) if g.numel() else 0.0


def bench_one(
    name: str,
    module: Any,
    shape: tuple[int, ...],
    effort: str,
    copy_gbs: float,
    device: str = "cuda",
) -> dict[str, Any]:
    """One kernel module at one shape: correctness first, then the four timings and ratios."""
    dtype = torch.bfloat16 if torch.bfloat16 in module.DTYPES else module.DTYPES[0]
    inputs = module.make_inputs(shape, dtype, device, 0)
    want = module.reference(*inputs)
    tuned = TunedCall(effort)
    row: dict[str, Any] = {
        "kernel": name,
        "shape": "x".join(map(str, shape)),
        "max_err_default": max_error(module.run(inputs), want),
        "max_err_tuned": max_error(module.run(inputs, call=tuned), want),
        "tune_s": round(tuned.tune_s, 1),
    }
    peer = getattr(module, "peer", module.reference)
    compiled = torch.compile(peer)
    times = {
        "tilecraft_default": bench_ms(lambda: module.run(inputs)),
        "tilecraft_tuned": bench_ms(lambda: module.run(inputs, call=tuned)),
        "eager": bench_ms(lambda: peer(*inputs)),
        "torch_compile": bench_ms(lambda: compiled(*inputs)),
    }
    row.update({f"{k}_ms": v for k, v in times.items()})
    best = min(times["tilecraft_default"], times["tilecraft_tuned"])
    if hasattr(module, "flops"):
        row["tflops"] = module.flops(shape) / best / 1e9
    else:
        gbs = min_bytes(inputs, want) / best / 1e6
        row["gb_s"] = gbs
        row["pct_copy"] = f"{gbs / copy_gbs:.1%}"
    row["vs_compile"] = times["torch_compile"] / best
    row["vs_eager"] = times["eager"] / best
    row["default_vs_tuned"] = times["tilecraft_tuned"] / times["tilecraft_default"]
    row["configs"] = "; ".join(f"{k}: {v}" for k, v in tuned.configs.items())
    return row


COLUMNS = [
    "kernel",
    "shape",
    "max_err_default",
    "max_err_tuned",
    "tune_s",
    "tilecraft_default_ms",
    "tilecraft_tuned_ms",
    "eager_ms",
    "torch_compile_ms",
    "gb_s",
    "pct_copy",
    "tflops",
    "vs_compile",
    "vs_eager",
    "default_vs_tuned",
    "error",
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", nargs="*", default=list(EXAMPLES), choices=list(EXAMPLES))
    parser.add_argument("--quick", action="store_true", help="first two shapes of each kernel only")
    parser.add_argument(
        "--shapes", nargs="*", type=int, help="indices into each module's BENCH_SHAPES"
    )
    parser.add_argument(
        "--shape",
        action="append",
        type=lambda text: tuple(int(v) for v in text.split(",")),
        help="an explicit shape, e.g. --shape 16,4096,14336 for a decode matmul (repeatable; "
        "replaces BENCH_SHAPES)",
    )
    parser.add_argument("--effort", default="quick", choices=["none", "quick", "full"])
    parser.add_argument("--name", default="suite", help="results file name (without suffix)")
    ns = parser.parse_args(argv)
    copy_gbs = copy_bandwidth_gbs()
    notes = f"copy bandwidth measured: {copy_gbs:.0f} GB/s; dtype bf16 where supported"
    rows = []
    for name in ns.kernels:
        module = EXAMPLES[name]
        picks = ns.shapes if ns.shapes is not None else ([0, 1] if ns.quick else None)
        shapes = module.BENCH_SHAPES if picks is None else [module.BENCH_SHAPES[i] for i in picks]
        shapes = ns.shape or shapes
        for shape in shapes:
            ident = {"kernel": name, "shape": "x".join(map(str, shape))}
            add_row(
                rows,
                ident,
                partial(bench_one, name, module, tuple(shape), ns.effort, copy_gbs),
                (ns.name, COLUMNS, notes),
            )
    write_results(ns.name, rows, COLUMNS, notes)


if __name__ == "__main__":
    main()

"""Kernel time apart from the host's (``python -m benchmarks.graph_replay CASE [CONFIG ...]
--name N``; writes ``N.{md,json}`` to $OUT or benchmarks/results/). Needs a CUDA GPU.

A generalization case (``benchmarks.gen_kernels``: CASES or HELDOUT) at its first GPU shape:
the discovered default, each CONFIG (``default.replace(...)`` or ``tc.Config(...)``), the eager
reference and torch.compile, each timed two ways in one process. ``do_bench``: the least of
``--rounds`` do_bench medians, the contenders in interleaved rounds (each round in the reverse
order of the one before), as ``benchmarks.generalize`` and the autotuner time them; on a short
kernel it carries the host's per-call CPU time whenever the host falls behind the GPU.
``graph``: ``triton.testing.do_bench_cudagraph``'s median (launches replayed from a CUDA graph:
no host cost), i.e. what the kernels themselves take.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import bench_ms, graph_ms, write_results
from benchmarks.default_change import case_calls
from benchmarks.gen_kernels import ALL_CASES

COLUMNS = ["case", "variant", "config", "do_bench_ms", "graph_ms"]


def contenders(case_name: str, configs: list[str]) -> dict[str, tuple[str, Callable[[], Any]]]:
    """label -> (config, call) for the default, each config, eager and torch.compile."""
    case = ALL_CASES[case_name]
    inputs = tuple(case.make_inputs(case.gpu_shapes[0], "cuda", 0))
    # the case's first kernel call as its run makes it (scalars such as a smoothing included)
    kernel, args = case_calls(case, case.gpu_shapes[0], "cuda", inputs)[0]
    bound = kernel.bind(args)
    names = {"tc": tc, "default": bound.config_spec.default()}
    out: dict[str, tuple[str, Callable[[], Any]]] = {}
    for expr in ["default", *configs]:
        program = bound.compile_config(eval(expr, names))  # noqa: S307 - the user's command line
        out[expr] = (repr(program.config), functools.partial(bound.run, program, *args))
    compiled = torch.compile(case.reference)
    out["eager"] = ("", lambda: case.reference(*inputs))
    out["torch.compile"] = ("", lambda: compiled(*inputs))
    for _, call in out.values():
        call()  # compile and warm up before any timing
    return out


def measure(case_name: str, configs: list[str], rounds: int) -> list[dict[str, Any]]:
    calls = contenders(case_name, configs)
    least = {label: float("inf") for label in calls}
    for r in range(rounds):
        for label in list(calls) if r % 2 == 0 else list(calls)[::-1]:
            least[label] = min(least[label], bench_ms(calls[label][1]))
    rows = []
    for label, (config, call) in calls.items():
        graph = graph_ms(call)
        rows.append({"case": case_name, "variant": label, "config": config,
                     "do_bench_ms": round(least[label], 4),
                     "graph_ms": None if graph is None else round(graph, 4)})  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=sorted(ALL_CASES))
    parser.add_argument("configs", nargs="*", help="default.replace(...) or tc.Config(...)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--name", default="graph_replay")
    args = parser.parse_args(argv)
    write_results(args.name, measure(args.case, args.configs, args.rounds), COLUMNS)


if __name__ == "__main__":
    main()

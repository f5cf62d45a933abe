"""Example rows whose discovered default a heuristic change moved, before and after, side by side
in one run on one GPU (the rule: no example row may get more than 3% slower).

``python -m benchmarks.default_change TABLE.json [--examples NAME ...]``

TABLE is a list of ``{"example", "shape", "call", "before"}``: an example module (``examples/``),
one of its shapes, which of the kernel calls its ``run`` makes (0: the first) and the config the
old heuristic chose there (``tc.Config(...)``); or of ``{"case", "shape", "call", "before"}``:
a generalization case (``benchmarks.gen_kernels``) instead of an example. Each row times the old config and today's default
on the same inputs, alternating twice (the faster of each kept), and checks that their outputs
agree. Writes ``default_change.{md,json}`` (to $OUT or benchmarks/results/).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import bench_ms, write_results
from benchmarks.gen_kernels import ALL_CASES, Case
from benchmarks.run import max_error
from examples import EXAMPLES
from tilecraft.language import ref_sample

COLUMNS = ["example", "kernel", "shape", "before", "after", "before_ms", "after_ms", "ratio",
           "max_err"]  # fmt: skip


def example_calls(
    module: Any, shape: tuple[int, ...], device: str
) -> list[tuple[Any, tuple[Any, ...]]]:
    """The kernel calls ``module.run`` makes on its inputs for ``shape`` (kernel, arguments).
    On ``meta`` tensors ref mode may stop early: the calls made until then are returned."""
    dtype = torch.bfloat16 if torch.bfloat16 in module.DTYPES else module.DTYPES[0]
    calls: list[tuple[Any, tuple[Any, ...]]] = []

    def record(kernel: Any, *args: Any) -> Any:
        calls.append((kernel, args))
        with _shapes_only(device):  # eager: no discovery or tuning of calls not measured
            return kernel.run_ref(*args)

    try:
        module.run(module.make_inputs(shape, dtype, device, 0), record)
    except Exception:
        if device != "meta":
            raise
    return calls


def _shapes_only(device: str) -> Any:
    """On ``meta`` tensors only the outputs' shapes matter: ref mode runs one program of each
    grid (a 4096-step recurrence's every program took minutes of a default dump)."""
    return ref_sample.sampling(1, 1.0) if device == "meta" else contextlib.nullcontext()


def example_call(
    module: Any, shape: tuple[int, ...], index: int, device: str
) -> tuple[Any, tuple[Any, ...]]:
    """The ``index``-th kernel call that ``module.run`` makes on its inputs for ``shape``."""
    return example_calls(module, shape, device)[index]


def case_calls(
    case: Case, shape: tuple[int, ...], device: str = "meta", inputs: Any = None
) -> list[tuple[Any, tuple[Any, ...]]]:
    """The kernel calls a generalization case's ``run`` makes on its inputs for ``shape`` (or on
    ``inputs``, made for it already), each replayed in ref mode as :func:`example_calls` does
    (on ``meta`` tensors ref mode may stop early: the calls made until then are returned)."""
    calls: list[tuple[Any, tuple[Any, ...]]] = []

    def recorder(kernel: Any) -> Callable[..., Any]:
        def record(*args: Any) -> Any:
            calls.append((kernel, args))
            with _shapes_only(device):
                return kernel.run_ref(*args)

        return record

    try:
        if inputs is None:
            inputs = case.make_inputs(shape, device, 0)
        case.run({k.__name__: recorder(k) for k in case.kernels}, inputs)
    except Exception:
        if device != "meta":
            raise
    return calls


def _entry_call(entry: dict[str, Any], device: str) -> tuple[str, Any, tuple[Any, ...]]:
    """(the entry's name, the kernel it measures, that call's arguments)."""
    shape, index = tuple(entry["shape"]), int(entry.get("call", 0))
    if "case" in entry:
        kernel, args = case_calls(ALL_CASES[entry["case"]], shape, device)[index]
        return entry["case"], kernel, args
    kernel, args = example_call(EXAMPLES[entry["example"]], shape, index, device)
    return entry["example"], kernel, args


def measure(entry: dict[str, Any], device: str = "cuda") -> dict[str, Any]:
    name, kernel, args = _entry_call(entry, device)
    shape = tuple(entry["shape"])
    bound = kernel.bind(args)
    before = eval(entry["before"], {"tc": tc})  # noqa: S307 - the repository's own table
    programs = [bound.compile_config(c) for c in (before, bound.config_spec.default())]
    outputs = [bound.run(p, *args) for p in programs]
    times = [float("inf"), float("inf")]
    for _ in range(2):  # alternate, so that clocks and caches treat both alike
        for i, program in enumerate(programs):
            times[i] = min(times[i], bench_ms(lambda p=program: bound.run(p, *args)))
    return {
        "example": name,
        "kernel": kernel.__name__,
        "shape": "x".join(map(str, shape)),
        "before": repr(programs[0].config),
        "after": repr(programs[1].config),
        "before_ms": round(times[0], 4),
        "after_ms": round(times[1], 4),
        "ratio": round(times[1] / times[0], 3),
        "max_err": max_error(outputs[1], outputs[0]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", type=Path)
    parser.add_argument("--examples", nargs="*", help="only these example modules or cases")
    parser.add_argument("--name", default="default_change")
    parser.add_argument("--device", default="cuda", help="cpu: plumbing check (interpreter)")
    ns = parser.parse_args(argv)
    entries = json.loads(ns.table.read_text())
    rows = []
    for entry in entries:
        name = entry.get("example", entry.get("case"))
        if ns.examples and name not in ns.examples:
            continue
        try:
            rows.append(measure(entry, ns.device))
            print(rows[-1], flush=True)  # a row survives a time limit that cuts the run
        except Exception as exc:  # a failing row is reported, the others still run
            rows.append({"example": name, "shape": str(entry["shape"]),
                         "before": entry["before"], "max_err": f"{type(exc).__name__}: {exc}"})  # fmt: skip
        if ns.device == "cuda":
            torch.cuda.empty_cache()
    write_results(ns.name, rows, COLUMNS, notes=f"table: {ns.table}")


if __name__ == "__main__":
    main()

"""Time generated kernels with their Triton source edited: what a codegen change would buy,
measured before it is built (``python -m benchmarks.source_variants EXPERIMENTS.py --name N``).

``EXPERIMENTS.py`` defines ``EXPERIMENTS``, a list of dicts: ``name``, ``kernel``
(``module:function``), ``shape``, ``inputs`` (as ``benchmarks.compare_configs`` takes them),
optionally ``reference`` (``module:function`` or a callable: timed eager and under
torch.compile) and ``variants``: ``(label, config expression, edits)`` where each edit is a
``(regex, replacement)`` applied to the generated module's source before it is loaded (an edit
that matches nothing is an error row, never a silent no-op). Rows: label, config, median ms,
max error against the reference (or the first variant). Writes ``$OUT/N.{md,json}``.
"""

from __future__ import annotations

import argparse
import re
import runpy
from collections.abc import Callable
from typing import Any

import torch

import tilecraft as tc
import tilecraft.runtime.bound as runtime_kernel
from benchmarks.common import bench_ms, write_results
from benchmarks.compare_configs import _inputs, _load
from benchmarks.run import max_error

Edit = tuple[str, str]
COLUMNS = ["experiment", "variant", "config", "ms", "max_err", "error"]


class EditedSources:
    """Installed as the runtime's source loader: applies the current edits first."""

    def __init__(self, load: Callable[[str], Any]) -> None:
        self.load = load
        self.edits: list[Edit] = []

    def __call__(self, source: str) -> Any:
        for pattern, replacement in self.edits:
            edited = re.sub(pattern, replacement, source, flags=re.M)
            if edited == source:
                raise ValueError(f"the edit {pattern!r} matches nothing in the generated source")
            source = edited
        return self.load(source)


def run_experiment(exp: dict[str, Any], loader: EditedSources, device: str) -> list[dict[str, Any]]:
    kernel = _load(exp["kernel"])
    inputs = _inputs(kernel, tuple(exp["shape"]), device, exp.get("inputs"))
    bound = kernel.bind(inputs)
    names = {"tc": tc, "default": bound.config_spec.default()}
    rows: list[dict[str, Any]] = []
    want = None
    if exp.get("reference"):
        ref = exp["reference"]
        fn = ref if callable(ref) else _load(ref)
        want = fn(*inputs)
        for label, f in (("eager", fn), ("torch.compile", torch.compile(fn))):
            f(*inputs)
            rows.append({"variant": label, "ms": round(bench_ms(lambda f=f: f(*inputs)), 4)})
    for label, expr, edits in exp["variants"]:
        row: dict[str, Any] = {"variant": label}
        loader.edits = list(edits)
        bound._programs.clear()  # each variant compiles its own (edited) source
        try:
            program = bound.compile_config(eval(expr, names))  # noqa: S307 - the user's file
            out = bound.run(program, *inputs)
            want = out if want is None else want
            ms = bench_ms(lambda p=program: bound.run(p, *inputs))
            row.update(config=repr(program.config), ms=round(ms, 4), max_err=max_error(out, want))
        except Exception as err:  # noqa: BLE001 - one bad variant is a row, not the end
            row["error"] = f"{type(err).__name__}: {str(err)[:200]}"
        rows.append(row)
        print(row, flush=True)
    loader.edits = []
    return [{"experiment": exp["name"], **r} for r in rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiments", help="a Python file defining EXPERIMENTS")
    parser.add_argument("--name", default="source_variants")
    parser.add_argument("--device", default="cuda", help="cpu: plumbing check (interpreter)")
    args = parser.parse_args(argv)
    loader = EditedSources(runtime_kernel.load_source)
    runtime_kernel.load_source = loader  # type: ignore[assignment]
    try:
        rows = [
            row
            for exp in runpy.run_path(args.experiments)["EXPERIMENTS"]
            for row in run_experiment(exp, loader, args.device)
        ]
    finally:
        runtime_kernel.load_source = loader.load  # type: ignore[assignment]
    write_results(args.name, rows, COLUMNS)


if __name__ == "__main__":
    main()

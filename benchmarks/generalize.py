"""The generalization benchmark: tilecraft on kernels written the way users write them.

``python -m benchmarks.generalize [--set suite|heldout|all] [--kernels NAME ...]
[--quick-budget S] [--skip-quick] [--all-shapes] [--name generalization]``

For every case of :mod:`benchmarks.gen_kernels` (first GPU shape only unless ``--all-shapes``), in
one process: the discovered default config (on a fresh, empty tilecraft and Triton cache), then
``autotune_effort="quick"`` on another fresh cache (``quick_wall_s`` is its first call's wall time,
discovery and tuning included), eager PyTorch and ``torch.compile`` of the case's reference (with
``compile_ms``, its first call), each timed as the least of ``--repeats`` ``do_bench`` medians
(3: a single median can carry the host's noise, see ``benchmarks.common.bench_best_ms``), the
host's load average when the row ended (``cpu_load``), and the max absolute error of
tilecraft's outputs against the reference. ``*_graph_ms``: the same calls replayed from a CUDA
graph (``benchmarks.common.graph_ms``), the kernels' time without the host's per-call cost. A
failing case becomes an error row. Writes
``generalization.{md,json}`` under ``$OUT`` or ``benchmarks/results/``. ``--isolate S`` measures
each kernel in its own process stopped after S seconds (an error row), so that one hung compile
or untimeable reference does not cost the other rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import add_row, bench_best_ms, graph_ms, write_results
from benchmarks.gen_kernels import ALL_CASES, CASES, HELDOUT, REWRITTEN, Case
from benchmarks.run import max_error

NAME = "generalization"
SETS: dict[str, dict[str, Case]] = {
    "suite": CASES,
    "heldout": HELDOUT,
    "rewritten": REWRITTEN,
    "all": ALL_CASES,
}
COLUMNS = [
    "kernel",
    "shape",
    "default_ms",
    "quick_ms",
    "eager_ms",
    "torch_compile_ms",
    "default_vs_compile",
    "quick_vs_compile",
    "default_graph_ms",
    "quick_graph_ms",
    "compile_graph_ms",
    "quick_vs_compile_graph",
    "quick_wall_s",
    "default_first_s",
    "compile_ms",
    "max_err",
    "default_config",
    "quick_config",
    "cpu_load",
    "error",
]
REPEATS = 3


@contextlib.contextmanager
def fresh_caches() -> Iterator[None]:
    """Empty tilecraft and Triton caches for the block, as on a user's first run."""
    names = ("TILECRAFT_CACHE_DIR", "TRITON_CACHE_DIR")
    saved = {n: os.environ.get(n) for n in names}
    with tempfile.TemporaryDirectory(prefix="tc-generalize-") as root:
        for n in names:
            os.environ[n] = os.path.join(root, n.lower())
        try:
            yield
        finally:
            for n, value in saved.items():
                if value is None:
                    os.environ.pop(n, None)
                else:
                    os.environ[n] = value


class Recorder:
    """Launches a kernel and remembers the arguments of its last call, so that the config its
    plain call settled on can be read back through the public API afterwards."""

    def __init__(self, kernel: Any):
        self.kernel = kernel
        self.args: tuple[Any, ...] | None = None

    def __call__(self, *args: Any) -> Any:
        self.args = args
        return self.kernel(*args)

    def config(self) -> str:
        if self.args is None:
            return "not called"
        return repr(self.kernel.bind(self.args).default_program().config)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _first_call(fn: Callable[[], Any], device: str) -> tuple[Any, float]:
    """``fn()``'s result and the seconds its (first) call took."""
    start = time.perf_counter()
    result = fn()
    _sync(device)
    return result, time.perf_counter() - start


def _tilecraft(
    case: Case,
    inputs: tuple[torch.Tensor, ...],
    timed_inputs: tuple[torch.Tensor, ...],
    want: Any,
    device: str,
    repeats: int = REPEATS,
    **options: Any,
) -> dict[str, Any]:
    """First-call seconds, median ms, max error and configs of the case's kernels with
    ``options``, compiled on fresh caches (the first call on ``inputs``, the timed ones on
    ``timed_inputs``: :func:`_timed_inputs`)."""
    timed = case.timed_run or case.run
    with fresh_caches():
        kernels = {name: Recorder(k) for name, k in case.variants(**options).items()}
        got, first_s = _first_call(lambda: case.run(kernels, inputs), device)
        ms = bench_best_ms(lambda: timed(kernels, timed_inputs), repeats)
        graph = graph_ms(lambda: timed(kernels, timed_inputs))
        configs = "; ".join(f"{name}: {r.config()}" for name, r in kernels.items())
    err = max_error(got, want)
    return {"first_s": first_s, "ms": ms, "graph_ms": graph, "err": err, "configs": configs}


def _timed_inputs(case: Case, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """What the timed calls run on: for an in-place case (``Case.timed_run``) a copy of the
    inputs, which those calls update again and again; otherwise the inputs themselves."""
    return tuple(t.clone() for t in inputs) if case.timed_run is not None else inputs


def _compiled_times(case: Case, inputs: Any, device: str, repeats: int) -> dict[str, Any]:
    compiled = torch.compile(case.timed_reference or case.reference)
    _, compile_s = _first_call(lambda: compiled(*inputs), device)
    return {
        "compile_ms": compile_s * 1e3,
        "torch_compile_ms": bench_best_ms(lambda: compiled(*inputs), repeats),
        "compile_graph_ms": graph_ms(lambda: compiled(*inputs)),
    }


def measure(
    case: Case,
    shape: tuple[int, ...],
    skip_quick: bool = False,
    quick_budget: float | None = None,
    device: str = "cuda",
    repeats: int = REPEATS,
) -> dict[str, Any]:
    """One row: the case at ``shape`` through tilecraft (default, then quick), eager and
    ``torch.compile``; times in ms except the first-call walls (s)."""
    inputs = case.make_inputs(shape, device, 0)
    want = case.reference(*inputs)
    timed = _timed_inputs(case, inputs)  # every timed call's inputs, one copy for in-place cases
    row: dict[str, Any] = {"kernel": case.name, "shape": "x".join(map(str, shape))}
    _reached(row, "tilecraft's default")
    default = _tilecraft(case, inputs, timed, want, device, repeats)
    row.update(default_ms=default["ms"], default_first_s=default["first_s"])
    row["default_graph_ms"] = default["graph_ms"]
    row.update(default_config=default["configs"], max_err=default["err"])
    if not skip_quick:
        _reached(row, "quick tuning")
        budget = {} if quick_budget is None else {"autotune_budget_s": quick_budget}
        quick = _tilecraft(
            case, inputs, timed, want, device, repeats, autotune_effort="quick", **budget
        )
        row.update(quick_ms=quick["ms"], quick_wall_s=quick["first_s"])
        row["quick_graph_ms"] = quick["graph_ms"]
        row.update(quick_config=quick["configs"], max_err=max(default["err"], quick["err"]))
    eager = case.timed_reference or case.reference
    _reached(row, "eager timing")
    row["eager_ms"] = bench_best_ms(lambda: eager(*timed), repeats)
    row["cpu_load"] = round(os.getloadavg()[0], 2)
    _reached(row, "torch.compile of the reference")
    try:
        row.update(_compiled_times(case, timed, device, repeats))
    except Exception as exc:  # torch.compile's own failure: our columns stand, its are empty
        row["error"] = f"torch.compile of the reference: {type(exc).__name__}: {exc}"[:300]
        return row
    row["default_vs_compile"] = row["torch_compile_ms"] / row["default_ms"]
    if not skip_quick:
        row["quick_vs_compile"] = row["torch_compile_ms"] / row["quick_ms"]
        if row["compile_graph_ms"] and row["quick_graph_ms"]:
            row["quick_vs_compile_graph"] = row["compile_graph_ms"] / row["quick_graph_ms"]
    return row


PARTIAL_ROW = "partial_row.json"


def _reached(row: dict[str, Any], stage: str) -> None:
    """In an isolated child (``--isolate``), the row so far and the stage it enters, under
    ``$OUT``: a child stopped at its limit keeps the columns it measured."""
    out = os.environ.get("TC_GENERALIZE_CHILD_OUT")
    if out:
        (Path(out) / PARTIAL_ROW).write_text(json.dumps({**row, "stage": stage}, default=str))


def _child_argv(argv: list[str] | None) -> list[str]:
    """The parent's options for one kernel's process: no ``--kernels``, ``--name``, ``--isolate``
    (the child gets its own)."""
    args = list(sys.argv[1:] if argv is None else argv)
    kept: list[str] = []
    skipping = False
    for arg in args:
        if arg.startswith("--"):
            skipping = arg.split("=")[0] in ("--kernels", "--name", "--isolate")
            if not skipping:
                kept.append(arg)
        elif not skipping:
            kept.append(arg)
    return kept


def _isolated_rows(name: str, options: list[str], limit_s: float) -> list[dict[str, Any]]:
    """The rows of kernel ``name`` measured by a child process, plus an error row if it failed or
    ran past ``limit_s`` (a hung compile or a reference that cannot be timed stops only itself;
    the rows it finished before stand)."""
    with tempfile.TemporaryDirectory(prefix="tc-generalize-row-") as out:
        cmd = [sys.executable, "-X", "faulthandler", "-m", "benchmarks.generalize"]
        cmd += [*options, "--kernels", name, "--name", "row"]
        error = None
        try:
            env = {**os.environ, "OUT": out, "TC_GENERALIZE_CHILD_OUT": out}
            done = subprocess.run(cmd, env=env, timeout=limit_s, capture_output=True, text=True)
            if done.returncode != 0:
                error = f"exit status {done.returncode}: {done.stderr[-300:]}"
        except subprocess.TimeoutExpired:
            error = f"stopped after {limit_s:g} s"
        path = Path(out) / "row.json"
        rows: list[dict[str, Any]] = json.loads(path.read_text())["rows"] if path.exists() else []
        partial_path = Path(out) / PARTIAL_ROW
        if error is not None and partial_path.exists() and not rows:
            row = json.loads(partial_path.read_text())
            stage = row.pop("stage")
            rows.append({**row, "error": f"{error} in {stage}"})
        elif error is not None:
            rows.append({"kernel": name, "error": error})
    for row in rows:
        print(row, flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--set",
        default="suite",
        choices=list(SETS),
        help="suite: issue 11's eight kernels; heldout: the ones written after the heuristic froze; "
        "rewritten: held-out kernels rewritten with a later feature",
    )
    parser.add_argument("--kernels", nargs="*", default=None, choices=list(SETS["all"]))
    parser.add_argument(
        "--quick-budget", type=float, default=None, help="autotune_budget_s for quick (seconds)"
    )
    parser.add_argument(
        "--repeats", type=int, default=REPEATS, help="do_bench medians per timing (least kept)"
    )
    parser.add_argument("--skip-quick", action="store_true", help="the default config only")
    parser.add_argument("--all-shapes", action="store_true", help="every GPU shape of each case")
    parser.add_argument("--device", default="cuda", help="cpu: plumbing check (interpreter)")
    parser.add_argument("--name", default=NAME, help="results file name (without suffix)")
    parser.add_argument(
        "--isolate",
        type=float,
        default=None,
        metavar="S",
        help="run each kernel in its own process, stopped (an error row) after S seconds",
    )
    ns = parser.parse_args(argv)
    notes = (
        "bf16 inputs; times are do_bench medians in ms; *_vs_compile = torch.compile time / "
        "tilecraft time (> 1: tilecraft ahead); quick_wall_s / default_first_s: first call on "
        "empty caches; compile_ms: torch.compile's first call; *_graph_ms: CUDA-graph replays "
        "(kernel time without the host's per-call cost)"
    )
    cases = SETS[ns.set]
    rows: list[dict[str, Any]] = []
    for name in cases if ns.kernels is None else ns.kernels:
        if ns.isolate is not None:
            rows.extend(_isolated_rows(name, _child_argv(argv), ns.isolate))
            write_results(ns.name, rows, COLUMNS, notes, echo=False)
            continue
        case = SETS["all"][name]
        shapes = case.gpu_shapes if ns.all_shapes else case.gpu_shapes[:1]
        if ns.device == "cpu":
            shapes = case.cpu_shapes
        for shape in shapes:
            ident = {"kernel": name, "shape": "x".join(map(str, shape))}
            add_row(
                rows,
                ident,
                partial(
                    measure, case, shape, ns.skip_quick, ns.quick_budget, ns.device, ns.repeats
                ),
                (ns.name, COLUMNS, notes),
            )
    write_results(ns.name, rows, COLUMNS, notes)
    return rows


if __name__ == "__main__":
    main()

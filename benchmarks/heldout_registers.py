"""The resource model against ptxas on the held-out kernels: each case's launches at its first GPU
shape (recorded through ref mode on meta tensors), each launch's heuristic default cross-compiled
for sm_90 (no GPU needed), the model's registers per thread for each generated kernel's own loop
beside what ptxas allocated and spilled.

``python -m benchmarks.heldout_registers [--cases NAME ...] [--name NAME]`` writes
``NAME.{md,json}`` (default ``heldout_registers``) to $OUT or ``benchmarks/results/``: a summary
(median absolute error over kernels that did not spill, and how often the model and ptxas agree
on "spills": predicted above the per-thread limit min(255, 65536 / threads)), then one row per
compiled kernel.

``--repredict FILE`` compiles nothing: it re-predicts the rows of a stored results file (its
configs, at the same launches) with the current model and sets them beside the stored ptxas
counts (the stored prediction kept as ``stored_predicted``), so a model change is checked against
hundreds of compiles in a minute. ``benchmarks/results/ptxas_counts_s46.json`` holds 212 such
compiles of held-out launches, pointwise tiles near the occupancy line among them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import write_results
from benchmarks.default_change import case_calls
from benchmarks.gen_kernels import HELDOUT, Case
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel, predict_kernel

TARGET = Target.parse("cuda:90")


def launches(case: Case) -> list[tuple[Any, tuple[Any, ...]]]:
    """(kernel, arguments) of each distinct launch at the case's first GPU shape, recorded on
    meta tensors (``default_change.case_calls``) and handed over as empty CPU tensors of the
    same strides (binding reads shapes only)."""
    seen: set[Any] = set()
    out = []
    for kernel, args in case_calls(case, case.gpu_shapes[0], "meta"):
        real = tuple(
            torch.empty_strided(a.shape, a.stride(), dtype=a.dtype) if _meta(a) else a for a in args
        )
        key = (kernel.__name__, tuple(tuple(a.shape) if _meta(a) else repr(a) for a in args))
        if key not in seen:
            seen.add(key)
            out.append((kernel, real))
    return out


def _meta(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.is_meta


def case_rows(case: Case) -> list[dict[str, Any]]:
    rows = []
    for kernel, args in launches(case):
        start = time.perf_counter()
        checked = check_kernel(kernel, args, [TARGET], lambda b: [b.config_spec.default()], 240)
        for row in checked:
            r = row.report
            if r is None or not r.ok or r.registers is None:
                continue
            rows.append(
                {
                    "case": case.name,
                    "kernel": row.kernel_name,
                    "predicted": row.predicted_registers,
                    "ptxas": r.registers,
                    "spill_bytes": r.spills or 0,
                    "limit": min(255, 65536 // ((row.config.num_warps or 4) * 32)),
                    "compile_s": round(time.perf_counter() - start, 1),
                    "config": repr(row.config),
                }
            )
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    fitting = [r for r in rows if not r["spill_bytes"]]
    errors = [abs(r["predicted"] - r["ptxas"]) for r in fitting]
    relative = [e / r["ptxas"] for e, r in zip(errors, fitting, strict=True)]
    agree = sum((r["predicted"] > r["limit"]) == bool(r["spill_bytes"]) for r in rows)
    missed = [r["kernel"] for r in rows if r["spill_bytes"] and r["predicted"] <= r["limit"]]
    false = [r["kernel"] for r in rows if not r["spill_bytes"] and r["predicted"] > r["limit"]]
    return {
        "case": "SUMMARY",
        "kernel": f"{len(rows)} kernels, {len(rows) - len(fitting)} spilled",
        "predicted": f"median abs error {statistics.median(errors):.0f} regs "
        f"({statistics.median(relative):.0%}) over the {len(fitting)} that fit"
        if errors
        else "",
        "ptxas": f"spill agreement {agree}/{len(rows)}",
        "spill_bytes": f"missed {missed}, false {false}",
    }


COLUMNS = ["case", "kernel", "predicted", "ptxas", "spill_bytes", "limit", "compile_s", "config"]


def repredicted(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``stored`` rows (not the summary) with ``predicted`` from the current model for the same
    launch, config and generated kernel; rows whose kernel or config no longer generates are
    left out."""
    out = []
    calls: dict[str, list[tuple[Any, tuple[Any, ...]]]] = {}
    for row in stored:
        if row["case"] not in HELDOUT:
            continue
        case_launches = calls.setdefault(row["case"], launches(HELDOUT[row["case"]]))
        config = eval(row["config"], {"tc": tc})  # a repr written by this benchmark
        for kernel, args in case_launches:
            predicted = [
                r.predicted_registers
                for r in predict_kernel(kernel, args, [TARGET], lambda b, c=config: [c])
                if r.kernel_name == row["kernel"]
            ]
            if predicted:
                out.append({**row, "stored_predicted": row["predicted"], "predicted": predicted[0]})
                break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", nargs="*", default=sorted(HELDOUT))
    parser.add_argument("--name", default="heldout_registers")
    parser.add_argument("--repredict", help="a results .json: its rows re-predicted, no compiles")
    ns = parser.parse_args()
    if ns.repredict:
        with open(ns.repredict) as f:
            stored = [r for r in json.load(f)["rows"] if r["case"] != "SUMMARY"]
        rows = repredicted(stored)
        dropped = len(stored) - len(rows)
        notes = (
            f"The rows of {ns.repredict} re-predicted by the current model (no compiles); "
            f"{dropped} of {len(stored)} left out: their case, config or kernel no longer generates."
        )
        write_results(ns.name, [summary(rows), *rows], [*COLUMNS, "stored_predicted"], notes)
        return
    rows: list[dict[str, Any]] = []
    for n, name in enumerate(ns.cases):
        rows += case_rows(HELDOUT[name])
        print(f"{n + 1}/{len(ns.cases)} {name}", flush=True)
    notes = (
        "Heuristic defaults of the held-out kernels at their first GPU shape, cross-compiled for "
        "sm_90: the resource model's registers per thread for each generated kernel's own loop "
        "(config/resources.py) vs ptxas's (cuobjdump REG) and the bytes it spilled (STACK + "
        "LOCAL beyond the frame the PTX declares)."
    )
    write_results(ns.name, [summary(rows), *rows], COLUMNS, notes)


if __name__ == "__main__":
    main()

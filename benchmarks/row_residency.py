"""Why a row loop's warps win or lose: its variants cross-compiled for sm_90 (CPU, no GPU), next
to their measured times (``python -m benchmarks.row_residency EXPERIMENTS.py --times RESULTS.json
--name N``; writes ``N.{md,json}`` to $OUT or benchmarks/results/).

For each variant of a source-variants experiment file (``benchmarks.source_variants``) whose
config is an expression only (no source edits): the registers ptxas allocates, the programs one
SM holds by them (``tools/check``) and by the resource model (``occupancy.resident_programs``),
the warps resident per SM, the bytes each program re-reads (``eviction.reread_bytes``) and the
rows all resident programs re-read at once (SMs x programs per SM x bytes) against the target's
L2, with the variant's time from RESULTS.json (that experiment's GPU run).
"""

from __future__ import annotations

import argparse
import json
import runpy
from pathlib import Path
from typing import Any

import tilecraft as tc
from benchmarks.common import write_results
from benchmarks.compare_configs import _inputs, _load
from tilecraft.config import eviction, occupancy
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

COLUMNS = ["experiment", "variant", "warps", "ms", "registers", "predicted", "programs_per_sm",
           "model_programs_per_sm", "resident_warps", "reread_kb", "resident_reread_mib"]  # fmt: skip
TARGET = "cuda:90"


def rows_for(exp: dict[str, Any], times: dict[tuple[str, str], float]) -> list[dict[str, Any]]:
    target = Target.parse(TARGET)
    kernel = _load(exp["kernel"])
    args = _inputs(kernel, tuple(exp["shape"]), "meta", exp.get("inputs"))
    variants = [(label, expr) for label, expr, edits in exp["variants"] if not edits]
    spec = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target).config_spec
    names = {"tc": tc, "default": spec.default()}
    configs = [eval(expr, names) for _, expr in variants]  # noqa: S307 - our experiment files
    checked = check_kernel(kernel, args, [target], lambda bound: configs)
    out = []
    for (label, _), row in zip(variants, checked, strict=True):
        config = spec.normalize(row.config, warn=False)
        per_sm = row.programs_per_sm or 0
        reread = eviction.reread_bytes(spec, config, 0)
        out.append({
            "experiment": exp["name"], "variant": label, "warps": config.num_warps,
            "ms": times.get((exp["name"], label)),
            "registers": row.report.registers if row.report else None,
            "predicted": row.predicted_registers, "programs_per_sm": per_sm,
            "model_programs_per_sm": occupancy.resident_programs(spec, config),
            "resident_warps": per_sm * (config.num_warps or 4),
            "reread_kb": round(reread / 1024, 1),
            "resident_reread_mib": round(target.limits.num_sms * per_sm * reread / 2**20, 1),
        })  # fmt: skip
        print(out[-1], flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiments", help="a source-variants file defining EXPERIMENTS")
    parser.add_argument("--times", help="that experiment's results JSON (its GPU run)")
    parser.add_argument("--name", default="row_residency")
    args = parser.parse_args(argv)
    times: dict[tuple[str, str], float] = {}
    if args.times:
        for r in json.loads(Path(args.times).read_text())["rows"]:
            if r.get("ms") is not None:
                times[(r["experiment"], r["variant"])] = r["ms"]
    rows = [
        row
        for exp in runpy.run_path(args.experiments)["EXPERIMENTS"]
        for row in rows_for(exp, times)
    ]
    l2 = Target.parse(TARGET).limits.l2_bytes / 2**20
    write_results(args.name, rows, COLUMNS, f"{TARGET}: L2 {l2:.0f} MiB")


if __name__ == "__main__":
    main()

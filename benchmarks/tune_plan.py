"""Tuning a plan on every GPU of a host: wall time on 1 GPU vs N GPUs, and the winners of both.

``python -m benchmarks.tune_plan [--devices N] [--effort quick] [--small]``

Builds a plan of 12 kernel x shape jobs (rms_norm fwd, softmax, add, matmul; bf16), runs it with
``tilecraft tune``'s runner on one GPU and then on ``N`` (default: every visible GPU), each from
an empty cache and an empty table, and compares: the speed-up of the wall time (the bar: >= 1.8x
on 2 GPUs) and, per job, whether both runs picked the same config or, where not, how far apart
their winners' times are (timing noise). ``--small`` is a CPU smoke run (tiny shapes, the Triton
interpreter, two worker processes standing in for GPUs). Writes ``tune_plan.{md,json}`` to
``$OUT`` or ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import write_results


def _t(shape: list[int]) -> dict[str, Any]:
    return {"shape": shape, "dtype": "bfloat16"}


def plan_jobs(small: bool) -> list[dict[str, Any]]:
    """Kernels and argument lists: 12 jobs (4 + 4 + 2 + 2)."""
    rows = [(37, 100), (1, 7), (64, 64), (9, 300)] if small else [
        (4096, 4096), (8192, 8192), (4608, 40920), (1000, 1000)
    ]  # fmt: skip
    mm = [(37, 100, 50), (64, 64, 64)] if small else [(4096, 4096, 4096), (8192, 8192, 8192)]
    return [
        {"kernel": "examples.rms_norm:rms_norm_fwd",
         "args": [[_t([m, n]), _t([n]), 1e-5] for m, n in rows]},
        {"kernel": "examples.softmax:softmax", "args": [[_t([m, n])] for m, n in rows]},
        {"kernel": "examples.add:add", "args": [[_t([m, n]), _t([m, n])] for m, n in rows[:2]]},
        {"kernel": "examples.matmul:matmul",
         "args": [[_t([m, k]), _t([k, n])] for m, k, n in mm]},
    ]  # fmt: skip


def run_once(plan: Path, devices: int, folder: Path) -> tuple[float, dict[str, Any]]:
    """Wall time of one plan run from an empty cache, and its table's entries by job id."""
    from tilecraft.autotune.plan import tune_plan
    from tilecraft.autotune.table import ConfigTable

    os.environ["TILECRAFT_CACHE_DIR"] = str(folder / "cache")
    out = folder / "table.json"
    start = time.perf_counter()
    status = tune_plan(plan, out, devices=devices)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"tilecraft tune failed with status {status} ({devices} devices)")
    return wall, {e["job"]: e for e in ConfigTable.read(out).entries}


def compare(one: dict[str, Any], many: dict[str, Any]) -> list[dict[str, Any]]:
    from tilecraft.config.config import Config

    rows = []
    for job, a in one.items():
        b = many.get(job, {})
        same = bool(b) and Config.from_json(a["config"]) == Config.from_json(b["config"])
        ms_a, ms_b = a.get("ms"), b.get("ms")
        rows.append(
            {
                "kernel": a["name"],
                "args": a["specialization"].split("|")[0][:60],
                "ms_1gpu": ms_a,
                "ms_ngpu": ms_b,
                "winner_ratio": round(ms_b / ms_a, 3) if ms_a and ms_b else "",
                "same_config": same,
                "device_ngpu": b.get("worker_device", ""),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, help="GPUs of the parallel run (default: all)")
    parser.add_argument("--effort", default="quick", choices=["none", "quick", "full"])
    parser.add_argument("--budget-s", type=float, help="per-job tuning budget")
    parser.add_argument("--small", action="store_true", help="CPU smoke run (interpreter)")
    ns = parser.parse_args(argv)
    if ns.small:
        os.environ["TRITON_INTERPRET"] = "1"
    from tilecraft.autotune.plan import visible_devices

    n = ns.devices or len(visible_devices(None if not ns.small else 2))
    with tempfile.TemporaryDirectory(prefix="tc_tune_plan_") as tmp:
        folder = Path(tmp)
        plan = folder / "plan.json"
        spec: dict[str, Any] = {"effort": ns.effort, "kernels": plan_jobs(ns.small)}
        if ns.small:
            spec["device"] = "cpu"
        if ns.budget_s:
            spec["budget_s"] = ns.budget_s
        plan.write_text(json.dumps(spec))
        (folder / "one").mkdir()
        (folder / "many").mkdir()
        wall_1, one = run_once(plan, 1, folder / "one")
        wall_n, many = run_once(plan, n, folder / "many")
    rows = compare(one, many)
    same = sum(r["same_config"] for r in rows)
    notes = (
        f"{len(rows)} jobs, effort {ns.effort}: 1 device {wall_1:.1f} s, {n} devices "
        f"{wall_n:.1f} s, speed-up {wall_1 / wall_n:.2f}x; same winning config in {same}/"
        f"{len(rows)} jobs (winner_ratio: the {n}-device winner's time over the 1-device one's)"
    )
    columns = ["kernel", "args", "ms_1gpu", "ms_ngpu", "winner_ratio", "same_config", "device_ngpu"]
    write_results("tune_plan" + ("_small" if ns.small else ""), rows, columns, notes)


if __name__ == "__main__":
    main()

"""Validate the resource model against ptxas: for every example kernel, at small and at
LLM-sized shapes, cross-compile the heuristic default and random configs for sm_90 (no GPU needed)
and compare the predicted registers per thread with what ptxas allocates (``cuobjdump``).

``python -m benchmarks.resource_model [--random N]`` writes ``resource_model.{md,json}`` to $OUT or
``benchmarks/results/``: one row per compiled config, then a summary per kernel (median absolute
error where nothing spilled, and how often the model and ptxas agree on "spills").
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
from typing import Any

import torch

from benchmarks.common import write_results
from examples import EXAMPLES
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

TARGET = Target.parse("cuda:90")
# LLM-sized shapes of the row kernels (their rows do not fit a thread's registers whole)
WIDE = {"rms_norm": [(4096, 40920)], "layer_norm": [(4608, 40920)], "softmax": [(4096, 32768)]}


def _launches(example: str, module: Any) -> list[tuple[str, Any, tuple[Any, ...]]]:
    """(name, kernel, args) of every launch of ``module.run`` at its shapes, recorded in ref mode
    (the wide shapes are recorded on meta tensors: nothing runs, binding needs shapes only)."""
    out = []
    dtype = torch.bfloat16 if torch.bfloat16 in module.DTYPES else module.DTYPES[0]
    shapes = [(s, "cpu") for s in module.TEST_SHAPES[:2]] + [
        (s, "meta") for s in WIDE.get(example, [])
    ]
    names = {id(k): n for n, k in module.KERNELS.items()}
    for shape, device in shapes:
        calls: list[tuple[Any, tuple[Any, ...]]] = []

        def record(kernel: Any, *args: Any, calls: list[Any] = calls) -> Any:
            calls.append((kernel, args))
            return kernel.run_ref(*args)

        # a meta run that ref mode cannot finish still recorded the launches before it failed
        with contextlib.suppress(Exception):
            module.run(module.make_inputs(shape, dtype, device, seed=0), record)
        size = "x".join(map(str, shape))
        out += [(f"{names[id(k)]}-{size}", k, _real(a)) for k, a in calls]
    return out


def _real(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Meta tensors become empty CPU tensors of the same shape and strides (binding traces on
    meta itself, so nothing is read)."""
    return tuple(
        torch.empty_strided(a.shape, a.stride(), dtype=a.dtype)
        if isinstance(a, torch.Tensor) and a.is_meta
        else a
        for a in args
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--random", type=int, default=3, help="random configs per launch")
    parser.add_argument("--kernels", nargs="*", default=list(EXAMPLES))
    ns = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for example in ns.kernels:
        for launch, kernel, args in _launches(example, EXAMPLES[example]):
            rng = random.Random(0)

            def configs(bound: Any, rng: random.Random = rng) -> list[Any]:
                spec = bound.config_spec
                return [spec.default()] + [spec.random(rng) for _ in range(ns.random)]

            for row in check_kernel(kernel, args, [TARGET], configs, timeout_s=240):
                r = row.report
                if r is None or not r.ok or r.registers is None:
                    continue
                rows.append(
                    {
                        "example": example,
                        "launch": launch,
                        "kernel": row.kernel_name,
                        "predicted": row.predicted_registers,
                        "ptxas": r.registers,
                        "spill_bytes": r.spills or 0,
                        "config": repr(row.config),
                    }
                )
                print(rows[-1], flush=True)
    summary = _summary(rows)
    write_results("resource_model", summary + rows, COLUMNS, NOTES)


def _summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for example in dict.fromkeys(r["example"] for r in rows):
        mine = [r for r in rows if r["example"] == example]
        fitting = [r for r in mine if not r["spill_bytes"]]
        errors = [abs(r["predicted"] - r["ptxas"]) / r["ptxas"] for r in fitting]
        spilled = [r for r in mine if r["spill_bytes"]]
        agree = sum(1 for r in mine if (r["predicted"] > _limit(r)) == bool(r["spill_bytes"]))
        out.append(
            {
                "example": example,
                "launch": "SUMMARY",
                "kernel": f"{len(mine)} configs, {len(spilled)} spilled",
                "predicted": f"median |err| {statistics.median(errors):.0%}" if errors else "",
                "ptxas": f"spill agreement {agree}/{len(mine)}",
            }
        )
    return out


def _limit(row: dict[str, Any]) -> int:
    warps = int(row["config"].split("num_warps=")[1].split(",")[0].rstrip(")"))
    return min(255, 65536 // (warps * 32))


COLUMNS = ["example", "launch", "kernel", "predicted", "ptxas", "spill_bytes", "config"]
NOTES = (
    "Predicted registers per thread (tilecraft/config/resources.py: values live at once, Triton's "
    "default layout) vs what ptxas allocated for sm_90 (cuobjdump REG), and the stack + local bytes "
    "per thread it spilled. Error is over configs that did not spill (a spilled kernel's REG is "
    "capped); for all configs, 'spill agreement' counts where the model's prediction (above the "
    "per-thread limit min(255, 65536 / threads)) matches whether ptxas spilled."
)

if __name__ == "__main__":
    main()

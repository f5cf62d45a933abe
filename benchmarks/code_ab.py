"""Time generalization-case defaults with whichever ``tilecraft`` is first on ``sys.path``: a
codegen change's before and after, run once with an older checkout's package in front
(``PYTHONPATH=OLD:.``) and once without, in one GPU session (the configs are the same on both
sides; only the generated code differs).

``python -m benchmarks.code_ab LABEL OUT.json CASE@SHAPE_INDEX ... [--device cpu]``

Each run keeps its autotune cache in a fresh folder: a cached discovered default (keyed by the
same tilecraft version on both sides) would otherwise hide a change of the heuristic default.

Each row: the label, case, shape, do_bench median (the faster of two), the max error against the
case's reference and which ``tilecraft`` ran. ``benchmarks/results/lane_order_ab_s23.md`` came
from it (``git archive <rev> tilecraft | tar -x -C old/``, then both runs twice, alternating).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

import tilecraft
from benchmarks.common import bench_best_ms
from benchmarks.gen_kernels import ALL_CASES
from benchmarks.run import max_error


def _tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def time_call(name: str, index: int, device: str) -> dict[str, Any]:
    """One case call's default on ``device``: its median time and its error."""
    case = ALL_CASES[name]
    shape = (case.gpu_shapes if device == "cuda" else case.cpu_shapes)[index]
    inputs = case.make_inputs(shape, device, 0)
    kernels = {k.__name__: k for k in case.kernels}
    err = max_error(_tuple(case.run(kernels, inputs)), _tuple(case.reference(*inputs)))
    ms = bench_best_ms(lambda: case.run(kernels, inputs), 2) if device == "cuda" else None
    return {"case": name, "shape": "x".join(map(str, shape)), "ms": ms, "max_err": err}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("label")
    parser.add_argument("out", type=Path)
    parser.add_argument("calls", nargs="+", help="CASE@SHAPE_INDEX")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ns = parser.parse_args(argv)
    os.environ["TILECRAFT_CACHE_DIR"] = tempfile.mkdtemp(prefix="code_ab_")
    rows = []
    for call in ns.calls:
        name, _, index = call.partition("@")
        row = {"label": ns.label, **time_call(name, int(index or 0), ns.device)}
        rows.append({**row, "tilecraft": str(Path(tilecraft.__file__).parent)})
        print(rows[-1], flush=True)
    ns.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Max error of the Helion-idiom port kernels and the advanced-indexing kernels on one device.

``python -m benchmarks.helion_port`` runs every case of ``tests/test_helion_port.py`` and
``tests/test_advanced_index.py`` compiled on the GPU (or the Triton interpreter without one) and
in ref mode, against eager PyTorch on the CPU, and writes ``helion_port.{md,json}`` to $OUT or
``benchmarks/results/``: one row per kernel with its max absolute error. It is a record for the
issue's closing note (the tests assert the tolerances).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import write_results
from benchmarks.run import max_error

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _rows(device: str) -> list[dict[str, Any]]:
    import test_advanced_index as adv
    import test_helion_port as port

    cases: list[tuple[str, Any, Any, Any]] = []
    for name, case in sorted(port.CASES.items()):
        cases.append((name, case.kernel, case.inputs, case.expected))
    for param in adv._cases():
        kernel, args, expected = param.values

        def inputs(dev: str, args: tuple[Any, ...] = args) -> tuple[Any, ...]:
            return tuple(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args)

        cases.append((f"advanced_index:{param.id}", kernel, inputs, lambda *_, e=expected: e()))
    rows = []
    for name, kernel, make, expected in cases:
        want = expected(*make("cpu"))
        row: dict[str, Any] = {"kernel": name, "device": device}
        try:
            row["max_err"] = max_error(kernel(*make(device)), want)
            row["ref_max_err"] = max_error(kernel.run_ref(*make(device)), want)
        except Exception as exc:  # a record of what failed, not a crash of the whole table
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
        rows.append(row)
    return rows


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    rows = _rows(device)
    write_results("helion_port", rows, ["kernel", "device", "max_err", "ref_max_err", "error"])
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())

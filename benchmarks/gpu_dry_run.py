"""A GPU dry run on the CPU: each case's default program generated for ``cuda:90`` (or
``--target hip:gfx942``), compiled by Triton (ptxas / the AMD toolchain) and launched through Triton's own binder and tilecraft's direct launches, with a
stand-in driver whose launches do nothing. What it catches needs no GPU to show: arguments
Triton's specializer refuses (a tensor named ``params`` met the binder's own dict: no working
config on the H200), host-path and glue-path errors that only the GPU path takes, compile
failures of the default configs. Values are not checked (nothing runs).

``python -m benchmarks.gpu_dry_run OUT.jsonl [CASE ...]`` (every case by default), in a process
without ``TRITON_INTERPRET``; writes one JSON row per case (``case``, ``ok``, ``error``, ``s``)
and prints a summary. Exit status 1 if any case failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from triton.backends.compiler import GPUTarget
from triton.runtime import driver


class StandInDriver:
    """The parts of Triton's active CUDA driver a compile and a launch touch; launches do
    nothing and every query answers as an H100/H200 (sm_90, 132 SMs)."""

    class utils:  # noqa: N801 - mirrors triton's driver.active.utils
        @staticmethod
        def load_binary(*args: Any) -> tuple[int, int, int, int, int]:
            return (1, 1, 32, 0, 1024)  # module, function, registers, spills, max threads

        @staticmethod
        def get_device_properties(*args: Any) -> dict[str, int]:
            return {"max_shared_mem": 232448, "multiprocessor_count": 132, "warpSize": 32}

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    target = GPUTarget("cuda", 90, 32)

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def launcher_cls(self, src: Any, metadata: Any) -> Any:
        return lambda *args, **kwargs: None

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"the dry run's stand-in driver has no {name}")


def dry_run(name: str) -> dict[str, Any]:
    """One case's call at its first CPU shape, down to the (stand-in) launches."""
    from benchmarks.gen_kernels import ALL_CASES

    case = ALL_CASES[name]
    start = time.time()
    row: dict[str, Any] = {"case": name, "ok": True}
    try:
        inputs = case.make_inputs(case.cpu_shapes[0], "cpu", 0)
        case.run({k.__name__: k for k in case.kernels}, inputs)
    except Exception as exc:
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:2000])
        row["traceback"] = traceback.format_exc()[-3000:]
    row["s"] = round(time.time() - start, 2)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("cases", nargs="*")
    parser.add_argument("--target", default="cuda:90", choices=["cuda:90", "hip:gfx942"])
    ns = parser.parse_intermixed_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        parser.error("run without TRITON_INTERPRET: the dry run takes Triton's GPU path")
    os.environ["TILECRAFT_TARGET"] = ns.target
    os.environ["TILECRAFT_NO_AUTOTUNE"] = "1"  # the default config; no workers (nothing runs)
    stand_in = StandInDriver()
    if ns.target.startswith("hip"):
        stand_in.target = GPUTarget("hip", "gfx942", 64)
    driver.set_active(stand_in)
    import tilecraft.runtime.bound as kernel_module
    from benchmarks.gen_kernels import ALL_CASES

    kernel_module.check_runnable = lambda target: None  # CPU tensors on the GPU path
    failed = 0
    with ns.out.open("w") as out:
        for name in ns.cases or sorted(ALL_CASES):
            row = dry_run(name)
            failed += not row["ok"]
            out.write(json.dumps(row) + "\n")
            print(name, "ok" if row["ok"] else row["error"][:300], flush=True)
    print(f"{failed} of {len(ns.cases or ALL_CASES)} cases failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

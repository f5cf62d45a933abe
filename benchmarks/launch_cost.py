"""CPU time per call of a tiny kernel: tilecraft vs a plain Triton launch of the same kernel vs
eager ``F.rms_norm``.

``python -m benchmarks.launch_cost OUT.json [--repeats 5] [--calls 1000] [--device cuda]``

The kernel is an rms_norm forward on a ``(16, 256)`` fp32 tensor, small enough that the GPU never
limits the loop: what is timed is the host work of a call. "plain triton" launches the very
``@triton.jit`` function tilecraft generated, with the same block sizes and launch options, from a
hand-written host wrapper (allocate the output, ``fn[grid](...)``) through Triton's own launch
path (not tilecraft's direct launches) — what a user writing Triton by hand would run. Each row: the median over ``--repeats`` loops of ``--calls`` calls of the wall time
per call, in µs. Prints a table and writes JSON to ``OUT.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import environment
from benchmarks.config_space import rms_norm  # the same kernel the config-space table uses
from tilecraft.runtime.direct_launch import DirectKernel

EPS = 1e-5


def plain_triton(x: torch.Tensor, w: torch.Tensor) -> Callable[[], torch.Tensor]:
    """The generated launcher driven by a hand-written host wrapper (no tilecraft runtime)."""
    program = rms_norm.bind((x, w, EPS)).default_program((x, w, EPS), {})
    generated = program.kernels[0]
    launcher = getattr(program.module, generated.launcher_name)
    kernel = getattr(program.module, generated.kernel_name)
    if isinstance(kernel, DirectKernel):  # the baseline launches through Triton's own path
        scope = {**vars(program.module), generated.kernel_name: kernel.jit}
        launcher = types.FunctionType(launcher.__code__, scope, launcher.__name__)

    def call() -> torch.Tensor:
        out = torch.empty_like(x)
        launcher({"x": x, "w": w, "out": out, "eps": EPS}, None)
        return out

    return call


def per_call_us(fn: Callable[[], Any], calls: int, repeats: int, sync: Callable[[], None]) -> float:
    """Median over ``repeats`` of the wall time per call of ``calls`` back-to-back calls."""
    for _ in range(20):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
        sync()
    return statistics.median(samples)


def measure(device: str, calls: int, repeats: int) -> list[dict[str, Any]]:
    x = torch.randn(16, 256, device=device)
    w = torch.randn(256, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    plain = plain_triton(x, w)
    cases: dict[str, Callable[[], Any]] = {
        "tilecraft": lambda: rms_norm(x, w, EPS),
        "plain triton": plain,
        "eager F.rms_norm": lambda: torch.nn.functional.rms_norm(x, (256,), w, EPS),
    }
    torch.testing.assert_close(cases["tilecraft"](), plain())  # the same work
    rows = [
        {"case": name, "us_per_call": per_call_us(fn, calls, repeats, sync)}
        for name, fn in cases.items()
    ]
    base = rows[1]["us_per_call"]
    for row in rows:
        row["vs_plain_triton_us"] = row["us_per_call"] - base
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="where to write the JSON results")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    default = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=default)
    args = parser.parse_args(argv)
    rows = measure(args.device, args.calls, args.repeats)
    print(f"{'case':<20} {'us/call':>10} {'vs plain triton':>16}")
    for row in rows:
        print(f"{row['case']:<20} {row['us_per_call']:>10.2f} {row['vs_plain_triton_us']:>+16.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"env": environment(), "calls": args.calls, "repeats": args.repeats, "rows": rows}
    args.out.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()

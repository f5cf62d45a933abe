"""What autotuning costs and buys: wall time of ``autotune_effort`` quick and full, and the speed
of their winners vs ``torch.compile``, plus the cost of a cache hit in a new process.

``python -m benchmarks.autotune_time [--cases rms_norm softmax matmul] [--efforts quick full]``

For rms_norm forward and softmax at 8192x8192 bf16 and matmul at 4096^3 bf16: each effort tunes
from an empty cache folder (discovery included, as a user's first call), then its winner is timed
(``do_bench`` median). A new Python process then looks the quick winner up in the cache: the
lookup (``tune`` hitting the cache, which re-validates by generating code) and the whole first
call are timed there. Writes ``autotune.{md,json}`` to ``$OUT`` or ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from benchmarks.common import add_row, bench_ms, write_results


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], tuple[Any, tuple[Any, ...]]]  # () -> (kernel, args)
    peer: Callable[..., Any]  # the PyTorch a user would write instead (compiled for the table)
    work: Callable[[tuple[Any, ...]], float]  # bytes (memory-bound) or flops of one call
    unit: str  # "GB/s" or "TFLOP/s"


def _rows_bytes(args: tuple[Any, ...]) -> float:
    x = args[0]
    return 2.0 * x.numel() * x.element_size()  # read x, write out (w and rstd are ~0.01%)


def _rms_norm() -> tuple[Any, tuple[Any, ...]]:
    from examples import rms_norm

    x, w, _ = rms_norm.make_inputs((8192, 8192), torch.bfloat16, "cuda", 0)
    return rms_norm.rms_norm_fwd, (x, w, rms_norm.EPS)


def _rms_norm_peer(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def _softmax() -> tuple[Any, tuple[Any, ...]]:
    from examples import softmax

    return softmax.softmax, softmax.make_inputs((8192, 8192), torch.bfloat16, "cuda", 0)


def _softmax_peer(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def _matmul() -> tuple[Any, tuple[Any, ...]]:
    from examples import matmul

    a, b, _ = matmul.make_inputs((4096, 4096, 4096), torch.bfloat16, "cuda", 0)
    return matmul.matmul, (a, b)


CASES = {
    "rms_norm": Case("rms_norm", _rms_norm, _rms_norm_peer, _rows_bytes, "GB/s"),
    "softmax": Case("softmax", _softmax, _softmax_peer, _rows_bytes, "GB/s"),
    "matmul": Case(
        "matmul",
        _matmul,
        torch.mm,
        lambda a: 2.0 * a[0].size(0) * a[0].size(1) * a[1].size(1),
        "TFLOP/s",
    ),  # fmt: skip
}


def _rate(case: Case, args: tuple[Any, ...], ms: float) -> float:
    scale = 1e6 if case.unit == "GB/s" else 1e9
    return case.work(args) / ms / scale


def tune_once(case: Case, effort: str, cache_dir: str) -> dict[str, Any]:
    """Tune from an empty cache folder; the winner's wall time and speed."""
    from tilecraft.autotune.search import tune

    os.environ["TILECRAFT_CACHE_DIR"] = cache_dir
    kernel, args = case.make()
    bound = kernel.bind(args)
    start = time.perf_counter()
    config = tune(bound, args, effort=effort, stream=sys.stdout)
    wall = time.perf_counter() - start
    program = bound.compile_config(config)
    ms = bench_ms(lambda: bound.run(program, *args))
    return {"wall_s": wall, "ms": ms, "rate": _rate(case, args, ms), "config": repr(config)}


def probe_cache(name: str, cache_dir: str) -> dict[str, float]:
    """In a new process: the cost of finding the tuned config in the cache, and the first call."""
    code = (
        "import json, time, torch; t0 = time.perf_counter()\n"
        "from benchmarks.autotune_time import CASES\n"
        "from tilecraft.autotune.search import tune\n"
        f"kernel, args = CASES[{name!r}].make(); bound = kernel.bind(args)\n"
        "t1 = time.perf_counter(); config = tune(bound, args, effort='quick')\n"
        "t2 = time.perf_counter(); bound.run(bound.compile_config(config), *args)\n"
        "torch.cuda.synchronize(); t3 = time.perf_counter()\n"
        "print(json.dumps({'lookup_ms': (t2 - t1) * 1e3, 'first_call_ms': (t3 - t1) * 1e3,"
        " 'import_and_inputs_ms': (t1 - t0) * 1e3}))\n"
    )
    env = {**os.environ, "TILECRAFT_CACHE_DIR": cache_dir}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    if out.returncode != 0:
        raise RuntimeError(f"cache probe failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(case: Case, efforts: list[str]) -> dict[str, Any]:
    kernel, args = case.make()
    compiled = torch.compile(case.peer)
    compile_ms = bench_ms(lambda: compiled(*args))
    row: dict[str, Any] = {"kernel": case.name, "unit": case.unit}
    row["torch_compile"] = _rate(case, args, compile_ms)
    for effort in efforts:
        cache_dir = tempfile.mkdtemp(prefix=f"tc-{case.name}-{effort}-")
        result = tune_once(case, effort, cache_dir)
        row[f"{effort}_wall_s"] = round(result["wall_s"], 1)
        row[f"{effort}_rate"] = result["rate"]
        row[f"{effort}_vs_compile"] = compile_ms / result["ms"]
        row[f"{effort}_config"] = result["config"]
        if effort == "quick":
            row.update(probe_cache(case.name, cache_dir))
    if "quick_rate" in row and "full_rate" in row:
        row["quick_vs_full"] = row["quick_rate"] / row["full_rate"]
    return row


COLUMNS = [
    "kernel",
    "unit",
    "torch_compile",
    "quick_wall_s",
    "quick_rate",
    "quick_vs_compile",
    "full_wall_s",
    "full_rate",
    "full_vs_compile",
    "quick_vs_full",
    "lookup_ms",
    "first_call_ms",
    "error",
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--efforts", nargs="*", default=["quick", "full"])
    ns = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    results = ("autotune", COLUMNS, "wall times from an empty cache (discovery included)")
    for name in ns.cases:
        add_row(rows, {"kernel": name}, partial(measure, CASES[name], ns.efforts), results)
    write_results("autotune", rows, COLUMNS, results[2])


if __name__ == "__main__":
    main()

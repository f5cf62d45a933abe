"""Shared measurement helpers: do_bench medians, device copy bandwidth, result files."""

from __future__ import annotations

import datetime
import json
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def bench_ms(fn: Callable[[], Any]) -> float:
    """Median time of ``fn`` in ms (triton.testing.do_bench, which flushes L2 between runs)."""
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def bench_best_ms(fn: Callable[[], Any], repeats: int = 3) -> float:
    """The least of ``repeats`` :func:`bench_ms` medians. A median can still carry the host's
    noise: do_bench's L2 flush (a 256 MB memset, ~85 us on an H200) only hides the next launch's
    CPU time while the host keeps ahead of the GPU, and on a busy host a ~50 us kernel then
    measured 0.047-0.070 ms in one process while its CUDA-graph replay stayed at 0.036
    (benchmarks/results/host_noise_s11.md). Applied to every contender alike."""
    return min(bench_ms(fn) for _ in range(max(repeats, 1)))


def graph_ms(fn: Callable[[], Any]) -> float | None:
    """The median time of ``fn`` replayed from a CUDA graph, in ms (``do_bench_cudagraph``):
    the kernels' time without the host's per-call cost, which :func:`bench_ms` carries whenever
    the host falls behind the GPU. None off CUDA or where ``fn`` cannot be captured."""
    if not torch.cuda.is_available():
        return None
    import triton.testing

    try:
        return float(triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median"))
    except Exception:  # noqa: BLE001 - a call that cannot be captured has no graph time
        torch.cuda.synchronize()
        return None


def copy_bandwidth_gbs(numel: int = 1 << 28) -> float:
    """Measured device copy bandwidth (read + write) in GB/s, with a 512 MiB bf16 tensor."""
    src = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / ms / 1e6


def environment() -> dict[str, str]:
    import triton

    return {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": datetime.date.today().isoformat(),
    }


def write_results(
    name: str, rows: list[dict[str, Any]], columns: list[str], notes: str = "", echo: bool = True
) -> str:
    """Print a markdown table and write it (and JSON) to $OUT or benchmarks/results/."""
    env = environment()
    lines = [f"# {name}", "", " | ".join(f"{k}: {v}" for k, v in env.items()), ""]
    if notes:
        lines += [notes, ""]
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * len(columns))
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(c, "")) for c in columns) + " |")
    text = "\n".join(lines) + "\n"
    out = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(text)
    (out / f"{name}.json").write_text(json.dumps({"env": env, "rows": rows}, indent=2, default=str))
    if echo:
        print(text)
    return text


def add_row(
    rows: list[dict[str, Any]],
    ident: dict[str, Any],
    measure: Callable[[], dict[str, Any]],
    results: tuple[str, list[str], str],
) -> None:
    """Append ``measure()`` (or ``ident`` with the error, so one failing case does not stop the
    run), print it, and rewrite the results file ``(name, columns, notes)`` so that partial
    results survive a timeout."""
    try:
        rows.append(measure())
    except Exception as exc:
        traceback.print_exc()  # the whole cause in the log (a NoWorkingConfigError's table)
        rows.append({**ident, "error": f"{type(exc).__name__}: {exc}"[:2000]})
    print(rows[-1], flush=True)
    name, columns, notes = results
    write_results(name, rows, columns, notes, echo=False)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)

"""Peak dot kernels on Hopper (issue 16): tilecraft's matmul and attention against torch.mm
(cuBLAS) and SDPA (flash) in one run, in TFLOP/s and % of the H200's dense bf16 peak.

``python -m benchmarks.peak_dots [--part matmul|attention|all] [--effort none|quick|full]
[--budget S] [--rows I ...] [--name NAME]``

Rows: decode GEMMs (M in 1, 16, 64, 128 against 4096x14336 bf16 weights), prefill and square
GEMMs, and attention forward at seq 1k / 4k / 16k, head dim 64 / 128, causal and not. Each row
tunes its kernel from an empty cache with ``--effort`` (the first call's wall time, discovery
included, is ``first_call_s``), checks the output against fp32 math, then times (``do_bench``
medians) the discovered default, the tuned config and the library peer. Writes
``benchmarks/results/<name>.{md,json}`` (or under ``$OUT``) after every row, so a run cut short
keeps what it measured. ``--part matmul`` and ``--part attention`` each fit in 9 minutes on an
H200 with ``--effort quick``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from benchmarks.common import add_row, bench_ms, write_results

PEAK_TFLOPS = 989.0  # H200 dense bf16 tensor-core peak
DECODE = [(m, 4096, 14336) for m in (1, 16, 64, 128)]
PREFILL = [(4096, 4096, 14336), (8192, 4096, 14336), (4096, 4096, 4096), (8192, 8192, 8192)]
MATMUL_SHAPES = DECODE + PREFILL
# (batch, heads, seq, head_dim): ~64k-128k query rows each; the reference row is 2x32x4096x128
ATTENTION_SHAPES = [
    (b, h, s, d) for (b, h, s) in ((4, 32, 1024), (2, 32, 4096), (1, 16, 16384)) for d in (64, 128)
]
COLUMNS = [
    "kernel",
    "shape",
    "causal",
    "max_err",
    "first_call_s",
    "default_ms",
    "tuned_ms",
    "peer",
    "peer_ms",
    "tflops",
    "pct_peak",
    "vs_peer",
    "peer_tflops",
    "default_vs_tuned",
    "config",
    "error",
]


def matmul_flops(shape: tuple[int, ...]) -> float:
    m, k, n = shape
    return 2.0 * m * n * k


def attention_flops(shape: tuple[int, ...], causal: bool) -> float:
    b, h, s, d = shape
    full = 4.0 * b * h * s * s * d  # q @ k^T and p @ v
    return full / 2 if causal else full


def tuned_and_default(
    kernel: Any, args: tuple[Any, ...], effort: str, budget_s: float | None
) -> tuple[Any, Any, Any, float]:
    """(bound kernel, default program, tuned program, seconds of the first call's tuning)."""
    from tilecraft.autotune import cache
    from tilecraft.autotune.search import run_tune

    bound = kernel.bind(args)
    start = time.perf_counter()
    result = run_tune(bound, args, effort=effort, budget_s=budget_s)
    first_call_s = time.perf_counter() - start
    default = cache.load(bound, "default") or bound.config_spec.default()
    return bound, bound.compile_config(default), bound.compile_config(result.config), first_call_s


def _row(
    ident: dict[str, Any],
    flops: float,
    run_default: Callable[[], Any],
    run_tuned: Callable[[], Any],
    peer: tuple[str, Callable[[], Any]],
    want: torch.Tensor,
    first_call_s: float,
    config: str,
) -> dict[str, Any]:
    err = (run_tuned().float() - want).abs().max().item()
    default_ms, tuned_ms = bench_ms(run_default), bench_ms(run_tuned)
    peer_name, run_peer = peer
    peer_ms = bench_ms(run_peer)
    best = min(default_ms, tuned_ms)
    tflops = flops / best / 1e9
    return {
        **ident,
        "max_err": err,
        "first_call_s": round(first_call_s, 1),
        "default_ms": default_ms,
        "tuned_ms": tuned_ms,
        "peer": peer_name,
        "peer_ms": peer_ms,
        "tflops": tflops,
        "pct_peak": f"{tflops / PEAK_TFLOPS:.1%}",
        "vs_peer": peer_ms / best,
        "peer_tflops": flops / peer_ms / 1e9,
        "default_vs_tuned": tuned_ms / default_ms,
        "config": config,
    }


def bench_matmul(
    shape: tuple[int, int, int], effort: str, budget_s: float | None, device: str = "cuda"
) -> dict[str, Any]:
    from examples.matmul import matmul

    m, k, n = shape
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(device=device, dtype=torch.bfloat16)
    b = (torch.randn(k, n, generator=gen) / k**0.5).to(device=device, dtype=torch.bfloat16)
    bound, default, tuned, first_s = tuned_and_default(matmul, (a, b), effort, budget_s)
    return _row(
        {"kernel": "matmul", "shape": "x".join(map(str, shape)), "causal": ""},
        matmul_flops(shape),
        lambda: bound.run(default, a, b),
        lambda: bound.run(tuned, a, b),
        ("torch.mm", lambda: torch.mm(a, b)),
        a.float() @ b.float(),
        first_s,
        repr(tuned.config),
    )


def _qkv(shape: tuple[int, ...], device: str) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    return tuple(
        torch.randn(shape, generator=gen).to(device=device, dtype=torch.bfloat16) for _ in range(3)
    )


def attention_inputs(shape: tuple[int, ...], device: str) -> tuple[Any, ...]:
    """``examples.attention.attention``'s arguments for ``(batch, heads, seq, head_dim)``,
    non-causal (``benchmarks.compare_configs --inputs benchmarks.peak_dots:attention_inputs``)."""
    b, h, s, d = shape
    return (*(t.reshape(b * h, s, d) for t in _qkv(shape, device)), False)


def bench_attention(
    shape: tuple[int, int, int, int],
    causal: bool,
    effort: str,
    budget_s: float | None,
    device: str = "cuda",
) -> dict[str, Any]:
    from examples.attention import attention

    b, h, s, d = shape
    q, k, v = _qkv(shape, device)
    args = (*(t.reshape(b * h, s, d) for t in (q, k, v)), causal)
    bound, default, tuned, first_s = tuned_and_default(attention, args, effort, budget_s)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    want = sdpa(q.float(), k.float(), v.float(), is_causal=causal).reshape(b * h, s, d)
    return _row(
        {"kernel": "attention", "shape": "x".join(map(str, shape)), "causal": causal},
        attention_flops(shape, causal),
        lambda: bound.run(default, *args),
        lambda: bound.run(tuned, *args),
        ("sdpa", lambda: sdpa(q, k, v, is_causal=causal)),
        want,
        first_s,
        repr(tuned.config),
    )


def cases(part: str) -> list[tuple[dict[str, Any], Callable[..., dict[str, Any]]]]:
    """(row identity, measure(effort, budget_s)) for every row of ``part``."""
    out: list[tuple[dict[str, Any], Callable[..., dict[str, Any]]]] = []
    if part in ("matmul", "all"):
        for shape in MATMUL_SHAPES:
            ident = {"kernel": "matmul", "shape": "x".join(map(str, shape))}
            out.append((ident, partial(bench_matmul, shape)))
    if part in ("attention", "all"):
        for shape in ATTENTION_SHAPES:
            for causal in (False, True):
                ident = {
                    "kernel": "attention",
                    "shape": "x".join(map(str, shape)),
                    "causal": causal,
                }
                out.append((ident, partial(bench_attention, shape, causal)))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", default="all", choices=["matmul", "attention", "all"])
    parser.add_argument("--effort", default="quick", choices=["none", "quick", "full"])
    parser.add_argument("--budget", type=float, help="tuning budget per row in seconds")
    parser.add_argument("--rows", nargs="*", type=int, help="indices into the part's rows")
    parser.add_argument("--name", help="results file name (default: peak_dots_<part>)")
    ns = parser.parse_args(argv)
    name = ns.name or f"peak_dots_{ns.part}"
    notes = (
        f"bf16; effort {ns.effort}; TFLOP/s of the faster of default and tuned; "
        f"% of {PEAK_TFLOPS:g} TFLOP/s dense bf16 peak; vs_peer = peer_ms / tilecraft_ms"
    )
    picked = cases(ns.part)
    if ns.rows is not None:
        picked = [picked[i] for i in ns.rows]
    rows: list[dict[str, Any]] = []
    for ident, measure in picked:
        add_row(rows, ident, partial(measure, ns.effort, ns.budget), (name, COLUMNS, notes))
    write_results(name, rows, COLUMNS, notes)


if __name__ == "__main__":
    main()

"""Matmuls whose operand is computed in the k loop, with and without the pre-pass of
``ir/hoist.py`` (``python -m benchmarks.operand_prepass [--shapes M,K,N ...] --name N``; writes
``N.{md,json}`` to $OUT or benchmarks/results/). Needs a CUDA GPU.

Two kernels as users write them: an int8 weight dequantized with per-column scales (the right
operand computed: the held-out ``int8_weight_gemm``) and an input scaled per k column before the
matmul (the left operand computed). Each at the discovered default config with the pre-pass
(``hoist_operands=True``, the default) and without, beside the eager reference and
torch.compile: ``do_bench`` (least of three medians) and CUDA-graph replays.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import bench_ms, graph_ms, write_results
from benchmarks.gen_kernels.heldout_dots import (
    _int8_weight_inputs,
    int8_weight_gemm,
    int8_weight_gemm_reference,
)

COLUMNS = [
    "kernel", "shape", "variant", "do_bench_ms", "graph_ms", "vs_compile_graph", "config", "error",
]  # fmt: skip
NAME = "operand_prepass"


@tc.kernel(static_shapes=True)
def column_scaled_gemm(x: torch.Tensor, s: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``(x * s) @ w``: a per-channel input scale (a folded norm weight) applied in the loop."""
    m, kk = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(kk):
            xt = (x[tm, tk].to(torch.float32) * s[tk][None, :]).to(x.dtype)
            acc = tc.dot(xt, w[tk, tn], acc=acc)
        out[tm, tn] = acc.to(x.dtype)
    return out


def column_scaled_reference(x: torch.Tensor, s: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.float() * s).to(x.dtype) @ w


def _column_scaled_inputs(shape: tuple[int, ...], device: str, seed: int) -> tuple[Any, ...]:
    m, k, n = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    s = 0.5 + torch.rand(k, generator=g)
    w = (torch.randn(k, n, generator=g) / k**0.5).to(torch.bfloat16)
    return tuple(t.to(device) for t in (x, s, w))


KERNELS = {
    "int8_weight_gemm": (int8_weight_gemm, _int8_weight_inputs, int8_weight_gemm_reference),
    "column_scaled_gemm": (column_scaled_gemm, _column_scaled_inputs, column_scaled_reference),
}


def _contenders(name: str, shape: tuple[int, ...]) -> dict[str, tuple[str, Callable[[], Any]]]:
    kernel, make_inputs, reference = KERNELS[name]
    inputs = tuple(make_inputs(shape, "cuda", 0))
    out: dict[str, tuple[str, Callable[[], Any]]] = {}
    in_loop = tc.kernel(static_shapes=True, hoist_operands=False)(kernel.fn)
    for label, k in (("prepass", kernel), ("in_loop", in_loop)):
        bound = k.bind(inputs)
        program = bound.compile_config(bound.config_spec.default())
        loops = len(bound.traced.loops)
        out[label] = (
            f"{loops} launches, {program.config!r}",
            functools.partial(bound.run, program, *inputs),
        )
    compiled = torch.compile(reference)
    out["eager"] = ("", lambda: reference(*inputs))
    out["torch.compile"] = ("", lambda: compiled(*inputs))
    want = reference(*inputs).float()
    for label, (_, call) in out.items():
        err = (call().float() - want).abs().max().item()
        assert err < 5e-2 * want.abs().max().item(), f"{name} {shape} {label}: max error {err}"
    return out


def measure(name: str, shape: tuple[int, ...]) -> list[dict[str, Any]]:
    calls = _contenders(name, shape)
    least = {label: float("inf") for label in calls}
    for r in range(3):
        for label in list(calls) if r % 2 == 0 else list(calls)[::-1]:
            least[label] = min(least[label], bench_ms(calls[label][1]))
    graphs = {label: graph_ms(call) for label, (_, call) in calls.items()}
    ref = graphs["torch.compile"]
    return [
        {"kernel": name, "shape": "x".join(map(str, shape)), "variant": label, "config": config,
         "do_bench_ms": round(least[label], 4),
         "graph_ms": None if graphs[label] is None else round(graphs[label], 4),
         "vs_compile_graph": None if not (ref and graphs[label]) else round(ref / graphs[label], 3)}
        for label, (config, _) in calls.items()
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", nargs="*", default=sorted(KERNELS), choices=sorted(KERNELS))
    parser.add_argument(
        "--shapes",
        nargs="*",
        default=["4096,4096,4096", "512,4096,4096", "256,4096,4096", "64,4096,4096"],
    )
    parser.add_argument("--name", default=NAME)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    notes = "vs_compile_graph: torch.compile's graph time / this variant's (> 1: faster)"
    for name in args.kernels:
        for text in args.shapes:
            shape = tuple(int(v) for v in text.split(","))
            try:
                rows += measure(name, shape)
            except Exception as exc:  # one failing shape does not stop the run
                rows.append(
                    {"kernel": name, "shape": text, "error": f"{type(exc).__name__}: {exc}"[:300]}
                )
            print(rows[-1], flush=True)
            write_results(args.name, rows, COLUMNS, notes, echo=False)  # partial results survive
    write_results(args.name, rows, COLUMNS, notes)


if __name__ == "__main__":
    main()

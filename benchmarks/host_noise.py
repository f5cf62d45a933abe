"""How much of a short kernel's do_bench median is the host's (``python -m benchmarks.host_noise
[alone|after]``; prints; behind benchmarks/results/host_noise_s11.md). Needs a CUDA GPU.

The generalization benchmark's column sum (about 47 us) is compiled on fresh caches (``after``:
right after the online softmax row's default and quick tuning, as in ``benchmarks.generalize``)
and timed several ways in one process: do_bench medians three times, a CUDA-graph replay (no
launch cost, no L2 flush), and the host's own time per call (1000 calls without a sync), with a
clone of its input, the same config compiled again, and torch.compile's kernel beside it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import triton.testing

import tilecraft as tc
from benchmarks.common import bench_ms
from benchmarks.gen_kernels import CASES
from benchmarks.generalize import _tilecraft, fresh_caches


def report(tag: str, run: Callable[[], Any]) -> None:
    """Three do_bench medians, the CUDA-graph replay and the host's microseconds per call."""
    torch.cuda.synchronize()
    medians = [round(bench_ms(run), 4) for _ in range(3)]
    graph = triton.testing.do_bench_cudagraph(run, rep=100, return_mode="median")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(1000):
        run()
    host = time.perf_counter() - start
    torch.cuda.synchronize()
    print(f"{tag}: do_bench {medians} graph {graph:.4f} host_us_per_call {host * 1e3:.1f}")


def main(mode: str) -> None:
    column = CASES["column_sum_tall"]
    if mode == "after":
        softmax = CASES["online_softmax_two_pass"]
        y = softmax.make_inputs(softmax.gpu_shapes[0], "cuda", 0)
        want = softmax.reference(*y)
        _tilecraft(softmax, y, y, want, "cuda", 1)
        _tilecraft(softmax, y, y, want, "cuda", 1, autotune_effort="quick")
        del y, want
    x = column.make_inputs(column.gpu_shapes[0], "cuda", 0)
    with fresh_caches():
        kernels = column.variants()
        column.run(kernels, x)
        report("default", lambda: column.run(kernels, x))
        x2 = tuple(t.clone() for t in x)
        report("default, input cloned", lambda: column.run(kernels, x2))
        (kernel,) = kernels.values()
        config = kernel.bind(x).default_program().config
        again = tc.kernel(kernel.fn, static_shapes=True, config=config)
        again(*x)
        report("its config compiled again", lambda: again(*x))
    compiled = torch.compile(column.reference)
    compiled(*x)
    report("torch.compile", lambda: compiled(*x))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "after")

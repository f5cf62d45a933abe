"""The column sum's default, compiled first, timed before and after a quick tuning of another
kernel in the same process (``python -m benchmarks.after_quick``; prints; behind
benchmarks/results/after_quick_s10.md). Needs a CUDA GPU."""

import subprocess
import threading
import time

import torch

import tilecraft as tc
from benchmarks.common import bench_ms
from benchmarks.gen_kernels import CASES
from benchmarks.generalize import fresh_caches


def main() -> None:
    column = CASES["column_sum_tall"]
    x = column.make_inputs(column.gpu_shapes[0], "cuda", 0)
    base = column.kernels[0]
    config = base.bind(x).config_spec.default()
    kernel = tc.kernel(base.fn, static_shapes=True, config=config)
    kernel(*x)
    print("before", bench_ms(lambda: kernel(*x)), flush=True)
    softmax = CASES["online_softmax_two_pass"]
    y = softmax.make_inputs(softmax.gpu_shapes[0], "cuda", 0)
    with fresh_caches():
        quick = softmax.variants(autotune_effort="quick")
        start = time.time()
        softmax.run(quick, y)
        torch.cuda.synchronize()
        print("quick s", time.time() - start, flush=True)
    for delay in (0, 0, 2, 5, 10):
        time.sleep(delay)
        ps = "ps -eo pid,stat,pcpu,cmd | grep -c tilecraft.tools.worker"
        workers = subprocess.run(ps, shell=True, capture_output=True, text=True).stdout.strip()
        ms = bench_ms(lambda: kernel(*x))
        print("after", delay, ms, "workers", workers, "threads", threading.active_count())


if __name__ == "__main__":
    main()

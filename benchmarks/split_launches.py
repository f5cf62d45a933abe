"""Split reductions combined in one launch (the last program per tile combines) vs in a second
kernel, at each kernel's default config, called as a user calls them (``config=`` given: the
per-call fast path). ``python -m benchmarks.split_launches --name N [--cases a,b]`` writes
``$OUT/N.{md,json}``: per case the two variants' median ms (each timed twice, interleaved),
torch.compile's, both variants' host µs per call, and their max errors against the reference
(each variant must also be bit-identical over 20 calls: the combine order is fixed).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import bench_ms, write_results
from benchmarks.gen_kernels import ALL_CASES
from benchmarks.gen_kernels.case import Case
from tilecraft.targets.target import Target

DEFAULT_CASES = "column_sum_tall,long_row_sum,varlen_mean,gemv_decode"
COLUMNS = [
    "kernel", "shape", "config", "two_ms", "one_ms", "two_ms_again", "one_ms_again",
    "compile_ms", "host_us_two", "host_us_one", "max_err_one", "max_err_two",
]  # fmt: skip


def _compiled(case: Case, inputs: tuple[Any, ...], one: bool) -> tuple[tc.Config, Callable]:
    """The case's kernel at its default config, with or without arrival counters."""
    arrival = Target.arrival_counters
    if not one:
        Target.arrival_counters = property(lambda self: False)  # type: ignore[assignment]
    try:
        base = case.kernels[0]
        bound = tc.kernel(base.fn, static_shapes=base.static_shapes).bind(inputs)
        config = bound.config_spec.default()
        assert bound.config_spec.resolve(config).split_one_launch == one
        kernel = tc.kernel(base.fn, static_shapes=base.static_shapes, config=config)
        kernel(*inputs)  # compiled now, while the property holds
        return config, lambda: kernel(*inputs)
    finally:
        Target.arrival_counters = arrival  # type: ignore[method-assign]


def _host_us(fn: Callable[[], Any], calls: int = 300) -> float:
    """CPU µs per call over ``calls`` calls, fewer than the launch queue holds."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host


def _max_error(fn: Callable[[], Any], reference: Any) -> float:
    outs = [fn() for _ in range(20)]
    first = [o if isinstance(o, torch.Tensor) else o[0] for o in outs]
    assert all(torch.equal(first[0], o) for o in first), "results differ between calls"
    ref = reference if isinstance(reference, torch.Tensor) else reference[0]
    return (first[0].float() - ref.float()).abs().max().item()


def measure(name: str) -> dict[str, Any]:
    case = ALL_CASES[name]
    shape = case.gpu_shapes[0]
    inputs = case.make_inputs(shape, "cuda", 0)
    reference = case.reference(*inputs)
    config, one = _compiled(case, inputs, True)
    _, two = _compiled(case, inputs, False)
    compiled = torch.compile(case.reference)
    compiled(*inputs)
    row: dict[str, Any] = {"kernel": name, "shape": "x".join(map(str, shape))}
    row["config"] = repr(config)
    row["max_err_one"], row["max_err_two"] = _max_error(one, reference), _max_error(two, reference)
    row["two_ms"], row["one_ms"] = bench_ms(two), bench_ms(one)
    row["compile_ms"] = bench_ms(lambda: compiled(*inputs))
    row["two_ms_again"], row["one_ms_again"] = bench_ms(two), bench_ms(one)
    row["host_us_two"], row["host_us_one"] = _host_us(two), _host_us(one)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", default="split_launches")
    parser.add_argument("--cases", default=DEFAULT_CASES)
    args = parser.parse_args()
    rows = []
    for name in args.cases.split(","):
        rows.append(measure(name))
        print(rows[-1], flush=True)
    write_results(
        args.name, rows, COLUMNS, "one = last program per tile combines; two = a combine kernel"
    )


if __name__ == "__main__":
    main()

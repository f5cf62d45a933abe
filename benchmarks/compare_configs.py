"""Explicit configs of one kernel side by side on one GPU (a heuristic change's before/after).

``python -m benchmarks.compare_configs KERNEL SHAPE CONFIG [CONFIG ...]``

KERNEL is ``module:name`` (a tilecraft kernel; inputs: the module's ``make_inputs(shape, dtype,
device, seed)`` when it has one, as example modules do, e.g. ``examples.rope:rope_interleaved
8192,32,128``; else one random bf16 tensor of SHAPE, e.g. ``examples.sum:sum_first 4096,4096``), each CONFIG a
``tc.Config(...)`` expression or ``default.replace(...)`` (a change to the discovered default). Prints and writes ``compare_configs.{md,json}`` (to $OUT or
benchmarks/results/): each config's do_bench median and its max error against the first one's
output, plus the discovered default. A config that fails to compile or launch (e.g. out of shared
memory) is a row with its error, and the others still run. ``--inputs gen:CASE`` takes the
arguments a generalization case (``benchmarks.gen_kernels``) calls the kernel with, scalars
included, e.g. ``gen:layer_norm_bwd_seed``;
``--inputs example:NAME:CALL`` the arguments of the CALL-th kernel call an example's ``run`` makes
(``example:rms_norm:1``: the backward's).
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

import torch

import tilecraft as tc
from benchmarks.common import bench_ms, write_results
from benchmarks.run import max_error


def _load(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _inputs(
    kernel: Any, shape: tuple[int, ...], device: str, inputs: str | None = None
) -> tuple[Any, ...]:
    """The kernel's arguments: ``inputs`` (``MODULE:FN``, called with shape and device), else
    its module's ``make_inputs`` (bf16), else one random tensor."""
    if inputs and inputs.startswith("example:"):  # example:MODULE:CALL, e.g. example:rms_norm:1
        from benchmarks.default_change import example_call
        from examples import EXAMPLES

        _, name, index = inputs.split(":")
        return example_call(EXAMPLES[name], shape, int(index), device)[1]
    if inputs and inputs.startswith("gen:"):  # gen:CASE, the arguments of its call of kernel
        from benchmarks.default_change import case_calls
        from benchmarks.gen_kernels import ALL_CASES

        case = ALL_CASES[inputs.removeprefix("gen:")]
        found = [args for k, args in case_calls(case, shape, device) if k is kernel]
        if not found:
            raise ValueError(f"{inputs}: the case never calls {kernel.__name__}")
        return found[0]
    if inputs:
        return tuple(_load(inputs)(shape, device))
    make_inputs = getattr(importlib.import_module(kernel.__module__), "make_inputs", None)
    if make_inputs is not None:
        return tuple(make_inputs(shape, torch.bfloat16, device, 0))
    gen = torch.Generator(device="cpu").manual_seed(0)
    return (torch.randn(shape, generator=gen).to(device=device, dtype=torch.bfloat16),)


def compare(
    kernel: Any,
    shape: tuple[int, ...],
    configs: list[str],
    device: str,
    inputs_fn: str | None = None,
) -> list[dict[str, Any]]:
    """Each config expression (``tc.Config(...)``, or ``default.replace(...)``: a change to the
    discovered default) timed after the default, on the same inputs."""
    inputs = _inputs(kernel, shape, device, inputs_fn)
    bound = kernel.bind(inputs)
    default = bound.config_spec.default()
    names = {"tc": tc, "default": default}
    rows: list[dict[str, Any]] = []
    first = None
    for label, expr in [("default", "default"), *(("given", c) for c in configs)]:
        row = {"kernel": kernel.__name__, "shape": "x".join(map(str, shape)), "kind": label,
               "config": expr}  # fmt: skip
        try:
            config = eval(expr, names)  # noqa: S307 - the user's own command line
            row["config"] = repr(config)
            program = bound.compile_config(config)
            out = bound.run(program, *inputs)
            first = out if first is None else first
            ms = bench_ms(lambda p=program: bound.run(p, *inputs))
        except Exception as err:  # noqa: BLE001 - one bad config is a result, not the end
            rows.append({**row, "error": f"{type(err).__name__}: {str(err)[:160]}"})
            print(rows[-1], flush=True)
            continue
        rows.append({**row, "config": repr(program.config), "ms": round(ms, 4),
                     "max_err": max_error(out, first)})  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernel")
    parser.add_argument("shape")
    parser.add_argument("configs", nargs="*")
    parser.add_argument("--name", default="compare_configs")
    parser.add_argument(
        "--inputs",
        help="MODULE:FN(shape, device) returning the arguments, gen:CASE or example:NAME:CALL",
    )
    ns = parser.parse_intermixed_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shape = tuple(int(s) for s in ns.shape.split(","))
    rows = compare(_load(ns.kernel), shape, ns.configs, device, ns.inputs)
    write_results(ns.name, rows, ["kernel", "shape", "kind", "config", "ms", "max_err", "error"])


if __name__ == "__main__":
    main()

"""The ``tilecraft`` command line.

``tilecraft cache ls|clear [KERNEL]`` lists or removes the autotuner's cached configs.

``tilecraft tune PLAN [-o TABLE] [--devices N] [--ray [ADDRESS]]`` tunes a plan's kernels at its
shapes, on every visible GPU (or as Ray tasks), into one config table (docs/deploy.md).

``tilecraft check MODULE:KERNEL --target cuda:90 --target hip:gfx942 [--config JSON | --samples N]``
cross-compiles a kernel's configs for real GPU targets on any machine and prints, per config:
ok / error class, shared memory, registers, spills and whether it fits the target.

Inputs for binding the kernel come from ``--inputs MODULE:FN`` (a function returning the argument
tuple) or, for modules following the ``examples/`` convention (``make_inputs``, ``run``,
``TEST_SHAPES``), from ``--shape`` / ``--dtype``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import sys
from typing import Any

import torch

from tilecraft.config.config import Config
from tilecraft.errors import TilecraftError


def _load(ref: str) -> tuple[Any, Any]:
    module_name, _, attr = ref.partition(":")
    if not attr:
        raise SystemExit(f"tilecraft: expected MODULE:NAME, got {ref!r}")
    if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
        dotted = module_name.removesuffix(".py").replace(os.sep, ".").replace("/", ".")
        raise SystemExit(
            f"tilecraft: {ref!r} names a file; MODULE is a dotted module name, e.g. "
            f"{dotted}:{attr} (run from the folder that holds the package)"
        )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: `examples.x` from the repo root
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise SystemExit(
            f"tilecraft: cannot import {module_name!r} ({exc}); run from the folder that holds "
            "it or add that folder to PYTHONPATH"
        ) from None
    try:
        return module, getattr(module, attr)
    except AttributeError:
        raise SystemExit(f"tilecraft: module {module_name!r} has no {attr!r}") from None


def _example_args(
    module: Any, kernel: Any, shape: tuple[int, ...] | None, dtype: torch.dtype
) -> tuple[Any, ...]:
    """The arguments ``kernel`` is called with when the example module runs its suite."""
    missing = [n for n in ("make_inputs", "run") if not hasattr(module, n)]
    if not shape and not hasattr(module, "TEST_SHAPES"):
        missing.append("TEST_SHAPES")
    if missing:
        raise SystemExit(
            f"tilecraft: {module.__name__} has no {', '.join(missing)}: pass --inputs MODULE:FN "
            "(a function returning the kernel's arguments)"
            + (" or --shape" if missing == ["TEST_SHAPES"] else "")
        )
    shape = shape or tuple(module.TEST_SHAPES[0])
    inputs = module.make_inputs(shape, dtype, "cpu", 0)
    seen: list[tuple[Any, ...]] = []

    def record(k: Any, *args: Any) -> Any:
        if k is kernel:
            seen.append(args)
        return k.run_ref(*args)

    module.run(inputs, call=record)
    if not seen:
        raise SystemExit(f"tilecraft: {kernel.__name__} is not called by {module.__name__}.run")
    return seen[0]


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: give a count of 0 or more")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a count of 1 or more")
    return value


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in text.split(","))
    except ValueError:
        shape = ()
    if not shape or any(s < 0 for s in shape):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape: give sizes like 4096,1024")
    return shape


def _dtype(text: str) -> torch.dtype:
    dtype = getattr(torch, text.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a torch dtype: give e.g. bfloat16, float16, float32"
        )
    return dtype


def _json_config(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"tilecraft: --config {text!r} is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise SystemExit(f"tilecraft: --config {text!r} must be a JSON object of Config fields")
    return value


def cmd_check(ns: argparse.Namespace) -> int:
    from tilecraft.targets.target import Target
    from tilecraft.tools.check import check_kernel, format_rows
    from tilecraft.tools.crosscompile import missing_backend

    module, kernel = _load(ns.kernel)
    from tilecraft.runtime.kernel import Kernel

    if not isinstance(kernel, Kernel):
        raise SystemExit(
            f"tilecraft: {ns.kernel} is a {type(kernel).__name__}, not a kernel: check takes a "
            "function decorated with @tc.kernel"
        )
    targets = [Target.parse(t) for t in ns.target or ["cuda:90"]]
    for target in targets:  # before the arguments: _example_args runs the module's suite
        problem = missing_backend(target)
        if problem:
            raise SystemExit(f"tilecraft: check --target {target.backend}: {problem}")
    if ns.inputs:
        args = tuple(_load(ns.inputs)[1]())
    else:
        args = _example_args(module, kernel, ns.shape, ns.dtype)

    def configs_for(bound: Any) -> list[Config]:
        if ns.config:
            return [Config(**_json_config(c)) for c in ns.config]
        rng = random.Random(ns.seed)
        return [bound.config_spec.default()] + [
            bound.config_spec.random(rng) for _ in range(ns.samples)
        ]

    rows = check_kernel(kernel, args, targets, configs_for, ns.timeout)
    print(format_rows(rows))
    failed = [r for r in rows if r.report is None or not r.report.ok or r.misfit]
    print(f"\n{len(rows) - len(failed)} ok, {len(failed)} failed")
    # Every config failing is a failed check whatever --strict says; --strict also fails on one.
    return 1 if failed and (ns.strict or len(failed) == len(rows)) else 0


def cmd_cache(ns: argparse.Namespace) -> int:
    from tilecraft.autotune import cache

    if ns.action == "ls":
        entries = cache.ls(ns.kernel)
        for entry in entries:
            print(entry.describe())
        print(f"{len(entries)} cached config(s) under {cache.cache_root()}")
    else:
        print(f"removed {cache.clear(ns.kernel)} cached config(s)")
    return 0


def cmd_tune(ns: argparse.Namespace) -> int:
    from tilecraft.autotune.plan import tune_plan

    runner = None
    if ns.ray is not None:
        from tilecraft.autotune.plan_ray import ray_runner

        runner = ray_runner(ns.ray or None)
    return tune_plan(ns.plan, ns.output, devices=ns.devices, device=ns.device, runner=runner)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tilecraft",
        description="tilecraft's tools: cross-compile a kernel's configs for GPU targets "
        "(check), list or clear cached configs (cache), tune a plan's kernels into a config "
        "table to ship (tune)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="cross-compile a kernel's configs for GPU targets")
    check.add_argument("kernel", help="MODULE:KERNEL, e.g. examples.rms_norm:rms_norm_fwd")
    check.add_argument(
        "--target", action="append", help="cuda:90, hip:gfx942, ... (repeatable; default cuda:90)"
    )
    check.add_argument("--config", action="append", help="a config as JSON (repeatable)")
    check.add_argument(
        "--samples", type=_count, default=4, help="random configs besides the default"
    )
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--inputs", help="MODULE:FN returning the kernel's argument tuple")
    check.add_argument("--shape", type=_shape, help="comma-separated shape for example modules")
    check.add_argument("--dtype", type=_dtype, default="bfloat16")
    check.add_argument("--timeout", type=float, default=300.0, help="seconds per compile batch")
    check.add_argument("--strict", action="store_true", help="exit 1 if any config fails")
    cache = sub.add_parser("cache", help="list or clear the autotuner's cached configs")
    cache.add_argument("action", choices=["ls", "clear"])
    cache.add_argument("kernel", nargs="?", help="only this kernel's entries")
    tune = sub.add_parser("tune", help="run a tuning plan into a config table (JSON)")
    tune.add_argument("plan", help="a plan file (JSON): kernels as MODULE:NAME with argument specs")
    tune.add_argument("-o", "--output", help="the table (default: <plan>.tilecraft.json)")
    tune.add_argument("--devices", type=_positive, help="GPUs to use (default: every visible GPU)")
    tune.add_argument("--device", help="cuda or cpu (default: the plan's, else cuda if present)")
    tune.add_argument(
        "--ray", nargs="?", const="", metavar="ADDRESS", help="run jobs as Ray tasks (one GPU each)"
    )
    ns = parser.parse_args(argv)
    commands = {"cache": cmd_cache, "check": cmd_check, "tune": cmd_tune}
    try:
        return commands[ns.command](ns)
    except TilecraftError as exc:
        print(f"tilecraft: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""Random configs of every example kernel: correct in the interpreter and compiling for real GPUs.

Default runs are bounded for CI (a few configs per kernel); ``--run-slow`` runs the full sweep of
30 random configs per kernel, per target (cuda sm_90 and hip gfx942, CUDA-only fields dropped).
"""

from __future__ import annotations

import random
import zlib
from typing import Any

import pytest
import torch

from examples import EXAMPLES
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel


def _recorded_calls(
    module: Any, shape: tuple[int, ...], dtype: torch.dtype
) -> list[tuple[Any, tuple[Any, ...]]]:
    """(kernel, args) of every launch the module's ``run`` makes (run in ref mode)."""
    calls: list[tuple[Any, tuple[Any, ...]]] = []

    def record(kernel: Any, *args: Any) -> Any:
        calls.append((kernel, args))
        return kernel.run_ref(*args)

    module.run(module.make_inputs(shape, dtype, "cpu", 0), call=record)
    return calls


CASES = [(name, kname) for name, module in EXAMPLES.items() for kname in module.KERNELS]


def _dtype(module: Any) -> torch.dtype:
    return torch.float32 if torch.float32 in module.DTYPES else module.DTYPES[0]


@pytest.mark.parametrize("example,kernel_name", CASES)
def test_random_configs_match_reference_in_interpreter(
    example: str, kernel_name: str, request: pytest.FixtureRequest
) -> None:
    module = EXAMPLES[example]
    kernel = module.KERNELS[kernel_name]
    n = 30 if request.config.getoption("--run-slow") else 3
    calls = [
        (k, a)
        for k, a in _recorded_calls(module, tuple(module.TEST_SHAPES[0]), _dtype(module))
        if k is kernel
    ]
    assert calls, f"{kernel_name} is not launched by examples.{example}.run"
    args = calls[0][1]
    want = kernel.run_ref(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    bound = kernel.bind(args)
    rng = random.Random(zlib.crc32(kernel_name.encode()))  # the same configs in every process
    for _ in range(n):
        config = bound.config_spec.random(rng)
        got = bound.run(bound.compile_config(config), *args)
        for g, w in zip(_flat(got), _flat(want), strict=True):
            rtol, atol = _tolerance(w.dtype)
            torch.testing.assert_close(
                g.float(), w.float(), rtol=rtol, atol=atol, msg=lambda m, c=config: f"{c}: {m}"
            )


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """Another config may sum in another order: a few units in the last place of the output's
    dtype (fp32 results: 2e-3; bf16/fp16: one bf16 ulp; fp8: one e4m3 ulp, 12.5%)."""
    if not dtype.is_floating_point or dtype.itemsize >= 4:
        return 2e-3, 2e-3
    return (0.125, 0.125) if dtype.itemsize == 1 else (1.6e-2, 1.6e-2)


def _flat(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return (
        [v for v in value if isinstance(v, torch.Tensor)]
        if isinstance(value, (tuple, list))
        else []
    )


@pytest.mark.crosscompile
@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_random_configs_cross_compile(target: str, request: pytest.FixtureRequest) -> None:
    """Every example kernel, random configs from its space on ``target``: all compile."""
    n = 30 if request.config.getoption("--run-slow") else 1
    failures = []
    total = 0
    for name, module in EXAMPLES.items():
        shape = (
            tuple(module.BENCH_SHAPES[0])
            if request.config.getoption("--run-slow")
            else tuple(module.TEST_SHAPES[0])
        )
        seen: set[int] = set()
        for kernel, args in _recorded_calls(
            module, shape, torch.bfloat16 if torch.bfloat16 in module.DTYPES else module.DTYPES[0]
        ):
            if id(kernel) in seen:
                continue
            seen.add(id(kernel))
            rng = random.Random(0)
            rows = check_kernel(
                kernel,
                args,
                [Target.parse(target)],
                lambda b, r=rng: [b.config_spec.random(r) for _ in range(n)],
            )
            total += len(rows)
            failures += [
                f"{name}.{row.kernel_name} {row.config}: {row.status} {row.report.error[:300] if row.report else row.error}"
                for row in rows
                if row.report is None or not row.report.ok
            ]
    assert total > 0
    assert not failures, "\n".join(failures)

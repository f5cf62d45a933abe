"""Every example kernel's default config cross-compiles for real GPU targets (no GPU needed).

Each example module's ``run`` is driven once in ref mode with a medium shape; the ``call`` hook
records every kernel launch's arguments (a backward kernel gets its forward's outputs). For each
launch the default config is generated for ``cuda:90`` and ``hip:gfx942``, and all compiles run as
one batch in a worker process. Nothing executes: only ``triton.compile`` runs.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import tilecraft as tc
from tilecraft.codegen.kernel import GeneratedKernel
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob, CompileReport
from tilecraft.tools.worker import run_compile_jobs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `examples` lives at the repo root
from examples import EXAMPLES  # noqa: E402

pytestmark = pytest.mark.crosscompile

TARGETS = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
DTYPE = torch.bfloat16
SHAPES: dict[str, list[tuple[int, ...]]] = {  # medium shapes, one or more per example
    "add": [(512, 1000)],
    "softmax": [(512, 1000)],
    "rms_norm": [(512, 1000)],
    "layer_norm": [(512, 1000)],
    "matmul": [(512, 1000, 768)],
    "cross_entropy": [(512, 32000)],
    "attention": [(1, 2, 512, 64), (1, 2, 512, 128)],
    "swiglu": [(512, 1000)],
    "geglu": [(512, 1000)],
    "sum": [(512, 1000)],
    "rope": [(512, 32, 128), (300, 8, 80)],
    "cumsum": [(512, 10000)],
    "dropout_layer_norm": [(512, 1000)],
    "fp8_quant": [(512, 1024, 768)],
    "block_sparse_attention": [(1, 2, 512, 64, 50)],
}
DOT_KERNELS = {"matmul", "matmul_bias_gelu", "attention"}
TIMEOUT_S = 900.0


@dataclasses.dataclass
class Launch:
    """One kernel launch of an example's ``run``: what to bind, or why it could not be recorded."""

    launch_id: str
    kernel_name: str
    kernel: tc.Kernel | None = None
    args: tuple[Any, ...] = ()
    error: str = ""


@dataclasses.dataclass
class Case:
    target: Target
    generated: list[GeneratedKernel]
    loops: list[Any]
    reports: list[CompileReport] = dataclasses.field(default_factory=list)
    error: str = ""


@functools.cache
def _launches() -> tuple[Launch, ...]:
    """Every launch of every example's ``run`` at its medium shapes, recorded in ref mode."""
    out: list[Launch] = []
    for example, module in EXAMPLES.items():
        for shape in SHAPES[example]:
            size = "x".join(map(str, shape))
            calls: list[tuple[tc.Kernel, tuple[Any, ...]]] = []

            def record(kernel: tc.Kernel, *args: Any, calls: list[Any] = calls) -> Any:
                calls.append((kernel, args))
                return kernel.run_ref(*args)

            try:
                module.run(module.make_inputs(shape, DTYPE, "cpu", seed=0), record)
            except Exception as exc:  # reported by the test of this example, not at collection
                out.append(Launch(f"{example}-{size}", example, error=f"ref run failed: {exc!r}"))
                continue
            names = {id(k): n for n, k in module.KERNELS.items()}
            for i, (kernel, args) in enumerate(calls):
                name = names[id(kernel)]
                out.append(Launch(f"{name}-{size}-call{i}", name, kernel, args))
    return tuple(out)


def _generate(launch: Launch, target: Target) -> Case:
    assert launch.kernel is not None
    kernel = launch.kernel
    bound = BoundKernel(kernel, kernel.bind_arguments(launch.args, {}), target=target)
    _, _, traced, generated = bound.generate(bound.config_spec.default())
    return Case(target, generated, list(traced.loops))


@pytest.fixture(scope="module")
def compiled() -> dict[tuple[str, str], Case]:
    """Every (launch, target), generated here and compiled in one worker call."""
    cases: dict[tuple[str, str], Case] = {}
    for launch in _launches():
        for target in TARGETS:
            key = (launch.launch_id, target.backend)
            if launch.error:
                cases[key] = Case(target, [], [], error=launch.error)
                continue
            try:
                cases[key] = _generate(launch, target)
            except Exception as exc:
                cases[key] = Case(target, [], [], error=f"generate failed: {exc!r}")
    jobs = [
        CompileJob.of(gen, loop, case.target)
        for case in cases.values()
        for gen, loop in zip(case.generated, case.loops, strict=True)
    ]
    reports = iter(run_compile_jobs(jobs, TIMEOUT_S))
    for case in cases.values():
        case.reports = [next(reports) for _ in case.generated]
    return cases


def _params() -> list[Any]:
    return [
        pytest.param(launch, target, id=f"{launch.launch_id}-{target.backend}")
        for launch in _launches()
        for target in TARGETS
    ]


@pytest.mark.parametrize("launch,target", _params())
def test_crosscompile(
    compiled: dict[tuple[str, str], Case], launch: Launch, target: Target
) -> None:
    case = compiled[(launch.launch_id, target.backend)]
    assert not case.error, case.error
    assert case.generated, "no device loop was generated"
    for gen, report in zip(case.generated, case.reports, strict=True):
        assert report.ok, f"{gen.kernel_name} for {target.key}: {report.error}"
        if target.backend == "cuda":
            assert report.registers is not None, f"{gen.kernel_name}: no register count"
        if launch.kernel_name in DOT_KERNELS:
            assert "tl.dot" in gen.device_source, f"{gen.kernel_name}: no tl.dot in the source"


def test_crosscompile_bmm_3d_defaults() -> None:
    """The generalization benchmark's bmm (scalar batch index) at 16 x 1024^3 and with ragged
    rows (m = 1000): on sm_90 its defaults load through descriptors (2-D over the flattened
    batch rows, or 3-D blocks reshaped) and compile within shared memory without spills;
    gfx942's default has no descriptor and compiles too."""
    from benchmarks.gen_kernels.dots import bmm_3d

    jobs = []
    for target in TARGETS:
        for m in (1024, 1000):
            a = torch.empty(16, m, 1024, dtype=DTYPE)
            b = torch.empty(16, 1024, 1024, dtype=DTYPE)
            bound = BoundKernel(bmm_3d, bmm_3d.bind_arguments((a, b), {}), target=target)
            _, _, traced, generated = bound.generate(bound.config_spec.default())
            tma = target.backend == "cuda"
            assert ("a_desc.load(" in generated[0].device_source) == tma
            assert ("b_desc.load(" in generated[0].device_source) == tma
            jobs += [CompileJob.of(g, loop, target) for g, loop in zip(generated, traced.loops)]
    reports = run_compile_jobs(jobs, TIMEOUT_S)
    assert len(reports) == 4
    for report in reports:
        assert report.ok and report.fits and report.spills == 0, (report.target, report.error)


def test_pointers_compile_as_aligned_like_a_launch() -> None:
    """A launch specializes every 16-byte-aligned tensor pointer; the validator must too, or it
    measures unvectorized loads: seed 000's LayerNorm backward at 16 x 2 rows x 2048 / 8 warps
    compiles to 188 registers unaligned, 80 aligned (sm_90)."""
    from benchmarks.gen_kernels import CASES

    case = CASES["layer_norm_bwd_seed"]
    args = case.make_inputs((4608, 40920), "meta", 0)
    target = Target.parse("cuda:90")
    kernel = case.kernels[0]
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)
    config = tc.Config(block_sizes=[16, 2], reduction_loops=[2048], num_warps=8, num_stages=1)
    _, _, traced, kernels = bound.generate(config)
    job = CompileJob.of(kernels[0], traced.loops[0], target)
    pointers = [i for i, kind in enumerate(job.signature.values()) if kind.startswith("*")]
    assert job.aligned == tuple(pointers) and len(pointers) == 10  # 8 tensors, 2 statistics
    (report,) = run_compile_jobs([job], 300)  # a worker: no interpreter state in the way
    assert report.ok and report.registers is not None and report.registers < 128, report

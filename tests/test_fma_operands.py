"""The resource model's fp32 FMA dots (config/fma_operands.py) against ptxas: an STFT's two dots
sharing their frames operand over a whole K of 64 held 8 x 64 operand registers across the first
dot, which the model missed (its default spilled 10 KB a thread on sm_90); the slabs are counted
now, the default's tile shrinks until it fits, and what ptxas allocates for it stays within the
model's prediction. A stack frame the PTX itself declares (libdevice's sin / cos slow path) is
not reported as a spill."""

from __future__ import annotations

import tilecraft as tc
from benchmarks.gen_kernels import ALL_CASES
from tests.cross_targets import TARGETS
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

H200 = TARGETS[0]


def _bound(name: str) -> BoundKernel:
    case = ALL_CASES[name]
    args = case.make_inputs(case.gpu_shapes[0], "meta", 0)
    kernel = case.kernels[0]
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=H200)


def _compiled(bound: BoundKernel, config: tc.Config) -> tuple[int, int]:
    _, _, traced, kernels = bound.generate(config)
    (report,) = run_compile_jobs([CompileJob.of(kernels[0], traced.loops[0], H200)], 600)
    assert report.ok and report.registers is not None and report.spills is not None, report
    return report.registers, report.spills


def test_shared_fma_operands_are_counted_and_the_stft_default_fits() -> None:
    """Since session 44 the STFT's dots run in K chunks (codegen/dot_chunks.py): no slab is
    held, and its default owns 64 outputs a thread (config/fma_tiles.py), predicted past the
    limit (the streamed operands counted at their most), compiled without a spill."""
    bound = _bound("stft_magnitude")
    spec = bound.config_spec
    default = spec.resolve(spec.default(), warn=False)
    registers, spills = _compiled(bound, default.config)
    assert spills == 0 and registers <= default.resources.registers + 16, registers


def test_a_sine_tables_stack_frame_is_not_a_spill() -> None:
    bound = _bound("yarn_rope")
    assert "sin" in bound.generate(bound.config_spec.default())[3][0].device_source
    registers, spills = _compiled(bound, bound.config_spec.default())
    assert spills == 0 and registers < 128


def test_a_spilling_config_still_reports_its_spills() -> None:
    bound = _bound("stft_magnitude")
    _, spills = _compiled(bound, tc.Config(block_sizes=[64, 64], num_warps=8, num_stages=3))
    assert spills > 0


def test_a_kernel_spilling_at_every_tile_keeps_its_tile_and_no_spilling_pipeline() -> None:
    """Mamba-2's SSD holds FMA operand slabs of its whole head and state dims: every chunk size
    spills, so its chunks do not shrink further, and no TMA pipeline is predicted to fit. On an
    H100 its plain 32-row default took 5.94 ms, the 64-row TMA pipeline it had 6.17 (a chunked
    GLA's spilling pipeline 9.92 ms against its plain 9.43: spilling pipelines stay refused)."""
    spec = _bound("mamba2_ssd").config_spec
    default = spec.default()
    assert list(default.block_sizes) == [32]
    assert "tensor_descriptor" not in (default.indexing or [])
    assert spec.predicted(default).spills

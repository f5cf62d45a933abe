"""More warps for small grids whose loops reduce each step only into carried sums, maxima or
minima (config/occupancy.py: small_grid_warps; ir/deferred_sums.py:
step_reductions_only_accumulate): which loops qualify, which defaults move on cuda:90, and the
moved default's numerics."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.default_change import case_calls
from benchmarks.gen_kernels import HELDOUT
from benchmarks.gen_kernels.case import assert_matches_reference
from examples.cumsum import cumsum_rows
from tilecraft.config.occupancy import small_grid_warps
from tilecraft.config.resolve import deferred_reductions
from tilecraft.config.spec import ConfigSpec
from tilecraft.ir.deferred_sums import step_reductions_only_accumulate
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")


def _spec(kernel: tc.Kernel, *args: object) -> ConfigSpec:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=H200).config_spec


def _case_spec(name: str, shape: tuple[int, ...] | None = None) -> ConfigSpec:
    case = HELDOUT[name]
    kernel, args = case_calls(case, shape or case.gpu_shapes[0])[0]
    return _spec(kernel, *args)


def test_batchnorm_statistics_reduce_only_into_sums_and_get_16_warps() -> None:
    """256 channels, one a program (under two an SM), a [32, 256] step summed over two dims
    into the carried total: 8192 elements a step, 16 a thread at 16 warps. Deferred, whole
    tiles are added each step and nothing is reduced in the loop (then the warps stay)."""
    spec = _case_spec("batchnorm_stats_nchw")
    assert all(step_reductions_only_accumulate(loop.body, set()) for loop in spec.loops)
    plain = spec.default().replace(deferred_sums=False, num_warps=8)
    assert small_grid_warps(spec, plain).num_warps == 16
    deferred = deferred_reductions(spec, plain.replace(deferred_sums=True))
    assert not any(step_reductions_only_accumulate(loop.body, deferred) for loop in spec.loops)
    default = spec.default()  # deferred whole tiles (0.0398 ms on the H200; 8 warps 0.0635)
    assert default.num_warps == 16 and default.deferred_sums


def test_a_column_range_reduces_into_a_running_max_and_min_and_gets_16_warps() -> None:
    """A column range of [32768, 4096] bf16: 128 column tiles split in 2 (under two programs
    an SM), each step's amax and amin only update the running max and min. A column argmin's
    step minimum feeds a comparison that picks the index (a ``torch.where``, not an
    accumulator), so its walk does not qualify."""
    spec = _case_spec("column_range", (32768, 4096))
    assert all(step_reductions_only_accumulate(loop.body, set()) for loop in spec.loops)
    default = spec.default()
    assert default.split_reductions == (2,) and default.num_warps == 16
    argmin = _case_spec("column_argmin", (16384, 8192))
    assert not any(step_reductions_only_accumulate(loop.body, set()) for loop in argmin.loops)


def test_a_large_batchnorm_grid_keeps_its_warps() -> None:
    """4096 channels in 8-channel tiles, 512 programs (almost 4 an SM): other programs fill
    the waits."""
    spec = _case_spec("batchnorm_stats_nchw", (8, 4096, 16, 16))
    config = spec.default()
    assert spec.programs(0, config) == 512 and config.num_warps == 8


def test_a_step_max_that_feeds_the_elements_keeps_the_warps() -> None:
    """Decode attention's loop: the step's max and sum feed exp() of the step's scores."""
    spec = _case_spec("decode_attention")
    deferred = deferred_reductions(spec, spec.default())
    assert not any(step_reductions_only_accumulate(loop.body, deferred) for loop in spec.loops)
    assert spec.default().num_warps == 8


def test_scans_keep_the_warps_and_deferred_sums_count_as_sums() -> None:
    """A cumsum (32 rows of 1M) scans across warps; instance norm's sums are deferred past
    their loops, yet they only feed carried totals and its 16 x 2 programs hold few threads
    (H200: 8 warps 0.0843 ms, 16 warps 0.0837, default_change_s21d)."""
    scan = _spec(cumsum_rows, torch.empty(32, 1048576, dtype=torch.bfloat16, device="meta"))
    assert scan.default().num_warps == 4
    norm = _case_spec("instance_norm_nhwc")
    deferred = deferred_reductions(norm, norm.default())
    assert not all(step_reductions_only_accumulate(loop.body, deferred) for loop in norm.loops)
    assert norm.default().num_warps == 16


def test_a_kernel_of_a_few_microseconds_keeps_its_warps() -> None:
    """BatchNorm statistics over 1 MB: the launch is the cost; 16 warps would only add to it."""
    spec = _case_spec("batchnorm_stats_nchw", (8, 256, 16, 16))
    config = spec.default().replace(num_warps=4)
    assert small_grid_warps(spec, config) == config
    large = _case_spec("batchnorm_stats_nchw")
    assert small_grid_warps(large, large.default().replace(num_warps=4)).num_warps == 16


def test_batchnorm_at_16_warps_matches_eager_in_the_interpreter() -> None:
    case = HELDOUT["batchnorm_stats_nchw"]
    (x,) = case.make_inputs((3, 5, 6, 7), "cpu", 0)
    bound = BoundKernel(case.kernels[0], case.kernels[0].bind_arguments((x,), {}))
    config = bound.config_spec.default().replace(num_warps=16)
    mean, var = bound.run(bound.compile_config(config), x)
    ref_mean, ref_var = case.reference(x)
    torch.testing.assert_close(mean, ref_mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(var, ref_var, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_the_16_warp_batchnorm_default_matches_eager_on_gpu() -> None:
    case = HELDOUT["batchnorm_stats_nchw"]
    assert_matches_reference(case, case.gpu_shapes[0], "cuda")


@pytest.mark.gpu
def test_the_16_warp_column_range_default_matches_eager_on_gpu() -> None:
    case = HELDOUT["column_range"]
    assert_matches_reference(case, (32768, 4096), "cuda")

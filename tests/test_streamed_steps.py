"""Column walks whose steps stream into reductions (ir/streamed_steps.py) and the step the
default gives them (config/tile_budget.stream_walk_steps): the IR analysis on kernels that do
and do not stream, the default's step and warps on an H200 and an MI300, and the reshaped
default's numerics in the interpreter."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s17 import layer_norm_bwd_dwdb  # column sums
from benchmarks.gen_kernels.heldout_s26 import column_max_argmax  # a where-merged column walk
from tilecraft.config import tile_budget
from tilecraft.config.resolve import predicted_registers
from tilecraft.ir.nodes import Op
from tilecraft.ir.streamed_steps import streamed_step
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")
MI300 = Target.parse("hip:gfx942")


@tc.kernel(static_shapes=True)
def column_online_max_shift(x: torch.Tensor) -> torch.Tensor:
    """A running column max and a sum of exp(x - the step's new max): the tile is needed
    again after the step's reduction, so it does not stream."""
    m, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        best = tc.full([tn], float("-inf"), dtype=torch.float32)
        total = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            xt = x[tm, tn].to(torch.float32)
            new = torch.maximum(best, torch.amax(xt, dim=0))
            total = total * torch.exp(best - new) + torch.sum(torch.exp(xt - new[None, :]), dim=0)
            best = new
        out[tn] = total
    return out


def _bound(kernel: tc.Kernel, *args: torch.Tensor, target: Target = H200) -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)


def _walk(kernel: tc.Kernel, *args: torch.Tensor) -> bool:
    spec = _bound(kernel, *args).config_spec
    (loop,) = [n for n in spec.loops[0].walk() if n.op is Op.LOOP]
    return streamed_step(loop)


def _bf16(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, dtype=torch.bfloat16, device="meta")


def test_a_max_and_argmax_walk_streams_sums_and_a_reused_tile_do_not() -> None:
    assert _walk(column_max_argmax, _bf16(4096, 1024))
    assert not _walk(column_online_max_shift, _bf16(4096, 1024))
    fp32 = torch.empty(4096, device="meta")
    assert not _walk(layer_norm_bwd_dwdb, _bf16(4096, 1024), _bf16(4096, 1024), fp32, fp32)


@pytest.mark.parametrize(
    ("shape", "blocks", "warps"),
    [
        # 128 programs of 32 columns, one an SM: 1024 threads an SM capped at 16 warps, 64
        # elements a thread a step
        ((32768, 4096), [32, 1024], 16),
        # 1000 programs, 8 an SM: 4 warps, whose 64 elements a thread are the resident-slot
        # rule's 256-row step already
        ((4096, 32000), [32, 256], 4),
    ],
)
def test_a_streamed_column_walk_takes_64_elements_a_thread_a_step(
    shape: tuple[int, int], blocks: list[int], warps: int
) -> None:
    spec = _bound(column_max_argmax, _bf16(*shape)).config_spec
    config = spec.default()
    assert list(config.block_sizes) == blocks and config.num_warps == warps
    assert not predicted_registers(spec, config, warps).spills


def test_on_wave64_the_threads_per_sm_decide_the_waves() -> None:
    """MI300 (304 CUs, wave64): 1000 programs, 4 a CU, 256 threads each: 4 wave64s taking
    64 elements a thread, 512 rows of 32 columns; one program a CU: 8 wave64s (half the
    most), 1024 rows."""
    config = _bound(column_max_argmax, _bf16(4096, 32000), target=MI300).config_spec.default()
    assert list(config.block_sizes) == [32, 512] and config.num_warps == 4
    config = _bound(column_max_argmax, _bf16(32768, 4096), target=MI300).config_spec.default()
    assert list(config.block_sizes) == [32, 1024] and config.num_warps == 8


def test_column_sums_keep_their_steps() -> None:
    """Sums defer into tile accumulators that grow with the step: the rule leaves them."""
    fp32 = torch.empty(32768, device="meta")
    spec = _bound(layer_norm_bwd_dwdb, _bf16(32768, 4096), _bf16(32768, 4096), fp32, fp32)
    spec = spec.config_spec
    config = spec.default()
    assert tile_budget.stream_walk_steps(spec, config) == config
    assert config.block_sizes[1] <= 512


def test_the_streamed_default_computes_max_and_argmax_in_the_interpreter() -> None:
    x = ((torch.randn(700, 48) * 8).round() / 8).to(torch.bfloat16)  # ties
    bound = column_max_argmax.bind((x,))
    spec = _bound(column_max_argmax, _bf16(700, 48)).config_spec
    values, indices = bound.run(bound.compile_config(spec.default()), x)
    want = torch.max(x.float(), dim=0)
    torch.testing.assert_close(values.float(), want.values)
    assert torch.equal(indices, want.indices)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(32768, 512), (4096, 32000)])
def test_the_streamed_default_matches_torch_on_the_gpu(shape: tuple[int, int]) -> None:
    """The default's 1024- and 256-row steps, with ties, on the GPU."""
    x = ((torch.randn(*shape, device="cuda") * 4).round() / 4).to(torch.bfloat16)
    values, indices = column_max_argmax(x)
    want = torch.max(x.float(), dim=0)
    torch.testing.assert_close(values.float(), want.values)
    assert torch.equal(indices, want.indices)


@tc.kernel(static_shapes=True)
def column_max_and_copy(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A running column max that also stores each step's tile: the tile is a store's value,
    not only a reduction's input."""
    m, n = x.size()
    top = torch.empty([n], dtype=torch.float32, device=x.device)
    copy = torch.empty_like(x)
    for tn in tc.tile(n):
        best = tc.full([tn], float("-inf"), dtype=torch.float32)
        for tm in tc.tile(m):
            t = x[tm, tn]
            copy[tm, tn] = t
            v, i = torch.max(t.to(torch.float32), dim=0)
            best = torch.where(v > best, v, best + 0 * i.to(torch.float32))
        top[tn] = best
    return top, copy


def test_a_walk_that_stores_its_tile_does_not_stream() -> None:
    assert not _walk(column_max_and_copy, _bf16(4096, 1024))
    spec = _bound(column_max_and_copy, _bf16(32768, 4096)).config_spec
    config = spec.default()
    assert tile_budget.stream_walk_steps(spec, config) == config

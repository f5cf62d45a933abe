"""The default for row loops (a grid over rows, an inner loop walking each row in chunks): wide
chunks and one row per program on a GPU target (config/row_loops.py), and nothing else
changes: 1-D accesses walk no row, 2-D grids without an inner loop keep their tiles."""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_rows import logsumexp_middle  # strided whole reduction
from benchmarks.gen_kernels.reductions import online_softmax  # two loops over each row
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")


@tc.kernel(static_shapes=True)
def scale_rows(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] * s[tm][:, None]
    return out


def _default(kernel: tc.Kernel, *args: torch.Tensor) -> tc.Config:
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=H200)
    return bound.config_spec.default()


def test_row_loop_takes_one_row_and_wide_chunks() -> None:
    x = torch.empty(8192, 8192, dtype=torch.bfloat16, device="meta")
    config = _default(online_softmax, x)  # the whole row, 16 elements per thread
    assert list(config.block_sizes) == [1, 8192, 8192] and config.num_warps == 16


def test_short_rows_take_several_rows_per_program() -> None:
    x = torch.empty(65536, 512, dtype=torch.bfloat16, device="meta")
    assert list(_default(online_softmax, x).block_sizes) == [8, 512, 512]


def test_a_grid_without_an_inner_loop_is_unchanged() -> None:
    x = torch.empty(8192, 8192, dtype=torch.bfloat16, device="meta")
    s = torch.empty(8192, dtype=torch.bfloat16, device="meta")
    rows, cols = _default(scale_rows, x, s).block_sizes
    assert cols >= 64 and rows > 1


def test_the_new_default_computes_the_same_in_the_interpreter() -> None:
    x = torch.randn(6, 300)
    torch.testing.assert_close(online_softmax(x), torch.softmax(x, dim=-1))


def test_a_strided_whole_reduction_is_looped_before_rows_narrow() -> None:
    """[16, 4096, 1024] bf16: the whole 4096-long reduction with 32 columns is over the
    register budget. The default used to narrow the contiguous block to 2 columns (4 bytes of
    each 32-byte sector read); now it keeps 64 bytes of each row and loops the reduction."""
    x = torch.empty(16, 4096, 1024, dtype=torch.bfloat16, device="meta")
    config = _default(logsumexp_middle, x)
    assert config.block_sizes[1] * 2 >= 64
    assert config.reduction_loops[0] is not None and config.reduction_loops[0] < 4096


def test_a_looped_strided_reduction_computes_logsumexp() -> None:
    x = torch.randn(3, 700, 40)
    bound = logsumexp_middle.bind((x,))
    config = tc.Config(block_sizes=[1, 32], reduction_loops=[128])
    got = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(got, torch.logsumexp(x, 1), rtol=1e-5, atol=1e-5)

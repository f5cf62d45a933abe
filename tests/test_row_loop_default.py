"""The default for row loops (a grid over rows, an inner loop walking each row in chunks): wide
chunks and one row per program on a GPU target (config/row_loops.py), and nothing else
changes: 1-D accesses walk no row, 2-D grids without an inner loop keep their tiles."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_rows import (  # strided whole reductions
    column_softmax,
    logsumexp_middle,
)
from benchmarks.gen_kernels.heldout_s24 import compact_rows  # a cumsum along whole rows
from benchmarks.gen_kernels.heldout_s26 import column_max_argmax  # a where-merged column walk
from benchmarks.gen_kernels.heldout_s27 import channel_absmax_whole  # amax of x[:, tn]
from benchmarks.gen_kernels.reductions import online_softmax  # two loops over each row
from tilecraft.config import tile_budget
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


@tc.kernel(static_shapes=True)
def middle_softmax(x: torch.Tensor) -> torch.Tensor:
    b, _, h = x.size()
    out = torch.empty_like(x)
    for tb, th in tc.tile([b, h]):
        out[tb, :, th] = torch.softmax(x[tb, :, th].to(torch.float32), dim=1).to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def middle_sum(x: torch.Tensor) -> torch.Tensor:
    b, _, h = x.size()
    out = torch.empty([b, h], dtype=torch.float32, device=x.device)
    for tb, th in tc.tile([b, h]):
        out[tb, th] = torch.sum(x[tb, :, th].to(torch.float32), dim=1)
    return out


def test_a_two_pass_strided_reduction_stays_whole_in_sector_wide_columns() -> None:
    """A softmax over the middle dim of [64, 2048, 1024] bf16 would read each column block
    twice in chunks (statistics, then normalization): its 2048 rows stay one tile of 16 columns
    (32 bytes, a sector), at the fewest warps that hold it without spilling."""
    x = torch.empty(64, 2048, 1024, dtype=torch.bfloat16, device="meta")
    config = _default(middle_softmax, x)
    assert list(config.block_sizes) == [1, 16] and list(config.reduction_loops) == [None]
    assert config.num_warps == 8
    # a shorter dim keeps 64-byte rows whole
    config = _default(
        middle_softmax, torch.empty(32, 1024, 4096, dtype=torch.bfloat16, device="meta")
    )
    assert list(config.block_sizes) == [1, 32] and list(config.reduction_loops) == [None]


def test_a_one_pass_strided_reduction_still_loops_in_chunks() -> None:
    """A sum over the same dim streams its rows once either way: it keeps 64 bytes of each row
    and loops the 2048 rows in chunks."""
    config = _default(middle_sum, torch.empty(64, 2048, 1024, dtype=torch.bfloat16, device="meta"))
    assert list(config.block_sizes) == [1, 32]
    assert config.reduction_loops[0] is not None and config.reduction_loops[0] < 2048


def test_a_whole_strided_softmax_computes_the_same_in_the_interpreter() -> None:
    x = torch.randn(3, 40, 20)
    bound = middle_softmax.bind((x,))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=[1, 16], num_warps=8)), x)
    torch.testing.assert_close(got, torch.softmax(x, dim=1))


def test_a_row_scanned_whole_takes_one_row_tile() -> None:
    """A compaction by an exclusive cumsum of each 4096-wide row: one row a program at the
    4096-element tile's 4 warps (each warp more is a cross-warp step of the scan), not the
    pointwise budget's 2 rows at 8."""
    values = torch.empty(16384, 4096, device="meta")
    keep = torch.empty(16384, 4096, dtype=torch.bool, device="meta")
    config = _default(compact_rows, values, keep)
    assert list(config.block_sizes) == [1] and config.num_warps == 4


def test_a_column_walk_under_its_resident_slots_takes_taller_steps() -> None:
    """A running column max + argmax (a merge by torch.where: no split is offered) of
    4096x32000 bf16: [128 columns, 64 rows] a step leaves 250 programs for 132 SMs that each
    hold more; the column block halves and the step doubles (the tile stays) down to the
    64-byte floor of 32 bf16 columns. At 32768x4096 the column block is at its floor
    already. (The default then sizes the step: tests/test_streamed_steps.py.)"""
    for shape, blocks, want in [
        ((4096, 32000), [128, 64], [32, 256]),
        ((32768, 4096), [32, 256], [32, 256]),
    ]:
        x = torch.empty(*shape, dtype=torch.bfloat16, device="meta")
        spec = BoundKernel(
            column_max_argmax, column_max_argmax.bind_arguments((x,), {}), target=H200
        ).config_spec
        # (the default's rules size tiles without deferred arg-bests' lanes)
        config = tc.Config(block_sizes=blocks, num_warps=8, deferred_args=False)
        assert list(tile_budget.fill_resident_slots(spec, config).block_sizes) == want


def test_a_reshaped_column_walk_computes_max_and_argmax() -> None:
    x = ((torch.randn(300, 70) * 8).round() / 8).to(torch.bfloat16)  # ties
    bound = column_max_argmax.bind((x,))
    values, indices = bound.run(
        bound.compile_config(tc.Config(block_sizes=[16, 64], num_warps=4)), x
    )
    want = torch.max(x.float(), dim=0)
    torch.testing.assert_close(values.float(), want.values)
    assert torch.equal(indices, want.indices)


def test_a_chunked_column_counts_its_column_block_in_the_tile() -> None:
    """A softmax down the columns of 4096x4096 bf16 (x[:, tn], the reduction dim strided):
    [32 columns, 256 rows] chunks are an 8192-element tile, 16 elements a thread at 16 warps
    (counted as a 256-element row it took 8). A row loop's chunk keeps its rule."""
    x = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    config = _default(column_softmax, x)
    assert list(config.block_sizes) == [32] and list(config.reduction_loops) == [256]
    assert config.num_warps == 16
    config = _default(online_softmax, torch.empty(8192, 8192, dtype=torch.bfloat16, device="meta"))
    assert config.num_warps == 16 and list(config.block_sizes) == [1, 8192, 8192]


def test_a_tall_chunked_column_keeps_its_tile_to_the_chunk_limit() -> None:
    """amax of x[:, tn] over 32768 rows: a row's chunk rule gives 8192 *rows*, which with the
    32-column block would be a 262144-element budget (a first version took 4096-row chunks at
    32 warps and spilled 360 bytes on sm_90); the tile stays at the 8192-element limit."""
    x = torch.empty(32768, 4096, dtype=torch.bfloat16, device="meta")
    bound = BoundKernel(channel_absmax_whole, channel_absmax_whole.bind_arguments((x,), {}), H200)
    config = bound.config_spec.default()
    (chunk,) = config.reduction_loops
    assert chunk is not None and config.block_sizes[0] * chunk <= 8192
    assert not bound.config_spec.predicted(config).spills


def test_short_whole_rows_grow_to_a_thousand_elements_a_program() -> None:
    """Quaternions q [N, 4] fp32 and pixels of 3 channels, whole rows ``x[tn, :]``: 32 rows a
    program moved 512 bytes (H200: 0.32 ms for 16.7M quaternions, 0.13 at 256 rows; the
    NHWC3 -> NCHW transpose 0.32 -> 0.061 ms, heldout_s28c)."""
    from benchmarks.gen_kernels.heldout_s28c import nhwc3_to_nchw, quaternion_normalize

    q = torch.empty(1 << 24, 4, device="meta")
    assert list(_default(quaternion_normalize, q).block_sizes) == [256]
    img = torch.empty(64, 512, 512, 3, dtype=torch.bfloat16, device="meta")
    assert list(_default(nhwc3_to_nchw, img).block_sizes) == [256]


def test_rows_of_a_thousand_elements_a_program_keep_their_rows() -> None:
    """[32, 32] fp32 rows already hold 1024 elements: 64 or 128 rows ran 2-4% slower (H200,
    short_rows_softmax 4194304 x 32); and a small input still fills the device first."""
    from benchmarks.gen_kernels.heldout_s28 import short_rows_softmax
    from benchmarks.gen_kernels.heldout_s28c import quaternion_normalize

    x = torch.empty(4194304, 32, device="meta")
    assert list(_default(short_rows_softmax, x).block_sizes) == [32]
    q = torch.empty(4096, 4, device="meta")  # 4096 rows: 16 a program keeps 256 programs
    assert _default(quaternion_normalize, q).block_sizes[0] * 132 <= 4096


def test_grown_short_rows_compute_the_same_in_the_interpreter() -> None:
    from benchmarks.gen_kernels.heldout_s28c import (
        nhwc3_to_nchw,
        nhwc3_to_nchw_reference,
        quaternion_normalize,
        quaternion_normalize_reference,
    )

    q = torch.randn(3000, 4)
    torch.testing.assert_close(quaternion_normalize(q), quaternion_normalize_reference(q))
    img = torch.randn(2, 30, 33, 3)
    torch.testing.assert_close(nhwc3_to_nchw(img), nhwc3_to_nchw_reference(img))


@pytest.mark.crosscompile
def test_grown_quaternion_rows_are_16_byte_vectors_on_sm90() -> None:
    """At 32 rows the [32, 4] fp32 tile was laid out one element a thread (``ld.global.b32``);
    at the grown rows each thread's row is one 16-byte vector each way."""
    from benchmarks.gen_kernels.heldout_s28c import quaternion_normalize
    from tests.cross_targets import default_memory_ops

    ops = default_memory_ops(quaternion_normalize, (torch.empty(1 << 24, 4, device="meta"),))
    assert set(ops) == {"ld.global.v4.b32", "st.global.v4.b32"}, ops


def test_a_small_tile_of_a_grid_of_single_indices_grows_to_a_thousand_elements() -> None:
    """``block_size=[1, 1, None]`` (one sample and channel a program, the channel's scale as a
    scalar) left the voxel dim its pointwise [128]: one 2-byte element a thread, 262144
    programs of 256 bytes (H200: 0.162 ms; at [1024] 0.038 ms, short_row_ab_s30)."""
    from benchmarks.gen_kernels.heldout_s29b import channel_affine_ncdhw

    x = torch.empty(4, 64, 32, 64, 64, dtype=torch.bfloat16, device="meta")
    s = torch.empty(64, dtype=torch.bfloat16, device="meta")
    assert list(_default(channel_affine_ncdhw, x, s, s).block_sizes) == [1024]


@pytest.mark.crosscompile
def test_the_grown_voxel_block_is_16_byte_vectors_on_sm90() -> None:
    from benchmarks.gen_kernels.heldout_s29b import channel_affine_ncdhw
    from tests.cross_targets import default_memory_ops

    x = torch.empty(4, 64, 32, 64, 64, dtype=torch.bfloat16, device="meta")
    s = torch.empty(64, dtype=torch.bfloat16, device="meta")
    ops = default_memory_ops(channel_affine_ncdhw, (x, s, s))
    assert "ld.global.v4.b32" in ops and "st.global.v4.b32" in ops, ops
    assert "st.global.b16" not in ops, ops

"""The default order of multi-dim grids (config/grid_order.py): the grid dim that indexes the
accesses' stride-1 dim varies fastest, so the programs resident at once read neighbouring
memory; dot loops and atomic scatters keep the identity; the search moves between both; and the
reordered grids compute what eager PyTorch does in the interpreter."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels import HELDOUT
from benchmarks.gen_kernels.case import assert_matches_reference
from examples.add import add
from examples.matmul import matmul
from tilecraft.config.grid_order import contiguous_first_order
from tilecraft.config.spec import ConfigSpec
from tilecraft.ir.nodes import Op
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")


def _bound(kernel: tc.Kernel, *args: torch.Tensor, target: Target | None = H200) -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)


def _case_spec(name: str) -> ConfigSpec:
    case = HELDOUT[name]
    return _bound(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0)).config_spec


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, dtype=torch.bfloat16, device="meta")


def test_a_2d_pointwise_grid_walks_along_its_rows() -> None:
    """[32, 128] tiles of a row-major 8192x8192 add: the 64 column tiles of a row vary
    fastest (pid_1 = pid % 64), the 256 row tiles slowest."""
    bound = _bound(add, _meta(8192, 8192), _meta(8192, 8192))
    config = bound.config_spec.default()
    assert config.loop_orders == ((1, 0),)
    code = bound.to_triton_code(config)
    assert "pid_1 = (tl.program_id(0)) % (64)" in code
    assert "pid_0 = tl.program_id(0) // (64)" in code


def test_channels_last_loads_outvote_contiguous_stores() -> None:
    """A 2x2 max pool reading a channels_last image (four loads along the channels) into
    contiguous outputs (two stores along the width): channels fastest, then the width."""
    spec = _case_spec("max_pool2x2")
    assert spec.default().loop_orders == ((1, 3, 0, 2),)


def test_dot_loops_and_atomic_scatters_keep_their_order() -> None:
    """A GEMM's programs share operand panels (its order is the pipelines'); an embedding
    backward adds rows picked by ids with atomics: both keep the identity."""
    gemm = _bound(matmul, _meta(4096, 4096), _meta(4096, 4096)).config_spec
    assert [contiguous_first_order(loop) for loop in gemm.loops] == [[0, 1]]
    scatter = _case_spec("embedding_bwd_atomic")
    assert [contiguous_first_order(loop) for loop in scatter.loops] == [[0, 1]]
    assert all(list(o) == sorted(o) for o in scatter.default().loop_orders)


def test_the_search_moves_between_identity_and_memory_order() -> None:
    spec = _bound(add, _meta(8192, 8192), _meta(8192, 8192)).config_spec
    default = spec.default()
    moves = [m["loop_orders"] for m in spec.space.neighbor_fields(default) if "loop_orders" in m]
    assert moves == [[[0, 1]]]
    back = spec.normalize(default.replace(loop_orders=moves[0]), warn=False)
    moves_back = [m["loop_orders"] for m in spec.space.neighbor_fields(back) if "loop_orders" in m]
    assert moves_back == [[[1, 0]]]


@pytest.mark.parametrize(
    "pid_type", ["flat", "xyz", "persistent_blocked", "persistent_interleaved"]
)
def test_reordered_grids_match_eager(pid_type: str, device: str) -> None:
    """Ragged edges in both dims (37x100 in [16, 32] tiles) under each pid type, and the 4-D
    pool at an odd size (the interpreter on CPU, the GPU where there is one)."""
    x, y = torch.randn(37, 100, device=device), torch.randn(37, 100, device=device)
    bound = _bound(add, x, y, target=None)
    config = tc.Config(block_sizes=[16, 32], num_warps=4, loop_orders=[[1, 0]], pid_type=pid_type)
    torch.testing.assert_close(bound.run(bound.compile_config(config), x, y), x + y)

    case = HELDOUT["max_pool2x2"]
    (image,) = case.make_inputs((2, 5, 7, 9), device, 0)
    pool = _bound(case.kernels[0], image, target=None)
    default = pool.config_spec.default()
    assert default.loop_orders == ((1, 3, 0, 2),)
    out, where = pool.run(pool.compile_config(default), image)
    ref_out, ref_where = case.reference(image)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(where, ref_where)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name", ["max_pool2x2", "swiglu_bwd", "instance_norm_nhwc", "segmented_cumsum", "moe_combine"]
)
def test_reordered_defaults_match_eager_on_gpu(name: str) -> None:
    case = HELDOUT[name]
    assert_matches_reference(case, case.gpu_shapes[0], "cuda")


def test_a_dim_contiguous_only_in_the_outputs_keeps_whole_segments() -> None:
    """The max pool's width is contiguous only in its NCHW outputs (64 MB and 32 MB beside a
    256 MB input): it keeps 64 of its 56 columns (128-byte rows stored) instead of 8."""
    spec = _case_spec("max_pool2x2")
    assert spec.blocks[3].store_itemsize == 1 and spec.blocks[3].row_floor == 64
    assert spec.default().block_sizes == (1, 32, 1, 64)


def test_small_side_outputs_do_not_set_segment_floors() -> None:
    """A group norm stores its per-(n, group) statistics along the groups (2 KB beside 64 MB
    of activations): the group dim stays one a program."""
    from benchmarks.default_change import case_calls

    case = HELDOUT["group_norm_fwd"]
    kernel, args = case_calls(case, case.gpu_shapes[0])[0]
    spec = _bound(kernel, *args).config_spec
    assert spec.blocks[1].store_itemsize == 0 and spec.blocks[1].row_floor is None
    assert spec.default().block_sizes == (1, 1)


def test_a_shifted_tile_walks_its_row() -> None:
    """Four shifted loads ``x[tb, tch, tw.index + k]`` of a window-of-4 unfold read x's rows in
    order (slice items of the window block, step 1): the window block is contiguous, varies
    fastest and keeps 256-byte rows when the tile shrinks (it was halved to 32 columns, 64
    bytes of each row, with 16 x 16 batches and channels)."""
    spec = _case_spec("unfold_1d_k4")
    assert [b.contiguous for b in spec.blocks] == [False, False, True]
    default = spec.default()
    assert default.loop_orders == ((2, 0, 1),)
    assert default.block_sizes[2] * 2 >= 256


def test_an_interleaved_pair_dim_walks_its_row() -> None:
    """A complex multiply over ``x.view(t, d // 2, 2)[tt, tp, 0]`` (bf16 real / imaginary
    parts, the parts' dim of 2 picked by an int): the pair block walks memory 4 bytes a pair,
    so it is the contiguous one, varies fastest and keeps its 64-pair rows while the occupancy
    rule shrinks the tile (it halved the pairs to 32 while rows stayed 32)."""
    spec = _case_spec("complex_mul_interleaved")
    assert [b.contiguous for b in spec.blocks] == [False, True]
    default = spec.default()
    assert default.loop_orders == ((1, 0),)
    assert default.block_sizes[1] >= 64


def test_a_conv_weights_taps_do_not_make_its_channels_contiguous() -> None:
    """A causal depthwise conv reads its [D, 4] bf16 taps ``w[td, j]`` (8 bytes a channel)
    beside [B, D, T] activations 4096x their size: only bulk accesses' interleaved dims count,
    so the time block stays the one contiguous block (counting the taps moved the default to
    [1, 32, 64], channels fastest)."""
    spec = _case_spec("causal_conv1d_silu")
    taps = [
        n
        for loop in spec.loops
        for n in loop.walk()
        if n.op is Op.LOAD and n.attrs["tensor"].shape == (8192, 4)
    ]
    assert len(taps) == 4 and all(n.attrs["index"][1][0] == "int" for n in taps)
    assert [b.contiguous for b in spec.blocks] == [False, False, True]
    assert spec.default().loop_orders == ((2, 0, 1),)

"""Gather indices every lane shares (``codegen/uniform.py``): a group-wise scale indexed by
``tile.index // group`` loads one row per tile where the block keeps the tile inside one group
(and gathers per lane where it does not: a block wider than the group, masked lanes, an offset
that crosses groups), with the same numerics in the interpreter and code that cross-compiles."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels import HELDOUT
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

GROUP = 32


@tc.kernel(static_shapes=True)
def group_scaled(x: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """x [K, N] times the scale of each row's group of GROUP rows, scales [K / GROUP, N]."""
    k, n = x.size()
    out = torch.empty_like(x)
    for tk, tn in tc.tile([k, n]):
        out[tk, tn] = x[tk, tn] * scales[tk.index // GROUP, tn]
    return out


@tc.kernel(static_shapes=True)
def pair_group_scaled(x: torch.Tensor, scales: torch.Tensor, shift: int) -> torch.Tensor:
    """Rows of packed pairs: row i holds elements 2i and 2i + 1, whose group is (2i + shift) //
    (2 * GROUP) (shift: a constant offset into the groups)."""
    k, n = x.size()
    out = torch.empty_like(x)
    for tk, tn in tc.tile([k, n]):
        out[tk, tn] = x[tk, tn] * scales[(2 * tk.index + shift) // (2 * GROUP), tn]
    return out


def _inputs(k: int, n: int, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(k + n)
    return torch.randn(k, n, generator=g), torch.rand(groups, n, generator=g) + 0.5


def _code(kernel: tc.Kernel, args: tuple[object, ...], config: tc.Config) -> str:
    return kernel.bind(args).to_triton_code(config)


@pytest.mark.parametrize("block", [8, 16, 32])
def test_a_block_inside_one_group_loads_one_scale_row(block: int) -> None:
    x, s = _inputs(128, 48, 128 // GROUP)
    config = tc.Config(block_sizes=[block, 16])
    code = _code(group_scaled, (x, s), config)
    assert "tl.broadcast_to(tl.load(scales + (((1 * offset_0 + 0) // 32)" in code, code
    load = next(line for line in code.splitlines() if "tl.load(scales" in line)
    assert "v[" not in load and "indices_0" not in load, load  # no per-lane index
    bound = group_scaled.bind((x, s))
    got = bound.run(bound.compile_config(config), x, s)
    torch.testing.assert_close(got, x * s.repeat_interleave(GROUP, 0))


@pytest.mark.parametrize(
    ("k", "block"),
    [(128, 64), (100, 16)],  # wider than a group; a masked last tile
)
def test_blocks_across_groups_or_masked_lanes_gather_per_lane(k: int, block: int) -> None:
    x, s = _inputs(k, 48, -(-k // GROUP))
    config = tc.Config(block_sizes=[block, 16])
    code = _code(group_scaled, (x, s), config)
    assert "tl.broadcast_to(tl.load(scales" not in code, code
    bound = group_scaled.bind((x, s))
    got = bound.run(bound.compile_config(config), x, s)
    torch.testing.assert_close(got, x * s.repeat_interleave(GROUP, 0)[:k])


@pytest.mark.parametrize(("shift", "uniform"), [(0, True), (64, True), (16, False)])
def test_affine_indices_share_a_row_only_when_no_lane_crosses_a_group(
    shift: int, uniform: bool
) -> None:
    x, s = _inputs(96, 40, 4)
    config = tc.Config(block_sizes=[16, 8])
    code = _code(pair_group_scaled, (x, s, shift), config)
    assert ("tl.broadcast_to(tl.load(scales" in code) is uniform, code
    bound = pair_group_scaled.bind((x, s, shift))
    got = bound.run(bound.compile_config(config), x, s, shift)
    rows = (2 * torch.arange(96) + shift) // (2 * GROUP)
    torch.testing.assert_close(got, x * s[rows])


def test_uniform_rows_with_64_bit_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilecraft.ir import index_width

    x, s = _inputs(128, 48, 128 // GROUP)
    monkeypatch.setattr(index_width, "INT32_LIMIT", 100)  # the offsets now "pass" 2**31
    config = tc.Config(block_sizes=[16, 16])
    bound = group_scaled.bind((x, s))
    code = bound.to_triton_code(config)
    assert "tl.broadcast_to(tl.load(scales + (tl.cast(((1 * offset_0 + 0) // 32), tl.int64)" in code
    got = bound.run(bound.compile_config(config), x, s)
    torch.testing.assert_close(got, x * s.repeat_interleave(GROUP, 0))


@pytest.mark.crosscompile
def test_uniform_scale_rows_cross_compile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x, s = _inputs(512, 256, 512 // GROUP)
    configs = [tc.Config(block_sizes=[16, 64]), tc.Config(block_sizes=[64, 64])]
    rows = check_kernel(group_scaled, (x.bfloat16(), s.bfloat16()), targets, lambda b: configs)
    assert len(rows) == 4
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_uniform_scale_rows_on_gpu() -> None:
    case = HELDOUT["w4a16_gemm_prefill"]
    inputs = case.make_inputs((512, 1024, 768), "cuda", 0)
    got = case.kernels[0](*inputs)
    torch.testing.assert_close(got, case.reference(*inputs), rtol=2**-7, atol=case.atol)
    x, s = (t.cuda().bfloat16() for t in _inputs(4096, 512, 4096 // GROUP))
    want = (x.float() * s.float().repeat_interleave(GROUP, 0)).bfloat16()
    for config in (tc.Config(block_sizes=[32, 128]), tc.Config(block_sizes=[128, 128])):
        bound = group_scaled.bind((x, s))
        torch.testing.assert_close(bound.run(bound.compile_config(config), x, s), want)

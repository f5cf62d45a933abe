"""Gathers and scatters whose index along the tensor's contiguous dim is computed
(codegen/lane_order.py): built with that dim first so Triton lays the warp's lanes along it.
Generated code, numerics in the interpreter (2-D and 3-D tiles, a scatter, padded tiles),
accesses left alone, and the layout Triton chose cross-compiled for sm_90."""

from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel


@tc.kernel(static_shapes=True)
def upsample_nearest(x: torch.Tensor) -> torch.Tensor:
    """x [M, H, W] -> [M, 2H, 2W], each output pixel reading its source pixel: the column
    index is computed (float math), as a resize's is."""
    m, h, w = x.size()
    out = torch.empty([m, 2 * h, 2 * w], dtype=x.dtype, device=x.device)
    for tp, ty, tx in tc.tile([m, 2 * h, 2 * w], block_size=[1, None, None]):
        sy = (ty.index.to(torch.float32) * 0.5).to(torch.int32)
        sx = (tx.index.to(torch.float32) * 0.5).to(torch.int32)
        out[tp.begin, ty, tx] = x[tp.begin, sy[:, None], sx[None, :]] * 2
    return out


@tc.kernel(static_shapes=True)
def rows_by_index(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Embedding rows: the computed index picks rows, the contiguous dim is a tile's arange."""
    (n,), d = idx.size(), table.size(1)
    out = torch.empty([n, d], dtype=table.dtype, device=table.device)
    for tn, td in tc.tile([n, d]):
        out[tn, td] = table[idx[tn][:, None], td.index[None, :]]
    return out


@tc.kernel(static_shapes=True)
def channel_shuffle_3d(x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """x [A, B, C]: out[a, b, c] = x[a, b, perm[c]] over a 3-D tile (tl.permute)."""
    a, b, c = x.size()
    out = torch.empty_like(x)
    for ta, tb, tc_ in tc.tile([a, b, c]):
        out[ta, tb, tc_] = x[
            ta.index[:, None, None], tb.index[None, :, None], perm[tc_][None, None, :]
        ]
    return out


@tc.kernel(static_shapes=True)
def scatter_columns(x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """out[:, perm[j]] = x[:, j]: a scatter along the contiguous dim."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm.index[:, None], perm[tn][None, :]] = x[tm, tn]
    return out


def _code(
    kernel: tc.Kernel, args: tuple[torch.Tensor, ...], config: tc.Config | None = None
) -> str:
    bound = kernel.bind(args)
    return bound.to_triton_code(config or bound.config_spec.default())


def test_gather_along_contiguous_dim_is_built_transposed() -> None:
    x = torch.randn(3, 5, 9)
    code = _code(upsample_nearest, (x,))
    assert code.count("tl.trans(tl.load(tl.trans(tl.broadcast_to(x + (") == 1, code
    # the output store's column index is the tile's own: left to Triton
    assert "tl.store(tl.trans(" not in code
    code = _code(channel_shuffle_3d, (torch.randn(4, 5, 6), torch.randperm(6)))
    assert "tl.permute(tl.load(tl.permute(tl.broadcast_to(x + (" in code, code
    assert ", [2, 0, 1])" in code and ", [1, 2, 0])" in code  # moved first, then back
    code = _code(scatter_columns, (torch.randn(5, 7), torch.randperm(7)))
    assert "tl.store(tl.trans(tl.broadcast_to(out + (" in code, code


@tc.kernel(static_shapes=True)
def overlapping_frames(x: torch.Tensor) -> torch.Tensor:
    """x [L] cut into frames of 16 every 4 samples: out[f, k] = x[4 f + k], a computed index
    that is a sum of a frame tile's positions and an arange along the contiguous dim."""
    nf = 1 + (x.size(0) - 16) // 4
    out = torch.empty([nf, 16], dtype=x.dtype, device=x.device)
    for tf in tc.tile(nf):
        out[tf, :] = x[tf.index[:, None] * 4 + tc.arange(16)[None, :]] * 2
    return out


def test_accesses_whose_lanes_triton_sees_are_left_alone() -> None:
    code = _code(rows_by_index, (torch.randn(50, 16), torch.randint(0, 50, (9,))))
    assert "tl.trans(" not in code, code
    # frames: the row offset is constant along the arange's dim, which Triton proves
    # contiguous (transposed, an STFT's frames took 11 barriers of layout conversion on sm_90)
    x = torch.randn(101)
    code = _code(overlapping_frames, (x,))
    assert "tl.trans(" not in code and "tl.permute(" not in code, code
    want = x.unfold(0, 16, 4) * 2
    torch.testing.assert_close(overlapping_frames(x), want)
    bound = overlapping_frames.bind((x,))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=[4])), x)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("config", [None, tc.Config(block_sizes=[4, 8])])
def test_numerics_match_eager(config: tc.Config | None) -> None:
    x = torch.randn(3, 5, 9)
    bound = upsample_nearest.bind((x,))
    got = bound.run(bound.compile_config(config or bound.config_spec.default()), x)
    expected = 2 * x.repeat_interleave(2, dim=1).repeat_interleave(2, dim=2)
    torch.testing.assert_close(got, expected)
    y, perm = torch.randn(4, 5, 6), torch.randperm(6)
    torch.testing.assert_close(channel_shuffle_3d(y, perm), y[:, :, perm])
    z, cols = torch.randn(5, 7), torch.randperm(7)
    want = torch.empty_like(z)
    want[:, cols] = z
    torch.testing.assert_close(scatter_columns(z, cols), want)


def _load_layouts(ttgir: str) -> list[str]:
    """The blocked layout of every tt.load in ``ttgir``."""
    layouts = dict(re.findall(r"^(#blocked\d*) = #ttg\.blocked<(\{[^}]*\})>", ttgir, re.M))
    used = re.findall(r"tt\.load [^\n]*, (#blocked\d*)>", ttgir)
    return [layouts[name] for name in used]


def _sm90_loads(kernel: tc.Kernel, x: torch.Tensor, config: tc.Config) -> tuple[list[str], str]:
    """The load layouts and the TTGIR of ``kernel`` on ``x`` at ``config``, compiled for sm_90."""
    (row,) = check_kernel(kernel, (x,), [Target.parse("cuda:90")], lambda b: [config])
    assert row.report is not None and row.report.ok, row.report
    return _load_layouts(row.report.ttgir), row.report.ttgir


@pytest.mark.crosscompile
def test_triton_lays_the_gathers_lanes_along_the_contiguous_dim() -> None:
    """sm_90: the [16, 128] gather is loaded as [128, 16] with the 32 lanes of a warp on 32
    columns (threadsPerWarp [32, 1]), where built untransposed Triton's tie gave [16, 2]."""
    config = tc.Config(block_sizes=[16, 128], num_warps=4)
    layouts, ttgir = _sm90_loads(upsample_nearest, torch.randn(64, 256, 256), config)
    assert layouts and all("threadsPerWarp = [32, 1]" in lay for lay in layouts), layouts
    assert "tensor<128x16x!tt.ptr<f32>" in ttgir


@pytest.mark.crosscompile
def test_permuted_accesses_cross_compile() -> None:
    assert_defaults_cross_compile(
        channel_shuffle_3d, (torch.randn(8, 64, 256), torch.randperm(256))
    )
    assert_defaults_cross_compile(scatter_columns, (torch.randn(512, 1024), torch.randperm(1024)))
    assert_defaults_cross_compile(upsample_nearest, (torch.randn(16, 128, 128),))


@tc.kernel(static_shapes=True)
def zero_columns(x: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """A constant scattered along the contiguous dim (``tl.broadcast_to`` takes no number)."""
    m, k = x.size(0), cols.size(0)
    for tm, tk in tc.tile([m, k]):
        x[tm.index[:, None], cols[tk][None, :]] = 0.0
    return x


def test_a_scattered_constant() -> None:
    x, cols = torch.randn(5, 9), torch.tensor([7, 0, 3])
    want = x.clone()
    want[:, cols] = 0.0
    code = _code(zero_columns, (x, cols))
    assert "tl.trans(tl.full([" in code, code
    torch.testing.assert_close(zero_columns(x.clone(), cols), want)


@tc.kernel(static_shapes=True)
def group_center(x: torch.Tensor) -> torch.Tensor:
    """x [M, G, K]: each group of K minus its mean; ``tg`` continues the whole K dim in memory."""
    m, g, _ = x.size()
    out = torch.empty_like(x)
    for tm, tg in tc.tile([m, g]):
        v = x[tm, tg, :]
        out[tm, tg, :] = v - torch.mean(v, dim=-1, keepdim=True)
    return out


def _center_ref(x: torch.Tensor) -> torch.Tensor:
    return x - x.mean(-1, keepdim=True)


def test_a_tile_that_continues_a_whole_contiguous_dim_is_built_first() -> None:
    """[tm, tg, :] of [M, G, 16]: tg's stride is K, so the load and the store move it first; a
    K that the block pads (12 -> 16), a G dim that is not next to K in memory, and 2-D tiles
    keep their order."""
    x = torch.randn(5, 7, 16)
    code = _code(group_center, (x,))
    assert "tl.permute(tl.load(tl.permute(tl.broadcast_to(x + (" in code, code
    assert "tl.store(tl.permute(tl.broadcast_to(out + (" in code and "[1, 0, 2]" in code, code
    for config in (None, tc.Config(block_sizes=[4, 2])):
        bound = group_center.bind((x,))
        got = bound.run(bound.compile_config(config or bound.config_spec.default()), x)
        torch.testing.assert_close(got, _center_ref(x))
    padded = torch.randn(5, 7, 12)
    assert "tl.permute(" not in _code(group_center, (padded,))
    torch.testing.assert_close(group_center(padded), _center_ref(padded))
    strided = torch.randn(5, 16, 7).transpose(1, 2)  # [5, 7, 16], G of stride 1
    assert "tl.permute(" not in _code(group_center, (strided,))
    torch.testing.assert_close(group_center(strided), _center_ref(strided))


@pytest.mark.crosscompile
def test_triton_lays_the_lanes_along_the_groups() -> None:
    """sm_90, [16, 32, 16] bf16 tiles, loaded as [32, 16, 16] (groups first): the warp's lanes
    cover 16 consecutive groups (before: the same threadsPerWarp [16, 1, 2] over the [16, 32,
    16] tile, 16 rows of 32 bytes)."""
    x = torch.randn(4096, 256, 16, dtype=torch.bfloat16)
    layouts, ttgir = _sm90_loads(group_center, x, tc.Config(block_sizes=[16, 32], num_warps=8))
    assert layouts and all("threadsPerWarp = [16, 1, 2]" in lay for lay in layouts), layouts
    assert "tensor<32x16x16x!tt.ptr<bf16>" in ttgir
    assert_defaults_cross_compile(group_center, (x,))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_groups_built_first_match_eager_on_gpu() -> None:
    """fp32 groups of 16 (64 bytes, built first) and of 8, 37 groups (masked)."""
    for shape in ((4096, 256, 16), (1000, 37, 8)):
        x = torch.randn(shape, device="cuda")
        torch.testing.assert_close(group_center(x), _center_ref(x), atol=1e-5, rtol=1e-5)

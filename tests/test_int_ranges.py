"""Integer sums and scans narrowed to int32 where they cannot overflow (ir/int_ranges.py):
which accumulations narrow (IR and generated code), which must not (unknown or too large
ranges, dynamic extents), numerics in the interpreter against eager PyTorch, including values
that would overflow int32, and cross-compiles for cuda:90 and hip:gfx942."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s24 import compact_rows as compact
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.ir.nodes import Op


def _compact_expected(values: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, ...]:
    out = torch.zeros_like(values)
    for i in range(values.shape[0]):
        row = values[i][keep[i]]
        out[i, : row.numel()] = row
    return out, keep.long().sum(1)


@tc.kernel(static_shapes=True)
def int_sums(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Row sums, cumsums and maxima of an integer tensor, as torch gives them (int64)."""
    m, n = x.size()
    sums = torch.empty([m], dtype=torch.int64, device=x.device)
    csums = torch.empty([m, n], dtype=torch.int64, device=x.device)
    maxes = torch.empty([m], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        v = x[tm, :]
        sums[tm] = torch.sum(v, dim=1)
        csums[tm, :] = torch.cumsum(v * 2 - 1, dim=1)
        maxes[tm] = torch.amax(v.to(torch.int64), dim=1)
    return sums, csums, maxes


def _dtypes_of(kernel: tc.Kernel, args: tuple[torch.Tensor, ...], op: Op) -> list[torch.dtype]:
    bound = kernel.bind(args)
    return [n.dtype for loop in bound.config_spec.loops for n in loop.walk() if n.op is op]


def test_mask_cumsum_and_count_narrow() -> None:
    args = (
        torch.empty(64, 4096, device="meta"),
        torch.empty(64, 4096, dtype=torch.bool, device="meta"),
    )
    assert _dtypes_of(compact, args, Op.SCAN) == [torch.int32]
    assert _dtypes_of(compact, args, Op.REDUCE) == [torch.int32]
    bound = compact.bind(args)
    code = bound.to_triton_code(bound.config_spec.default())
    assert "tl.cumsum(k, 1)" in code, code
    # the index of the scatter is the int32 slot, widened only for the user's int64 view
    assert "out + (v_1 * 4096 + slot)" in code or "* 4096 + slot)" in code, code


@pytest.mark.parametrize(
    ("dtype", "n", "narrow"),
    [
        (torch.int8, 4096, True),  # |v| and |v * 2 - 1| <= 128 (int8 wraps), 4096 of them
        (torch.int16, 1 << 17, False),  # 2^15 * 2^17 elements: past 2^31
        (torch.int32, 8, False),  # an int32 load's range is all of int32
    ],
)
def test_bounds_decide(dtype: torch.dtype, n: int, narrow: bool) -> None:
    args = (torch.empty(8, n, dtype=dtype, device="meta"),)
    assert _dtypes_of(int_sums, args, Op.SCAN) == [torch.int32 if narrow else torch.int64]
    sums, maxes = _dtypes_of(int_sums, args, Op.REDUCE)
    assert sums == (torch.int32 if narrow else torch.int64)
    # a max narrows whenever its values fit int32
    assert maxes == (torch.int64 if dtype == torch.int32 else torch.int32)


def test_dynamic_extent_keeps_int64() -> None:
    dynamic = tc.kernel(static_shapes=False)(int_sums.fn)
    args = (torch.empty(8, 64, dtype=torch.int8, device="meta"),)
    assert _dtypes_of(dynamic, args, Op.SCAN) == [torch.int64]


@pytest.mark.parametrize("config", [None, tc.Config(block_sizes=[2], num_warps=2)])
def test_compact_numerics(config: tc.Config | None) -> None:
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(5, 300, generator=gen)
    keep = torch.rand(5, 300, generator=gen) < 0.4
    kernel = compact if config is None else tc.kernel(static_shapes=True, config=config)(compact.fn)
    out, counts = kernel(values, keep)
    want_out, want_counts = _compact_expected(values, keep)
    torch.testing.assert_close(out, want_out, rtol=0, atol=0)
    torch.testing.assert_close(counts, want_counts, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32])
def test_int_sums_numerics(dtype: torch.dtype) -> None:
    info = torch.iinfo(dtype)
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(info.min, info.max, (6, 200), generator=gen, dtype=torch.int64).to(dtype)
    x[0, :] = info.max  # int32: sums past 2^31 that an int32 accumulator would wrap
    sums, csums, maxes = int_sums(x)
    wide = x.to(torch.int64)
    assert torch.equal(sums, wide.sum(1))
    assert torch.equal(csums, torch.cumsum(x * 2 - 1, dim=1))
    assert torch.equal(maxes, wide.amax(1))


@pytest.mark.crosscompile
def test_cross_compiles() -> None:
    assert_defaults_cross_compile(
        compact,
        (
            torch.empty(64, 4096, device="meta"),
            torch.empty(64, 4096, dtype=torch.bool, device="meta"),
        ),
    )
    assert_defaults_cross_compile(
        int_sums, (torch.empty(64, 1024, dtype=torch.int8, device="meta"),)
    )


@pytest.mark.gpu
def test_on_gpu() -> None:
    """The narrowed scan, count and scatter on the GPU, at a row long enough for every warp's
    share (4096), and sums that would wrap an int32 accumulator."""
    gen = torch.Generator().manual_seed(2)
    values = torch.randn(64, 4096, generator=gen).cuda()
    keep = (torch.rand(64, 4096, generator=gen) < 0.4).cuda()
    out, counts = compact(values, keep)
    want_out, want_counts = _compact_expected(values.cpu(), keep.cpu())
    assert torch.equal(out.cpu(), want_out) and torch.equal(counts.cpu(), want_counts)
    for dtype in (torch.int8, torch.int32):
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, (64, 1024), generator=gen, dtype=torch.int64)
        x = x.to(dtype).cuda()
        x[0, :] = info.max
        sums, csums, maxes = int_sums(x)
        wide = x.to(torch.int64)
        assert torch.equal(sums, wide.sum(1)) and torch.equal(maxes, wide.amax(1))
        assert torch.equal(csums, torch.cumsum(x * 2 - 1, dim=1))


@tc.kernel(static_shapes=True)
def positions_divided(x: torch.Tensor) -> torch.Tensor:
    """Floor divisions and moduli of a tile's positions: by a constant, shifted up (still
    non-negative), shifted down (negative for the first positions), of a signed load."""
    (n,) = x.size()
    out = torch.empty([4, n], dtype=torch.int64, device=x.device)
    for tn in tc.tile(n):
        out[0, tn] = tn.index // 3
        out[1, tn] = (tn.index + 5) % 4
        out[2, tn] = (tn.index - 5) // 3
        out[3, tn] = x[tn] % 4
    return out


def test_non_negative_divisions_truncate_without_the_sign_fix_up() -> None:
    """A tile's positions are >= 0, so their floor division and modulo by a positive constant
    are Triton's ``//`` and ``%`` (a capacity-limited MoE dispatch's ``tt.index // bt``); a
    value that may be negative keeps torch's floor semantics."""
    x = torch.randint(-20, 20, (37,), dtype=torch.int32)
    code = positions_divided.bind((x,)).to_triton_code(tc.Config(block_sizes=[16]))
    assert "(indices_0 // 3)" in code and "% 4)" in code, code
    assert code.count("tl.where(") == 2, code  # (positions - 5) // 3 and x % 4
    n = torch.arange(37)
    want = torch.stack([n // 3, (n + 5) % 4, (n - 5) // 3, (x % 4).long()])
    for blocks in ([16], [64]):
        bound = positions_divided.bind((x,))
        got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
        torch.testing.assert_close(got, want)

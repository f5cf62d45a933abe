"""Batched torch.searchsorted (an N-D sorted tile whose leading dims are the values': each row
of values searches its own row, frontend/sequences.py) and Tensor.median / torch.median along
a whole static dim (the ascending sort's middle element, frontend/sorting.py): numerics in the
interpreter (on the GPU where there is one) against eager PyTorch at lengths that are not
powers of two, under several configs; the generated code's form; errors naming what the user
wrote; cross-compiles for cuda:90 and hip:gfx942."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import ShapeError, UnsupportedOpError

CONFIGS = [None, tc.Config(block_sizes=[1]), tc.Config(block_sizes=[4])]


def _run(kernel: tc.Kernel, args: tuple[torch.Tensor, ...], config: tc.Config | None) -> Any:
    """``kernel`` on ``args`` under ``config`` (None: the default config)."""
    bound = kernel.bind(args)
    return bound.run(bound.compile_config(config or bound.config_spec.default()), *args)


def _code(kernel: tc.Kernel, args: tuple[torch.Tensor, ...]) -> str:
    bound = kernel.bind(args)
    return bound.to_triton_code(bound.config_spec.default())


# -- batched torch.searchsorted --------------------------------------------------------------


@tc.kernel(static_shapes=True)
def row_searches(
    w: torch.Tensor, r: torch.Tensor, keys: torch.Tensor, q: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Per row: left and right searches of a cdf row (inverse-CDF sampling), side='right' with
    int32 out, and an int row with ties searched by ints."""
    b, n = w.size()
    s = r.size(1)
    left = torch.empty([b, s], dtype=torch.int64, device=w.device)
    right = torch.empty([b, s], dtype=torch.int64, device=w.device)
    side = torch.empty([b, s], dtype=torch.int32, device=w.device)
    ints = torch.empty([b, q.size(1)], dtype=torch.int64, device=w.device)
    for tb in tc.tile(b):
        cdf = torch.cumsum(w[tb, :], dim=1)
        v = r[tb, :] * cdf[:, -1:]
        left[tb, :] = torch.searchsorted(cdf, v)
        right[tb, :] = torch.searchsorted(cdf, v, right=True)
        side[tb, :] = torch.searchsorted(cdf, v, side="right", out_int32=True)
        ints[tb, :] = torch.searchsorted(keys[tb, :], q[tb, :], side="left")
    return left, right, side, ints


def _search_args(device: str) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    w = torch.randint(1, 17, (7, 37), generator=g).float()  # integer cdf: exact in fp32
    r = torch.rand(7, 23, generator=g)
    r[:, :3] = torch.tensor([0.0, 1.0, float("nan")])  # the ends, and NaN (counts every element)
    keys = torch.randint(0, 9, (7, 37), generator=g).sort(dim=1).values.int()  # many ties
    q = torch.randint(-1, 11, (7, 13), generator=g).int()
    return tuple(a.to(device) for a in (w, r, keys, q))


@pytest.mark.parametrize("config", CONFIGS, ids=["default", "block1", "block4"])
def test_row_searches_match_eager(config: tc.Config | None, device: str) -> None:
    w, r, keys, q = args = _search_args(device)
    cdf = torch.cumsum(w, 1)
    v = r * cdf[:, -1:]
    want = (
        torch.searchsorted(cdf, v),
        torch.searchsorted(cdf, v, right=True),
        torch.searchsorted(cdf, v, side="right", out_int32=True),
        torch.searchsorted(keys, q, side="left"),
    )
    got = _run(row_searches, args, config)
    for have, expected in zip(got, want, strict=True):
        assert have.dtype == expected.dtype and torch.equal(have, expected)
    assert not torch.equal(want[0], want[1])  # the data tells left from right


def test_row_search_code_is_a_broadcast_compare_and_sum() -> None:
    """[BLOCK, s, 1] values against [BLOCK, 1, n] rows, summed over n: no sort, no gather."""
    code = _code(row_searches, _search_args("cpu"))
    assert "[:, None, :]" in code and "[:, :, None]" in code, code
    assert code.count("tl.sum(") >= 4 and "_tc_sort." not in code and "tl.gather" not in code


@tc.kernel(static_shapes=True)
def head_searches(seq: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """A 3-D search: leading dims a tile loop's block and a whole dim of heads."""
    b, h, s = v.size()
    out = torch.empty([b, h, s], dtype=torch.int64, device=v.device)
    for tb in tc.tile(b):
        out[tb, :, :] = torch.searchsorted(seq[tb, :, :], v[tb, :, :])
    return out


@tc.kernel(static_shapes=True)
def column_searches(seq: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Whole rows of boundaries, values tiled along their last dim."""
    h, s = v.size()
    out = torch.empty([h, s], dtype=torch.int64, device=v.device)
    for ts in tc.tile(s):
        out[:, ts] = torch.searchsorted(seq[:, :], v[:, ts], right=True)
    return out


@pytest.mark.parametrize("config", CONFIGS, ids=["default", "block1", "block4"])
def test_searches_with_more_leading_dims_match_eager(config: tc.Config | None, device: str) -> None:
    g = torch.Generator().manual_seed(1)
    seq = torch.randn(5, 3, 19, generator=g).sort(dim=-1).values.to(device)
    v = (torch.randn(5, 3, 6, generator=g) * 2).to(device)
    v[0, 0, 0] = seq[0, 0, 4]  # on a boundary
    assert torch.equal(_run(head_searches, (seq, v), config), torch.searchsorted(seq, v))
    rows, cols = seq[0], (torch.randn(3, 45, generator=g) * 2).to(device)
    cols[:, :5] = rows[:, 2:7]
    want = torch.searchsorted(rows, cols, right=True)
    assert torch.equal(_run(column_searches, (rows, cols), config), want)


def _searching(form: str) -> tc.Kernel:
    """A kernel whose search has the leading-dims mismatch ``form`` names."""

    @tc.kernel(static_shapes=True)
    def k(seq: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        b, n = seq.size()
        out = torch.empty([b, n], dtype=torch.int64, device=v.device)
        for tb in tc.tile(b):
            rows = seq[tb, :]
            if form == "1d values":
                out[tb, :] = torch.searchsorted(rows, v[:])[None, :]
            elif form == "other rows":
                out[tb, :] = torch.searchsorted(rows, v[:, :])
            elif form == "scalar":
                out[tb, :] = torch.searchsorted(rows, 0.5)[:, None]
            elif form == "bucketize":
                out[tb, :] = torch.bucketize(v[tb, :], rows)
            else:
                out[tb, :] = torch.searchsorted(rows.t(), rows.t()).t()
        return out

    return k


def test_batched_search_errors(device: str) -> None:
    seq, v = torch.randn(8, 16, device=device), torch.randn(8, 16, device=device)
    with pytest.raises(ShapeError, match=r"leading dims \[BLOCK_0\] must be") as info:
        _searching("1d values")(seq, v[0])
    assert "1-D tile" in str(info.value) and "v[tb, :]" in str(info.value)
    with pytest.raises(ShapeError, match=r"values are a 2-D tile \[RDIM_\d+ \(8\)"):
        _searching("other rows")(seq, v)  # whole rows, not the tile's
    with pytest.raises(ShapeError, match="values are a scalar"):
        _searching("scalar")(seq, v)
    with pytest.raises(UnsupportedOpError, match="bucketize: the sorted sequence is a 2-D"):
        _searching("bucketize")(seq, v)  # torch.bucketize takes 1-D boundaries only
    with pytest.raises(UnsupportedOpError, match=r"searchsorted along dim 1, a tile loop's"):
        _searching("tile last dim")(seq, v)  # rows.t(): the boundaries are the tile's lanes


@pytest.mark.crosscompile
def test_batched_search_cross_compiles() -> None:
    assert_defaults_cross_compile(row_searches, _search_args("cpu"))
    seq = torch.randn(5, 3, 19).sort(dim=-1).values
    assert_defaults_cross_compile(head_searches, (seq, torch.randn(5, 3, 6)))


# -- Tensor.median / torch.median ------------------------------------------------------------


@tc.kernel(static_shapes=True)
def medians(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """A row's median (values, indices), torch.median's kept dim by tuple unpacking, and the
    median along a 3-D tile's middle dim."""
    b, n = x.size()
    c = y.size(2)
    values = torch.empty([b], dtype=x.dtype, device=x.device)
    indices = torch.empty([b], dtype=torch.int64, device=x.device)
    kept = torch.empty([b, 1], dtype=x.dtype, device=x.device)
    kept_at = torch.empty([b, 1], dtype=torch.int64, device=x.device)
    mid = torch.empty([b, c], dtype=y.dtype, device=y.device)
    mid_at = torch.empty([b, c], dtype=torch.int64, device=y.device)
    for tb in tc.tile(b):
        m = x[tb, :].median(dim=1)
        values[tb], indices[tb] = m.values, m.indices
        kept[tb, :], kept_at[tb, :] = torch.median(x[tb, :], -1, keepdim=True)
        along_h = y[tb, :, :].median(dim=1)
        mid[tb, :], mid_at[tb, :] = along_h.values, along_h.indices
    return values, indices, kept, kept_at, mid, mid_at


def _distinct(shape: tuple[int, ...], seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Tie-free values (torch's median index of tied values is not necessarily the first)."""
    n = torch.Size(shape).numel()
    x = torch.randperm(n, generator=torch.Generator().manual_seed(seed)) - n // 2
    x = (x.float() / 8).to(dtype) if dtype.is_floating_point else x.to(dtype)
    return x.reshape(shape)


def _median_want(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    m, k, h = x.median(dim=1), torch.median(x, -1, keepdim=True), y.median(dim=1)
    return m.values, m.indices, k.values, k.indices, h.values, h.indices


@pytest.mark.parametrize("n", [37, 100])  # odd; even: the lower of the two middle values
@pytest.mark.parametrize("config", CONFIGS, ids=["default", "block1", "block4"])
def test_medians_match_eager(n: int, config: tc.Config | None, device: str) -> None:
    x = _distinct((7, n), 2, torch.float32).to(device)
    y = _distinct((7, 6, 5), 3, torch.float32).to(device)
    for have, want in zip(_run(medians, (x, y), config), _median_want(x, y), strict=True):
        assert have.dtype == want.dtype and torch.equal(have, want)


def test_int_medians_match_eager(device: str) -> None:
    x, y = _distinct((5, 22), 4, torch.int32).to(device), _distinct((5, 4, 3), 5, torch.int32)
    got = medians(x, y.to(device))
    for have, want in zip(got, _median_want(x, y.to(device)), strict=True):
        assert have.dtype == want.dtype and torch.equal(have, want)


def test_median_propagates_nan_at_the_first_nan(device: str) -> None:
    """A row holding NaN has median NaN at its first NaN's index (torch on the CPU), NaN
    rows beside clean ones."""
    x, y = _distinct((6, 41), 6, torch.float32), _distinct((6, 6, 5), 7, torch.float32)
    x[1, [30, 3]] = float("nan")
    x[4, 40] = float("nan")
    x[5, :] = float("nan")
    y[2, 5, 1] = float("nan")
    values, indices, kept, _, mid, mid_at = medians(x.to(device), y.to(device))
    want = _median_want(x, y)  # eager on the CPU: the first NaN's index
    assert torch.equal(values.isnan().cpu(), torch.tensor([0, 1, 0, 0, 1, 1], dtype=torch.bool))
    torch.testing.assert_close(values.cpu(), want[0], equal_nan=True)
    assert want[1][[1, 4, 5]].tolist() == [3, 40, 0] and torch.equal(indices.cpu(), want[1])
    torch.testing.assert_close(kept.cpu(), want[2], equal_nan=True)
    torch.testing.assert_close(mid.cpu(), want[4], equal_nan=True)
    assert mid_at[2, 1].item() == 5 and torch.equal(mid_at.cpu(), want[5])


@tc.kernel(static_shapes=True)
def rolling_median(x: torch.Tensor) -> torch.Tensor:
    """A 5-wide rolling median of a centered row: unfold's windows in a new last dim."""
    b, t = x.size()
    out = torch.empty([b, t - 4], dtype=torch.float32, device=x.device)
    for tb in tc.tile(b):
        xt = x[tb, :]
        out[tb, :] = (xt - xt.mean(dim=1, keepdim=True)).unfold(1, 5, 1).median(dim=-1).values
    return out


@pytest.mark.parametrize("config", CONFIGS, ids=["default", "block1", "block4"])
def test_rolling_median_matches_eager(config: tc.Config | None, device: str) -> None:
    x = torch.randn(5, 123, generator=torch.Generator().manual_seed(8)).to(device)
    xn = x - x.mean(1, keepdim=True)
    want = xn.unfold(1, 5, 1).median(dim=-1).values
    torch.testing.assert_close(_run(rolling_median, (x,), config), want, rtol=0, atol=1e-6)


@tc.kernel(static_shapes=True)
def centered_by_median(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """``x`` minus the median of every element of the 1-D tile ``ref`` (no dim)."""
    (m,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(m):
        out[t] = x[t] - (ref[:].median() + torch.median(ref[:])) / 2
    return out


def test_median_of_a_whole_1d_tile(device: str) -> None:
    x, ref = torch.randn(50, device=device), _distinct((10,), 9, torch.float32).to(device)
    torch.testing.assert_close(centered_by_median(x, ref), x - ref.median(), rtol=0, atol=0)


def test_median_code_selects_without_sorting() -> None:
    """A median is 32 rounds of a compare and a count (radix selection), no sort; its index
    is one scan, left out where only ``.values`` is used."""
    x, y = _distinct((7, 37), 2, torch.float32), _distinct((7, 6, 5), 3, torch.float32)
    code = _code(medians, (x, y))
    assert "_tc_sort." not in code, code
    assert code.count(" <= ") >= 3 * 32  # each median's 32 threshold counts
    assert "tl.cumsum" in code or "associative_scan" in code
    values_only = _code(rolling_median, (torch.randn(5, 123),))
    assert "_tc_sort." not in values_only and "tl.cumsum" not in values_only
    assert "associative_scan" not in values_only


def test_a_median_over_a_run_time_length(device: str) -> None:
    """With dynamic shapes the middle position is computed at run time (was refused): one
    compile serves lengths of one size bucket, odd and even, padded lanes outside the count."""
    kernel = _median_form("dim 1", static_shapes=False)
    g = torch.Generator().manual_seed(5)
    for n in (20, 23, 32):
        x = torch.randn(6, n, generator=g).to(device)
        x[2, 3] = float("nan")
        want = x.cpu().median(dim=1).values
        torch.testing.assert_close(kernel(x).cpu(), want, equal_nan=True, rtol=0, atol=0)
    assert len(kernel._bound) == 1  # one bucket, one compile


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int16])
def test_median_selection_across_signs_zeros_and_extremes(dtype: torch.dtype, device: str) -> None:
    """Keys order negatives, -0.0 beside +0.0 (tied), infinities and an int's extremes as
    the values do; ties take the stable sort's index (ref mode's)."""
    g = torch.Generator().manual_seed(21)
    if dtype.is_floating_point:
        x = (torch.randn(7, 37, generator=g) * 1e4).round() / 64
        x[0, :20] = -0.0
        x[0, 20:] = 0.0
        x[1, :19] = float("-inf")
        x[2, ::2] = float("inf")
        x[3] = torch.finfo(dtype).max * torch.sign(torch.randn(37, generator=g))
        x[4] = torch.randint(-2, 2, (37,), generator=g).float()  # ties
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, (7, 37), generator=g, dtype=torch.int64)
        x[0, :19], x[1, :18] = info.min, info.max
        x[4] = torch.randint(-2, 2, (37,), generator=g)
    x, y = x.to(dtype).to(device), _distinct((7, 6, 5), 3, torch.float32).to(device)
    got, ref = medians(x, y), medians.run_ref(x, y)
    want = x.cpu().float().median(dim=1).values
    assert torch.equal(got[0].cpu().float(), want)  # -0.0 == 0.0
    for have, expected in zip(got, ref, strict=True):
        assert have.dtype == expected.dtype and torch.equal(have, expected)


def _median_form(form: str, static_shapes: bool = True) -> tc.Kernel:
    """A kernel whose median has the form ``form`` names."""

    @tc.kernel(static_shapes=static_shapes)
    def k(x: torch.Tensor) -> torch.Tensor:
        b, n = x.size()
        out = torch.empty([b], dtype=x.dtype, device=x.device)
        for tb in tc.tile(b):
            row = x[tb, :]
            if form == "tile dim":
                out[tb] = row.median(dim=0).values.sum() + row[:, 0]
            elif form == "no dim":
                out[tb] = row.median() + row[:, 0]
            else:
                out[tb] = row.median(dim=1).values
        return out

    return k


def test_median_errors(device: str) -> None:
    x = torch.randn(8, 12, device=device)
    with pytest.raises(UnsupportedOpError, match=r"median along dim 0 .* tile loop's block"):
        _median_form("tile dim")(x)
    with pytest.raises(UnsupportedOpError, match=r"median\(\) without dim of a 2-D tile") as info:
        _median_form("no dim")(x)
    assert "x.median(dim=-1).values" in str(info.value)
    with pytest.raises(UnsupportedOpError, match="Tensor.median of a torch.int64 tile"):
        _median_form("dim 1")(x.long())


@pytest.mark.crosscompile
def test_median_cross_compiles() -> None:
    x, y = _distinct((7, 37), 2, torch.float32), _distinct((7, 6, 5), 3, torch.float32)
    assert_defaults_cross_compile(medians, (x, y))
    assert_defaults_cross_compile(rolling_median, (torch.randn(5, 123),))
    dynamic = _median_form("dim 1", static_shapes=False)  # the middle computed at run time
    assert_defaults_cross_compile(dynamic, (torch.randn(64, 3000),))


def test_ref_mode_median_is_the_compiled_ones_on_ties_and_nan(device: str) -> None:
    """Ref mode (the autotuner's baseline) takes the stable sort's middle, or a line's first
    NaN, as compiled code does: torch's CUDA median returns whichever equal value's (or NaN's)
    index a thread finds first, so every config differed from it on such lines."""
    g = torch.Generator().manual_seed(11)
    x = torch.randint(0, 3, (6, 41), generator=g).float()  # many ties
    y = torch.randint(0, 2, (6, 6, 5), generator=g).float()
    x[1, [30, 3]] = float("nan")
    y[2, 5, 1] = float("nan")
    x, y = x.to(device), y.to(device)
    got, ref = medians(x, y), medians.run_ref(x, y)
    for have, want in zip(got, ref, strict=True):
        assert torch.equal(have.isnan(), want.isnan())
        assert torch.equal(have.nan_to_num(-7), want.nan_to_num(-7)), (have, want)
    stable = torch.sort(x[0], stable=True)
    assert ref[1][0].item() == stable.indices[20].item()  # (41 - 1) // 2
    assert ref[1][1].item() == 3  # the first NaN


def test_ref_call_answers_median_itself() -> None:
    """ref_call computes a median along a dim without calling torch's (whose CUDA index of a
    tie or NaN is whichever a thread finds first): a stand-in named median is never called."""
    from tilecraft.runtime.ref import ref_call

    def median(*args: object, **kwargs: object) -> None:
        raise AssertionError("torch's median was called")

    x = torch.tensor([[2.0, 1.0, 2.0, 2.0, 0.0], [1.0, float("nan"), 0.0, float("nan"), 3.0]])
    values, indices = ref_call(median, x, 1)
    assert indices.tolist() == [0, 1] and values[0].item() == 2.0 and values[1].isnan()
    kept = ref_call(median, x, dim=1, keepdim=True)
    assert kept.indices.shape == (2, 1)

"""Batched torch.searchsorted (an N-D sorted tile whose leading dims are the values': each row
of values searches its own row, frontend/sequences.py): numerics in the interpreter (on the
GPU where there is one) against eager PyTorch at lengths that are not powers of two, under
several configs; the generated code's form; errors naming what the user wrote;
cross-compiles for cuda:90 and hip:gfx942."""

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

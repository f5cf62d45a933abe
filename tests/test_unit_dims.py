"""Whole dims of extent 1 (frontend/indexing.py): ``x[t, :, :]`` over a size-1 middle dim keeps
that dim in the value, and every later item lands on its own dim of the tile. (A 4-D weight
standardization over ``w[to, :, :, :]`` of a depthwise conv's [O, 1, 3, 3] weight summed each
row three times: the load put the last dim's indices on the size-1 dim.)"""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ShapeError
from tilecraft.runtime.kernel import BoundKernel

SHAPES = [(4, 1, 3), (4, 3, 1), (4, 1, 1), (4, 2, 3), (3, 1, 5, 1, 2)]


@tc.kernel(static_shapes=True)
def standardize_rows(w: torch.Tensor) -> torch.Tensor:
    """Each leading index's trailing dims minus their mean over their std (all of them whole)."""
    out = torch.empty_like(w)
    dims = list(range(1, w.ndim))
    for to in tc.tile(w.size(0)):
        wt = w[to, ...] if w.ndim > 3 else w[to, :, :]
        mean = torch.mean(wt, dim=dims, keepdim=True)
        std = torch.std(wt, dim=dims, keepdim=True)
        if w.ndim > 3:
            out[to, ...] = (wt - mean) / (std + 1e-5)
        else:
            out[to, :, :] = (wt - mean) / (std + 1e-5)
    return out


@tc.kernel(static_shapes=True)
def sum_trailing(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.sum(x[tm, :, :], dim=[1, 2])
    return out


def _standardized(w: torch.Tensor) -> torch.Tensor:
    dims = list(range(1, w.ndim))
    return (w - w.mean(dim=dims, keepdim=True)) / (w.std(dim=dims, keepdim=True) + 1e-5)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_reductions_over_whole_dims_with_unit_extents_match_eager(shape: tuple[int, ...]) -> None:
    w = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(
        standardize_rows(w), _standardized(w), rtol=1e-4, atol=1e-5, equal_nan=True
    )
    if len(shape) == 3:
        torch.testing.assert_close(sum_trailing(w), w.sum(dim=[1, 2]), rtol=1e-5, atol=1e-5)


def test_a_unit_dim_keeps_its_place_in_the_load() -> None:
    """[4, 1, 3]: the whole last dim's indices go on the tile's last dim, not the unit dim."""
    x = torch.empty(4, 1, 3)
    bound = BoundKernel(sum_trailing, sum_trailing.bind_arguments((x,), {}))
    code = bound.to_triton_code(bound.config_spec.default())
    assert "rindex_1[None, None, :]" in code
    assert "rindex_1[None, :, None]" not in code


@tc.kernel(static_shapes=True)
def two_ellipses(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, ...] = x[tm, ..., ...]
    return out


def test_two_ellipses_name_the_tensor_and_line() -> None:
    with pytest.raises(ShapeError, match=r"'x' can have only one ellipsis") as info:
        two_ellipses(torch.randn(4, 2, 3))
    assert info.value.loc is not None and info.value.loc.lineno > 0


@tc.kernel(static_shapes=True)
def odd_rows(x: torch.Tensor) -> torch.Tensor:
    """Every other row of x, taken by column tiles: one row where x has two or three."""
    m, n = x.size()
    out = torch.empty([len(range(m)[1::2]), n], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        out[:, tn] = x[1::2, tn]
    return out


@tc.kernel(static_shapes=True)
def last_column_times_rows(x: torch.Tensor) -> torch.Tensor:
    """x[tm, -1:] (one column, kept as a dim) broadcast against each whole row."""
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = x[tm, -1:] * x[tm, :]
    return out


@pytest.mark.parametrize("rows", [2, 3, 4, 7])
def test_one_element_slices_keep_their_dim(rows: int) -> None:
    """A slice that selects one element keeps a size-1 dim in the access, in place (``1::2``
    of two rows put the tile's indices on that dim and failed to compile)."""
    x = torch.randn(rows, 5)
    torch.testing.assert_close(odd_rows(x), x[1::2])
    torch.testing.assert_close(last_column_times_rows(x), x[:, -1:] * x)


@tc.kernel(static_shapes=True)
def stacked_pair(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, 2, n], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :, :] = torch.stack([x[tm, :], y[tm, :]], dim=1)
    return out


@tc.kernel(static_shapes=True)
def neighbour_diff(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n - 1], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :] * 2.0
        out[tm, :] = row[:, 1:] - row[:, :-1]
    return out


@tc.kernel(static_shapes=True)
def unit_total(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tm in tc.tile(x.size(0), block_size=1):
        out[tm] = x[tm, :, :].sum()
    return out


def test_literal_and_whole_unit_dims_fit_each_other() -> None:
    """A stack's dim of 2 stores into a whole dim of 2; a one-element slice of a computed row
    stores into a whole dim of 1; a load whose every dim is 1 (a one-row tile of [.., 1, 1]) is
    a [1, 1] tile that reduces (three shapes that raised or failed to compile)."""
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    torch.testing.assert_close(stacked_pair(x, y), torch.stack([x, y], 1))
    two = torch.randn(3, 2)
    torch.testing.assert_close(neighbour_diff(two), 2 * two[:, 1:] - 2 * two[:, :-1])
    cube = torch.randn(3, 1, 1)
    torch.testing.assert_close(unit_total(cube), cube.sum([1, 2]))

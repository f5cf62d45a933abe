"""Ops at the edges of their domains, against eager PyTorch in the interpreter: ``log1p`` of
tiny values keeps their digits, ``torch.prod`` of integer and float rows (int64 as torch),
and a tile indexed by an int picks one element of a whole dim. Found by fuzzing small kernels
against eager (session 31)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ShapeError


@tc.kernel(static_shapes=True)
def log1p_of(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.log1p(x[tm])
    return out


def test_log1p_keeps_the_digits_of_tiny_values() -> None:
    """log(1 + 1e-8) is 0 in fp32; log1p is 1e-8 (and inf, -1, NaN and signed zeros as torch)."""
    x = torch.tensor(
        [1e-8, -1e-8, 1e-3, 0.5, -0.5, 3.0, 1e30, float("inf"), -1.0, -2.0, float("nan"), -0.0]
    )
    torch.testing.assert_close(log1p_of(x), torch.log1p(x), rtol=3e-7, atol=0, equal_nan=True)


@tc.kernel(static_shapes=True)
def row_products(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = torch.int64 if not x.dtype.is_floating_point else x.dtype
    out = torch.empty([x.size(0)], dtype=dtype, device=x.device)
    kept = torch.empty([x.size(0), 1], dtype=dtype, device=x.device)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.prod(x[tm, :], dim=1)
        kept[tm, :] = x[tm, :].prod(-1, keepdim=True)
    return out, kept


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.float32])
def test_prod_of_rows_matches_torch(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        x = torch.rand(5, 7, generator=gen) + 0.5
    else:
        x = torch.randint(-2, 3, (5, 7), generator=gen).to(dtype)
    out, kept = row_products(x)
    torch.testing.assert_close(out, x.prod(1))
    torch.testing.assert_close(kept, x.prod(-1, keepdim=True))


@tc.kernel(static_shapes=True)
def corners(boxes: torch.Tensor) -> torch.Tensor:
    """Box areas from a computed [n, 4] tile indexed by ints (x1, y1, x2, y2)."""
    out = torch.empty([boxes.size(0)], dtype=boxes.dtype, device=boxes.device)
    for tn in tc.tile(boxes.size(0)):
        b = boxes[tn, :] * 1.0
        out[tn] = (b[:, 2] - b[:, 0]) * (b[:, -1] - b[:, 1])
    return out


@tc.kernel(static_shapes=True)
def past_the_end(boxes: torch.Tensor) -> torch.Tensor:
    out = torch.empty([boxes.size(0)], dtype=boxes.dtype, device=boxes.device)
    for tn in tc.tile(boxes.size(0)):
        out[tn] = boxes[tn, :][:, 4]
    return out


def test_an_int_index_picks_one_element_of_a_tile_dim() -> None:
    boxes = torch.rand(9, 4)
    expect = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    torch.testing.assert_close(corners(boxes), expect)
    with pytest.raises(ShapeError, match="index 4 is out of range for a tile dim of 4"):
        past_the_end(boxes)

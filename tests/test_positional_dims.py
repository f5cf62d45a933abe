"""Whole dims of equal extent follow torch's positional semantics in every op that lines shapes
up (frontend/rdims.py): broadcasts whose names sit at other places, join / stack / cat, expand_as,
a reshape that splits a dim into sizes a kept dim also has, and stores of a value with leading
1s. Each kernel here raised ShapeError or UnsupportedOpError before (found by fuzzing)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import tilecraft as tc


@tc.kernel(static_shapes=True)
def matmul_by_broadcast(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``v @ u`` of [4, 4] tiles written as a broadcast product summed over the middle."""
    n = x.size(0)
    out = torch.empty([n, 4, 4], dtype=torch.float32, device=x.device)
    for tb in tc.tile(n):
        v, u = x[tb, :, :], y[tb, :, :]
        out[tb, :, :] = (v[:, :, :, None] * u[:, None, :, :]).sum(2)
    return out


@tc.kernel(static_shapes=True)
def where_shifted(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Three operands whose 16s sit at different places."""
    n = x.size(0)
    out = torch.empty([n, 16, 16, 16], dtype=torch.float32, device=x.device)
    for tb in tc.tile(n):
        v = x[tb, :, :]
        wv = w[:]
        out[tb, :, :, :] = torch.where(v[:, None, :, :] < wv, v[:, :, :, None], wv)
    return out


@tc.kernel(static_shapes=True)
def outer_with_leading_one(x: torch.Tensor) -> torch.Tensor:
    """A [1, 4, 4, 4] product stored into a [4, 4, 4] place (torch drops the leading 1)."""
    n = x.size(0)
    out = torch.empty([n, 4, 4, 4], dtype=torch.float32, device=x.device)
    for tb in tc.tile(n, block_size=1):
        v = x[tb.begin, :, :]
        out[tb.begin, :, :, :] = v * v[None, :, :, None]
    return out


@tc.kernel(static_shapes=True)
def stack_and_cat_transposes(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.size(0)
    stacked = torch.empty([n, 4, 4, 2], dtype=torch.float32, device=x.device)
    catted = torch.empty([n, 8, 4], dtype=torch.float32, device=x.device)
    for tb in tc.tile(n):
        v = x[tb, :, :]
        stacked[tb, :, :, :] = torch.stack([v, v.transpose(1, 2)], dim=-1)
        catted[tb, :, :] = torch.cat([v, v.transpose(1, 2)], dim=1)
    return stacked, catted


@tc.kernel(static_shapes=True)
def cat_row_and_product(x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m, 32], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        a = x[tm, :]
        out[tm, :] = torch.cat([a, a @ h[:, :]], dim=1)
    return out


@tc.kernel(static_shapes=True)
def bias_expanded_as_product(x: torch.Tensor, h: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m, 16], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        y = x[tm, :] @ h[:, :]
        out[tm, :] = y + b[None, :].expand_as(y)
    return out


@tc.kernel(static_shapes=True)
def split_view_plus_transpose(x: torch.Tensor) -> torch.Tensor:
    """[B, 4, 16] viewed as [B, 4, 4, 4]: the split's 4s are named apart from the kept 4."""
    n = x.size(0)
    out = torch.empty([n, 4, 4, 4], dtype=torch.float32, device=x.device)
    for tb in tc.tile(n):
        v = x[tb, :, :].view(tb, 4, 4, 4)
        out[tb, :, :, :] = v.transpose(1, 3) + v
    return out


def _r(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


x4, y4, x16, w16 = _r(5, 4, 4), _r(5, 4, 4, seed=1), _r(3, 16, 16, seed=2), _r(16, seed=3)
rows, h16, b16, x416 = _r(6, 16, seed=4), _r(16, 16, seed=5), _r(16, seed=6), _r(5, 4, 16, seed=7)
CASES: list[tuple[str, Callable[..., object], tuple[torch.Tensor, ...], object]] = [
    ("matmul_by_broadcast", matmul_by_broadcast, (x4, y4), x4 @ y4),
    (
        "where_shifted",
        where_shifted,
        (x16, w16),
        torch.where(x16[:, None] < w16, x16[..., None], w16),
    ),
    ("outer_with_leading_one", outer_with_leading_one, (x4,), x4[:, None, :, :] * x4[..., None]),
    (
        "stack_and_cat_transposes",
        stack_and_cat_transposes,
        (x4,),
        (torch.stack([x4, x4.transpose(1, 2)], -1), torch.cat([x4, x4.transpose(1, 2)], 1)),
    ),
    ("cat_row_and_product", cat_row_and_product, (rows, h16), torch.cat([rows, rows @ h16], 1)),
    ("bias_expanded", bias_expanded_as_product, (rows, h16, b16), rows @ h16 + b16),
    (
        "split_view_plus_transpose",
        split_view_plus_transpose,
        (x416,),
        x416.view(5, 4, 4, 4).transpose(1, 3) + x416.view(5, 4, 4, 4),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_equal_extents_line_up_by_position(case: tuple, device: str) -> None:
    _, kernel, args, want = case
    got = kernel(*(a.to(device) for a in args))
    got = tuple(g.cpu() for g in got) if isinstance(got, tuple) else got.cpu()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_a_split_view_names_its_dims_apart() -> None:
    from tilecraft.ir.nodes import Op

    loop = split_view_plus_transpose.bind((x416,)).traced.loops[0]
    for node in loop.walk():
        if node.op is Op.VIEW:
            syms = [d for d in node.shape if not isinstance(d, int)]
            assert len({id(d) for d in syms}) == len(syms), node.shape


@tc.kernel(static_shapes=True)
def gated_by_a_row_max(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A 0-d bool (a reduction compared) folded into a load's mask and and-ed with a tile."""
    n = x0.size(0)
    out = torch.empty([n, 4], dtype=torch.float32, device=x0.device)
    flags = torch.empty([n, 4], dtype=torch.bool, device=x0.device)
    for tb in tc.tile(n):
        m = torch.amax(x1[:], -1)
        out[tb, :] = torch.where(m > 0, x0[tb, :], 0.0)
        flags[tb, :] = torch.logical_and(x0[tb, :] > 0, m > 0) | ((x0[tb, :] < -1) & (m < 5))
    return out, flags


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_scalar_bool_combines_with_a_tile(sign: float, device: str) -> None:
    """Triton's interpreter raised TypeError on ``mask & scalar_bool`` (every config failed)."""
    x0, x1 = _r(5, 4, seed=8), _r(4, seed=9).abs() * sign
    big = x1.amax()
    out, flags = gated_by_a_row_max(x0.to(device), x1.to(device))
    torch.testing.assert_close(out.cpu(), torch.where(big > 0, x0, 0.0))
    want = torch.logical_and(x0 > 0, big > 0) | ((x0 < -1) & (big < 5))
    assert torch.equal(flags.cpu(), want)

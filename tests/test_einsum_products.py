"""torch.einsum forms that are no single matmul (frontend/einsum.py's product-and-sum): a
mat-vec, row-wise dots, an outer product, a batched mat-vec, a full dot and a contraction too
short for tl.dot, against eager
PyTorch at sizes that are not powers of two, in fp32, bf16 (fp32 sums, rounded once) and int32;
the generated code (no ``tl.dot``) and cross-compiles of the default for sm_90 and gfx942."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import UnsupportedOpError


@tc.kernel(static_shapes=True)
def products(
    x: torch.Tensor, v: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """x: [m, n], v: [n], y: [m, n]; each form on a tile of rows (or on whole vectors)."""
    m, n = x.size()
    matvec = torch.empty(m, dtype=x.dtype, device=x.device)
    rowdot = torch.empty(m, dtype=x.dtype, device=x.device)
    outer = torch.empty(m, n, dtype=x.dtype, device=x.device)
    transposed = torch.empty(n, m, dtype=x.dtype, device=x.device)
    total = torch.empty(1, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        xt, yt = x[tm, :], y[tm, :]
        matvec[tm] = torch.einsum("ij,j->i", xt, v[:])
        rowdot[tm] = torch.einsum("bi,bi->b", xt, yt)
        outer[tm, :] = torch.einsum("i,j->ij", x[tm, 0], v[:])
        transposed[:, tm] = torch.einsum("ij,ij->ji", xt, yt)
        total[0] = torch.einsum("i,i->", v[:], v[:])
    return matvec, rowdot, outer, transposed, total


def _eager(x: torch.Tensor, v: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        torch.einsum("ij,j->i", x, v),
        torch.einsum("bi,bi->b", x, y),
        torch.einsum("i,j->ij", x[:, 0], v),
        torch.einsum("ij,ij->ji", x, y),
        torch.einsum("i,i->", v, v).reshape(1),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_product_sum_forms_match_eager(dtype: torch.dtype, device: str) -> None:
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(13, 37, generator=g) * 4 for _ in range(2))
    v = torch.randn(37, generator=g) * 4
    x, y, v = x.to(dtype), y.to(dtype), v.to(dtype)
    want = _eager(x, v, y)  # on the CPU: CUDA has no int32 matmul for eager einsum's bmm
    x, y, v = x.to(device), y.to(device), v.to(device)
    got = products(x, v, y)
    tol = {"rtol": 1e-5, "atol": 1e-4} if dtype == torch.float32 else {}
    for have, expect in zip(got, want, strict=True):
        assert have.dtype == expect.dtype
        torch.testing.assert_close(have.cpu(), expect, **tol)
    code = products.bind((x, v, y)).to_triton_code(products.bind((x, v, y)).config_spec.default())
    assert "tl.dot" not in code and "tl.sum" in code


@tc.kernel(static_shapes=True)
def batched_matvec(a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """a: [b, m, n], v: [b, n]: 'bij,bj->bi' on a tile of batches."""
    b, m, n = a.size()
    out = torch.empty(b, m, dtype=a.dtype, device=a.device)
    for tb in tc.tile(b):
        out[tb, :] = torch.einsum("bij,bj->bi", a[tb, :, :], v[tb, :])
    return out


def test_batched_matvec_matches_eager(device: str) -> None:
    g = torch.Generator().manual_seed(1)
    a, v = torch.randn(5, 6, 11, generator=g), torch.randn(5, 11, generator=g)
    a, v = a.to(device), v.to(device)
    torch.testing.assert_close(
        batched_matvec(a, v), torch.einsum("bij,bj->bi", a, v), rtol=1e-5, atol=1e-5
    )


@tc.kernel(static_shapes=True)
def short_k(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x: [m, 3], w: [3, n]: a contraction over 3 (4 padded), too short for tl.dot."""
    m, n = x.size(0), w.size(1)
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = torch.einsum("ij,jk->ik", x[tm, :], w[:, :])
    return out


def test_a_contraction_too_short_for_a_dot_is_a_product_and_sum(device: str) -> None:
    g = torch.Generator().manual_seed(4)
    x, w = torch.randn(21, 3, generator=g), torch.randn(3, 10, generator=g)
    x, w = x.to(device), w.to(device)
    torch.testing.assert_close(short_k(x, w), x @ w, rtol=1e-5, atol=1e-5)
    bound = short_k.bind((x, w))
    assert "tl.dot" not in bound.to_triton_code(bound.config_spec.default())


def test_forms_beyond_two_operands_stay_errors(device: str) -> None:
    @tc.kernel(static_shapes=True)
    def diagonal(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.size(0), device=x.device)
        for _ in tc.tile(1):
            out[:] = torch.einsum("ii->i", x[:, :])
        return out

    with pytest.raises(UnsupportedOpError, match=r"torch.einsum\('ii->i'\)"):
        diagonal(torch.randn(4, 4, device=device))


@pytest.mark.crosscompile
def test_product_sum_forms_cross_compile() -> None:
    meta = {"device": "meta"}
    x, v = torch.empty(300, 100, **meta), torch.empty(100, **meta)
    assert_defaults_cross_compile(products, (x, v, x))
    a, w = torch.empty(64, 12, 40, **meta), torch.empty(64, 40, **meta)
    assert_defaults_cross_compile(batched_matvec, (a, w))

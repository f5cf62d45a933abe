"""Dots as users write them (fuzz round 55a): addmm's beta and alpha from float arguments,
F.linear over a short in_features, and an int8 ``@`` summed over a K tile loop (its int8
result wraps per block: refused, it followed the config's block size silently)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError


@tc.kernel(static_shapes=True)
def scaled_addmm(
    c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, alpha: float, beta: float
) -> torch.Tensor:
    m, n = c.size()
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = torch.addmm(c[tm, tn], a[tm, :], b[:, tn], beta=beta, alpha=alpha)
    return out


@tc.kernel(static_shapes=True)
def small_linear(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m, w.size(0)], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = torch.nn.functional.linear(x[tm, :], w[:, :], bias[:])
    return out


@tc.kernel(static_shapes=True)
def int8_k_loop(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.int32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.int32)
        for tk in tc.tile(k):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc
    return out


@tc.kernel(static_shapes=True)
def int8_whole_k(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m = a.size(0)
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.int8, device=a.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = a[tm, :] @ b[:, tn]
    return out


@pytest.mark.parametrize("alpha,beta", [(0.5, 2.0), (1.0, 1.0), (-1.5, 0.0)])
def test_addmm_takes_beta_and_alpha_from_float_arguments(
    device: str, alpha: float, beta: float
) -> None:
    """A run-time beta of 0 ignores the input, NaN included, as torch does."""
    c, a, b = torch.randn(20, 24), torch.randn(20, 32), torch.randn(32, 24)
    c[3, 5] = float("nan")
    c, a, b = c.to(device), a.to(device), b.to(device)
    want = torch.addmm(c, a, b, beta=beta, alpha=alpha)
    got = scaled_addmm(c, a, b, alpha, beta)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, equal_nan=True)
    assert got.isnan().any().item() == (beta != 0)


def test_linear_with_few_input_features(device: str) -> None:
    """in_features 5 (tl.dot needs 16): the product summed over K, rounded once with the bias."""
    x = torch.randn(40, 5, device=device, dtype=torch.bfloat16)
    w = torch.randn(24, 5, device=device, dtype=torch.bfloat16)
    bias = torch.randn(24, device=device, dtype=torch.bfloat16)
    want = (x.float() @ w.float().T + bias.float()).to(torch.bfloat16)
    torch.testing.assert_close(small_linear(x, w, bias), want, atol=2e-2, rtol=1e-2)


def test_an_int8_product_over_a_k_loop_is_refused(device: str) -> None:
    a = torch.randint(-128, 128, (16, 64), dtype=torch.int8, device=device)
    b = torch.randint(-128, 128, (64, 16), dtype=torch.int8, device=device)
    with pytest.raises(DeviceCodeError, match=r"int8 tiles over the tile dim") as info:
        int8_k_loop(a, b)
    assert "tc.dot" in str(info.value) and "test_dot_arguments.py" in str(info.value)


def test_an_int8_product_over_a_whole_k_wraps_as_torch(device: str) -> None:
    a = torch.randint(-128, 128, (16, 64), dtype=torch.int8)
    b = torch.randint(-128, 128, (64, 16), dtype=torch.int8)
    got = int8_whole_k(a.to(device), b.to(device)).cpu()
    torch.testing.assert_close(got, a @ b, atol=0, rtol=0)

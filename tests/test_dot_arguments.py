"""Dots as users write them (fuzz round 55a): addmm's beta and alpha from float arguments,
F.linear over a short in_features, and an int8 ``@`` summed over a K tile loop (its int8
result wraps per block: refused, it followed the config's block size silently)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError, ShapeError


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


@tc.kernel(static_shapes=False)
def whole_k_dynamic(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, n = a.size(0), b.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = a[tm, :] @ b[:, tn]
    return out


@pytest.mark.parametrize("k", [3, 8, 20])
def test_a_short_whole_k_under_dynamic_shapes_is_summed(device: str, k: int) -> None:
    """static_shapes=False: a whole K of 3 or 8 (its size bucket under 16) emitted a tl.dot
    that failed to compile for sm_90 under every config; it is the summed product, as with
    static shapes."""
    a, b = torch.randn(20, k, device=device), torch.randn(k, 12, device=device)
    torch.testing.assert_close(whole_k_dynamic(a, b), a @ b, atol=1e-4, rtol=1e-4)
    code = whole_k_dynamic.bind((a, b)).to_triton_code(
        whole_k_dynamic.bind((a, b)).config_spec.default()
    )
    assert ("tl.dot" in code) == (k > 16), code


@pytest.mark.crosscompile
def test_a_short_whole_k_under_dynamic_shapes_cross_compiles() -> None:
    from tests.cross_targets import assert_defaults_cross_compile

    a, b = torch.empty(20, 5, device="meta"), torch.empty(5, 12, device="meta")
    assert_defaults_cross_compile(whole_k_dynamic, (a, b))


@tc.kernel(static_shapes=True)
def linear_bias_addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, n = a.size(0), b.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = torch.addmm(bias[tn], a[tm, :], b[:, tn])
    return out


def test_addmm_broadcasts_a_1d_input_as_torch(device: str) -> None:
    """The nn.Linear form, addmm(bias, x, w) with a 1-D bias, was refused ('acc [BLOCK_1] does
    not match the product')."""
    bias, a, b = (torch.randn(*s, device=device) for s in ((24,), (20, 32), (32, 24)))
    want = torch.addmm(bias, a, b)
    torch.testing.assert_close(linear_bias_addmm(bias, a, b), want, atol=1e-4, rtol=1e-4)


@tc.kernel(static_shapes=True)
def float_dot_into_int(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, n = a.size(0), b.size(1)
    out = torch.empty([m, n], dtype=torch.int32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.int32)
        out[tm, tn] = tc.dot(a[tm, :], b[:, tn], acc=acc)
    return out


mixed_matmul = tc.kernel(static_shapes=True)(whole_k_dynamic.fn)  # (given operands of two dtypes)


@tc.kernel(static_shapes=True)
def short_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    nb, m, n = a.size(0), a.size(1), b.size(2)
    out = torch.empty([nb, m, n], dtype=torch.float32, device=a.device)
    for tb in tc.tile(nb):
        out[tb, :, :] = torch.bmm(a[tb, :, :], b[tb, :, :])
    return out


def test_dot_mistakes_are_named_at_their_line(device: str) -> None:
    """Float tiles into an int32 acc were truncated product by product, silently; fp16 @ fp32
    ran compiled where torch (and ref mode) refuse it; a K of 5 was said to be 8 (its padded
    block) and torch.bmm's hint showed a 2-D product."""
    a16, b16 = torch.randn(32, 32, device=device).half(), torch.randn(32, 32, device=device).half()
    with pytest.raises(DeviceCodeError, match="into an integer result") as info:
        float_dot_into_int(a16, b16)
    assert "test_dot_arguments.py" in str(info.value)
    with pytest.raises(DeviceCodeError, match="float16 and float32 tiles: torch needs"):
        mixed_matmul(a16, b16.float())
    a, b = torch.randn(2, 16, 5, device=device), torch.randn(2, 5, 16, device=device)
    with pytest.raises(ShapeError, match=r"is 5 elements") as shape_info:
        short_bmm(a, b)
    assert "b[:, None, :, :]).sum(2)" in str(shape_info.value)

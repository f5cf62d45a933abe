"""Autograd: kernels paired with backward kernels, in eager and under torch.compile."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

import tilecraft as tc
from examples import cross_entropy, geglu, layer_norm, rms_norm, swiglu
from tilecraft.errors import ArgumentError


@pytest.fixture(autouse=True)
def _on_test_device(device: str) -> Iterator[None]:
    """Tensors made without a device land on the GPU when there is one, else the interpreter."""
    with torch.device(device):
        yield


@tc.kernel
def tanh_mul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``tanh(x) * w`` in the inputs' own dtype (fp64 in gradcheck)."""
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = torch.tanh(x[tm]) * w[tm]
    return out


@tc.kernel
def tanh_mul_bwd(
    grad: torch.Tensor, x: torch.Tensor, w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    (m,) = x.size()
    grad_x, grad_w = torch.empty_like(x), torch.empty_like(w)
    for tm in tc.tile(m):
        t = torch.tanh(x[tm])
        grad_x[tm] = grad[tm] * (1.0 - t * t) * w[tm]
        grad_w[tm] = grad[tm] * t
    return grad_x, grad_w


def _tanh_mul_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x, w, _ = ctx.saved_tensors
    return tanh_mul_bwd(grad.contiguous(), x, w)  # type: ignore[no-any-return]


tanh_mul.register_backward(_tanh_mul_backward)


@tc.kernel
def no_backward(x: torch.Tensor) -> torch.Tensor:
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] * 2
    return out


def _grads(fn: Any, inputs: tuple[torch.Tensor, ...], seed: int = 0) -> list[torch.Tensor]:
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    out = fn(*leaves)
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(out.shape, generator=gen, device="cpu").to(out.device)
    (out * weight).sum().backward()
    return [t.grad for t in leaves if t.requires_grad]


def test_gradcheck_fp64() -> None:
    x = torch.randn(37, dtype=torch.float64, requires_grad=True)
    w = torch.randn(37, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(tanh_mul, (x, w))


def test_gradcheck_rms_norm_fp64_inputs() -> None:
    # the kernels compute in fp32 whatever the input dtype: a larger step and tolerance
    x = torch.randn(5, 12, dtype=torch.float64, requires_grad=True)
    w = torch.randn(12, dtype=torch.float64, requires_grad=True)
    fn = lambda a, b: rms_norm.rms_norm_fwd(a, b, rms_norm.EPS)[0]  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w), eps=1e-3, atol=2e-3, rtol=2e-3)


NORM_CASES = {
    "rms_norm": (
        lambda x, w, b: rms_norm.rms_norm_fwd(x, w, rms_norm.EPS)[0],
        lambda x, w, b: torch.nn.functional.rms_norm(x, x.shape[-1:], w, rms_norm.EPS),
    ),
    "layer_norm": (
        lambda x, w, b: layer_norm.layer_norm_fwd(x, w, b, layer_norm.EPS)[0],
        lambda x, w, b: torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, layer_norm.EPS),
    ),
    "swiglu": (
        lambda x, w, b: swiglu.swiglu(x, x * 0.5 + 1),
        lambda x, w, b: torch.nn.functional.silu(x) * (x * 0.5 + 1),
    ),
    "geglu": (
        lambda x, w, b: geglu.geglu(x, x.flip(-1).contiguous()),
        lambda x, w, b: torch.nn.functional.gelu(x, approximate="tanh") * x.flip(-1),
    ),
}


@pytest.mark.parametrize("name", sorted(NORM_CASES))
def test_example_backward_matches_torch(name: str, device: str) -> None:
    ours, ref = NORM_CASES[name]
    gen = torch.Generator().manual_seed(1)
    inputs = (
        torch.randn(9, 48, generator=gen, device="cpu").to(device),
        1 + torch.randn(48, generator=gen, device="cpu").to(device),
        torch.randn(48),
    )
    got, want = _grads(ours, inputs), _grads(ref, inputs)
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)


def test_cross_entropy_backward_matches_torch(device: str) -> None:
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(7, 50, generator=gen, device="cpu").to(device).requires_grad_()
    labels = torch.randint(0, 50, (7,), generator=gen, device="cpu").to(device)
    cross_entropy.cross_entropy(logits, labels).backward()
    ours, logits.grad = logits.grad, None
    torch.nn.functional.cross_entropy(logits, labels).backward()
    torch.testing.assert_close(ours, logits.grad, rtol=1e-4, atol=1e-5)


def test_backward_under_torch_compile() -> None:
    def loss(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = rms_norm.rms_norm_fwd(x, w, rms_norm.EPS)[0]
        return swiglu.swiglu(h, h * 2).pow(2).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    x, w = torch.randn(6, 32), torch.randn(32)
    eager = _grads(lambda a, b: loss(a, b)[None], (x, w))
    got = _grads(lambda a, b: compiled(a, b)[None], (x, w))
    for g, r in zip(got, eager, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)


def test_kernel_without_backward_names_the_fix() -> None:
    x = torch.randn(8, requires_grad=True)
    with pytest.raises(ArgumentError, match=r"no_backward\(\).*requires grad") as info:
        no_backward(x)
    assert "no_backward.register_backward" in str(info.value)
    assert "test_autograd.py" in str(info.value)  # the kernel's definition site
    with torch.no_grad():
        torch.testing.assert_close(no_backward(x), x.detach() * 2)
    torch.testing.assert_close(no_backward(x.detach()), x.detach() * 2)

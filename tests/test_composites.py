"""Torch functions built from pointwise ops (frontend/composites.py, isinf / isfinite in
ir/pointwise.py, torch.std, var_mean and std_mean in frontend/lowerings.py): interpreter and ref
mode against eager PyTorch on values that hit each formula's edges (lerp weights on both sides
of 0.5, softplus past its threshold, NaN and infinities, sign of NaN and -0.0), a tile view
through ``...``, generated code, and cross-compiles for sm_90 and gfx942."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import ShapeError


@tc.kernel(static_shapes=True)
def activations(
    x: torch.Tensor, y: torch.Tensor, w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per element: lerp by a tensor weight, addcmul + addcdiv, softplus / mish /
    hardswish / hardsigmoid summed (times relu6, plus hardtanh), and nan_to_num; per row: std and counts of inf / finite."""
    m, n = x.size()
    mixed, fused, acts, clean = (torch.empty_like(x) for _ in range(4))
    stats = torch.empty([m, 3], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        a, b, wt = x[tm, :], y[tm, :], w[tm, :]
        mixed[tm, :] = torch.lerp(a, b, wt)
        fused[tm, :] = torch.addcdiv(torch.addcmul(a, a, b, value=0.5), a, wt, value=2.0)
        acts[tm, :] = (
            F.softplus(a, beta=2.0) + F.mish(b) + F.hardswish(a) + F.hardsigmoid(b)
        ) * F.relu6(b) + F.hardtanh(a, -2.0, 3.0)
        clean[tm, :] = torch.nan_to_num(a / b, nan=0.0, posinf=1e4)
        inf = torch.isinf(a / b).to(torch.float32).sum(dim=1)
        finite = torch.isfinite(a / b).to(torch.float32).sum(dim=1)
        stats[tm, 0] = torch.std(a, dim=1)
        stats[tm, 1] = inf
        stats[tm, 2] = finite
    return mixed, fused, acts, clean, stats  # type: ignore[return-value]


def _eager(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    acts = F.softplus(x, beta=2.0) + F.mish(y) + F.hardswish(x) + F.hardsigmoid(y)
    acts = acts * F.relu6(y) + F.hardtanh(x, -2.0, 3.0)
    q = x / y
    stats = torch.stack(
        [x.std(dim=1), torch.isinf(q).float().sum(1), torch.isfinite(q).float().sum(1)], dim=1
    )
    fused = torch.addcdiv(torch.addcmul(x, x, y, value=0.5), x, w, value=2.0)
    return torch.lerp(x, y, w), fused, acts, torch.nan_to_num(q, nan=0.0, posinf=1e4), stats


def _inputs(m: int = 7, n: int = 37) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(m, n, generator=gen) * 12  # softplus(2x) passes its threshold of 20
    y = torch.randn(m, n, generator=gen)
    y[:, 3] = 0.0  # x / 0: infinities
    x[:, 5], y[:, 5] = 0.0, 0.0  # 0 / 0: NaN
    w = torch.rand(m, n, generator=gen) * 1.4 - 0.2  # both sides of 0.5, outside [0, 1]
    return x, y, w


def test_composites_match_eager_in_the_interpreter_and_ref_mode(device: str) -> None:
    args = tuple(a.to(device) for a in _inputs())
    want = _eager(*args)
    for got in (activations(*args), activations.run_ref(*args)):
        for have, expect in zip(got, want, strict=True):
            torch.testing.assert_close(have, expect, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def signs_and_moments(
    x: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """torch.sign of floats and ints, var_mean per row, std_mean kept 2-D and used through a
    ``...`` view (a Lion step's sign, a group quantizer's ``scale[..., None]``)."""
    m, n = x.size()
    sx, sk, centred = torch.empty_like(x), torch.empty_like(k), torch.empty_like(x)
    var = torch.empty([m], dtype=torch.float32, device=x.device)
    mean = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        a = x[tm, :]
        sx[tm, :] = torch.sign(a * 2.0)
        sk[tm, :] = k[tm, :].sign()
        var[tm], mean[tm] = torch.var_mean(a, dim=1)
        std, mu = torch.std_mean(a, dim=1, keepdim=True, correction=0)
        centred[tm, :] = (a - mu[..., 0][..., None]) / std[:, ...]
    return sx, sk, var, mean, centred


def _signs_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(6, 29, generator=gen)
    x[0, :4] = torch.tensor([float("nan"), -0.0, 0.0, float("-inf")])
    k = torch.randint(-3, 4, (6, 29), generator=gen, dtype=torch.int32)
    return x, k


def _signs_eager(x: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, ...]:
    var, mean = torch.var_mean(x, dim=1)
    std, mu = torch.std_mean(x, dim=1, keepdim=True, correction=0)
    return torch.sign(x * 2.0), k.sign(), var, mean, (x - mu) / std


def test_sign_var_mean_and_ellipsis_match_eager(device: str) -> None:
    args = tuple(a.to(device) for a in _signs_inputs())
    want = _signs_eager(*args)
    for got in (signs_and_moments(*args), signs_and_moments.run_ref(*args)):
        for have, expect in zip(got, want, strict=True):
            torch.testing.assert_close(have, expect, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert not torch.signbit(signs_and_moments(*args)[0][0, 1])  # sign(-0.0) is +0.0


def test_two_ellipses_are_an_error() -> None:
    @tc.kernel(static_shapes=True)
    def twice(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm in tc.tile(x.size(0)):
            out[tm, :] = x[tm, :][..., ...]
        return out

    with pytest.raises(ShapeError, match="only one ellipsis"):
        twice(torch.zeros(4, 8))


def test_composites_generate_their_formulas() -> None:
    bound = activations.bind(_inputs())
    code = bound.to_triton_code(bound.config_spec.default())
    assert "(tl.abs(" in code and "== float('inf'))" in code  # isinf
    assert "!= float('inf')))" in code and code.count("tl.log(1.0 + ") == 2  # softplus, mish
    assert "tl.sqrt(" in code  # std


@pytest.mark.crosscompile
def test_composites_cross_compile() -> None:
    assert_defaults_cross_compile(activations, _inputs(512, 1000))
    x, k = _signs_inputs()
    assert_defaults_cross_compile(signs_and_moments, (x.to("meta"), k.to("meta")))


@pytest.mark.gpu
def test_composites_on_gpu() -> None:
    args = tuple(a.cuda() for a in _inputs(300, 1000))
    for have, expect in zip(activations(*args), _eager(*args), strict=True):
        torch.testing.assert_close(have, expect, rtol=1e-4, atol=1e-4)
    signs = tuple(a.cuda() for a in _signs_inputs())
    for have, expect in zip(signs_and_moments(*signs), _signs_eager(*signs), strict=True):
        torch.testing.assert_close(have, expect, rtol=1e-4, atol=1e-4, equal_nan=True)

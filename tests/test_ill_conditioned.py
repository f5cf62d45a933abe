"""The accuracy check where the baseline's own fp32 rounding is the error (autotune/compare.py,
baseline.widened): a config may differ from ref mode only where ref mode itself is off its fp64
run, and not by much more; a wrong element elsewhere still fails."""

from __future__ import annotations

import torch

import tilecraft as tc
from tilecraft.autotune.baseline import compute_baseline, widened
from tilecraft.autotune.compare import compare


@tc.kernel(static_shapes=True)
def inverse3(a: torch.Tensor) -> torch.Tensor:
    """3 x 3 inverses by cofactors: det cancels for nearly singular matrices."""
    inv = torch.empty_like(a)
    for tn in tc.tile(a.size(0)):
        a00, a01, a02 = a[tn, 0, 0], a[tn, 0, 1], a[tn, 0, 2]
        a10, a11, a12 = a[tn, 1, 0], a[tn, 1, 1], a[tn, 1, 2]
        a20, a21, a22 = a[tn, 2, 0], a[tn, 2, 1], a[tn, 2, 2]
        c00, c01, c02 = a11 * a22 - a12 * a21, a12 * a20 - a10 * a22, a10 * a21 - a11 * a20
        r = 1.0 / (a00 * c00 + a01 * c01 + a02 * c02)
        inv[tn, 0, 0], inv[tn, 1, 0], inv[tn, 2, 0] = c00 * r, c01 * r, c02 * r
        inv[tn, 0, 1] = (a02 * a21 - a01 * a22) * r
        inv[tn, 1, 1] = (a00 * a22 - a02 * a20) * r
        inv[tn, 2, 1] = (a01 * a20 - a00 * a21) * r
        inv[tn, 0, 2] = (a01 * a12 - a02 * a11) * r
        inv[tn, 1, 2] = (a02 * a10 - a00 * a12) * r
        inv[tn, 2, 2] = (a00 * a11 - a01 * a10) * r
    return inv


def _matrices() -> torch.Tensor:
    """Well-conditioned matrices, and one in 2048 nearly singular (a column close to the sum
    of the other two: det ~1e-4 against terms ~1)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(16384, 3, 3, generator=g) + 3 * torch.eye(3)
    near = a[::2048]
    near[:, :, 2] = near[:, :, 0] + near[:, :, 1] + 1e-4 * torch.randn(8, 3, generator=g)
    a[::2048] = near
    return a


def _reassociated(a: torch.Tensor) -> torch.Tensor:
    """Another correct fp32 program: det summed in the other order, a product of reciprocals
    (as a GPU's FMAs and approximate division reorder the rounding)."""
    c = torch.linalg.det(a.double()).float()  # a det with other roundings than the cofactors'
    adj = torch.linalg.inv(a.double()).float() * torch.linalg.det(a.double()).float()[:, None, None]
    return adj * (1.0 / c)[:, None, None]


def test_a_config_may_differ_only_where_ref_mode_itself_is_off_its_fp64_run() -> None:
    a = _matrices()
    baseline = compute_baseline(inverse3, (a,))
    other = _reassociated(a)
    strict = compare(other, baseline.outputs)
    assert not strict.ok  # ref mode's fp32 cofactors and the other program part by > rtol
    precise = widened(baseline, inverse3, (a,), {})
    assert precise is not None and precise[0].dtype == torch.float64
    judged = compare(other, baseline.outputs, precise=precise)
    assert judged.ok, judged.summary()
    assert "own rounding" in judged.summary()
    wrong = other.clone()
    wrong[-1] += 1000.0  # a wrong tail: a well-conditioned matrix (the last is not singular)
    assert not compare(wrong, baseline.outputs, precise=precise).ok
    far = baseline.outputs + 1000 * (other - baseline.outputs)  # much further off than ref mode
    assert not compare(far, baseline.outputs, precise=precise).ok


def test_no_second_opinion_for_a_users_baseline_or_a_kernel_that_refuses_fp64() -> None:
    a = _matrices()
    user = tc.kernel(inverse3.fn, static_shapes=True, baseline=lambda x: torch.linalg.inv(x))
    assert widened(compute_baseline(user, (a,)), user, (a,), {}) is None

    @tc.kernel(static_shapes=True)
    def fp32_only(x: torch.Tensor) -> torch.Tensor:
        assert x.dtype == torch.float32, "fp32 only"
        out = torch.empty_like(x)
        for t in tc.tile(x.size(0)):
            out[t] = x[t] * 2
        return out

    x = torch.randn(64)
    assert widened(compute_baseline(fp32_only, (x,)), fp32_only, (x,), {}) is None

"""The accuracy check where the baseline's own fp32 rounding is the error (autotune/compare.py,
baseline.widened): a config may differ from ref mode only where ref mode itself is off its fp64
run, and not by much more; a wrong element elsewhere still fails."""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s34 import inverse_3x3
from tilecraft.autotune.baseline import compute_baseline, widened
from tilecraft.autotune.compare import compare


def _matrices() -> torch.Tensor:
    """Well-conditioned matrices, and one in 2048 nearly singular (a column close to the sum
    of the other two: det ~1e-4 against terms ~1)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(16384, 3, 3, generator=g) + 3 * torch.eye(3)
    near = a[::2048]
    near[:, :, 2] = near[:, :, 0] + near[:, :, 1] + 1e-4 * torch.randn(8, 3, generator=g)
    a[::2048] = near
    return a


def _reassociated(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Another correct fp32 program's (inverse, det): other roundings than the cofactors' (as a
    GPU's FMAs and approximate division give)."""
    c = torch.linalg.det(a.double()).float()
    adj = torch.linalg.inv(a.double()).float() * c[:, None, None]
    return adj * (1.0 / c)[:, None, None], c


def test_a_config_may_differ_only_where_ref_mode_itself_is_off_its_fp64_run() -> None:
    a = _matrices()
    baseline = compute_baseline(inverse_3x3, (a,))
    other = _reassociated(a)
    strict = compare(other, baseline.outputs)
    assert not strict.ok  # ref mode's fp32 cofactors and the other program part by > rtol
    precise = widened(baseline, inverse_3x3, (a,), {})
    assert precise is not None and precise[0][0].dtype == torch.float64
    judged = compare(other, baseline.outputs, precise=precise)
    assert judged.ok, judged.summary()
    assert "own rounding" in judged.summary()
    wrong = other[0].clone()
    wrong[-1] += 1000.0  # a wrong tail: a well-conditioned matrix (the last is not singular)
    assert not compare((wrong, other[1]), baseline.outputs, precise=precise).ok
    inv = baseline.outputs[0]
    far = inv + 1000 * (other[0] - inv)  # much further off than ref mode
    assert not compare((far, other[1]), baseline.outputs, precise=precise).ok


def test_no_second_opinion_for_a_users_baseline_or_a_kernel_that_refuses_fp64() -> None:
    a = _matrices()
    user = tc.kernel(inverse_3x3.fn, static_shapes=True, baseline=lambda x: torch.linalg.inv(x))
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

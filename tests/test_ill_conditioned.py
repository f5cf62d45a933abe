"""The accuracy check where fp32 rounding itself is the error (autotune/compare.py,
baseline.widened): a config may differ from ref mode only in ill-conditioned elements (ref mode
off its fp64 run by many ulps, or the fp64 run moving that far when the inputs move one ulp), and
not by much more; a wrong element elsewhere still fails."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s34 import _inverse_inputs, inverse_3x3
from benchmarks.gen_kernels.heldout_s37a import box_filter_integral, box_filter_integral_reference
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
    assert precise is not None and precise[0][0].value.dtype == torch.float64
    judged = compare(other, baseline.outputs, precise=precise)
    assert judged.ok, judged.summary()
    assert "ill-conditioned elements" in judged.summary()
    wrong = other[0].clone()
    wrong[-1] += 1000.0  # a wrong tail: a well-conditioned matrix (the last is not singular)
    assert not compare((wrong, other[1]), baseline.outputs, precise=precise).ok
    inv = baseline.outputs[0]
    far = inv + 1000 * (other[0] - inv)  # much further off than ref mode
    assert not compare((far, other[1]), baseline.outputs, precise=precise).ok


def test_an_element_where_ref_mode_was_lucky_is_judged_by_its_conditioning() -> None:
    """Nearly singular matrices from the benchmark's own inputs (seed 0 of 4M, det < 1e-3):
    on some, ref mode's fp32 cofactors land within the tolerance of the fp64 inverse while
    another correct fp32 program (LU, as torch.linalg.inv) is 10-100x further off. Ref mode's
    error alone called those wrong; the one-ulp spread of the inputs shows them ill-conditioned."""
    (a,) = _inverse_inputs((4194304,), "cpu", 0)
    det = torch.linalg.det(a.double()).abs()
    a = torch.cat([a[det < 1e-3], a[:20000]])
    baseline = compute_baseline(inverse_3x3, (a,))
    other = (torch.linalg.inv(a), baseline.outputs[1])
    precise = widened(baseline, inverse_3x3, (a,), {})
    assert precise is not None
    truth, e = precise[0][0].value, baseline.outputs[0].double()
    tol = 1e-5 * truth.abs().max() + 1e-4 * truth.abs()
    lucky = ((other[0].double() - truth).abs() > tol) & ((e - truth).abs() <= tol)
    assert bool(lucky.any())  # the case the baseline's error alone misjudged
    judged = compare(other, baseline.outputs, precise=precise)
    assert judged.ok, judged.summary()
    far = baseline.outputs[0] + 1000 * (other[0] - baseline.outputs[0])
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


def _box_image(n: int) -> torch.Tensor:
    return torch.rand(1, n, n, generator=torch.Generator().manual_seed(0))


def test_a_program_losing_precision_everywhere_is_judged_against_the_baselines_own_error() -> None:
    """A box filter through a summed-area table the kernel keeps in an fp32 buffer: each output
    is a difference of prefix sums up to n^2 / 2, so every fp32 program is off the fp64 result
    in most elements (no config matched ref mode on an H100 at 1024^2). The wide run allocates
    the table in fp64 too; a config as accurate as ref mode passes, a wrong one does not."""
    box = box_filter_integral
    img = _box_image(256)
    baseline = compute_baseline(box, (img,))
    precise = widened(baseline, box, (img,), {})
    assert precise is not None
    truth, ref = precise[0].value, baseline.outputs.double()
    assert bool(((ref - truth).abs() > 64 * 1.2e-7 * truth.abs()).float().mean() > 0.1)
    # another correct fp32 program: off the fp64 result by about as much as ref mode is
    other = baseline.outputs
    noise = torch.randn(other.shape, generator=torch.Generator().manual_seed(1))
    other = other + noise * (ref - truth).abs().float()
    assert not compare(other, baseline.outputs).ok  # differs from ref mode past rtol
    judged = compare(other, baseline.outputs, precise=precise)
    assert judged.ok, judged.summary()
    wrong = other.clone()
    wrong[0, 100:110, 40] += 0.05  # a few wrong outputs, far beyond rounding
    assert not compare(wrong, baseline.outputs, precise=precise).ok
    biased = other + 20 * (ref - truth).abs().max().float()  # off everywhere, well past it
    assert not compare(biased, baseline.outputs, precise=precise).ok


def test_the_box_filter_through_an_fp32_table_has_a_working_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))  # discovery runs: nothing cached
    img = _box_image(256).to(device)
    kernel = tc.kernel(box_filter_integral.fn, static_shapes=True)
    got = kernel(img)
    torch.testing.assert_close(got, box_filter_integral_reference(img), rtol=0, atol=1e-3)


def test_a_baseline_drawing_other_random_numbers_each_run_gets_no_second_opinion() -> None:
    @tc.kernel(static_shapes=True)
    def noisy(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in tc.tile(x.size(0)):
            out[t] = x[t] + torch.rand_like(x[t])
        return out

    x = torch.randn(4096)
    baseline = compute_baseline(noisy, (x,))
    precise = widened(baseline, noisy, (x,), {})
    assert precise is not None
    other = x + torch.rand(x.shape)  # another draw: as far from the wide run as ref mode is
    assert not compare(other, baseline.outputs, precise=precise).ok

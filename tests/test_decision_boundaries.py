"""Kernels that decide on computed floats: which ops count (``autotune/decisions.py``), which
differences the accuracy check accepts from them (``compare.scattered``), and discovery of such a
kernel against a reference that sums in another order (one boundary element flipped)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels import HELDOUT
from tilecraft.autotune.classify import Category, NoWorkingConfigError
from tilecraft.autotune.compare import compare, scattered, traded_places
from tilecraft.autotune.decisions import float_decisions, rounds_floats
from tilecraft.autotune.discover import run_discovery

ROWS, COLS = 64, 200  # 12800 elements: one boundary element may differ


def _kept_above_mean(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x >= x.mean(dim=-1, keepdim=True), x, 0.0)


def _flipped(out: torch.Tensor) -> torch.Tensor:
    """``out`` with the first kept element of row 3 dropped: what a reference whose row mean
    rounded a hair above that element would return."""
    out = out.clone()
    col = int(out[3].nonzero()[0])
    out[3, col] = 0.0
    return out


def _flipped_threshold_baseline(x: torch.Tensor) -> torch.Tensor:
    return _flipped(_kept_above_mean(x))


def _flipped_scale_baseline(x: torch.Tensor) -> torch.Tensor:
    return _flipped(x * 2.0)


@tc.kernel(baseline=_flipped_threshold_baseline)
def keep_above_row_mean(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        row = x[tm, :]
        mean = torch.mean(row, dim=-1)
        out[tm, :] = torch.where(row >= mean[:, None], row, 0.0)
    return out


@tc.kernel(baseline=_flipped_scale_baseline)
def double_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :] * 2.0
    return out


@tc.kernel
def first_half_doubled(x: torch.Tensor) -> torch.Tensor:
    """Compares tile indices (integers), never data: no float decision."""
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = torch.where(t.index < n // 2, x[t] * 2.0, x[t])
    return out


@tc.kernel
def rank_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = torch.argsort(x[tm, :] * 2.0, dim=-1, descending=True)
    return out


@tc.kernel
def rank_int_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = torch.argsort(x[tm, :], dim=-1)
    return out


def _inputs() -> torch.Tensor:
    return torch.randn(ROWS, COLS, generator=torch.Generator().manual_seed(3))


def test_decisions_are_float_comparisons_of_loaded_data() -> None:
    x = _inputs()
    found = float_decisions(keep_above_row_mean.bind((x,)).traced.loops)
    assert len(found) == 1 and found[0].startswith("ge (line "), found
    assert float_decisions(double_rows.bind((x,)).traced.loops) == []
    assert float_decisions(first_half_doubled.bind((x[0],)).traced.loops) == []


def test_rounding_to_integers_is_told_apart_from_comparisons() -> None:
    """The int4 pack rounds x / scale to integer codes (ties may land either way); a row-mean
    threshold only compares, and doubling rows decides nothing."""
    x = _inputs()
    int4 = HELDOUT["int4_row_quant_pack"].kernels[0]
    packs = torch.randn(4, 64, dtype=torch.bfloat16)
    assert rounds_floats(int4.bind((packs,)).traced.loops)
    assert not rounds_floats(keep_above_row_mean.bind((x,)).traced.loops)
    assert not rounds_floats(double_rows.bind((x,)).traced.loops)


def test_top_p_bisection_decides_on_floats() -> None:
    case = HELDOUT["top_p_mask_rows"]
    (logits,) = case.make_inputs(case.cpu_shapes[0], "cpu", 0)
    kernel = case.kernels[0]
    found = float_decisions(kernel.bind((logits, 0.9)).traced.loops)
    assert any(f.startswith("ge ") for f in found), found


def _mask(shape: tuple[int, ...], points: list[tuple[int, ...]]) -> torch.Tensor:
    bad = torch.zeros(shape, dtype=torch.bool)
    for p in points:
        bad[p] = True
    return bad


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([(3, 17)], True),
        ([(0, 5), (9, 100), (40, 7)], True),
        ([(0, 5), (1, 5), (2, 5)], False),  # a column
        ([(7, 5), (7, 50), (7, 150)], False),  # a row
        ([(7, 5), (7, 6), (7, 7)], False),  # a run (and a row)
        ([], True),
    ],
)
def test_scattered_accepts_isolated_points_only(
    points: list[tuple[int, ...]], expected: bool
) -> None:
    assert scattered(_mask((400, 3000), points)) is expected  # up to 12 points may differ


def test_scattered_limits_count_and_size() -> None:
    assert not scattered(_mask((10, 10), [(3, 3)]))  # tensors under 1000 elements: exact
    ten = [(i * 7, i * 13) for i in range(10)]  # 1e-5 of 1e6 elements
    assert scattered(_mask((1000, 1000), ten))
    assert not scattered(_mask((1000, 1000), [*ten, (999, 1)]))
    assert scattered(_mask((5000,), [17]))  # one point is always allowed
    assert not scattered(_mask((5000,), [17, 18, 19]))  # a run in a 1-D tensor


def test_compare_accepts_boundary_flips_only_for_deciding_kernels() -> None:
    x = _inputs()
    want = _kept_above_mean(x)
    got = _flipped(want)
    strict = compare(got, want)
    assert not strict.ok and "1 of 12800 elements" in strict.summary()
    lenient = compare(got, want, decides_on_floats=True)
    assert lenient.ok and "decision boundaries" in lenient.summary()
    assert lenient.boundary_cases and lenient.boundary_cases[0].index is not None
    broken_row = want.clone()
    broken_row[5] = 0.0
    assert not compare(broken_row, want, decides_on_floats=True).ok


def test_discovery_keeps_a_deciding_kernel_working_against_a_flipped_reference() -> None:
    x = _inputs()
    found = run_discovery(
        keep_above_row_mean.bind((x,)), (x,), isolate=False, use_cache=False, max_candidates=2
    )
    assert found.attempts[0].ok, found.attempts[0].reason
    assert "decision boundaries" in found.attempts[0].reason
    torch.testing.assert_close(keep_above_row_mean(x), _kept_above_mean(x))


def test_discovery_still_rejects_one_wrong_element_without_decisions() -> None:
    x = _inputs()
    with pytest.raises(NoWorkingConfigError) as info:
        run_discovery(
            double_rows.bind((x,)), (x,), isolate=False, use_cache=False, max_candidates=2
        )
    assert {a.category for a in info.value.attempts} == {Category.WRONG_RESULT}


@pytest.mark.gpu
def test_top_p_over_a_large_vocabulary_finds_a_config_on_the_gpu() -> None:
    """128 x 128256: no config matched ref mode exactly (4 tokens flipped) before the rule."""
    case = HELDOUT["top_p_mask_rows"]
    (logits,) = case.make_inputs((128, 128256), "cuda", 0)
    bound = case.kernels[0].bind((logits, 0.9))
    found = run_discovery(bound, (logits, 0.9), use_cache=False, max_candidates=2)
    assert any(a.ok for a in found.attempts)
    got = case.kernels[0](logits, 0.9)
    want = case.reference(logits, 0.9)
    assert int(((got - want).abs() > 1e-5).sum()) <= 128  # at most a token a row flips


def test_an_argmax_may_pick_a_near_tie_differently_in_a_few_rows_only() -> None:
    """Integer results of a deciding kernel (an argmax over near-equal sums) get the same
    allowance (1e-5 of the rows: one of 5000, four of 400000); a block of wrong ones does not."""
    want = torch.arange(5000) % 97
    got = want.clone()
    got[2000] = 70  # far off: not a rounding tie
    assert not compare(got, want).ok
    assert compare(got, want, decides_on_floats=True).ok
    got[17] = 3
    assert not compare(got, want, decides_on_floats=True).ok  # two of 5000
    many = torch.arange(400_000) % 97
    flipped = many.clone()
    flipped[[17, 90_000, 250_000, 399_000]] = 5
    assert compare(flipped, many, decides_on_floats=True).ok
    flipped[100:110] = 0
    assert not compare(flipped, many, decides_on_floats=True).ok


def test_a_sort_of_loaded_floats_decides_and_of_integers_does_not() -> None:
    x = _inputs()
    found = float_decisions(rank_rows.bind((x,)).traced.loops)
    assert len(found) == 1 and found[0].startswith("torch.argsort (line "), found
    assert float_decisions(rank_int_rows.bind((x.to(torch.int32),)).traced.loops) == []


def _swapped(want: torch.Tensor, *places: tuple[int, int, int]) -> torch.Tensor:
    """``want`` with ``want[row, i]`` and ``want[row, j]`` exchanged for each (row, i, j)."""
    got = want.clone()
    for row, i, j in places:
        got[row, i], got[row, j] = want[row, j], want[row, i]
    return got


def test_sorted_positions_of_near_ties_may_trade_places() -> None:
    """ToMe's argsort of 256 x 289 computed similarities on the H100: 4 of 73984 positions
    differed from ref mode (two pairs of keys a rounding apart) and every config failed."""
    want = torch.stack([torch.randperm(289, generator=torch.Generator().manual_seed(r))
                        for r in range(256)])  # fmt: skip
    got = _swapped(want, (3, 40, 41), (200, 7, 8))
    assert traded_places(got, want, got != want)
    assert compare(got, want, decides_on_floats=True).ok
    assert not compare(got, want).ok  # a kernel that decides nothing stays exact
    three = got.clone()
    three[9, 100:103] = want[9, 100:103].roll(1)  # three keys in a near tie: a run of three
    assert compare(three, want, decides_on_floats=True).ok
    far = _swapped(want, (3, 40, 200))  # positions far apart: a wrong sort, not a tie
    assert not traded_places(far, want, far != want)
    run = want.clone()
    run[5, 10:20] = want[5, 10:20].flip(0)  # a reversed stretch
    assert not compare(run, want, decides_on_floats=True).ok
    other = got.clone()
    other[3, 41] = other[3, 40]  # a duplicated position: not a permutation
    assert not compare(other, want, decides_on_floats=True).ok
    many = _swapped(want, *[(r, 0, 1) for r in range(0, 256, 2)])  # 256 elements: too many
    assert not compare(many, want, decides_on_floats=True).ok

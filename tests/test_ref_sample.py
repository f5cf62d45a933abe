"""The autotuner's ref-mode baseline over a sample of a large grid (``language/ref_sample.py``,
``autotune/baseline.py``): which programs run, which elements the comparison then looks at,
which kernels are sampled, and discovery and the accuracy check against such a baseline."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels import HELDOUT
from tilecraft.autotune import discover
from tilecraft.autotune.baseline import Baseline
from tilecraft.autotune.classify import Category
from tilecraft.autotune.evaluate import check_config
from tilecraft.language.ref_sample import ProgramSample, spread_order
from tilecraft.runtime.kernel import BoundKernel

ROWS, COLS = 300, 24


@tc.kernel
def row_norms(x: torch.Tensor) -> torch.Tensor:
    """One program per row: its L2 norm, and the row scaled by it in place."""
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for row in tc.grid(m):
        v = x[row, :]
        norm = torch.sqrt(torch.sum(v * v))
        out[row] = norm
        x[row, :] = v / norm
    return out


@tc.kernel
def row_sums_by_atomics(x: torch.Tensor, total: torch.Tensor) -> None:
    m, n = x.size()
    for row in tc.grid(m):
        tc.atomic_add(total, [0], torch.sum(x[row, :]))


def _x() -> torch.Tensor:
    return torch.rand(ROWS, COLS, generator=torch.Generator().manual_seed(5)) + 0.5


def _sampled_row_norms(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[torch.Tensor, BoundKernel, Baseline | None]:
    """``row_norms`` over 300 rows with the baseline's sample cut to 40 programs."""
    monkeypatch.setattr(discover, "SAMPLE_PROGRAMS", 40)
    x = _x()
    bound = row_norms.bind((x,))
    return x, bound, discover.baseline_or_none(bound, (x,), {})


def test_pick_keeps_small_grids_and_spreads_a_sample_over_large_ones() -> None:
    sample = ProgramSample(limit=40)
    assert sorted(sample.run(list(range(40)))) == list(range(40)) and not sample.sampled
    chosen = sample.pick(list(range(1000)))
    assert len(chosen) == 40 == len(set(chosen)) and chosen == sorted(chosen)
    assert chosen[:10] == list(range(10)) and chosen[-10:] == list(range(990, 1000))
    assert max(b - a for a, b in zip(chosen, chosen[1:], strict=False)) < 60  # spread out
    assert sorted(sample.run(list(range(1000)))) == chosen
    assert sample.sampled and (sample.ran, sample.of) == (80, 1040)


def test_spread_order_visits_everything_both_ends_first() -> None:
    for n in (0, 1, 2, 3, 7, 40, 1000):
        order = spread_order(n)
        assert sorted(order) == list(range(n))
    order = spread_order(1000)
    assert order[:3] == [0, 999, 499] and order[3:5] == [249, 749]
    first = sorted(order[:16])  # any prefix already spans the grid
    assert max(b - a for a, b in zip(first, first[1:], strict=False)) <= 1000 // 8


def test_a_spent_budget_stops_the_sample_after_its_least_programs() -> None:
    sample = ProgramSample(limit=10_000, budget_s=0.0, min_programs=5)
    ran = list(sample.run(list(range(300))))
    assert ran == spread_order(300)[:5] and (sample.ran, sample.of) == (5, 300)
    assert sample.sampled and 0 in ran and 299 in ran
    unlimited = ProgramSample(limit=10_000, budget_s=None, min_programs=5)
    assert len(list(unlimited.run(list(range(300))))) == 300 and not unlimited.sampled


def test_a_slow_grid_baseline_stops_at_its_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Few programs with long loops (a paged decode attention: 512 programs of 256 pages took
    42 s in ref mode): the baseline stops starting programs once its budget is spent, and
    discovery still checks the default against the programs it ran."""
    monkeypatch.setattr(discover, "SAMPLE_BUDGET_S", 0.0)
    x = _x()
    bound = row_norms.bind((x,))
    baseline = discover.baseline_or_none(bound, (x,), {})
    assert baseline is not None and baseline.source == "ref mode (16 of 300 programs)"
    config = bound.config_spec.default()
    assert check_config(bound, config, (x,), {}, baseline)["ok"]
    wrong = check_config(bound, config, (x,), {}, baseline, fault="wrong")
    assert not wrong["ok"] and "16 of 300 programs" in wrong["reason"]
    total = torch.zeros(1)
    whole = discover.baseline_or_none(row_sums_by_atomics.bind((x, total)), (x, total), {})
    assert whole is not None and whole.source == "ref mode"  # atomics: never cut short


def test_a_large_grid_baseline_runs_a_sample_and_records_what_it_wrote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x, bound, baseline = _sampled_row_norms(monkeypatch)
    assert baseline is not None and baseline.source == "ref mode (40 of 300 programs)"
    out_mask, (x_mask,), _ = baseline.written
    assert out_mask.shape == (ROWS,) and int(out_mask.sum()) == 40
    assert bool(x_mask[out_mask].all()) and not bool(x_mask[~out_mask].any())  # whole rows
    rows = out_mask.nonzero().flatten()
    want = x.norm(dim=1)
    torch.testing.assert_close(baseline.outputs[rows], want[rows])
    assert torch.equal(x, _x())  # the caller's tensor is untouched (the baseline ran on clones)


def test_the_accuracy_check_against_a_sample_passes_and_catches_wrong_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x, bound, baseline = _sampled_row_norms(monkeypatch)
    config = bound.config_spec.default()
    assert check_config(bound, config, (x,), {}, baseline)["ok"]
    wrong = check_config(bound, config, (x,), {}, baseline, fault="wrong")
    assert not wrong["ok"] and wrong["category"] == Category.WRONG_RESULT.value
    assert "40 of 300 programs" in wrong["reason"]
    found = discover.run_discovery(bound, (x,), isolate=False, use_cache=False, max_candidates=2)
    assert found.attempts[0].ok


def test_kernels_whose_programs_share_results_run_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discover, "SAMPLE_PROGRAMS", 40)
    x = _x()
    total = torch.zeros(1)
    atomics = row_sums_by_atomics.bind((x, total))
    assert discover._sample_programs(atomics) is None
    baseline = discover.baseline_or_none(atomics, (x, total), {})
    assert baseline is not None and baseline.source == "ref mode" and baseline.written is None
    torch.testing.assert_close(baseline.args_after[1], x.sum().reshape(1))
    assert discover._sample_programs(row_norms.bind((x,))) == 40


def test_a_sparse_matrix_product_samples_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The held-out CSR SpMV (one program per row, a loop over loaded bounds): ref mode over
    1M rows took minutes; sampled, discovery checks the default against the rows it ran."""
    monkeypatch.setattr(discover, "SAMPLE_PROGRAMS", 16)
    case = HELDOUT["csr_spmv"]
    inputs = case.make_inputs((200, 150), "cpu", 0)
    bound = case.kernels[0].bind(inputs)
    found = discover.run_discovery(bound, inputs, isolate=False, use_cache=False, max_candidates=1)
    assert found.attempts[0].ok, found.attempts[0].reason
    baseline = discover.baseline_or_none(bound, inputs, {})
    assert baseline is not None and "16 of 200 programs" in baseline.source


@pytest.mark.gpu
def test_a_sampled_baseline_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discover, "SAMPLE_PROGRAMS", 64)
    x = _x().repeat(20, 1).cuda()  # 6000 rows
    bound = row_norms.bind((x,))
    found = discover.run_discovery(bound, (x,), use_cache=False, max_candidates=2)
    assert found.attempts[0].ok, found.attempts[0].reason
    baseline = discover.baseline_or_none(bound, (x,), {})
    assert baseline is not None and baseline.source == "ref mode (64 of 6000 programs)"
    assert baseline.written[0].device.type == "cuda"


@tc.kernel
def scale_then_shift(x: torch.Tensor) -> torch.Tensor:
    """Two device loops: the second reads what the first wrote, so no sample may skip rows."""
    m, n = x.size()
    mid = torch.empty_like(x)
    out = torch.empty_like(x)
    for row in tc.grid(m):
        mid[row, :] = x[row, :] * 2.0
    for row in tc.grid(m):
        out[row, :] = mid[m - 1 - row, :] + 1.0
    return out


@tc.kernel
def heads_scaled(x: torch.Tensor) -> torch.Tensor:
    """A 2-D grid (batch x head): the sample is drawn over all its programs."""
    b, h, d = x.size()
    out = torch.empty_like(x)
    for bi, hi in tc.grid([b, h]):
        out[bi, hi, :] = x[bi, hi, :] * (hi + 1)
    return out


def test_two_loop_kernels_run_whole_and_2d_grids_are_sampled_over_their_product(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(discover, "SAMPLE_PROGRAMS", 40)
    x = _x()
    two = scale_then_shift.bind((x,))
    assert discover._sample_programs(two) is None
    baseline = discover.baseline_or_none(two, (x,), {})
    assert baseline is not None and baseline.written is None
    torch.testing.assert_close(baseline.outputs, x.flip(0) * 2.0 + 1.0)
    heads = torch.randn(30, 10, 8)
    baseline = discover.baseline_or_none(heads_scaled.bind((heads,)), (heads,), {})
    assert baseline is not None and baseline.source == "ref mode (40 of 300 programs)"
    mask = baseline.written[0]
    assert int(mask.sum()) == 40 * 8 and bool(mask[-1, -1].all()) and bool(mask[0, 0].all())
    scale = torch.arange(1, 11).float()[None, :, None]
    torch.testing.assert_close(baseline.outputs[mask], (heads * scale)[mask])


@tc.kernel
def rows_through_a_view(x: torch.Tensor) -> torch.Tensor:
    """Writes its flat output through a 2-D view of it: the mask follows the storage."""
    m, n = x.size()
    flat = torch.empty([m * n], dtype=x.dtype, device=x.device)
    grid_view = flat.view(m, n)
    for row in tc.grid(m):
        grid_view[row, :] = x[row, :] + 1.0
    return flat


def test_a_store_through_a_view_marks_the_returned_tensor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(discover, "SAMPLE_PROGRAMS", 40)
    x = _x()
    bound = rows_through_a_view.bind((x,))
    baseline = discover.baseline_or_none(bound, (x,), {})
    assert baseline is not None and baseline.source == "ref mode (40 of 300 programs)"
    mask = baseline.written[0]
    assert mask.shape == (ROWS * COLS,) and int(mask.sum()) == 40 * COLS
    rows = mask.view(ROWS, COLS).any(dim=1)
    assert bool(mask.view(ROWS, COLS)[rows].all())  # whole rows
    torch.testing.assert_close(baseline.outputs[mask], (x + 1.0).flatten()[mask])
    assert check_config(bound, bound.config_spec.default(), (x,), {}, baseline)["ok"]

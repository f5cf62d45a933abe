"""Ref mode's atomics follow the real ones: repeated indices all count (a histogram), max/min
reduce over repeats, and the returned previous values are not the updated ones."""

from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tc


@tc.kernel(config=tc.Config(block_sizes=[16]))
def histogram(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.zeros_like(bins)
    for t in tc.tile(n):
        tc.atomic_add(out, x[t], torch.ones_like(x[t], dtype=torch.float32))
    return out


@tc.kernel(config=tc.Config(block_sizes=[16]))
def bucket_max(x: torch.Tensor, v: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.full_like(bins, -1000.0)
    for t in tc.tile(n):
        tc.atomic_max(out, x[t], v[t])
    return out


def _data(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 5, (50,), generator=g)
    v, bins = torch.randn(50, generator=g), torch.zeros(5)
    return x.to(device), v.to(device), bins.to(device)


def test_ref_histogram_counts_repeats(device: str) -> None:
    x, _, bins = _data(device)
    want = torch.bincount(x, minlength=5).float()
    assert torch.equal(histogram.run_ref(x, bins), want)
    assert torch.equal(histogram(x, bins), want)  # the compiled kernel agrees (and is accepted)


def test_ref_mode_env_histogram(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    x, _, bins = _data(device)
    monkeypatch.setenv("TILECRAFT_REF", "1")
    assert torch.equal(histogram(x, bins), torch.bincount(x, minlength=5).float())


def test_ref_atomic_max_over_repeats(device: str) -> None:
    x, v, bins = _data(device)
    want = torch.full((5,), -1000.0, device=device).scatter_reduce(0, x, v, "amax")
    assert torch.equal(bucket_max.run_ref(x, v, bins), want)
    assert torch.equal(bucket_max(x, v, bins), want)


def test_ref_atomic_returns_previous_values() -> None:
    target = torch.zeros(4)
    old = tc.atomic_add(target, slice(None), torch.ones(4))  # eager meaning: no tracer
    assert torch.equal(old, torch.zeros(4)) and torch.equal(target, torch.ones(4))


@tc.kernel(static_shapes=True)
def scatter_rows_by_tiles(x: torch.Tensor, idx: torch.Tensor, nb: int) -> torch.Tensor:
    m, n = x.size()
    out = torch.zeros([nb, n], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        for tk in tc.tile(n):
            tc.atomic_add(out, [idx[tm], tk], x[tm, tk])
    return out


def test_a_one_row_tiles_scatter_adds_every_column_in_the_interpreter(device: str) -> None:
    """Rows added at ids by [1, 2] tiles: Triton's interpreter dropped every column but the
    first of an atomic whose mask is a broadcast view; the mask is materialized there."""
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], device=device)
    idx = torch.tensor([0, 1, 0], device=device)
    bound = scatter_rows_by_tiles.bind((x, idx, 2))
    config = bound.config_spec.default().replace(block_sizes=[1, 2])
    got = bound.run(bound.compile_config(config), x, idx, 2)
    assert torch.equal(got, torch.zeros(2, 2, device=device).index_add_(0, idx, x))


@tc.kernel(static_shapes=True)
def weighted_int_bincount(ids: torch.Tensor, w: torch.Tensor, nbins: int) -> torch.Tensor:
    (n,) = ids.size()
    out = torch.zeros([nbins], dtype=torch.int32, device=ids.device)
    for tn in tc.tile(n):
        tc.atomic_add(out, [ids[tn]], w[tn])
    return out


def test_float_values_into_an_int_atomic_are_refused(device: str) -> None:
    """Torch refuses ``index_add_`` of floats into ints; the atomic truncated each value
    (weights 0.6, 0.7, 0.8 added 0 to bin 0) in the compiled code and in ref mode alike."""
    from tilecraft.errors import DeviceCodeError

    ids = torch.tensor([0, 0, 0, 1, 1, 2], device=device)
    w = torch.tensor([0.6, 0.7, 0.8, 1.5, 1.5, 2.9], device=device)
    with pytest.raises(DeviceCodeError, match=r"atomic_add of torch.float32 values into 'out'"):
        weighted_int_bincount(ids, w, 3)
    with pytest.raises(DeviceCodeError, match="truncated to an integer"):
        weighted_int_bincount.run_ref(ids, w, 3)
    counts = weighted_int_bincount(ids, torch.ones(6, dtype=torch.int64, device=device), 3)
    assert counts.tolist() == [3, 2, 1]  # int values into an int32 target still add


@tc.kernel(static_shapes=True)
def padded_bincount(ids: torch.Tensor, nbins: int) -> tuple[torch.Tensor, torch.Tensor]:
    (n,) = ids.size()
    counts = torch.zeros([nbins], dtype=torch.int32, device=ids.device)
    seen = torch.full([n], -1, dtype=torch.int32, device=ids.device)
    for tn in tc.tile(n):
        i = ids[tn]
        valid = (i >= 0) & (i < nbins)
        seen[tn] = tc.atomic_add(counts, [i], 1, extra_mask=valid)
    return counts, seen


def test_a_masked_atomic_skips_padding_ids(device: str) -> None:
    """A bincount over ids with -1 padding: ``extra_mask`` drops those lanes (the out-of-range
    hint named extra_mask, which atomics did not take; clamping counted padding into a bin).
    The previous values are 0 where masked off; compiled and ref mode agree."""
    ids = torch.tensor([0, -1, 2, 2, -1, 1, 0, 0, 5], device=device)
    want = torch.bincount(ids[(ids >= 0) & (ids < 3)], minlength=3).to(torch.int32)
    for run in (padded_bincount, padded_bincount.run_ref):
        counts, seen = run(ids, 3)
        assert torch.equal(counts, want)
        masked = (ids < 0) | (ids >= 3)
        assert torch.equal(seen[masked], torch.zeros_like(seen[masked]))
        # each valid lane saw a distinct earlier count of its bin: 0..count-1
        for b in range(3):
            got = sorted(seen[ids == b].tolist())
            assert got == list(range(int(want[b]))), (b, got)


@pytest.mark.crosscompile
def test_a_masked_atomic_crosscompiles() -> None:
    from tilecraft.targets.target import Target
    from tilecraft.tools.check import check_kernel

    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    ids = torch.randint(-1, 3, (300,))
    rows = check_kernel(padded_bincount, (ids, 3), targets, lambda b: [b.config_spec.default()])
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status)
    code = padded_bincount.bind((ids, 3)).to_triton_code(
        padded_bincount.bind((ids, 3)).config_spec.default()
    )
    assert re.search(r"tl\.atomic_add\([^\n]*mask=[^\n]*>= 0", code), code


@tc.kernel(static_shapes=True)
def absmax_into_one(x: torch.Tensor) -> torch.Tensor:
    amax = torch.zeros([1], dtype=torch.float32, device=x.device)
    for t in tc.tile(x.size(0)):
        tc.atomic_max(amax, [0], torch.amax(torch.abs(x[t])))
    return amax


def test_ref_mode_atomics_run_on_meta_tensors() -> None:
    """Ref mode on meta tensors (shapes only: default_dump replays calls so) took a boolean
    selection of the atomic's lanes, which meta tensors cannot make: the next call of the case
    was lost from the dump."""
    out = absmax_into_one.run_ref(torch.empty(64, device="meta"))
    assert out.is_meta and out.shape == (1,)
    x = torch.randn(64)
    assert torch.equal(absmax_into_one.run_ref(x), x.abs().amax().reshape(1))

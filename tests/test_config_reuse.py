"""An explicit config written at one shape is repaired (with a warning) at another shape of the
same kernel where the parts it names differ: per-access lists when the number of loads changes,
a split when the reduction dim is 1 (config/space.py, config/split.py)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ConfigError, ShapeError


@tc.kernel(config=tc.Config(block_sizes=[4], indexing=["block_ptr", "block_ptr"]))
def flip_and_roll(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        v = x[tm, :].to(torch.float32)
        out[tm, :] = torch.flip(v, dims=[1]) + torch.roll(v, 1, 1)
    return out


def test_per_access_lists_written_for_other_shapes_fall_back_to_the_defaults() -> None:
    """A row longer than 32 is re-read from memory for the flip (one more load): the config's
    two-entry indexing list was a ConfigError there."""
    short = torch.randn(65, 3)
    v = short.float()
    torch.testing.assert_close(flip_and_roll(short), torch.flip(v, [1]) + torch.roll(v, 1, 1))
    long = torch.randn(3, 300)
    with pytest.warns(UserWarning, match=r"indexing has 2 entries; this kernel has 3"):
        got = flip_and_roll(long)
    torch.testing.assert_close(got, torch.flip(long, [1]) + torch.roll(long, 1, 1))


@tc.kernel(config=tc.Config(block_sizes=[2], reduction_loops=[16], split_reductions=[2]))
def row_sums(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tm in tc.tile(x.size(0)):
        out[tm] = x[tm, :].sum(dim=1)
    return out


@tc.kernel(config=tc.Config(block_sizes=[8], split_reductions=[2]))
def doubled(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * 2
    return out


def test_a_split_of_a_reduction_over_a_dim_of_one_is_repaired() -> None:
    x = torch.randn(4, 64)
    torch.testing.assert_close(row_sums(x), x.sum(1))
    one = torch.randn(4, 1)
    with pytest.warns(UserWarning, match=r"reduces nothing at these shapes"):
        torch.testing.assert_close(row_sums(one), one.sum(1))
    with pytest.raises(ConfigError, match=r"split_reductions\[0\]=2"):  # no shape can split it
        doubled(torch.randn(16))


@tc.kernel(config=tc.Config(block_sizes=[64], indexing="tensor_descriptor"))
def scale_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * 2.0 + y[t]
    return out


def test_a_view_off_a_16_byte_boundary_gets_its_own_specialization_without_tma() -> None:
    """The key had dtype, shape, strides and device but not the pointer's alignment: a
    descriptor config chosen on an aligned tensor was reused for ``base[1:]`` (the interpreter
    asserted; on a GPU a TMA descriptor of a misaligned base faults)."""
    x, y = torch.randn(96), torch.randn(96)
    torch.testing.assert_close(scale_add(x, y), x * 2 + y)
    view = torch.randn(97)[1:]
    torch.testing.assert_close(scale_add(view, y), view * 2 + y)
    config = tc.Config(block_sizes=[64], indexing="tensor_descriptor")
    aligned_code = scale_add.bind((x, y)).to_triton_code(config)
    view_code = scale_add.bind((view, y)).to_triton_code(config)
    assert aligned_code.count("tl.make_tensor_descriptor(") == 3
    assert view_code.count("tl.make_tensor_descriptor(") == 2  # y and out keep theirs


@tc.kernel(static_shapes=True)
def causal_row_sums(x: torch.Tensor) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(tm.end):  # the columns up to this row tile's end
            keep = tn.index[None, :] <= tm.index[:, None]
            acc = acc + torch.sum(torch.where(keep, x[tm, tn].float(), 0.0), dim=1)
        out[tm] = acc
    return out


def test_a_loop_bounded_by_an_enclosing_tiles_end_is_checked_against_the_tensor() -> None:
    """``tc.tile(tm.end)`` over an x narrower than tm's loop read past x's rows (96 of 128 rows
    wrong, NaNs; out of bounds on a GPU): only size bounds were checked before the launch."""
    x = torch.randn(24, 24)
    torch.testing.assert_close(causal_row_sums(x), torch.tril(x).sum(1))
    with pytest.raises(
        ShapeError, match=r"tensor 'x' has size 32 along dim 1 .* covers \[0, 128\)"
    ):
        causal_row_sums(torch.randn(128, 32))


def test_repair_warnings_point_at_the_users_kernel() -> None:
    """They pointed at tilecraft/runtime/kernel.py (the line that generated the code)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        row_sums(torch.randn(3, 1))
    assert caught and all(w.filename == __file__ for w in caught), [w.filename for w in caught]


@tc.kernel(static_shapes=True)
def banded_row_sums(x: torch.Tensor, w: int) -> torch.Tensor:
    m = x.size(0)
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(min(tm.end + w, m)):
            keep = tn.index[None, :] <= tm.index[:, None] + w  # columns up to i + w
            acc = acc + torch.where(keep, x[tm, tn].float(), 0.0).sum(dim=1)
        out[tm] = acc
    return out


def test_a_bound_from_an_enclosing_end_plus_a_window_is_checked_too() -> None:
    x = torch.randn(16, 16)
    torch.testing.assert_close(banded_row_sums(x, 4), torch.triu(torch.tril(x, 4), -16).sum(1))
    with pytest.raises(ShapeError, match=r"tensor 'x' has size 8 along dim 1"):
        banded_row_sums(torch.randn(16, 8), 4)

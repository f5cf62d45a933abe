"""Split reductions whose later loops the combine's programs share (``ir/split.shared_loops``):
which loops qualify, the generated kernels and grids, interpreter numerics against eager
PyTorch at ragged shares, cross-compiling for sm_90 and gfx942, and the H200."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s19 import (
    batchnorm1d_train_fwd,
    batchnorm1d_train_fwd_reference,
)
from tests.cross_targets import assert_cross_compiles
from tilecraft.ir.split import SplitSite, split_site
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target


@tc.kernel(static_shapes=True)
def center_columns(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each column minus its mean, and the means: a sum over the rows, then a pass that writes
    every row again (the second loop's block is its own)."""
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    means = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            acc = acc + x[tm, tn].to(torch.float32).sum(dim=0)
        mean = acc / m
        means[tn] = mean  # stored by every share, the same value
        for tm in tc.tile(m):
            out[tm, tn] = x[tm, tn].to(torch.float32) - mean[None, :]
    return out, means


@tc.kernel(static_shapes=True)
def center_then_sum(x: torch.Tensor) -> torch.Tensor:
    """The second loop carries a sum: the combine must run it whole, once per tile."""
    m, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            acc = acc + x[tm, tn].to(torch.float32).sum(dim=0)
        mean = acc / m
        sq = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            d = x[tm, tn].to(torch.float32) - mean[None, :]
            sq = sq + (d * d).sum(dim=0)
        out[tn] = sq
    return out


@tc.kernel(static_shapes=True)
def last_row_wins(x: torch.Tensor) -> torch.Tensor:
    """The second loop stores to the same element on every iteration (the last one wins):
    shares would race, so it is not shared."""
    m, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            acc = acc + x[tm, tn].to(torch.float32).sum(dim=0)
        for tm in tc.tile(m):
            out[tn] = acc + tm.begin
    return out


@tc.kernel(static_shapes=True)
def reads_back(x: torch.Tensor) -> torch.Tensor:
    """The second pass reads rows of ``out`` that its previous iteration wrote: in shares, the
    rows before a share's first block would be another share's, not yet written."""
    m, n = x.size()
    out = torch.zeros([m, n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            acc = acc + x[tm, tn].to(torch.float32).sum(dim=0)
        for tm in tc.tile(m):
            prev = out[torch.clamp(tm.index - 1, min=0), tn]
            out[tm, tn] = prev + acc[None, :]
    return out


@tc.kernel(static_shapes=True)
def standardize_columns(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean, then the variance about it, then every row normalized (a GroupNorm's three
    passes): the second loop is split in turn (a chain), the third shared."""
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    rstds = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            acc = acc + x[tm, tn].to(torch.float32).sum(dim=0)
        mean = acc / m
        sq = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            d = x[tm, tn].to(torch.float32) - mean[None, :]
            sq = sq + (d * d).sum(dim=0)
        rstd = torch.rsqrt(sq / m + 1e-5)
        rstds[tn] = rstd  # stored by every share of the last kernel, the same value
        for tm in tc.tile(m):
            out[tm, tn] = (x[tm, tn].to(torch.float32) - mean[None, :]) * rstd[None, :]
    return out, rstds


@tc.kernel(static_shapes=True)
def pass_between_sums(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A carry-free loop between two accumulator loops: it would run whole in every share of
    the second loop's kernel, so there is no chain."""
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    sums = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            acc = acc + x[tm, tn].to(torch.float32).sum(dim=0)
        for tm in tc.tile(m):
            out[tm, tn] = x[tm, tn].to(torch.float32) - acc[None, :]
        sq = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            sq = sq + x[tm, tn].to(torch.float32).sum(dim=0)
        sums[tn] = sq
    return out, sums


def _bind(kernel: tc.Kernel, *args: torch.Tensor, target: Target | None = None) -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)


def _site(kernel: tc.Kernel, *args: torch.Tensor) -> SplitSite:
    _, _, traced, _ = _bind(kernel, *args).generate(tc.Config())
    site, why = split_site(traced.loops[0])
    assert isinstance(site, SplitSite), why
    return site


def test_carry_free_loops_that_store_their_own_rows_are_shared() -> None:
    x = torch.randn(64, 32)
    assert len(_site(center_columns, x).shared) == 1
    assert _site(center_then_sum, x).shared == ()  # carries a sum
    assert _site(last_row_wins, x).shared == ()  # iterations write one element
    assert _site(reads_back, x).shared == ()  # it reads what the shared loop stores


def test_accumulator_loops_after_the_split_one_are_chained() -> None:
    x = torch.randn(64, 32)
    site = _site(standardize_columns, x)
    assert [c.position for c in site.chained] == [site.position + 3] and len(site.shared) == 1
    assert len(_site(center_then_sum, x).chained) == 1  # no loop after it: a 1-D combine
    assert _site(pass_between_sums, x).chained == ()
    assert _site(center_columns, x).chained == ()  # shared as before


def test_a_chain_is_one_kernel_per_accumulator_loop_then_the_shared_combine() -> None:
    x = torch.randn(300, 40)
    bound = _bind(standardize_columns, x, target=Target.parse("cuda:90"))
    config = tc.Config(block_sizes=[16, 32, 64, 64], split_reductions=[4])
    _, _, _, kernels = bound.generate(config)
    main = kernels[0]
    assert len(main.companions) == 2 and "split_counters(" not in main.launcher_source
    assert main.launcher_source.count("[(split_tiles, 4,)]") == 3
    second = main.companions[0].device_source
    # the second kernel combines the first loop's partials, then writes its share's own
    assert "_tc_split_acc_0" in second and "tl.store(_tc_split1_sq_0" in second
    assert "split_start_2 = 0 + tl.program_id(1) * split_span_2" in second
    combine = main.companions[1].device_source
    assert "tl.store(_tc_split" not in combine and "split_start_3" in combine
    center = _bind(center_then_sum, x, target=Target.parse("cuda:90"))
    source = center.generate(tc.Config(block_sizes=[16, 32, 64], split_reductions=[4]))[3][0]
    assert source.launcher_source.count("[(split_tiles, 4,)]") == 2  # then the 1-D combine
    assert "[(split_tiles,)]" in source.launcher_source


@pytest.mark.parametrize("split", [1, 2, 3, 8])
def test_chained_loops_match_eager(split: int, device: str) -> None:
    x = torch.randn(301, 45, device=device) * 3 + 1
    config = tc.Config(block_sizes=[16, 16, 32, 64], split_reductions=[split])
    kernel = tc.kernel(standardize_columns.fn, static_shapes=True, config=config)
    out, rstds = kernel(x)
    var = x.var(0, unbiased=False)
    torch.testing.assert_close(rstds, torch.rsqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out, (x - x.mean(0)) * torch.rsqrt(var + 1e-5), rtol=1e-4, atol=1e-4)
    kernel = tc.kernel(
        pass_between_sums.fn,
        static_shapes=True,
        config=config.replace(block_sizes=[16, 16, 32, 64]),
    )
    out, sums = kernel(x)
    torch.testing.assert_close(sums, x.sum(0), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(out, x - x.sum(0), rtol=1e-4, atol=1e-3)


def test_combine_runs_on_the_split_grid_and_shares_the_later_loop() -> None:
    x = torch.randn(300, 40)
    bound = _bind(center_columns, x, target=Target.parse("cuda:90"))
    config = tc.Config(block_sizes=[16, 32, 64], split_reductions=[4])
    plan, _, _, kernels = bound.generate(config)
    assert plan.split_one_launch  # the target could, but the shares need every partial
    main = kernels[0]
    assert len(main.companions) == 1 and "split_counters(" not in main.launcher_source
    combine = main.companions[0].device_source
    assert main.launcher_source.count("[(split_tiles, 4,)]") == 2
    assert "split_start_2 = 0 + tl.program_id(1) * split_span_2" in combine
    assert "for offset_2 in tl.range(split_start_2, split_stop_2, _BLOCK_2)" in combine
    _, plain, _, _ = bound.generate(config.replace(split_reductions=[1]))
    assert "program_id(1)" not in plain


@pytest.mark.parametrize("split", [1, 2, 3, 8])
def test_shared_loops_match_eager(split: int, device: str) -> None:
    """Ragged shares: 301 rows in blocks of 16 and 32 do not divide into equal shares."""
    x = torch.randn(301, 45, device=device)
    config = tc.Config(block_sizes=[16, 16, 32], split_reductions=[split])
    kernel = tc.kernel(center_columns.fn, static_shapes=True, config=config)
    out, means = kernel(x)
    torch.testing.assert_close(means, x.mean(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, x - x.mean(0), rtol=1e-5, atol=1e-5)
    kernel = tc.kernel(center_then_sum.fn, static_shapes=True, config=config)
    want = ((x - x.mean(0)) ** 2).sum(0)
    torch.testing.assert_close(kernel(x), want, rtol=1e-4, atol=1e-4)


def test_batchnorm_default_splits_both_passes_and_matches_eager(device: str) -> None:
    x = torch.randn(777, 40, device=device).to(torch.bfloat16)
    w = torch.rand(40, device=device).to(torch.bfloat16) + 0.5
    b = torch.randn(40, device=device).to(torch.bfloat16)
    config = tc.Config(block_sizes=[16, 64, 64], split_reductions=[4])
    kernel = tc.kernel(batchnorm1d_train_fwd.fn, static_shapes=True, config=config)
    got = kernel(x, w, b)
    want = batchnorm1d_train_fwd_reference(x, w, b)
    torch.testing.assert_close(got.float(), want.float(), rtol=2**-7, atol=6.25e-2)
    meta = (torch.empty(65536, 1024, dtype=torch.bfloat16, device="meta"),)
    meta += (torch.empty(1024, dtype=torch.bfloat16, device="meta"),) * 2
    bound = _bind(batchnorm1d_train_fwd, *meta, target=Target.parse("cuda:90"))
    default = bound.config_spec.default()
    assert default.split_reductions[0] > 1  # 1024 channels: too few tiles for 132 SMs
    source = bound.generate(default)[3][0].launcher_source
    assert source.count(f"(split_tiles, {default.split_reductions[0]},)") == 2


def test_shared_combine_cross_compiles() -> None:
    x = torch.empty(65536, 1024, dtype=torch.bfloat16, device="meta")
    config = tc.Config(block_sizes=[32, 256, 256], split_reductions=[8])
    assert_cross_compiles(center_columns, (x,), config)
    config = tc.Config(block_sizes=[32, 256, 256, 256], split_reductions=[8])
    assert_cross_compiles(standardize_columns, (x,), config)


@pytest.mark.gpu
def test_shared_split_on_gpu() -> None:
    x = torch.randn(65536, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.rand(1024, device="cuda", dtype=torch.bfloat16) + 0.5
    b = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    want = batchnorm1d_train_fwd_reference(x, w, b)
    for split in (1, 8, 16):
        config = tc.Config(block_sizes=[32, 256, 256], split_reductions=[split])
        kernel = tc.kernel(batchnorm1d_train_fwd.fn, static_shapes=True, config=config)
        got = kernel(x, w, b)
        torch.testing.assert_close(got.float(), want.float(), rtol=2**-7, atol=6.25e-2)
    out, means = center_columns(x)
    torch.testing.assert_close(means, x.float().mean(0), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out, x.float() - x.float().mean(0), rtol=1e-4, atol=1e-3)
    xf = x.float()
    var = xf.var(0, unbiased=False)
    for split in (1, 8, 16):
        config = tc.Config(block_sizes=[32, 256, 256, 256], split_reductions=[split])
        kernel = tc.kernel(standardize_columns.fn, static_shapes=True, config=config)
        out, rstds = kernel(x)
        torch.testing.assert_close(rstds, torch.rsqrt(var + 1e-5), rtol=1e-4, atol=1e-4)
        want = (xf - xf.mean(0)) * torch.rsqrt(var + 1e-5)
        torch.testing.assert_close(out, want, rtol=1e-3, atol=1e-3)

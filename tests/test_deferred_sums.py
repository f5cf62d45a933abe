"""Deferred sums (the ``deferred_sums`` knob; ir/ and codegen/deferred_sums.py): ``acc = acc +
x.sum(0)`` in a loop over ``x``'s rows keeps a tile accumulator and reduces once after the loop;
numerics in the interpreter against eager (ragged rows, split shares), what is left alone, the
knob's place in the space (off by default, offered only where legal, flipped by the search),
cross-compiles for cuda:90 / gfx942."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.reductions import column_sum
from examples.sum import sum_first
from tilecraft.autotune.candidates import neighbors
from tilecraft.errors import ConfigError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

HAS_CUDA = torch.cuda.is_available()


@tc.kernel(static_shapes=True)
def column_sum_and_max(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A sum that defers and a running max that does not (not a sum)."""
    m, n = x.size()
    total = torch.empty([n], dtype=torch.float32, device=x.device)
    peak = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        top = tc.full([tn], float("-inf"), dtype=torch.float32)
        for tm in tc.tile(m):
            xf = x[tm, tn].to(torch.float32)
            acc = acc + xf.sum(dim=0)
            top = torch.maximum(top, torch.amax(xf, dim=0))
        total[tn] = acc
        peak[tn] = top
    return total, peak


@tc.kernel(static_shapes=True)
def column_sum_read_in_loop(x: torch.Tensor) -> torch.Tensor:
    """The running sum is read inside the loop: it must stay a per-step reduction."""
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            xf = x[tm, tn].to(torch.float32)
            acc = acc + xf.sum(dim=0)
            out[tm, tn] = xf + acc[None, :]
    return out


def _code(kernel: tc.Kernel, config: tc.Config, *args: torch.Tensor) -> str:
    return kernel.bind(args).to_triton_code(config)


def test_the_column_sum_reduces_once_after_its_loop() -> None:
    x = torch.randn(1000, 96)
    code = _code(column_sum, tc.Config(block_sizes=[64, 32], num_warps=4, deferred_sums=True), x)
    loop = code[code.index("for offset_1") : code.index("tl.store(out")]
    body, after = loop.split("\n    acc_1 = ", 1)
    assert "acc_rows = acc_rows + tl.where(mask_1[:, None]" in body and "tl.sum(" not in body
    assert after.startswith("acc_1 + tl.sum(acc_rows, 0)")


@pytest.mark.parametrize("split", [1, 4])
@pytest.mark.parametrize("shape", [(1000, 96), (37, 100), (64, 16)])
def test_deferred_sums_match_eager(shape: tuple[int, int], split: int) -> None:
    x = torch.randn(*shape, dtype=torch.bfloat16)
    config = tc.Config(
        block_sizes=[16, 32], num_warps=4, split_reductions=[split], deferred_sums=True
    )
    bound = column_sum.bind((x,))
    got = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(got, x.float().sum(0), rtol=1e-5, atol=1e-4)
    assert "acc_rows" in bound.to_triton_code(config)


@pytest.mark.parametrize("split", [1, 3])
def test_a_running_max_defers_like_the_sum_and_both_match_eager(split: int) -> None:
    """``top = maximum(top, amax(x))`` keeps a -inf tile accumulator too; values all below
    zero and 300 rows in 64-row steps: a padded lane taken as 0 would win the max."""
    x = -torch.rand(300, 40) - 0.5
    config = tc.Config(
        block_sizes=[32, 64], num_warps=4, split_reductions=[split], deferred_sums=True
    )
    code = _code(column_sum_and_max, config, x)
    assert "acc_rows" in code and "top_rows = tl.full(" in code
    assert "top_rows = tl.maximum(top_rows, tl.where(mask_1[:, None], xf, float('-inf'))" in code
    bound = column_sum_and_max.bind((x,))
    total, peak = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(total, x.sum(0), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(peak, x.amax(0))


@tc.kernel(static_shapes=True)
def column_min_and_flag(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A running min of fp32 values and a running int32 max of a NaN flag."""
    m, n = x.size()
    low = torch.empty([n], dtype=torch.float32, device=x.device)
    flag = torch.empty([n], dtype=torch.int32, device=x.device)
    for tn in tc.tile(n):
        lo = tc.full([tn], float("inf"), dtype=torch.float32)
        found = tc.zeros([tn], dtype=torch.int32)
        for tm in tc.tile(m):
            t = x[tm, tn]
            lo = torch.minimum(lo, torch.amin(t, dim=0))
            found = torch.maximum(found, torch.amax(torch.isnan(t).to(torch.int32), dim=0))
        low[tn] = lo
        flag[tn] = found
    return low, flag


def test_a_deferred_min_propagates_nan_and_an_int_flag_defers_exactly() -> None:
    x = torch.rand(77, 50) + 1.0  # above zero: a padded lane taken as 0 would win the min
    x[40, 7] = float("nan")
    config = tc.Config(block_sizes=[16, 32], num_warps=4, deferred_sums=True)
    code = _code(column_min_and_flag, config, x)
    assert "lo_rows = tl.minimum(" in code and "found_rows = tl.maximum(" in code
    bound = column_min_and_flag.bind((x,))
    low, flag = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(low, x.amin(0), equal_nan=True)
    assert torch.equal(flag, torch.isnan(x).any(0).to(torch.int32))


def test_a_sum_read_inside_the_loop_is_not_deferred() -> None:
    x = torch.randn(100, 24)
    config = tc.Config(block_sizes=[32, 16], num_warps=4, deferred_sums=True)  # 16 rows a step
    assert "_rows" not in _code(column_sum_read_in_loop, config, x)
    bound = column_sum_read_in_loop.bind((x,))
    got = bound.run(bound.compile_config(config), x)
    blocks = torch.arange(100) // 16  # each row sees the running sum through its own block
    running = torch.cumsum(torch.stack([x[blocks == b].sum(0) for b in range(7)]), 0)
    torch.testing.assert_close(got, x + running[blocks], rtol=1e-5, atol=1e-4)


def test_a_wide_tile_keeps_the_per_step_sum() -> None:
    """4096 x 64 fp32 over 128 threads is 2048 values a thread: not kept in registers."""
    x = torch.randn(8192, 64)
    assert "_rows" not in _code(
        column_sum, tc.Config(block_sizes=[4096, 64], num_warps=4, deferred_sums=True), x
    )


def test_the_sum_example_defers_its_column_sum_by_default() -> None:
    """On by default where a loop can defer (H200: sum_first 8192x32000 0.349 -> 0.133 ms);
    False keeps the per-step reduction, and a config that leaves it out gets it."""
    x = torch.randn(333, 70, dtype=torch.bfloat16)
    bound = sum_first.bind((x,))
    default = bound.config_spec.default()
    assert default.deferred_sums is True and "_rows" in bound.to_triton_code(default)
    assert "_rows" not in bound.to_triton_code(default.replace(deferred_sums=False))
    plain = tc.Config(block_sizes=list(default.block_sizes), num_warps=default.num_warps)
    assert plain.deferred_sums is None and "_rows" in bound.to_triton_code(plain)
    got = bound.run(bound.compile_config(default), x)
    torch.testing.assert_close(got.float(), x.float().sum(0), rtol=2e-2, atol=2e-2)


def test_the_knob_is_offered_only_where_a_sum_can_defer() -> None:
    from examples.matmul import matmul

    spec = column_sum.bind((torch.randn(256, 64),)).config_spec
    assert spec.deferrable_sums and spec.default().deferred_sums
    flips = [c for c in neighbors(spec, spec.default()) if c.deferred_sums is False]
    assert len(flips) == 1
    a = torch.randn(64, 64)
    mm = matmul.bind((a, a)).config_spec
    assert not mm.deferrable_sums
    plan = mm.resolve(mm.default().replace(deferred_sums=True), warn=False)
    assert plan.config.deferred_sums is None and any("deferred_sums" in r for r in plan.repairs)
    assert mm.default().deferred_sums is None  # not spelled out where nothing can defer
    assert not any(c.deferred_sums for c in neighbors(mm, mm.default()))
    with pytest.raises(ConfigError, match="deferred_sums"):
        tc.Config(deferred_sums=1)


@pytest.mark.crosscompile
def test_deferred_sums_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x = torch.randn(4096, 1024, dtype=torch.bfloat16)
    configs = [
        tc.Config(block_sizes=[128, 64], num_warps=4, split_reductions=[8], deferred_sums=True)
    ]
    rows = check_kernel(column_sum, (x,), targets, lambda b: configs)
    # sm_90: one kernel (its last program per tile combines); gfx942: partials, then a combine
    assert len(rows) == 3
    for row in rows:
        assert row.report is not None and row.report.ok and row.report.spills == 0, row.status


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_deferred_sums_on_gpu() -> None:
    x = torch.randn(65536, 1024, device="cuda", dtype=torch.bfloat16)
    bound = column_sum.bind((x,))
    config = bound.config_spec.default().replace(deferred_sums=True)
    got = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(got, x.float().sum(0), rtol=1e-4, atol=2e-2)
    y = torch.randn(300, 40, device="cuda")
    both = column_sum_and_max.bind((y,))
    program = both.compile_config(both.config_spec.default().replace(deferred_sums=True))
    total, peak = both.run(program, y)
    torch.testing.assert_close(total, y.sum(0), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(peak, y.amax(0))


@pytest.mark.gpu
def test_deferred_min_and_flag_on_gpu() -> None:
    """The running min and int flag deferred at the default (a split tall input) on the GPU."""
    x = torch.rand(32768, 1000, device="cuda") + 1.0
    x[12345, 17] = float("nan")
    bound = column_min_and_flag.bind((x,))
    config = bound.config_spec.default()
    assert config.deferred_sums is not False
    low, flag = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(low, x.amin(0), equal_nan=True)
    assert torch.equal(flag, torch.isnan(x).any(0).to(torch.int32))

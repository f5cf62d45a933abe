"""Independent inner loops under a small grid become grid dimensions (ir/promote.py): promoted
only where iterations cannot see each other and the grid is under a wave; numerics unchanged."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.ir.promote import promotable
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel


@tc.kernel(static_shapes=True)
def row_blocks_scaled(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """One program per batch as written; each walks the row tiles."""
    b, m, n = x.size()
    out = torch.empty_like(x)
    for i in tc.grid(b):
        scale = w[i]
        for tm in tc.tile(m):
            out[i, tm, :] = torch.relu(x[i, tm, :]) * scale
    return out


@tc.kernel(static_shapes=True)
def chunked_row_sum(x: torch.Tensor) -> torch.Tensor:
    """The inner loop carries a sum: its iterations depend on each other."""
    b, n = x.size()
    out = torch.empty([b], dtype=torch.float32, device=x.device)
    for i in tc.grid(b):
        acc = tc.zeros([], dtype=torch.float32)
        for tn in tc.tile(n):
            acc += torch.sum(x[i, tn].to(torch.float32))
        out[i] = acc
    return out


@tc.kernel(static_shapes=True)
def last_tile_wins(x: torch.Tensor) -> torch.Tensor:
    """Every iteration writes the same place (the last one wins in order): not independent."""
    b, n = x.size()
    out = torch.empty([b], dtype=x.dtype, device=x.device)
    for i in tc.grid(b):
        for tn in tc.tile(n, block_size=8):
            out[i] = torch.amax(x[i, tn])
    return out


@tc.kernel(static_shapes=True)
def shift_in_place(x: torch.Tensor) -> torch.Tensor:
    """Reads what other iterations write (x is stored and loaded): not independent."""
    b, n = x.size()
    for i in tc.grid(b):
        for tn in tc.tile(n):
            x[i, tn] = x[i, tn] + 1.0
    return x


def _grid_rank(kernel: tc.Kernel, *args: torch.Tensor) -> int:
    (loop,) = kernel.bind(args).traced.loops
    return len(loop.grid_syms)


def test_small_grid_promotes_independent_inner_loop_and_matches_eager() -> None:
    x, w = torch.randn(2, 50, 24), torch.randn(2)
    assert _grid_rank(row_blocks_scaled, x, w) == 2  # (batch, row tiles): 2 < a wave of 4
    want = torch.relu(x) * w[:, None, None]
    torch.testing.assert_close(row_blocks_scaled(x, w), want)
    bound = row_blocks_scaled.bind((x, w))
    for config in (tc.Config(block_sizes=[8]), tc.Config(block_sizes=[64])):
        torch.testing.assert_close(bound.run(bound.compile_config(config), x, w), want)
    torch.testing.assert_close(row_blocks_scaled.run_ref(x, w), want)


def test_a_grid_that_fills_a_wave_is_left_as_written() -> None:
    x, w = torch.randn(6, 20, 8), torch.randn(6)
    assert _grid_rank(row_blocks_scaled, x, w) == 1  # 6 programs >= the interpreter's wave of 4
    torch.testing.assert_close(row_blocks_scaled(x, w), torch.relu(x) * w[:, None, None])


@pytest.mark.parametrize(
    ("kernel", "reason"),
    [
        (chunked_row_sum, "carries values"),
        (last_tile_wins, "not indexed by the loop's tile"),
        (shift_in_place, "stored and read"),
    ],
)
def test_dependent_iterations_are_never_promoted(kernel: tc.Kernel, reason: str) -> None:
    x = torch.randn(2, 40)
    (loop,) = kernel.bind((x.clone(),)).traced.loops
    why = promotable(loop)
    assert isinstance(why, str) and reason in why
    assert len(loop.grid_syms) == 1


def test_dependent_kernels_still_compute_in_order() -> None:
    x = torch.randn(2, 40)
    torch.testing.assert_close(chunked_row_sum(x), x.sum(1))
    torch.testing.assert_close(last_tile_wins(x), x[:, 32:].amax(1))
    torch.testing.assert_close(shift_in_place(x.clone()), x + 1.0)


def test_promoted_kernel_cross_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x, w = torch.randn(32, 512, 128), torch.randn(32)
    for target in targets:  # 32 programs < a wave of 132 / 304 SMs
        monkeypatch.setenv("TILECRAFT_TARGET", f"{target.backend}:{target.arch}")
        row_blocks_scaled.reset()
        assert _grid_rank(row_blocks_scaled, x, w) == 2
    monkeypatch.delenv("TILECRAFT_TARGET")
    row_blocks_scaled.reset()
    rows = check_kernel(row_blocks_scaled, (x, w), targets, lambda b: [b.config_spec.default()])
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)

"""Gathers from a loaded tile read memory at the gathered positions (frontend/gather_loads.py):
no register gather, the row never loaded whole, the same values as torch in the interpreter,
and a register gather still where the tile is computed or its tensor was stored to first (the
kernels run in the interpreter on a CPU, on the GPU where there is one)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s30 import take_along_last_dim
from tests.cross_targets import TARGETS
from tilecraft.runtime.kernel import BoundKernel


@tc.kernel(static_shapes=True)
def picks(
    x: torch.Tensor, idx: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three plain loads gathered from: a cast row, every other element of a row (a strided
    slice), and the rows of v's second plane (an int index before the tiles)."""
    b, _ = x.size()
    k = idx.size(1)
    cast = torch.empty([b, k], dtype=torch.float32, device=x.device)
    odd = torch.empty([b, k], dtype=x.dtype, device=x.device)
    plane = torch.empty([b, k], dtype=x.dtype, device=x.device)
    for tb, tk in tc.tile([b, k]):
        cast[tb, tk] = torch.take_along_dim(x[tb, :].to(torch.float32), idx[tb, tk], dim=1)
        odd[tb, tk] = torch.gather(x[tb, 1::2], 1, idx[tb, tk] // 2)
        plane[tb, tk] = torch.take_along_dim(v[1, tb, :], idx[tb, tk], dim=1)
    return cast, odd, plane


def _picks_inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(37, 300, generator=gen).to(torch.bfloat16)
    idx = torch.randint(0, 300, (37, 45), generator=gen)
    v = torch.randn(2, 37, 300, generator=gen).to(torch.bfloat16)
    return x.to(device), idx.to(device), v.to(device)


def test_gathers_of_loaded_tiles_match_torch(device: str) -> None:
    x, idx, v = _picks_inputs(device)
    cast, odd, plane = picks(x, idx, v)
    torch.testing.assert_close(cast, torch.take_along_dim(x.float(), idx, dim=1))
    torch.testing.assert_close(odd, torch.gather(x[:, 1::2], 1, idx // 2))
    torch.testing.assert_close(plane, torch.take_along_dim(v[1], idx, dim=1))


def test_gathers_of_loaded_tiles_are_loads_at_the_positions() -> None:
    bound = picks.bind(_picks_inputs())
    default = bound.config_spec.default()
    code = bound.to_triton_code(default)
    assert "tl.gather" not in code, code
    assert "_RDIM" not in code and not default.reduction_loops, default  # no whole row left
    assert "(2 * " in code or "* 2" in code, code  # x[tb, 1::2]'s position 2 p + 1


def test_an_index_past_the_row_reads_zero(device: str) -> None:
    """torch raises on it; the register gather was undefined; the load is masked to the tensor
    (a compiled kernel must not read past it)."""
    x, idx, v = _picks_inputs(device)
    idx[0, 0], idx[5, 3] = 10_000, -1
    plane = picks(x, idx, v)[2]
    assert plane[0, 0] == 0 and plane[5, 3] == 0
    keep = torch.ones_like(idx, dtype=torch.bool)
    keep[0, 0] = keep[5, 3] = False
    expect = torch.take_along_dim(v[1], idx.clamp(0, 299), dim=1)
    torch.testing.assert_close(plane[keep], expect[keep])


@tc.kernel(static_shapes=True)
def column_picks(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """torch.gather along dim 0 of whole columns x[:, tn]: row idx[k, j] of column j."""
    _, n = x.size()
    k = idx.size(0)
    out = torch.empty([k, n], dtype=x.dtype, device=x.device)
    for tk, tn in tc.tile([k, n]):
        out[tk, tn] = torch.gather(x[:, tn], 0, idx[tk, tn])
    return out


def test_a_gather_down_whole_columns_reads_memory_too(device: str) -> None:
    gen = torch.Generator().manual_seed(8)
    x, idx = torch.randn(70, 33, generator=gen), torch.randint(0, 70, (9, 33), generator=gen)
    bound = column_picks.bind((x, idx))
    assert "tl.gather" not in bound.to_triton_code(bound.config_spec.default())
    x, idx = x.to(device), idx.to(device)
    torch.testing.assert_close(column_picks(x, idx), torch.gather(x, 0, idx))


@tc.kernel(static_shapes=True)
def doubled_in_place(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x doubled in place after its rows were loaded, then gathered from the loaded rows."""
    m, _ = x.size()
    out = torch.empty([m, idx.size(1)], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        x[tm, :] = row * 2
        out[tm, :] = torch.take_along_dim(row, idx[tm, :], dim=1)
    return out


def test_a_row_stored_to_before_the_gather_is_gathered_as_loaded(device: str) -> None:
    """Re-reading x after the store would change what the compiled kernel gathers (the row's
    values as loaded, a tile being a value; eager torch's ``row`` is a view and sees the
    store, which is why this runs one config rather than autotuning against ref mode)."""
    gen = torch.Generator().manual_seed(4)
    x, idx = torch.randn(9, 300, generator=gen), torch.randint(0, 300, (9, 5), generator=gen)
    before = x.clone()
    bound = doubled_in_place.bind((x, idx))
    config = bound.config_spec.default()
    code = bound.to_triton_code(config)  # the row as loaded, through the program's scratch row
    assert "gather_row = _tc_gather_" in code and "tl.gather" not in code, code
    x, idx, before = x.to(device), idx.to(device), before.to(device)
    bound = doubled_in_place.bind((x, idx))  # bound again for the device it runs on
    out = bound.run(bound.compile_config(bound.config_spec.default()), x, idx)
    torch.testing.assert_close(out, torch.take_along_dim(before, idx, 1))
    torch.testing.assert_close(x, 2 * before)


def test_take_along_dim_of_wide_rows_defaults_to_a_pointwise_tile() -> None:
    """heldout_s30's take_along_dim(x[tb, :], idx[tb, tk]) of [16384, 4096] rows: with the row
    loaded whole the default was [2, 32] at 8 warps (255 registers, 2.6 KB of spills a thread
    on sm_90, x read 32 times over); read at the positions it is the [32, 128] pointwise tile."""
    x = torch.empty(16384, 4096, dtype=torch.bfloat16, device="meta")
    idx = torch.empty(16384, 1024, dtype=torch.int64, device="meta")
    bound = BoundKernel(take_along_last_dim, take_along_last_dim.bind_arguments((x, idx), {}))
    default = bound.config_spec.default()
    assert list(default.block_sizes) == [32, 128] and not default.reduction_loops, default


@pytest.mark.crosscompile
def test_the_take_along_dim_default_does_not_spill_on_sm90() -> None:
    from tilecraft.tools.check import check_kernel

    x = torch.empty(16384, 4096, dtype=torch.bfloat16, device="meta")
    idx = torch.empty(16384, 1024, dtype=torch.int64, device="meta")
    rows = check_kernel(
        take_along_last_dim, (x, idx), [TARGETS[0]], lambda b: [b.config_spec.default()]
    )
    (row,) = rows
    assert row.report is not None and row.report.ok, row
    assert row.report.spills == 0 and (row.report.registers or 0) <= 128, row.report


@pytest.mark.gpu
def test_gathers_of_loaded_tiles_on_gpu() -> None:
    gen = torch.Generator(device="cuda").manual_seed(6)
    x = torch.randn(2048, 4096, generator=gen, device="cuda").to(torch.bfloat16)
    idx = torch.randint(0, 4096, (2048, 1000), generator=gen, device="cuda")
    torch.testing.assert_close(take_along_last_dim(x, idx), torch.take_along_dim(x, idx, 1))
    v = torch.randn(2, 2048, 4096, generator=gen, device="cuda").to(torch.bfloat16)
    cast, odd, plane = picks(x, idx, v)
    torch.testing.assert_close(cast, torch.take_along_dim(x.float(), idx, dim=1))
    torch.testing.assert_close(odd, torch.gather(x[:, 1::2], 1, idx // 2))
    torch.testing.assert_close(plane, torch.take_along_dim(v[1], idx, dim=1))


@pytest.mark.crosscompile
def test_memory_gathers_rolls_and_flips_cross_compile_for_both_targets() -> None:
    from tests.cross_targets import assert_defaults_cross_compile
    from tests.test_tile_gather import reversed_sums, rolled_rows

    x = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    idx = torch.empty(4096, 512, dtype=torch.int64, device="meta")
    assert_defaults_cross_compile(take_along_last_dim, (x, idx))
    assert_defaults_cross_compile(reversed_sums, (torch.empty(1024, 4096, device="meta"),))
    assert_defaults_cross_compile(rolled_rows, (x[:1024, :3000],))

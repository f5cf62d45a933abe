"""Index tensors of int8 / uint8 / int16 (codes, small vocabularies, bucket ids): their address
offset ``index * stride`` is computed in int32 (``codegen/memory._offset_index``). Triton kept the
narrow type through the multiply: a uint8 row id times a row stride of 64 read row id % 4, and
int8 ids scattered outside the output (fuzzing, session 48)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc

NARROW = [torch.uint8, torch.int8, torch.int16]


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def gather_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    (n,) = ids.size()
    out = torch.empty([n, table.size(1)], dtype=table.dtype, device=table.device)
    for tn in tc.tile(n):
        out[tn, :] = table[ids[tn], :]
    return out


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def scatter_rows(rows: torch.Tensor, ids: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    (n,) = ids.size()
    for tn in tc.tile(n):
        out[ids[tn], :] = rows[tn, :]
    return out


def _ids(rows: int, dtype: torch.dtype, n: int, device: str) -> torch.Tensor:
    high = min(rows, torch.iinfo(dtype).max + 1)
    g = torch.Generator().manual_seed(rows + n)
    return torch.randint(0, high, (n,), generator=g).to(device=device, dtype=dtype)


@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_index_gathers_the_rows_it_names(dtype: torch.dtype, device: str) -> None:
    rows = 1000 if dtype == torch.int16 else 120
    table = torch.randn(rows, 64, device=device)
    ids = _ids(rows, dtype, 37, device)
    assert "to(tl.int32)" in gather_rows.bind((table, ids)).to_triton_code(
        tc.Config(block_sizes=[16])
    )
    assert torch.equal(gather_rows(table, ids), table[ids.long()])


@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_index_scatters_inside_the_output(dtype: torch.dtype, device: str) -> None:
    rows = 1000 if dtype == torch.int16 else 120
    ids = torch.randperm(rows, device=device)[:40].to(dtype)  # distinct: one writer a row
    values = torch.randn(40, 64, device=device)
    guard = torch.full((rows + 16, 64), 7.0, device=device)  # padding rows after the output
    out = guard[:rows]
    scatter_rows(values, ids, out)
    want = torch.full((rows, 64), 7.0, device=device)
    want[ids.long()] = values
    assert torch.equal(out, want)
    assert bool((guard[rows:] == 7.0).all())

"""``x.index_select(dim, idx)`` of a host tensor in device code (frontend/values.HostTensor): the
load ``x[:, .., idx]`` as torch defines it, along any dim, and errors naming the call."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError


@tc.kernel(static_shapes=True)
def table_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    n = ids.size(0)
    out = torch.empty([n, table.size(1)], dtype=table.dtype, device=table.device)
    for tn in tc.tile(n):
        out[tn, :] = table.index_select(0, ids[tn])
    return out


@tc.kernel(static_shapes=True)
def picked_columns(x: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    m, k = x.size(0), cols.size(0)
    out = torch.empty([m, k], dtype=x.dtype, device=x.device)
    for tk in tc.tile(k):
        out[:, tk] = x.index_select(-1, cols[tk])
    return out


def test_index_select_matches_torch_along_either_dim() -> None:
    gen = torch.Generator().manual_seed(12)
    table, ids = torch.randn(50, 24, generator=gen), torch.randint(0, 50, (37,), generator=gen)
    torch.testing.assert_close(table_rows(table, ids), table.index_select(0, ids))
    x, cols = torch.randn(9, 40, generator=gen), torch.randint(0, 40, (13,), generator=gen)
    torch.testing.assert_close(picked_columns(x, cols), x.index_select(1, cols))


@tc.kernel(static_shapes=True)
def select_with_a_matrix(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    out = torch.empty([ids.size(0), ids.size(1)], dtype=table.dtype, device=table.device)
    for ta, tb in tc.tile([ids.size(0), ids.size(1)]):
        out[ta, tb] = table.index_select(0, ids[ta, tb])
    return out


def test_index_select_names_a_bad_index() -> None:
    table, ids = torch.randn(8, 4), torch.zeros(3, 2, dtype=torch.int64)
    with pytest.raises(DeviceCodeError, match="index_select: the index must be a 1-D tile") as e:
        select_with_a_matrix(table, ids)
    assert "test_index_select.py" in str(e.value)

"""Module-level kernels for tests/test_deploy.py (isolated workers and tune plans re-import them)."""

from __future__ import annotations

import torch

import tilecraft as tc

LISTED = [tc.Config(block_sizes=[1]), tc.Config(block_sizes=[4]), tc.Config(block_sizes=[16])]


@tc.kernel(configs=LISTED)
def add_listed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Picks the fastest of LISTED per specialization."""
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] + y[t]
    return out


@tc.kernel
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] + y[t]
    return out


@tc.kernel
def row_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = x.new_empty(m)
    for tm in tc.tile(m):
        out[tm] = torch.sum(x[tm, :], dim=-1)
    return out

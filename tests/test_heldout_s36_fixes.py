"""Bugs the session-36 held-out kernels met: torch.all's result type, errors for factories of
numbers, run-time arange bounds and host tensors of dtypes device code lacks."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError, UnsupportedOpError


@tc.kernel(static_shapes=True)
def rows_all_positive(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.int64, device=x.device)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.where((x[tm, :] > 0).all(dim=1), 1, -1)
    return out


def test_all_over_a_padded_dim_is_a_bool_condition(device: str) -> None:
    """tl.min of a bool widened to int32, then fed tl.where an int32 condition (deprecated)."""
    x = torch.randn(6, 5, device=device)
    x[2] = x[2].abs() + 0.1
    config = tc.Config(block_sizes=[2], reduction_loops=[None])
    code = rows_all_positive.bind((x,)).to_triton_code(config)
    assert ", 1).to(tl.int1)" in code, code
    assert torch.equal(rows_all_positive(x), torch.where((x > 0).all(1), 1, -1))


@tc.kernel(static_shapes=True)
def lower_pairs(z: torch.Tensor) -> torch.Tensor:
    b, s, _ = z.size()
    out = torch.empty([b, s * (s - 1) // 2], dtype=z.dtype, device=z.device)
    for tb in tc.tile(b):
        li, lj = torch.tril_indices(s, s, -1)
        out[tb, :] = z[tb.index[:, None], li[None, :], lj[None, :]]
    return out


@tc.kernel(static_shapes=False)
def with_slots(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n + 1], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        j = torch.arange(n + 1)
        out[tm, :] = x[tm, 0][:, None] + j[None, :].float()
    return out


@tc.kernel(static_shapes=True)
def e8m0_scales(x: torch.Tensor) -> torch.Tensor:
    s = torch.empty([x.size(0)], dtype=torch.float8_e8m0fnu, device=x.device)
    for t in tc.tile(x.size(0)):
        s[t] = x[t].abs()
    return s


def test_factories_run_time_bounds_and_unsupported_host_dtypes_are_errors_at_the_line() -> None:
    with pytest.raises(
        UnsupportedOpError, match=r"torch op 'torch\.tril_indices' is not supp"
    ) as a:
        lower_pairs(torch.randn(3, 5, 5))
    with pytest.raises(DeviceCodeError, match=r"a bound computed from a run-time size") as b:
        with_slots(torch.randn(4, 5))
    assert "static_shapes=True" in str(b.value)
    with pytest.raises(UnsupportedOpError, match=r"'s' is a torch\.float8_e8m0fnu tensor") as c:
        e8m0_scales(torch.randn(64))
    for info in (a, b, c):
        assert "test_heldout_s36_fixes.py:" in str(info.value), str(info.value)


@tc.kernel(static_shapes=True)
def row_potential(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for ti in tc.tile(x.size(0)):
        pot = 0.0
        for tj in tc.tile(x.size(1)):
            pot = pot + x[ti, tj].sum(1)
        out[ti] = pot
    return out


def test_a_scalar_accumulator_that_becomes_a_tile_says_how_to_start_it() -> None:
    from tilecraft.errors import ShapeError

    with pytest.raises(ShapeError, match=r"loop-carried 'pot' changes shape") as info:
        row_potential(torch.randn(8, 32))
    assert "pot = tc.zeros([...], dtype=...)" in str(info.value)


def test_a_numpy_scalar_argument_is_named_as_numpys() -> None:
    """'cannot use a float32 as a device value' read like torch.float32."""
    import numpy as np

    from tests.kernels import rms_norm

    with pytest.raises(UnsupportedOpError, match=r"NumPy float32 scalar") as info:
        rms_norm(torch.randn(4, 16), torch.randn(16), np.float32(1e-5))
    assert "float(x)" in str(info.value)

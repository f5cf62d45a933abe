"""Persistent program loops in Triton's interpreter: their bound is a launcher-computed constexpr,
so NumPy's deprecated array-to-int conversion never happens (it becomes an error in NumPy 2.3),
and tiles past the end are skipped."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from examples.add import add


@pytest.mark.filterwarnings("error::DeprecationWarning")
@pytest.mark.parametrize("pid_type", ["persistent_blocked", "persistent_interleaved"])
@pytest.mark.parametrize("multiplier", [1, 3])
def test_persistent_loops_run_without_numpy_deprecations(pid_type: str, multiplier: int) -> None:
    config = tc.Config(block_sizes=[16, 32], pid_type=pid_type, num_sm_multiplier=multiplier)
    kernel = tc.kernel(add.fn, config=config)
    x, y = torch.randn(37, 100), torch.randn(37, 100)
    assert torch.equal(kernel(x, y), x + y)
    code = kernel.bind((x, y)).to_triton_code(config)
    assert "_TILES_PER_PROGRAM: tl.constexpr" in code
    assert "_TILES_PER_PROGRAM=triton.cdiv(" in code
    assert "if virtual_pid < total_tiles:" in code


@pytest.mark.filterwarnings("error::DeprecationWarning")
def test_computed_range_bounds_run_without_numpy_deprecations() -> None:
    from tests.kernels import rms_norm, rms_norm_ref

    config = tc.Config(block_sizes=[4], reduction_loops=[16])
    kernel = tc.kernel(rms_norm.fn, config=config, static_shapes=False)
    x, w = torch.randn(9, 100), torch.randn(100)
    torch.testing.assert_close(kernel(x, w), rms_norm_ref(x, w))
    code = kernel.bind((x, w)).to_triton_code(config)
    assert "in tl.range(0, _tc_index(" in code  # the runtime extent of the rolled reduction

"""Codegen rolls at most one reduction dim per kernel (codegen/schedule.py): the heuristic
default keeps one looped, and a config that loops two is repaired (config/spec.py:
one_looped). A row quantized by its absmax and packed by pairs has a K dim and a K / 2 dim, both
long enough to loop: the default used to loop both and then reject itself."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s24 import (
    int4_row_quant_pack,
    int4_row_quant_pack_reference,
)
from tilecraft.config.spec import ConfigSpec
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target


def _spec(shape: tuple[int, int], target: Target) -> ConfigSpec:
    x = torch.empty(*shape, dtype=torch.bfloat16, device="meta")
    return BoundKernel(
        int4_row_quant_pack, int4_row_quant_pack.bind_arguments((x,), {}), target=target
    ).config_spec


@pytest.mark.parametrize("target", [Target.parse("cuda:90"), Target("hip", "gfx942", 64)])
def test_the_default_loops_one_of_two_long_whole_dims(target: Target) -> None:
    spec = _spec((8192, 28672), target)
    assert len(spec.reductions) == 2 and all(r.loopable for r in spec.reductions)
    loops = spec.default().reduction_loops
    assert [c is not None for c in loops] == [True, False], loops  # K (the longer) loops


def test_a_config_looping_both_is_repaired_and_matches() -> None:
    x = torch.randn(2, 300, dtype=torch.bfloat16)
    bound = int4_row_quant_pack.bind((x,))
    with pytest.warns(UserWarning, match=r"reduction_loops\[1\]=32: at most one reduction dim"):
        config = bound.config_spec.normalize(tc.Config(block_sizes=[1], reduction_loops=[64, 32]))
    assert list(config.reduction_loops) == [64, None]
    got = bound.run(bound.compile_config(config), x)
    for have, want in zip(got, int4_row_quant_pack_reference(x), strict=True):
        torch.testing.assert_close(have, want)


def test_long_rows_run_through_discovery_and_match() -> None:
    """At K = 28672 discovery starts from the default (which raised before)."""
    x = torch.randn(2, 28672, dtype=torch.bfloat16)
    for have, want in zip(int4_row_quant_pack(x), int4_row_quant_pack_reference(x), strict=True):
        torch.testing.assert_close(have, want)

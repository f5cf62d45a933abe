"""Pointwise kernels keep the SM occupied (config/occupancy.py): the default's tiles shrink while
the resource model predicts more than OCCUPANCY_REGISTERS per thread; other kernels keep theirs."""

from __future__ import annotations

import torch

from examples.add import add
from examples.rms_norm import rms_norm_fwd
from examples.rope import make_inputs, rope_rotate_half
from tilecraft.config.occupancy import OCCUPANCY_REGISTERS
from tilecraft.config.resolve import predicted_registers
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")


def _bound(kernel: object, args: tuple[object, ...]) -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=H200)  # type: ignore[attr-defined]


def test_a_register_heavy_pointwise_default_shrinks_under_the_limit() -> None:
    bound = _bound(rope_rotate_half, make_inputs((8192, 32, 128), torch.bfloat16, "meta", 0))
    spec = bound.config_spec
    config = spec.default()
    assert (
        predicted_registers(spec, config, config.num_warps or 4).per_thread <= OCCUPANCY_REGISTERS
    )
    tokens, heads = config.block_sizes
    assert tokens * heads <= 32  # was [8, 16] at 8 warps: 192 registers per thread on sm_90


def test_light_pointwise_and_reduction_defaults_are_unchanged() -> None:
    x = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    assert list(_bound(add, (x, x)).config_spec.default().block_sizes) == [32, 128]
    w = torch.empty(4096, dtype=torch.bfloat16, device="meta")
    config = _bound(rms_norm_fwd, (x, w, 1e-5)).config_spec.default()
    assert config.num_warps == 8 and list(config.block_sizes) == [2]


def test_the_smaller_default_computes_rope_in_the_interpreter() -> None:
    from examples.rope import reference

    args = make_inputs((16, 4, 64), torch.float32, "cpu", 0)
    torch.testing.assert_close(rope_rotate_half(*args), reference(*args)[0])

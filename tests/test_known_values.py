"""Masks the plan makes constant (codegen/known.py): a user's explicit ``tn.index < n`` is all
true when the block divides the static range, so the select is its operand and a count of valid
lanes is the block; with a partial last block nothing is folded. Numerics in the interpreter
against eager PyTorch, generated code checked for what was (not) folded."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.norms import layer_norm_reference, welford_layer_norm

# welford_layer_norm (the generalization benchmark's user kernel) merges each chunk's count
# ``sum(where(tn.index < n, 1.0, 0.0))``, mean and M2 (Chan et al.) over explicit masks


@tc.kernel(static_shapes=True)
def flipped_masks(x: torch.Tensor) -> torch.Tensor:
    """The index on either side, a mask that is all false, and one over the grid dim."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        xt = x[tm, tn]
        kept = torch.where(n > tn.index[None, :], xt, 0.0)  # all true
        past = torch.where(tn.index[None, :] >= n, -1.0, kept)  # all false
        out[tm, tn] = torch.where(tm.index[:, None] <= m - 1, past, 7.0)  # all true
    return out


def _run(kernel: tc.Kernel, config: tc.Config, *args: torch.Tensor) -> torch.Tensor:
    bound = kernel.bind(args)
    return bound.run(bound.compile_config(config), *args)


def _kernel_code(kernel: tc.Kernel, config: tc.Config, *args: torch.Tensor) -> str:
    """The generated device function without its source comments."""
    code = kernel.bind(args).to_triton_code(config)
    body = code[code.index("@triton.jit") : code.index("def launch_0")]
    return "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))


def _norm_inputs(m: int, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(m, n) * 2 + 3, torch.randn(n), torch.randn(n)


def test_masks_fold_when_every_block_is_full() -> None:
    args = _norm_inputs(8, 256)
    config = tc.Config(block_sizes=[2, 64, 64])
    got = _run(welford_layer_norm, config, *args)
    torch.testing.assert_close(got, layer_norm_reference(*args), rtol=1e-5, atol=1e-5)
    kernel = _kernel_code(welford_layer_norm, config, *args)
    assert "tl.where(valid" not in kernel  # both selects are their operands
    assert "k = tl.full([1], 64.0, tl.float32)" in kernel  # the count is the block
    assert kernel.count("tl.sum(") == 2  # the chunk's sum and M2; no count reduction


def test_masks_stay_where_the_last_block_is_partial() -> None:
    args = _norm_inputs(8, 300)
    config = tc.Config(block_sizes=[2, 64, 64])
    got = _run(welford_layer_norm, config, *args)
    torch.testing.assert_close(got, layer_norm_reference(*args), rtol=1e-5, atol=1e-5)
    kernel = _kernel_code(welford_layer_norm, config, *args)
    assert kernel.count("tl.where(valid") == 3 and kernel.count("tl.sum(") == 3


@pytest.mark.parametrize("shape", [(8, 64), (6, 50)])
def test_flipped_false_and_grid_masks(shape: tuple[int, int]) -> None:
    x = torch.randn(shape)
    config = tc.Config(block_sizes=[2, 16])
    torch.testing.assert_close(_run(flipped_masks, config, x), x)
    kernel = _kernel_code(flipped_masks, config, x)
    folded = shape[1] % 16 == 0  # the grid dim (8 or 6 rows in blocks of 2) is always full
    assert ("-1.0" in kernel) is not folded  # the all-false select keeps its other operand
    assert "7.0" not in kernel  # the row mask holds: its select is its operand


@pytest.mark.parametrize("shape", [(8, 256), (6, 300)])
def test_random_configs_agree_with_eager(shape: tuple[int, int]) -> None:
    """Whatever blocks a config picks (folded where they divide, masked where not), the
    explicit-mask kernels compute what eager PyTorch does."""
    import random

    args = _norm_inputs(*shape)
    cases = (
        (welford_layer_norm, args, layer_norm_reference(*args)),
        (flipped_masks, args[:1], args[0]),
    )
    for kernel, inputs, want in cases:
        bound = kernel.bind(inputs)
        rng = random.Random(7)
        for _ in range(3):
            config = bound.config_spec.random(rng)
            got = bound.run(bound.compile_config(config), *inputs)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=repr(config))

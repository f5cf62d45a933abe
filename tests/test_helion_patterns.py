"""Kernels written as Helion's own examples write them, run through tilecraft's names
(``import tilecraft as helion; import tilecraft.language as hl``), found by porting Helion-style
kernels (session 50): accumulators shaped by a registered block size. End to end in the
interpreter (on the GPU where there is one) against eager PyTorch, over several configs."""

from __future__ import annotations

import re

import pytest
import torch

import tilecraft as helion
import tilecraft.language as hl


@helion.kernel()
def long_sum_manual(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    block_size_n = hl.register_block_size(n)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, block_size_n], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=block_size_n):
            acc += x[tile_m, tile_n].to(torch.float32)
        out[tile_m] = acc.sum(-1).to(x.dtype)
    return out


@pytest.mark.parametrize("blocks", [[4, 16], [8, 32], [2, 64]])
def test_an_accumulator_of_a_registered_block_sizes_lanes(blocks: list[int], device: str) -> None:
    """``hl.zeros([tile_m, block_size_n])`` then ``acc += x[tile_m, tile_n]`` over a loop of
    that block (Helion's long_sum / kl_div): refused with '[BLOCK_0, RDIM_1] and [BLOCK_0,
    BLOCK_2] do not broadcast'. The accumulator's dim holds each tile's lanes; a partial last
    tile's lanes add 0."""
    x = torch.randn(9, 100, generator=torch.Generator().manual_seed(0)).to(device)
    bound = long_sum_manual.bind((x,))
    config = helion.Config(block_sizes=blocks)
    got = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(got, x.sum(-1), rtol=1e-5, atol=1e-5)
    code = bound.to_triton_code(config)  # the lanes' dim is as wide as the tiles' block
    (lanes,) = re.findall(r"_RDIM_\d+=(\d+)", code)
    assert int(lanes) == blocks[0] and f"_BLOCK_2={blocks[0]}" in code


@helion.kernel()
def concatenate(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(1) + y.size(1)], dtype=x.dtype, device=x.device)
    for tile0, tile1 in hl.tile([out.size(0), out.size(1)]):
        in_x = (tile1.index < x.size(1))[None, :]
        x_part = hl.load(x, [tile0, tile1], extra_mask=in_x)
        y_part = hl.load(y, [tile0, tile1.index - x.size(1)], extra_mask=~in_x)
        out[tile0, tile1] = torch.where(in_x, x_part, y_part)
    return out


def test_a_masked_load_over_a_loop_wider_than_the_tensor(device: str) -> None:
    """Helion's concatenate loops over the output's columns and masks each input's in with
    hl.load(extra_mask=): refused ('tensor x has size 17 ... the loop covers [0, 26)'), and in
    ref mode a shape error. The wider tile is read at its positions, bounds-checked."""
    x, y = torch.randn(5, 17, device=device), torch.randn(5, 9, device=device)
    want = torch.cat([x, y], 1)
    for config in (helion.Config(block_sizes=[4, 8]), helion.Config(block_sizes=[8, 32])):
        bound = concatenate.bind((x, y))
        torch.testing.assert_close(bound.run(bound.compile_config(config), x, y), want)
    torch.testing.assert_close(concatenate.run_ref(x, y), want)


@pytest.mark.crosscompile
def test_helion_patterns_cross_compile_for_nvidia_and_amd() -> None:
    from tests.cross_targets import assert_defaults_cross_compile

    assert_defaults_cross_compile(concatenate, (torch.empty(512, 300), torch.empty(512, 200)))
    assert_defaults_cross_compile(long_sum_manual, (torch.empty(512, 3000),))


@helion.kernel(static_shapes=True)
def matmul_with(x: torch.Tensor, y: torch.Tensor, epilogue: object) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = epilogue(acc, (tile_m, tile_n))  # type: ignore[operator]
    return out


def test_an_epilogue_closing_over_a_tensor_is_refused_with_the_fix(device: str) -> None:
    """Helion's matmul(x, y, lambda acc, tile: acc + bias[tile[1]]): the closed-over tensor is
    not one the kernel holds; the error said 'made in device code or a global, on cpu'."""
    x, y = torch.randn(16, 32, device=device), torch.randn(32, 24, device=device)
    bias = torch.randn(24, device=device)
    with pytest.raises(helion.TilecraftError, match="closes over") as info:
        matmul_with(x, y, lambda acc, tile: torch.relu(acc + bias[tile[1]]))
    assert "pass it to the kernel as an argument" in str(info.value)
    got = matmul_with(x, y, lambda acc, tile: torch.relu(acc))
    torch.testing.assert_close(got, torch.relu(x @ y), rtol=1e-4, atol=1e-4)


def test_helion_exc_names_resolve() -> None:
    """Helion's cross_entropy example is decorated with
    ``ignore_warnings=[helion.exc.TensorOperationInWrapper]``: 'module tilecraft has no
    attribute exc' at import. Its errors are tilecraft's; its warning names are categories."""
    assert helion.exc.TilecraftError is helion.TilecraftError
    category = helion.exc.TensorOperationInWrapper
    assert issubclass(category, Warning) and category is helion.exc.TensorOperationInWrapper
    with pytest.raises(AttributeError):
        helion.exc.not_a_name  # noqa: B018

    @helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
    def doubled(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t] = x[t] * 2
        return out

    x = torch.arange(5.0)
    torch.testing.assert_close(doubled.run_ref(x), x * 2)

"""Constant-bound slices of host-tensor dims in loads and stores: IR, generated code, numerics in
the interpreter against eager PyTorch (several configs, including a looped reduction over a sliced
dim), ref mode, dynamic shapes, and the errors for slices a kernel cannot take."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ShapeError, UnsupportedOpError


def _rand(*shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randn(*shape, generator=g)


@tc.kernel(static_shapes=True)
def swap_halves(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    half = tc.specialize(n // 2)
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :half] = x[tm, half:] * 2.0
        out[tm, half:] = x[tm, :half] + 1.0
    return out


def _swap_ref(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[1] // 2
    return torch.cat([x[:, half:] * 2.0, x[:, :half] + 1.0], dim=1)


@tc.kernel(static_shapes=True)
def window_sum(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = x.new_empty([m, 2])
    for tm in tc.tile(m):
        out[tm, 0:1] = x[tm, 3:40].sum(-1, keepdim=True)
        out[tm, 1] = x[tm, 1::3].amax(-1)
    return out


def _window_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([x[:, 3:40].sum(-1), x[:, 1::3].amax(-1)], dim=1)


def test_slices_share_a_reduction_dim_and_offset_the_pointer() -> None:
    x = _rand(9, 48)
    bound = swap_halves.bind((x,))
    ir = bound.ir()
    assert "RDIM_1@24::1" in ir and "RDIM_1@0::1" in ir, ir
    code = bound.to_triton_code(bound.config_spec.default())
    assert "(24 + rindex_1)" in code, code
    # 24 is not a power of two: the half is a 32-wide block masked at 24, so no write spills over
    assert "rmask_1 = rindex_1 < 24" in code, code


@pytest.mark.parametrize("blocks", [[1], [4], [16]])
def test_half_slices_numerics(blocks: list[int]) -> None:
    for shape in ((9, 48), (5, 20)):
        x = _rand(*shape)
        bound = swap_halves.bind((x,))
        program = bound.compile_config(tc.Config(block_sizes=blocks))
        torch.testing.assert_close(bound.run(program, x), _swap_ref(x))
    torch.testing.assert_close(swap_halves.run_ref(x), _swap_ref(x))


def test_strided_and_windowed_slices_in_reductions() -> None:
    x = _rand(11, 50)
    bound = window_sum.bind((x,))
    code = bound.to_triton_code(bound.config_spec.default())
    assert "(1 + rindex" in code and "* 3)" in code, code  # x[tm, 1::3]: element i at 1 + 3i
    for config in (
        tc.Config(block_sizes=[4]),
        tc.Config(block_sizes=[2], reduction_loops=[8, None]),
        tc.Config(block_sizes=[2], reduction_loops=[None, 4]),
    ):
        program = bound.compile_config(config)
        torch.testing.assert_close(bound.run(program, x), _window_ref(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(window_sum.run_ref(x), _window_ref(x))


def test_sliced_access_offers_only_pointer_indexing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block pointer's bounds check is the tensor's, not the slice's: sliced accesses stay
    pointer accesses, while a whole-row access of the same kernel may use block pointers."""
    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:90")
    x = _rand(64, 64)
    choices = swap_halves.bind((x,)).config_spec.space.indexing_choices
    assert choices == [("pointer",)] * 4, choices

    @tc.kernel(static_shapes=True)
    def half_and_whole(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm in tc.tile(x.size(0)):
            out[tm, :] = x[tm, :] + x[tm, :32].sum(-1, keepdim=True)
        return out

    choices = half_and_whole.bind((x,)).config_spec.space.indexing_choices
    assert choices[1] == ("pointer",) and "block_ptr" in choices[0], choices


@tc.kernel(static_shapes=False)
def dyn_window(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = x.new_empty([m, 8])
    for tm in tc.tile(m):
        out[tm, :] = x[tm, 2:10] * 3.0
    return out


def test_closed_slice_with_dynamic_shapes() -> None:
    for shape in ((7, 12), (20, 33)):
        x = _rand(*shape)
        torch.testing.assert_close(dyn_window(x), x[:, 2:10] * 3.0)


@tc.kernel(static_shapes=False)
def dyn_open(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = x.new_empty([m, n - 4])
    for tm in tc.tile(m):
        out[tm, :] = x[tm, 4:]
    return out


@tc.kernel(static_shapes=True)
def slice_by_value(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, : k[0]]
    return out


@tc.kernel(static_shapes=True)
def empty_slice(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, 5:5]
    return out


def test_slice_errors_name_the_slice() -> None:
    x = _rand(8, 16)
    with pytest.raises(UnsupportedOpError, match=r"slice 4: on 'x' depends on its size") as info:
        dyn_open(x)
    assert "test_slices.py" in str(info.value)
    with pytest.raises(UnsupportedOpError, match=r"slice :n on 'x': the stop bound is") as info:
        slice_by_value(x, torch.tensor([3]))
    # (the repr of a traced value was shown, and a tc.specialize hint that cannot take a load)
    assert "TileValue" not in str(info.value) and "for ts in tc.tile(n)" in str(info.value)
    with pytest.raises(ShapeError, match=r"slice 5:5 on 'x' selects no elements"):
        empty_slice(x)


@tc.kernel(static_shapes=True)
def one_column(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = x.new_empty([m, 1])
    for tm in tc.tile(m):
        out[tm, :] = x[tm, n - 1 :] - x[tm, 0:1]
    return out


def test_one_element_slice_keeps_its_dim() -> None:
    x = _rand(10, 6)
    expected = x[:, 5:] - x[:, 0:1]
    torch.testing.assert_close(one_column(x), expected)
    torch.testing.assert_close(one_column.run_ref(x), expected)

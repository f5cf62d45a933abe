"""Computed indices that are a tile's positions scaled and shifted load as slices
(frontend/strided_tiles.py), and a stride-2 slice no other access pairs with loads its
contiguous span and keeps the even half (ir/paired_slices.py's lone slices, codegen/paired.py):
the IR items, the generated code, interpreter numerics against torch and sm_90 vector loads."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s29 import downsample2x_nchw
from benchmarks.gen_kernels.heldout_s29b import max_pool1d_k3s2
from tests.cross_targets import default_memory_ops


def _code(kernel: tc.Kernel, *args: torch.Tensor) -> str:
    bound = kernel.bind(args)
    return bound.to_triton_code(bound.config_spec.default())


def _load_items(kernel: tc.Kernel, *args: torch.Tensor) -> list[tuple[object, ...]]:
    from tilecraft.ir.nodes import Op

    loop = kernel.bind(args).traced.loops[0]
    return [n.attrs["index"] for n in loop.walk() if n.op is Op.LOAD]


@tc.kernel(static_shapes=True)
def strided_windows(x: torch.Tensor) -> torch.Tensor:
    """out[.., o] = x[.., 2 o + 1] - x[.., 3 o]: one stride-2 and one stride-3 window."""
    m, n = x.size()
    out = torch.empty([m, (n - 2) // 3 + 1], dtype=x.dtype, device=x.device)
    for tm, to in tc.tile([m, (n - 2) // 3 + 1]):
        out[tm, to] = x[tm, 2 * to.index + 1] - x[tm, to.index * 3]
    return out


def test_scaled_tile_positions_are_slices() -> None:
    x = torch.randn(5, 50)
    steps = [items[-1] for items in _load_items(strided_windows, x)]
    assert [(s[0], s[3], s[4]) for s in steps] == [("rslice", 1, 2), ("rslice", 0, 3)], steps
    code = _code(strided_windows, x)
    assert ">= 0" not in code, code  # no bounds mask: provably inside the rows
    o = torch.arange((50 - 2) // 3 + 1)
    torch.testing.assert_close(strided_windows(x), x[:, 2 * o + 1] - x[:, 3 * o])


@tc.kernel(static_shapes=True)
def shifted_back(x: torch.Tensor) -> torch.Tensor:
    """x[.., j - 1] (j = 0 reads 0): a position before the row stays a masked computed index."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        src = tn.index - 1
        out[tm, tn] = tc.load(x, [tm, src], extra_mask=(src >= 0)[None, :])
    return out


def test_a_shift_that_leaves_the_tensor_stays_a_masked_index() -> None:
    x = torch.randn(4, 37)
    assert _load_items(shifted_back, x)[0][-1][0] == "value"
    expect = torch.cat([torch.zeros(4, 1), x[:, :-1]], dim=1)
    torch.testing.assert_close(shifted_back(x), expect)


@tc.kernel(static_shapes=True)
def crossed_placements(x: torch.Tensor) -> torch.Tensor:
    """x[2 j, 2 i] laid out [i, j] (the row index placed along the value's second dim)."""
    h, w = x.size()
    out = torch.empty([w // 2, h // 2], dtype=x.dtype, device=x.device)
    for ti, tj in tc.tile([w // 2, h // 2]):
        out[ti, tj] = x[(2 * tj.index)[None, :], (2 * ti.index)[:, None]]
    return out


def test_placements_that_reorder_dims_stay_computed_indices() -> None:
    x = torch.randn(12, 20)
    assert all(item[0] == "value" for item in _load_items(crossed_placements, x)[0])
    torch.testing.assert_close(crossed_placements(x), x[::2, ::2].t())


def test_a_downsample_loads_the_span_and_keeps_the_even_half() -> None:
    x = torch.randn(2, 3, 14, 22)
    code = _code(downsample2x_nchw, x)
    assert "tl.split(tl.reshape(span" in code and ", _ = tl.split" in code, code
    torch.testing.assert_close(downsample2x_nchw(x), x[:, :, ::2, ::2])


def test_a_lone_span_is_masked_where_its_last_partner_lies_past_the_row() -> None:
    """Rows of 9: the third tap 2 o + 2 reads up to element 8, its span's last partner is
    element 9 (past the row): the span is masked at 9 - 2 = 7."""
    x = torch.randn(2, 3, 9)
    code = _code(max_pool1d_k3s2, x)
    assert "< 7)" in code or "< 7\n" in code, code
    torch.testing.assert_close(max_pool1d_k3s2(x), torch.nn.functional.max_pool1d(x, 3, 2))
    x = torch.randn(2, 3, 10)
    torch.testing.assert_close(max_pool1d_k3s2(x), torch.nn.functional.max_pool1d(x, 3, 2))


@pytest.mark.crosscompile
def test_the_downsample_loads_16_byte_vectors_on_sm90() -> None:
    """Columns 2 j as computed indices were 32 ``ld.global.b16`` a thread."""
    x = torch.empty(32, 64, 256, 256, dtype=torch.bfloat16, device="meta")
    ops = Counter(default_memory_ops(downsample2x_nchw, (x,)))
    assert ops["ld.global.v4.b32"] and not ops["ld.global.b16"], ops


@pytest.mark.gpu
def test_strided_windows_on_gpu() -> None:
    gen = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(8, 64, 256, 256, generator=gen, device="cuda").to(torch.bfloat16)
    torch.testing.assert_close(downsample2x_nchw(x), x[:, :, ::2, ::2])
    y = torch.randn(4, 64, 4097, generator=gen, device="cuda").to(torch.bfloat16)
    torch.testing.assert_close(max_pool1d_k3s2(y), torch.nn.functional.max_pool1d(y, 3, 2))
    z = torch.randn(64, 3001, generator=gen, device="cuda")
    o = torch.arange((3001 - 2) // 3 + 1, device="cuda")
    torch.testing.assert_close(strided_windows(z), z[:, 2 * o + 1] - z[:, 3 * o])


@pytest.mark.crosscompile
def test_strided_windows_cross_compile_for_both_targets() -> None:
    from tests.cross_targets import assert_defaults_cross_compile

    pool = torch.empty(8, 64, 4097, dtype=torch.bfloat16, device="meta")
    assert_defaults_cross_compile(max_pool1d_k3s2, (pool,))
    image = torch.empty(4, 16, 256, 256, dtype=torch.bfloat16, device="meta")
    assert_defaults_cross_compile(downsample2x_nchw, (image,))


@tc.kernel(static_shapes=True)
def spread_to_even_columns(x: torch.Tensor) -> torch.Tensor:
    """out[.., 2 j] = x[.., j], odd columns 0: a store at scaled tile positions."""
    m, n = x.size()
    out = torch.zeros([m, 2 * n], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, 2 * tn.index] = x[tm, tn]
    return out


def test_a_store_at_scaled_tile_positions_is_a_slice_too() -> None:
    from tilecraft.ir.nodes import Op

    x = torch.randn(5, 21)
    loop = spread_to_even_columns.bind((x,)).traced.loops[0]
    (store,) = [n for n in loop.walk() if n.op is Op.STORE]
    last = store.attrs["index"][-1]
    assert (last[0], last[3], last[4]) == ("rslice", 0, 2), last
    expect = torch.zeros(5, 42)
    expect[:, 0::2] = x
    torch.testing.assert_close(spread_to_even_columns(x), expect)


@tc.kernel(static_shapes=True)
def padded_pairs(x: torch.Tensor) -> torch.Tensor:
    """out[.., j] = x[.., j] + x[.., j - 1] for j in [0, L]: a tile loop one longer than x
    (a transposed conv's output pairs), each read masked to x by the bounds of its index."""
    m, n = x.size()
    out = torch.empty([m, n + 1], dtype=x.dtype, device=x.device)
    for tm, tj in tc.tile([m, n + 1]):
        cur = tc.load(x, [tm, tj.index], extra_mask=(tj.index < n)[None, :])
        prev = tc.load(x, [tm, tj.index - 1], extra_mask=(tj.index >= 1)[None, :])
        out[tm, tj] = cur + prev
    return out


def _padded_pairs_eager(x: torch.Tensor) -> torch.Tensor:
    zero = torch.zeros_like(x[:, :1])
    return torch.cat([x, zero], dim=1) + torch.cat([zero, x], dim=1)


@pytest.mark.parametrize("n", [37, 64, 100])
def test_a_bounds_check_that_ends_the_tile_replaces_its_mask(n: int) -> None:
    """x[tm, tj.index] with tj over n + 1 positions: ``j < n`` leaves out every lane past the
    loop's end, so the loop's own ``j < n + 1`` mask is dropped from the load (and with it the
    mask Triton could not prove constant over a vector); the values are unchanged."""
    x = torch.randn(5, n)
    code = _code(padded_pairs, x)
    mask = next(line.split(" = ")[0].strip() for line in code.splitlines() if f"< {n + 1}" in line)
    loads = [line for line in code.splitlines() if " = tl.load(" in line]
    assert len(loads) == 2 and all(mask not in line and f"< {n})" in line for line in loads), loads
    torch.testing.assert_close(padded_pairs(x), _padded_pairs_eager(x))


@pytest.mark.crosscompile
def test_reads_of_a_longer_tile_loop_are_16_byte_vectors_on_sm90() -> None:
    """The aligned read vectorizes on sm_90; the read one element back stays scalar."""
    x = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    ops = Counter(default_memory_ops(padded_pairs, (x,)))
    assert ops["ld.global.v4.b32"] or ops["ld.global.v2.b32"], ops

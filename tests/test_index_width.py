"""Index width per call: offsets that can pass 2^31 are computed in int64, decided from each call's
actual extents and strides (part of the specialization key with dynamic shapes too). Checked on
meta tensors and strided views (no 8 GB allocations) and one interpreter run with a lowered limit."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.ir import index_width
from tilecraft.ir.index_width import max_offset, needs_int64

CONFIG = tc.Config(block_sizes=[4, 16])


@tc.kernel(config=CONFIG, static_shapes=False)
def copy_dynamic(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] + 1
    return out


def _meta(shape: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty_strided(shape, stride, dtype=dtype, device="meta")


def test_boundary_is_two_to_the_31() -> None:
    assert max_offset((2, 5), (2**31 - 2, 1)) == 2**31 + 2
    assert not needs_int64((2, 1), (2**31 - 2, 1))  # farthest offset 2^31 - 2
    assert needs_int64((2, 1), (2**31 - 1, 1))  # farthest offset 2^31 - 1
    assert not needs_int64((0, 1), (2**40, 1))  # empty: nothing is touched


def test_large_row_stride_is_a_new_specialization() -> None:
    small = _meta((3, 16), (16, 1), torch.uint8)
    wide = _meta((3, 16), (2**30, 1), torch.uint8)  # same size buckets, offsets up to 2^31 + 15
    values = (small,), (wide,)
    keys = [copy_dynamic._key_of(v) for v in values]
    assert keys[0] != keys[1]
    codes = [copy_dynamic.bind(v).to_triton_code(CONFIG) for v in values]
    assert "tl.int64" not in codes[0]
    assert "tl.int64)" in codes[1]  # (x).to(tl.int64) / tl.cast(x, tl.int64)


def test_contiguous_rows_past_the_limit_switch_width() -> None:
    n = 2**29 + 1
    three, four = _meta((3, n), (n, 1), torch.float32), _meta((4, n), (n, 1), torch.float32)
    assert copy_dynamic._key_of((three,)) != copy_dynamic._key_of((four,))
    assert "tl.int64)" in copy_dynamic.bind((four,)).to_triton_code(CONFIG)
    assert "tl.int64" not in copy_dynamic.bind((three,)).to_triton_code(CONFIG)


def test_int64_indexing_runs_correctly(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    x = torch.randn(40, 24, device=device)
    first = copy_dynamic(x)
    monkeypatch.setattr(index_width, "INT32_LIMIT", 100)  # now x's offsets "pass" the limit
    bound = copy_dynamic.bind((x,))
    assert "tl.int64)" in bound.to_triton_code(CONFIG)
    assert torch.equal(copy_dynamic(x), x + 1)
    assert torch.equal(first, x + 1)


@tc.kernel(static_shapes=True)
def column_sums(x: torch.Tensor) -> torch.Tensor:
    _, n = x.size()
    out = torch.zeros([n], dtype=torch.int32, device=x.device)
    for tn in tc.tile(n):
        out[tn] = torch.sum(x[:, tn].to(torch.int32), dim=0)
    return out


@tc.kernel(static_shapes=False)
def rows_3_and_4(x: torch.Tensor) -> torch.Tensor:
    _, n = x.size()
    out = torch.empty([2, n], dtype=torch.int32, device=x.device)
    for tn in tc.tile(n):
        out[0, tn] = x[3, tn].to(torch.int32)
        out[1, tn] = x[3:5, tn][1].to(torch.int32)
    return out


def test_whole_dims_and_constant_indices_widen_with_the_offsets(device: str) -> None:
    """In int64 offsets a whole dim's tl.arange, a constant slice's positions and a constant
    index times a run-time stride stayed int32: rindex * 2**29 wrapped at row 4 and read 2 GB
    before the tensor (a segfault in the interpreter). A view of 5 rows 2**29 elements apart
    in a calloc'd 2 GiB buffer: only the rows' first elements are touched."""
    big = torch.zeros(2**31 + 4096, dtype=torch.uint8, device=device)
    for j in range(5):
        big[j * 2**29 : j * 2**29 + 64] = j + 1
    view = big.as_strided((5, 64), (2**29, 1))
    assert column_sums(view).tolist() == [15] * 64
    assert rows_3_and_4(view).tolist() == [[4] * 64, [5] * 64]
    code = rows_3_and_4.bind((view,)).to_triton_code(tc.Config(block_sizes=[64]))
    assert "tl.int64) * x_stride_0" in code  # 3 * x_stride_0 computed in int64


def _window(x: torch.Tensor, a: int, b: int) -> torch.Tensor:
    out = torch.empty([b - a], dtype=torch.int32, device=x.device)
    for t in tc.tile(a, b):
        out[t.index - a] = x[t].to(torch.int32) + 1
    return out


def test_tile_positions_past_int32_do_not_wrap(device: str) -> None:
    """``t.index - a`` with ``a`` past 2**31: the int32 positions wrapped ``a`` (a constant, or an
    int argument under dynamic shapes), every store was masked off and the output kept
    torch.empty's contents. Positions meeting such an int are int64 (as in torch)."""
    big = torch.zeros(2**31 + 4096, dtype=torch.uint8, device=device)
    big[2**31 :] = 7
    a, b = 2**31 + 7, 2**31 + 15
    for static in (True, False):
        window = tc.kernel(static_shapes=static)(_window)
        assert window(big, a, b).tolist() == [8] * 8, static
        assert window(big, 5, 9).tolist() == [1] * 4, static
    del big
    small = tc.kernel(static_shapes=True)(_window).bind((torch.zeros(64, device=device), 5, 9))
    assert "int64" not in small.to_triton_code(tc.Config(block_sizes=[4])).split("def _tc")[1]


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[64]))
def spatial_hash(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty([n], dtype=torch.int64, device=x.device)
    for t in tc.tile(n):
        i = t.index
        out[t] = (i * 73856093) ^ ((i + 7) * 19349663) + i * 100000 * 100000 + (i << 40)
    return out


@tc.kernel(static_shapes=False, config=tc.Config(block_sizes=[64]))
def offsets_times(x: torch.Tensor, stride: int) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty([n], dtype=torch.int32, device=x.device)
    for t in tc.tile(n):
        out[t] = t.index * stride + 3
    return out


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[64]))
def noisy_bits(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        r = ((t.index.to(torch.int64) * 0x9E3779B1) & 0xFFFF).to(torch.int32)
        bits = x[t].view(torch.int32)
        out[t] = (((bits & 0x7FFFFFFF) + r) & ~0xFFFF).view(torch.float32)
    return out


def test_position_arithmetic_past_int32_is_int64(device: str) -> None:
    """int32 positions times a constant past int32's range wrapped silently (a spatial hash:
    torch's arange is int64), and a config passed explicitly returned it (fuzz 54a). Where the
    loop's extent is known, the product is int64; positions of run-time extents stay int32."""
    x = torch.zeros(100, device=device)
    i = torch.arange(100, device=device)
    want = (i * 73856093) ^ ((i + 7) * 19349663) + i * 100000 * 100000 + (i << 40)
    assert torch.equal(spatial_hash(x), want)
    assert torch.equal(spatial_hash.run_ref(x), want)
    # positions the user narrowed (a hash's .to(torch.int32)) are int32 in torch too: the sum
    # wraps there, and a bitcast of it to fp32 keeps working (stochastic rounding's bits)
    y = torch.rand(100, device=device)
    torch.testing.assert_close(noisy_bits(y), noisy_bits.run_ref(y))
    small = offsets_times.bind((torch.zeros(64, device=device), 3))
    assert "int64" not in small.to_triton_code(tc.Config(block_sizes=[64])).split("def _tc")[1]


@pytest.mark.crosscompile
def test_widened_constant_indices_cross_compile_for_nvidia_and_amd() -> None:
    """``(3).to(tl.int64)``: a Python int has no .to() in a compiled kernel (every config of
    rows_3_and_4 failed on an H100; the interpreter's tl.cast took it)."""
    from tests.cross_targets import assert_cross_compiles

    storage = torch.empty(2**31 + 4096, dtype=torch.uint8, device="meta")
    view = storage.as_strided((5, 64), (2**29, 1))
    for kernel in (rows_3_and_4, column_sums):
        assert_cross_compiles(kernel, (view,), tc.Config(block_sizes=[64]))

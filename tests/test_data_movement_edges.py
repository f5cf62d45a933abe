"""Scans, sorts, gathers and atomics at their edges, found by fuzzing data movement and storage
dtypes (session 50): positions of a cummax over an inner loop's tile, the bits a sort keeps,
NaN in float atomics, atomics into narrow targets, a register gather at a position outside the
tile, narrow index tensors in ref mode, and casts to dtypes device code has not. End to end in
the interpreter (on the GPU where there is one) against eager PyTorch."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import ArgumentError, DeviceCodeError, ShapeError, UnsupportedOpError


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[1], reduction_loops=[None]))
def chunk_cummax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    idx = torch.empty([m, n], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        for tn in tc.tile(n, block_size=8):
            _, i = torch.cummax(x[tm, tn], dim=1)
            idx[tm, tn] = i
    return idx


@tc.kernel(static_shapes=True)
def slice_cummin(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    idx = torch.empty([m, 8], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        _, i = torch.cummin(x[tm, 4:12], dim=1)
        idx[tm, :] = i
    return idx


def test_cummax_positions_count_from_the_tile_start(device: str) -> None:
    """cummax of an inner loop's chunk gave positions in the whole row (8..15 in the second
    chunk; torch, ref mode and argmax of the chunk: 0..7)."""
    x = torch.randn(3, 20, generator=torch.Generator().manual_seed(0)).to(device)
    expect = torch.cat([c.cummax(1).indices for c in x.split(8, 1)], 1)
    assert torch.equal(chunk_cummax(x), expect)
    assert torch.equal(chunk_cummax.run_ref(x), expect)
    assert torch.equal(slice_cummin(x), x[:, 4:12].cummin(1).indices)


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[4]))
def lut_and_counts(table: torch.Tensor, codes: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    (n,) = codes.size()
    out = torch.empty([n], dtype=table.dtype, device=table.device)
    for tn in tc.tile(n):
        out[tn] = table[codes[tn]]
        tc.atomic_add(counts, [codes[tn]], 1)
    return out


def test_ref_mode_narrow_index_tensors_pick_positions(device: str) -> None:
    """Ref mode indexed with the codes as they were: int8 / int16 raised IndexError and uint8
    selected as a boolean mask, so the autotuner's accuracy baseline failed on such kernels."""
    table = torch.tensor([10.0, 20.0, 30.0, 40.0], device=device)
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32):
        codes = torch.tensor([1, 1, 3, 0, 1], dtype=dtype, device=device)
        expect_counts = torch.bincount(codes.long(), minlength=4).to(torch.int32)
        for run in (lut_and_counts, lut_and_counts.run_ref):
            counts = torch.zeros(4, dtype=torch.int32, device=device)
            assert torch.equal(run(table, codes, counts), table[codes.long()]), (dtype, run)
            assert torch.equal(counts, expect_counts), (dtype, run)


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[1]))
def sort_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.size()
    values, indices = torch.empty_like(x), torch.empty([m, n], dtype=torch.int64, device=x.device)
    top = torch.empty([m, 2], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        v, i = torch.sort(x[tm, :], dim=1, descending=True, stable=True)
        values[tm, :], indices[tm, :] = v, i
        top[tm, :] = torch.topk(x[tm, :], 2, dim=1, largest=False).values
    return values, indices, top


def test_sort_and_topk_keep_the_sign_of_zero(device: str) -> None:
    """The values were decoded from sort keys that fold -0.0 into 0.0: 1 / value was inf where
    eager's was -inf. Equal zeros keep their order by position (a stable sort)."""
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.tensor([[0.0, -0.0, 1.0, -0.0, 0.0], [-0.0, -1.0, -0.0, 2.0, 0.0]], dtype=dtype)
        x = x.to(device)
        values, indices, top = sort_rows(x)
        expect = torch.sort(x, dim=1, descending=True, stable=True)
        assert torch.equal(indices, expect.indices)
        assert torch.equal(torch.signbit(values), torch.signbit(expect.values)), dtype
        assert torch.equal(values, expect.values)
        # (topk among tied zeros picks any of them, eager too: a row without ties)
        y = torch.tensor([[3.0, -0.0, 1.0, 2.0, 5.0]], dtype=dtype, device=device)
        top = sort_rows(y)[2]
        assert torch.equal(top, y[:, 1:3]) and torch.equal(top.signbit(), y[:, 1:3].signbit())


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[4]))
def segment_extremes(
    v: torch.Tensor, ids: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    (n,) = v.size()
    for tn in tc.tile(n):
        tc.atomic_min(lo, [ids[tn]], v[tn])
        tc.atomic_max(hi, [ids[tn]], v[tn])
    return lo, hi


def test_float_atomic_min_and_max_propagate_nan_of_either_sign(device: str) -> None:
    """Triton's float atomics order by sign bit and integer bits: a positive NaN was dropped by
    atomic_min, a negative one (x86's default NaN, -nan) by atomic_max; scatter_reduce keeps
    both."""
    nan = float("nan")
    for dtype in (torch.float32, torch.float64):
        v = torch.tensor([1.0, nan, -2.0, 3.0, -1.0, -nan, 4.0, -5.0, 0.5], dtype=dtype)
        ids = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
        v, ids = v.to(device), ids.to(device)
        lo = torch.full((3,), float("inf"), dtype=dtype, device=device)
        hi = torch.full((3,), float("-inf"), dtype=dtype, device=device)
        got_lo, got_hi = segment_extremes(v, ids, lo.clone(), hi.clone())
        expect_lo = lo.scatter_reduce(0, ids, v, "amin")
        expect_hi = hi.scatter_reduce(0, ids, v, "amax")
        torch.testing.assert_close(got_lo, expect_lo, equal_nan=True, rtol=0, atol=0)
        torch.testing.assert_close(got_hi, expect_hi, equal_nan=True, rtol=0, atol=0)
    code = segment_extremes.bind((v, ids, lo, hi)).to_triton_code(tc.Config(block_sizes=[4]))
    assert "bitcast=True), nan_atomic" in code  # the NaN replaced before the atomics


@pytest.mark.crosscompile
def test_nan_safe_atomics_cross_compile_for_nvidia_and_amd() -> None:
    for dtype in (torch.float32, torch.float64):
        v, lo = torch.empty(4096, dtype=dtype), torch.empty(64, dtype=dtype)
        ids = torch.empty(4096, dtype=torch.int64)
        assert_defaults_cross_compile(segment_extremes, (v, ids, lo, lo.clone()))


@tc.kernel(static_shapes=True)
def count_into(ids: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    (n,) = ids.size()
    for tn in tc.tile(n):
        tc.atomic_add(counts, [ids[tn]], 1)
    return counts


@tc.kernel(static_shapes=True)
def flag_into(ids: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    (n,) = ids.size()
    for tn in tc.tile(n):
        tc.atomic_max(flags, [ids[tn]], True)
    return flags


def test_atomics_into_narrow_targets_are_refused_by_name(device: str) -> None:
    """An int8 histogram or a bool flag failed every config with Triton's 'atomic_add does not
    support int8' (an InterpreterError, or NoWorkingConfigError asking for a bug report)."""
    ids = torch.tensor([0, 1, 1, 2], device=device)
    for dtype in (torch.int8, torch.uint8, torch.int16):
        with pytest.raises(UnsupportedOpError, match=r"atomic_add into 'counts' \(torch\.") as e:
            count_into(ids, torch.zeros(3, dtype=dtype, device=device))
        assert "bit elements" in str(e.value) and "torch.int32" in str(e.value)
    with pytest.raises(UnsupportedOpError, match="atomic_max of bool elements"):
        flag_into(ids, torch.zeros(3, dtype=torch.bool, device=device))
    with pytest.raises(UnsupportedOpError, match="atomic_max of 16-bit"):
        flag_into(ids, torch.zeros(3, dtype=torch.float16, device=device))
    counts = torch.zeros(3, dtype=torch.int32, device=device)
    assert count_into(ids, counts).tolist() == [1, 2, 1]


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[1]))
def pick_doubled(x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, _ = x.size()
    out = torch.empty([m, idx.size(1)], dtype=x.dtype, device=x.device)
    one = torch.empty([m, 1], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        w = x[tm, :] * 2.0  # a computed tile: a register gather
        out[tm, :] = torch.gather(w, 1, idx[tm, :])
        one[tm, :] = torch.take_along_dim(w, idx[tm, :1], dim=1)
    return out, one


def test_register_gather_at_positions_outside_the_tile_reads_zero(device: str) -> None:
    """tl.gather got the user's positions unchecked: index 100 raised the interpreter's raw
    IndexError, 12 (a padded lane of a 12-wide row) and -1 read whatever was there; on a GPU a
    shuffle or shared-memory read outside the tile. A gather from memory reads 0 there."""
    x = (torch.arange(12.0).reshape(1, 12) + 1).to(device)
    for bad in (12, -1, 100):
        idx = torch.tensor([[bad, 0, 5]], device=device)
        out, one = pick_doubled(x, idx)
        assert out.tolist() == [[0.0, 2.0, 12.0]], bad
        assert one.tolist() == [[0.0]], bad
    idx = torch.tensor([[11, 0, 5]], device=device)
    assert pick_doubled(x, idx)[0].tolist() == [[24.0, 2.0, 12.0]]


@tc.kernel(static_shapes=True)
def widen(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    (n,) = x.size()
    f32 = torch.empty([n], dtype=torch.float32, device=x.device)
    f64 = torch.empty([n], dtype=torch.float64, device=x.device)
    nonzero = torch.empty([n], dtype=torch.bool, device=x.device)
    for tn in tc.tile(n):
        v = x[tn]
        f32[tn] = v.to(torch.float32)
        f64[tn] = v  # a store casts
        nonzero[tn] = v.to(torch.bool)
    return f32, f64, nonzero


def test_bf16_subnormals_widen_exactly(device: str) -> None:
    """Triton 3.6's interpreter widened bf16 subnormals wrong (1e-40 -> 0.0, 1e-39 -> 4.4e-39,
    bool(1e-40) False); GPUs shift the bits."""
    x = torch.tensor([1e-40, -1e-40, 1e-39, 5e-39, 1.0, 0.0, -0.0], dtype=torch.bfloat16)
    x = x.to(device)
    f32, f64, nonzero = widen(x)
    assert torch.equal(f32, x.float()) and torch.equal(f32.signbit(), x.float().signbit())
    assert torch.equal(f64, x.double())
    assert nonzero.tolist() == [True] * 5 + [False] * 2


@tc.kernel(static_shapes=True)
def row_extremes(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, _ = x.size()
    best = torch.empty([m], dtype=torch.float32, device=x.device)
    where = torch.empty([m], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        best[tm] = torch.amax(x[tm, :], dim=-1)
        where[tm] = torch.argmax(x[tm, :], dim=-1)
    return best, where


@tc.kernel(static_shapes=True)
def roll_rows(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.roll(x[tm, :], 1, -1)
    return out


def test_empty_dims_argmax_is_refused_and_roll_is_empty(device: str) -> None:
    """argmax over an empty dim returned index 0, an index into nothing (torch raises); a roll
    along an empty dim raised an internal ZeroDivisionError as 'the host code failed'."""
    x = torch.randn(4, 0, device=device)
    with pytest.raises(ShapeError, match=r"torch\.argmax over dim 1 .* has no elements"):
        row_extremes(x)
    assert roll_rows(torch.randn(3, 0, device=device)).shape == (3, 0)
    y = torch.randn(3, 5, device=device)
    assert torch.equal(roll_rows(y), torch.roll(y, 1, -1))
    assert torch.equal(row_extremes(y)[1], y.argmax(-1))


@tc.kernel(static_shapes=True)
def doubled_magnitude(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        out[tn] = (x[tn].to(torch.complex64) * 2).abs()
    return out


def test_dtypes_device_code_has_not_are_refused_with_a_fitting_hint(device: str) -> None:
    """.to(complex64) leaked 'torch.iinfo() requires an integer input type'; a uint16 argument
    was told to use .real or .view(torch.float32)."""
    with pytest.raises(UnsupportedOpError, match=r"\.to\(torch\.complex64\): device code has no"):
        doubled_magnitude(torch.randn(5, device=device))
    with pytest.raises(ArgumentError, match="uint16") as info:
        count_into(torch.zeros(3, dtype=torch.uint16, device=device), torch.zeros(3))
    assert ".to(torch.int32)" in str(info.value) and ".real" not in str(info.value)


@tc.kernel(static_shapes=True)
def fill_where(x: torch.Tensor, m: torch.Tensor, value: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t].masked_fill(m[t], value)
    return out


def test_masked_fill_with_a_value_the_dtype_cannot_hold_is_refused(device: str) -> None:
    """int8's masked_fill(m, 300) wrapped to 44 and fp16's 1e6 became inf, where torch raises
    'cannot be converted to type int8_t without overflow'."""
    m = torch.tensor([True, False, True], device=device)
    small = torch.zeros(3, dtype=torch.int8, device=device)
    with pytest.raises(DeviceCodeError, match=r"value 300 cannot be converted to torch\.int8"):
        fill_where(small, m, 300)
    assert fill_where(small, m, 127).tolist() == [127, 0, 127]
    half = torch.zeros(3, dtype=torch.float16, device=device)
    with pytest.raises(DeviceCodeError, match="without overflow"):
        fill_where(half, m, 100000)

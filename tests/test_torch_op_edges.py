"""Torch functions in tile code at their edges (fuzz round 51b): F.threshold keeps NaN, signbit
and copysign read a NaN's sign bit, copysign of an int tile by a constant works in float, a
normalization along a device loop's block is refused (each program would normalize its own
tile), an int tile to a negative int power is refused as torch refuses it, and the in-place
hints name methods that exist. Interpreter numerics against eager, cross-compiles for cuda:90 /
gfx942 of the bit helpers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft as tc
from tilecraft.errors import DeviceCodeError, ShapeError, UnsupportedOpError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit (a NaN's sign too); float tensors of one dtype."""
    width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return a.dtype == b.dtype and torch.equal(a.view(width), b.view(width))


@tc.kernel(static_shapes=True)
def threshold_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = F.threshold(x[tm, tn], 0.5, -3.0)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_threshold_keeps_nan(dtype: torch.dtype, device: str) -> None:
    x = torch.tensor([[float("nan"), 0.5, -1.0, 1.0, float("inf"), float("-inf")]], dtype=dtype)
    x = x.to(device)
    got = threshold_rows(x)
    assert torch.equal(got.isnan(), x.isnan())  # was -3.0 where x is NaN
    torch.testing.assert_close(got, F.threshold(x, 0.5, -3.0), equal_nan=True)


@tc.kernel(static_shapes=True)
def sign_bits(
    x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    (n,) = x.size()
    bits = torch.empty([n], dtype=torch.bool, device=x.device)
    signed, negated, plus = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    for tn in tc.tile(n):
        bits[tn] = torch.signbit(y[tn])
        signed[tn] = torch.copysign(x[tn], y[tn])
        negated[tn] = torch.copysign(x[tn], -1.0)
        plus[tn] = torch.copysign(x[tn], 2)
    return bits, signed, negated, plus


def _signed_inputs(dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    nan = torch.tensor([float("nan")])
    negative_nan = -nan  # the sign bit set (x86's inf - inf has it too)
    y = torch.cat([negative_nan, nan, torch.tensor([-0.0, 0.0, -2.0, 3.0, float("-inf")])])
    x = torch.tensor([2.0, -3.0, 4.0, -0.0, 0.0, 5.5, -1.0])
    return x.to(dtype).to(device), y.to(dtype).to(device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_signbit_and_copysign_read_the_sign_bit(dtype: torch.dtype, device: str) -> None:
    x, y = _signed_inputs(dtype, device)
    bits, signed, negated, plus = sign_bits(x, y)
    assert torch.equal(bits, torch.signbit(y))  # the negative NaN was False
    assert _bits_equal(signed, torch.copysign(x, y))
    assert _bits_equal(negated, torch.copysign(x, -1.0))  # -0.0 for 0
    assert _bits_equal(plus, torch.copysign(x, 2))


@tc.kernel(static_shapes=True)
def int_copysign(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    (n,) = x.size()
    negative = torch.empty([n], dtype=torch.float32, device=x.device)
    positive = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        negative[tn] = torch.copysign(x[tn], -1)
        positive[tn] = torch.copysign(x[tn], 1.0)
    return negative, positive


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_copysign_of_an_int_tile_by_a_constant_is_float(dtype: torch.dtype, device: str) -> None:
    info = torch.iinfo(dtype)
    x = torch.tensor([0, 1, 23, 100, info.min, info.max], dtype=dtype, device=device)
    negative, positive = int_copysign(x)
    # uint8 23 was 233.0 (|x| and -|x| in uint8); int8 -128 stayed negative
    assert _bits_equal(negative, torch.copysign(x, -1))
    assert _bits_equal(positive, torch.copysign(x, 1.0))


@pytest.mark.crosscompile
def test_sign_bit_helpers_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        x, y = _signed_inputs(dtype, "cpu")
        rows = check_kernel(sign_bits, (x, y), targets, lambda b: [b.config_spec.default()])
        assert len(rows) == 2
        for row in rows:
            assert row.report is not None and row.report.ok, row.status


_NORMALIZATIONS = {
    "torch.softmax": lambda v, n: torch.softmax(v, dim=1),
    "F.normalize": lambda v, n: F.normalize(v, dim=1),
    "F.layer_norm": lambda v, n: F.layer_norm(v, [n]),
}


@tc.kernel(static_shapes=True)
def normalized_tiles(x: torch.Tensor, op: str) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    normalization = _NORMALIZATIONS[op]
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = normalization(x[tm, tn], n)
    return out


@tc.kernel(static_shapes=True)
def softmax_of_rows(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.softmax(x[tm, :], dim=1)
    return out


@pytest.mark.parametrize("op", sorted(_NORMALIZATIONS))
def test_a_normalization_along_the_device_loops_block_is_refused(op: str) -> None:
    """Each program would normalize its own tile of the row: the result followed the config
    (max error 0.67 at n = 200) while ref mode normalized the row whole."""
    x = torch.randn(8, 200)
    with pytest.raises(ShapeError, match=rf"{op} along dim 1 .* normalized on its own") as info:
        normalized_tiles(x, op)
    assert "test_torch_op_edges.py" in str(info.value) and "x[tm, :]" in str(info.value)


def test_a_normalization_of_whole_rows_runs(device: str) -> None:
    x = torch.randn(8, 200, device=device)
    torch.testing.assert_close(softmax_of_rows(x), torch.softmax(x, 1))


@tc.kernel(static_shapes=True)
def int_reciprocal(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        out[tn] = x[tn] ** -1
    return out


def test_an_int_tile_to_a_negative_power_is_refused() -> None:
    with pytest.raises(DeviceCodeError, match="negative integer powers") as info:
        int_reciprocal(torch.tensor([1, 2, -1, 0, 3], dtype=torch.int32))
    assert "x.to(torch.float32) ** -1" in str(info.value)


@tc.kernel(static_shapes=True)
def zeroed(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        v = x[tn]
        v.zero_()
        out[tn] = v
    return out


def test_the_in_place_hint_names_a_method_that_exists() -> None:
    with pytest.raises(UnsupportedOpError) as info:
        zeroed(torch.randn(8))
    assert "torch.zeros_like(v)" in str(info.value) and "v.zero(" not in str(info.value)


@tc.kernel(static_shapes=True)
def softmax_of_chunks(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        for tk in tc.tile(n):
            out[tm, tk] = torch.softmax(x[tm, tk], dim=1)
    return out


@tc.kernel(static_shapes=True)
def softmax_of_literal_blocks(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n], block_size=[None, 32]):
        out[tm, tn] = torch.softmax(x[tm, tn], dim=1)
    return out


def test_a_normalization_along_an_inner_loops_tile_is_refused_a_literal_block_runs(
    device: str,
) -> None:
    """An inner loop's tile the config cuts normalizes each chunk on its own (config [8, 16]
    differed from eager, [8, 64] did not); a literal block is the user's per-block intent."""
    x = torch.randn(8, 128, device=device)
    with pytest.raises(ShapeError, match=r"torch.softmax along dim 1 .* a loop's tile"):
        softmax_of_chunks(x)
    want = torch.softmax(x.view(8, 4, 32), dim=2).view(8, 128)
    torch.testing.assert_close(softmax_of_literal_blocks(x), want)


@tc.kernel(static_shapes=True)
def chunk_statistics(
    x: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row and chunk of 32: the chunk's mean (kept dims), its variance and std, and the
    row's mean of its whole tile."""
    m, n = x.size()
    chunks = n // 32
    means = torch.empty([m, chunks], dtype=torch.float32, device=x.device)
    variances = torch.empty([m, chunks], dtype=torch.float32, device=x.device)
    stds = torch.empty([m, chunks], dtype=torch.float32, device=x.device)
    rows = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        rows[tm] = x[tm, :].mean(dim=1)
        for tk in tc.tile(n, block_size=32):
            chunk = x[tm, tk]
            means[tm, tk.id] = chunk.mean(dim=1, keepdim=True)[:, 0]
            variances[tm, tk.id] = torch.var(chunk, dim=1)
            stds[tm, tk.id] = chunk.std(dim=1, correction=0)
    return means, variances, stds, rows


def test_mean_var_std_over_a_tiles_dim(device: str) -> None:
    """mean(keepdim=True) over a tile dim failed to broadcast its count; var / std along a
    tile raised an internal TypeError (no int extent)."""
    x = torch.randn(6, 96, device=device)
    means, variances, stds, rows = chunk_statistics(x)
    chunks = x.view(6, 3, 32)
    torch.testing.assert_close(means, chunks.mean(2))
    torch.testing.assert_close(variances, chunks.var(2))
    torch.testing.assert_close(stds, chunks.std(2, correction=0))
    torch.testing.assert_close(rows, x.mean(1))


@tc.kernel(static_shapes=True)
def row_sums_raced(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.zeros([m], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        out[tm] = x[tm, tn].sum(1)  # every program along tn writes its own partial
    return out


@tc.kernel(static_shapes=True)
def row_sums_combined(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.size()
    total = torch.zeros([m], dtype=x.dtype, device=x.device)
    first = torch.zeros([m], dtype=x.dtype, device=x.device)
    whole = torch.zeros([m], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        tc.atomic_add(total, [tm], x[tm, tn].sum(1))
        column0 = (x[tm, tn] * (tn.index == 0)[None, :]).sum(1)  # x[tm, 0] in the first tile
        tc.store(first, [tm], column0, extra_mask=tn.begin == 0)
        whole[tm] = x[tm, :].sum(1)  # the same value from every program along tn
    return total, first, whole


def test_a_store_every_program_along_a_grid_dim_makes_is_refused(device: str) -> None:
    """``out[tm] = x[tm, tn].sum(1)``: the last program's partial stayed (silently without
    autotuning; with it every config 'differed' and the hint blamed tilecraft)."""
    with pytest.raises(DeviceCodeError, match="made by every program along BLOCK_1") as info:
        row_sums_raced(torch.randn(8, 200, device=device))
    assert "test_torch_op_edges.py" in str(info.value) and "tc.atomic_add" in str(info.value)
    x = torch.randn(8, 200, device=device)
    total, first, whole = row_sums_combined(x)  # atomics, a masked store, a whole-row value
    torch.testing.assert_close(total, x.sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(whole, x.sum(1), rtol=1e-5, atol=1e-5)
    assert torch.equal(first, x[:, 0])


@tc.kernel(static_shapes=True)
def tile_sums_spread(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] - x[t].amax()  # the tile's max, not the tensor's
    return out


@tc.kernel(static_shapes=True)
def per_block_scaled(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n, block_size=32):
        out[t] = x[t] / x[t].abs().amax()  # per block of 32: the user's intent
    return out


def test_a_value_reduced_over_the_tile_and_stored_along_it_is_refused(device: str) -> None:
    x = torch.randn(96, device=device)
    with pytest.raises(DeviceCodeError, match="reduced over BLOCK_0, the device loop's block"):
        tile_sums_spread(x)
    want = (x.view(3, 32) / x.view(3, 32).abs().amax(1, keepdim=True)).view(96)
    torch.testing.assert_close(per_block_scaled(x), want)


@tc.kernel(static_shapes=True)
def block_absmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    bn = tc.register_block_size(n)
    scales = torch.empty([m, tc.cdiv(n, bn)], dtype=torch.float32, device=x.device)
    for tm, tn in tc.tile([m, n], block_size=[None, bn]):
        scales[tm, tn.id] = x[tm, tn].abs().amax(1)
    return scales  # its shape follows the config


def test_a_returned_shape_that_follows_the_config_is_named(device: str) -> None:
    from tilecraft.autotune.discover import NoWorkingConfigError

    with pytest.raises(NoWorkingConfigError) as info:
        block_absmax(torch.randn(8, 100, device=device))
    text = str(info.value)
    assert "another shape than ref mode's" in text and "tilecraft bug" not in text


@tc.kernel(static_shapes=True)
def float_math_of_ints(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    gelu = torch.empty([m, n], dtype=torch.float32, device=x.device)
    mean = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        gelu[tm, :] = F.gelu(x[tm, :])
        mean[tm] = x[tm, :].mean(-1)
    return gelu, mean


def test_ref_mode_computes_float_math_of_int_tiles_in_float32(device: str) -> None:
    """Compiled code takes int tiles into float math in float32 (docs/ops.md); ref mode raised
    torch's 'not implemented for Int', so the tuner's baseline failed."""
    x = torch.randint(-5, 5, (8, 16), dtype=torch.int32, device=device)
    want = (F.gelu(x.float()), x.float().mean(-1))
    for got in (float_math_of_ints(x), float_math_of_ints.run_ref(x)):
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1], want[1])


@tc.kernel(static_shapes=True)
def glu_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n // 2], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = F.glu(x[tm, :], dim=1)
    return out


def test_glu_of_a_dim_that_is_no_power_of_two_names_glu() -> None:
    with pytest.raises(UnsupportedOpError, match=r"F.glu \(its halves\) of a tile") as info:
        glu_rows(torch.randn(4, 12))
    assert "x[t, :h]" in str(info.value)

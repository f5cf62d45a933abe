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


@tc.kernel(static_shapes=True)
def softmax_of_tiles(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = torch.softmax(x[tm, tn], dim=1)
    return out


@tc.kernel(static_shapes=True)
def normalize_of_tiles(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = F.normalize(x[tm, tn], dim=1)
    return out


@tc.kernel(static_shapes=True)
def layer_norm_of_tiles(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = F.layer_norm(x[tm, tn], [n])
    return out


@tc.kernel(static_shapes=True)
def softmax_of_rows(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.softmax(x[tm, :], dim=1)
    return out


@pytest.mark.parametrize(
    ("kernel", "op"),
    [
        (softmax_of_tiles, "torch.softmax"),
        (normalize_of_tiles, "F.normalize"),
        (layer_norm_of_tiles, "F.layer_norm"),
    ],
)
def test_a_normalization_along_the_device_loops_block_is_refused(
    kernel: tc.Kernel, op: str
) -> None:
    """Each program would normalize its own tile of the row: the result followed the config
    (max error 0.67 at n = 200) while ref mode normalized the row whole."""
    x = torch.randn(8, 200)
    with pytest.raises(ShapeError, match=rf"{op} along dim 1 .* normalized on its own") as info:
        kernel(x)
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

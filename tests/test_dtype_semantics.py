"""Ops whose dtype rules or edge values differed from eager PyTorch, each against eager in the
interpreter (found by fuzzing ~1,760 generated kernels over every dtype, session 34): powers
with tensor and run-time exponents, a host float in half-precision math, logical ops of
non-bool tiles, truncating division, fp16 variances, roundings of ints, float floor division
and remainders, small-int maxima, ``~`` of uint8, logsumexp of ints; a whole dim's size used as
a number and torch's factories in device code. Then the new helpers' code compiles for sm_90
and gfx942."""

from __future__ import annotations

import math

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target


@tc.kernel(static_shapes=True)
def powers(x: torch.Tensor, y: torch.Tensor, p: float) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(x)
    out_p = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] ** y[t]
        out_p[t] = torch.pow(x[t], p)
    return out, out_p


@pytest.mark.parametrize("p", [2.0, 3.0, 0.5, -1.5])
def test_float_powers_of_negative_bases_and_zero(p: float, device: str) -> None:
    """``x ** y`` was exp(log(x) * y): NaN for every negative base, 0 ** 0 NaN."""
    x = torch.tensor([-2.0, -3.0, 0.0, 2.0, 1.0, -0.5, 4.0], device=device)
    y = torch.tensor([2.0, 3.0, 0.0, 0.5, float("nan"), 1.5, -1.0], device=device)
    got, got_p = powers(x, y, p)
    torch.testing.assert_close(got, x**y, equal_nan=True)
    torch.testing.assert_close(got_p, x**p, equal_nan=True)


def test_float_powers_of_every_special_pair(device: str) -> None:
    """Every pair of special bases and exponents as torch.pow gives it: 0 ** NaN was 1 (the
    select that keeps log2(0) out took a NaN power for a zero one), torch's is NaN; and
    (-0.0) ** -1 was inf."""
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5]
    special += [float("inf"), -float("inf"), float("nan")]
    values = torch.tensor(special, device=device)
    x = values.repeat_interleave(len(special))
    y = values.repeat(len(special))
    got, _ = powers(x, y, 2.0)
    want = x**y
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-6, atol=0.0)
    # (-0.0) ** -1 is -inf and (-0.0) ** 3 is -0.0: signs too, zeros' included
    numbers = ~want.isnan()
    assert torch.equal(got[numbers].signbit(), want[numbers].signbit())


@tc.kernel(static_shapes=True)
def negations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(x)
    reciprocal = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = -x[t]
        reciprocal[t] = 1.0 / torch.neg(x[t])
    return out, reciprocal


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_negated_zero_is_negative_zero(dtype: torch.dtype, device: str) -> None:
    """Triton's unary minus is 0 - x: -(0.0) was +0.0, so 1 / -x gave +inf (torch: -inf)."""
    x = torch.tensor([0.0, -0.0, 1.5, -2.0, float("inf")], device=device, dtype=dtype)
    got, reciprocal = negations(x)
    assert torch.equal(got.signbit(), (-x).signbit())
    assert torch.equal(reciprocal, 1.0 / -x)


@tc.kernel(static_shapes=True)
def int_powers(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] ** y[t]
    return out


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_integer_powers_are_exact_and_wrap(dtype: torch.dtype, device: str) -> None:
    x = torch.tensor([2, 5, 0, 7, 3, 1], dtype=dtype, device=device)
    y = torch.tensor([3, 13, 0, 2, 40, 9], dtype=dtype, device=device)
    assert torch.equal(int_powers(x, y), x**y)


@tc.kernel(static_shapes=True)
def half_by_scalar(x: torch.Tensor, s: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] / s + x[t] * (s * 1e-9)
    return out


def test_a_host_float_joins_half_math_at_fp32(device: str) -> None:
    """``x_fp16 / s`` with s = 1e5 cast s to fp16 (inf) first: zeros."""
    x = torch.tensor([1000.0, 3.0, 60000.0], dtype=torch.float16, device=device)
    want = (x.float() / 1e5 + x.float() * (1e5 * 1e-9)).half()
    torch.testing.assert_close(half_by_scalar(x, 1e5), want)


@tc.kernel(static_shapes=True)
def logic(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = a.size(0)
    both = torch.empty([n], dtype=torch.bool, device=a.device)
    either = torch.empty([n], dtype=torch.int32, device=a.device)
    one = torch.empty([n], dtype=torch.bool, device=a.device)
    for t in tc.tile(n):
        both[t] = torch.logical_and(a[t], b[t])
        either[t] = torch.logical_or(a[t], b[t]).to(torch.int32)
        one[t] = torch.logical_xor(a[t], b[t])
    return both, either, one


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32])
def test_logical_ops_take_each_operand_as_its_truth(dtype: torch.dtype, device: str) -> None:
    """``logical_and([1, 2], [2, 2])`` was ``1 & 2``: False."""
    a = torch.tensor([1, 2, 0, 6, 0], dtype=dtype, device=device)
    b = torch.tensor([2, 2, 5, 1, 0], dtype=dtype, device=device)
    both, either, one = logic(a, b)
    assert torch.equal(both, torch.logical_and(a, b))
    assert torch.equal(either, torch.logical_or(a, b).int())
    assert torch.equal(one, torch.logical_xor(a, b))


@tc.kernel(static_shapes=True)
def trunc_div(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(a)
    rounded = torch.empty_like(a)
    for t in tc.tile(a.size(0)):
        out[t] = torch.div(a[t], b[t], rounding_mode="trunc")
        rounded[t] = torch.trunc(a[t]) + torch.floor(a[t]) + torch.ceil(a[t]) + torch.round(a[t])
    return out, rounded


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_truncating_division_and_roundings(dtype: torch.dtype, device: str) -> None:
    """``rounding_mode="trunc"`` was ignored for floats (7 / 2 gave 3.5) and went through fp32
    for ints (2**31 - 1 became INT_MIN); floor/ceil/round of ints went through fp32 too."""
    if dtype.is_floating_point:
        a = torch.tensor([7.0, -7.0, 15.0, -15.0, 2.0, 21.0])
    else:
        a = torch.tensor([7, -7, 2**31 - 1, 16777217, -15, 21], dtype=dtype)
    a, b = a.to(device), torch.tensor([2, 2, 1, 1, 4, 7], dtype=dtype, device=device)
    out, rounded = trunc_div(a, b)
    assert torch.equal(out, torch.div(a, b, rounding_mode="trunc"))
    want = torch.trunc(a) + torch.floor(a) + torch.ceil(a) + torch.round(a)
    assert torch.equal(rounded, want)


@tc.kernel(static_shapes=True)
def float_floors(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rem = torch.empty_like(x)
    quot = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        rem[t] = x[t] % y[t]
        quot[t] = x[t] // y[t]
    return rem, quot


def test_float_remainders_and_floors_follow_fmod(device: str) -> None:
    """``1e10 % 3`` was 0 and ``inf // 100`` inf (torch: 1 and nan)."""
    inf = float("inf")
    x = torch.tensor([1e10, 123456789.0, -1e10, 21.0, inf, 7.0, -5.0, 5.0, -7.5])
    y = torch.tensor([3.0, 7.0, 3.0, 7.0, 100.0, -inf, inf, 0.0, 2.0])
    x, y = x.to(device), y.to(device)
    rem, quot = float_floors(x, y)
    assert torch.equal(rem.nan_to_num(123.0), (x % y).nan_to_num(123.0))
    assert torch.equal(quot.nan_to_num(123.0), (x // y).nan_to_num(123.0))


def test_gpu_float_remainders_use_an_exact_fmod() -> None:
    """Triton's float ``%`` is exact in the interpreter (numpy) but LLVM's frem on GPUs, x - y *
    trunc(x / y): on an H200 ``1e10 % 3`` gave 256. GPU code takes libdevice's fmod."""
    x, y = torch.randn(64), torch.randn(64)
    config = tc.Config(block_sizes=[64])
    gpu = BoundKernel(
        float_floors, float_floors.bind_arguments((x, y), {}), Target.parse("cuda:90")
    )
    body = gpu.to_triton_code(config).split("@triton.jit")[1]
    assert "_tc_floordiv(load_2, load_3, _tc_fmod(load_2, load_3))" in body
    assert "_tc_fmod(load, load_1) + load_1" in body and "load % " not in body
    interpreted = float_floors.bind((x, y)).to_triton_code(config).split("@triton.jit")[1]
    assert "_tc_fmod(" not in interpreted and "load % load_1" in interpreted
    i = torch.randint(-9, 9, (64,), dtype=torch.int32)
    ints = BoundKernel(
        float_floors, float_floors.bind_arguments((i, i), {}), Target.parse("cuda:90")
    )
    assert "_tc_fmod(" not in ints.to_triton_code(config).split("@triton.jit")[1]  # C's % is exact


@tc.kernel(static_shapes=True)
def row_stats(x: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m = x.size(0)
    std = torch.empty([m], dtype=x.dtype, device=x.device)
    doubled = torch.empty([m], dtype=torch.int64, device=x.device)
    lse = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        std[tm] = torch.std(x[tm, :], dim=1)
        kt = k[tm, :]
        doubled[tm] = torch.amax(kt, dim=1) * 2 + (~kt).sum(dim=1)
        lse[tm] = torch.logsumexp(kt, dim=1)
    return std, doubled, lse


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
def test_half_std_small_int_maxima_and_int_logsumexp(dtype: torch.dtype, device: str) -> None:
    """fp16 std overflowed (inf for |x| ~ 300); ``amax(int8) * 2`` did not wrap (tl.max
    widens); ``~`` of uint8 crashed the interpreter; logsumexp of ints came back an int."""
    x = torch.tensor([[-300.0, 300.0, 0.0, 10.0], [-30000.0, 30000.0, 0.0, 4.0]])
    x = x.to(torch.float16)  # (a std of 24500: its variance is past fp16's 65504)
    k = torch.tensor([[100, 127, 3, 0], [1, 0, 1, 5]], dtype=dtype)
    x, k = x.to(device), k.to(device)
    std, doubled, lse = row_stats(x, k)
    torch.testing.assert_close(std, torch.std(x.float(), dim=1).half())
    assert torch.equal(doubled, (torch.amax(k, dim=1) * 2).long() + (~k).sum(dim=1))
    torch.testing.assert_close(lse, torch.logsumexp(k.float(), dim=1))


@tc.kernel(static_shapes=True)
def ramp_mean(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        xt = x[tm, :]
        weights = torch.arange(n, device=x.device)[None, :] + torch.ones([1, n])
        out[tm] = (xt * weights).sum(dim=-1) / xt.shape[-1]
    return out


def test_a_whole_dims_size_and_torch_factories_in_device_code(device: str) -> None:
    """``xt.shape[-1]`` of a whole row raised 'cannot use a Sym as a device value';
    ``torch.arange(n)`` 'cannot use a Tensor as a device value'."""
    x = torch.randn(7, 50, generator=torch.Generator().manual_seed(0)).to(device)
    want = (x * (torch.arange(50, device=device) + 1.0)).sum(-1) / 50
    torch.testing.assert_close(ramp_mean(x), want)


@pytest.mark.crosscompile
def test_the_helpers_cross_compile() -> None:
    n = 4096
    x, y = torch.randn(n), torch.randn(n)
    assert_defaults_cross_compile(powers, (x, y, 1.5))
    i = torch.randint(0, 9, (n,), dtype=torch.int32)
    assert_defaults_cross_compile(int_powers, (i, i))
    assert_defaults_cross_compile(float_floors, (x, y))


@tc.kernel(static_shapes=True)
def more_ops(
    x: torch.Tensor, y: torch.Tensor, s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m = x.size(0)
    a = torch.empty_like(x)
    count = torch.empty([m], dtype=torch.int64, device=x.device)
    total = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        xt, yt = x[tm, :], y[tm, :]
        a[tm, :] = (
            torch.expm1(xt) + torch.log10(xt.abs() + 1) + torch.frac(xt * 3)
            + torch.hypot(xt, yt) + s.to(torch.float16).float()
        )  # fmt: skip
        count[tm] = torch.count_nonzero(torch.relu(xt), dim=1)
        total[tm] = torch.nansum(torch.where(yt > 0.5, float("nan"), yt), dim=1)
    return a, count, total


def test_ops_the_fuzzer_found_missing(device: str) -> None:
    """expm1, log10, frac, hypot, count_nonzero, nansum and
    a method of a 0-d tensor argument (``s.to(torch.float16)``) raised UnsupportedOpError or
    'host tensor has no device-side attribute'."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 9, generator=g) * 1e-3
    x[0, :3] = torch.tensor([1.0, -2.5, 3.7])
    y = torch.randn(5, 9, generator=g)
    x, y, s = x.to(device), y.to(device), torch.tensor(1.0009765625, device=device)
    a, count, total = more_ops(x, y, s)
    want = torch.expm1(x) + torch.log10(x.abs() + 1) + torch.frac(x * 3) + torch.hypot(x, y)
    torch.testing.assert_close(a, want + s.half().float())
    assert torch.equal(count, torch.count_nonzero(torch.relu(x), dim=1))
    torch.testing.assert_close(total, torch.nansum(torch.where(y > 0.5, float("nan"), y), dim=1))


@tc.kernel(static_shapes=True)
def wide_range(
    h: torch.Tensor, x: torch.Tensor, d: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    m = h.size(0)
    mean = torch.empty([m], dtype=h.dtype, device=h.device)
    big = torch.empty_like(x)
    soft = torch.empty_like(d)
    lse = torch.empty([m], dtype=d.dtype, device=d.device)
    for tm in tc.tile(m):
        mean[tm] = torch.mean(torch.abs(h[tm, :]), dim=1)
        xt = x[tm, :]
        big[tm, :] = (
            torch.expm1(xt)
            + torch.hypot(xt * 1e30, xt * 1e30) * 0
            + torch.hypot(xt * 1e-30, xt * 1e-30) * 1e30
        )
        soft[tm, :] = torch.softmax(d[tm, :], dim=1)
        lse[tm] = torch.logsumexp(d[tm, :], dim=1)
    return mean, big, soft, lse


def test_fp16_means_large_arguments_and_fp64_softmax(device: str) -> None:
    """An fp16 row's mean summed in fp16 (inf past 65504), expm1(100) was NaN, hypot
    overflowed at 1e30 and underflowed at 1e-30, fp64 softmax ran in fp32 (found fuzzing the
    host glue that now runs these on the device, session 34)."""
    h = torch.full([2, 300], 1000.0, dtype=torch.float16, device=device)
    x = torch.tensor([[100.0, 1.0, -3.0, 0.5], [2.0, 50.0, 0.25, -100.0]], device=device)
    d = torch.randn(2, 37, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    d = d.to(device) * 30
    mean, big, soft, lse = wide_range(h, x, d)
    torch.testing.assert_close(mean, torch.mean(h.float().abs(), dim=1).half())
    want = torch.expm1(x) + torch.hypot(x * 1e-30, x * 1e-30) * 1e30
    torch.testing.assert_close(big, want)
    assert bool(torch.isfinite(torch.hypot(x * 1e30, x * 1e30)).all())
    torch.testing.assert_close(soft, torch.softmax(d, dim=1), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(lse, torch.logsumexp(d, dim=1), rtol=1e-12, atol=1e-12)


@tc.kernel(static_shapes=True)
def plus_positions(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    rows = torch.empty_like(x)
    starts = torch.empty_like(x)
    for r in tc.grid(m):
        rows[r, :] = x[r, :] + r
    for tm, tn in tc.tile([m, n], block_size=[2, 4]):
        starts[tm, tn] = x[tm, tn] + tm.begin
    return rows, starts


def test_int_scalars_join_bf16_math_at_fp32(device: str) -> None:
    """``x_bf16[r, :] + r`` (a grid index) and ``+ t.begin`` cast the int32 scalar to bf16
    first: the interpreter's cast gave 0.0 (and NaN) (fuzzing, session 34)."""
    x = torch.zeros(5, 8, dtype=torch.bfloat16, device=device)
    rows, starts = plus_positions(x)
    index = torch.arange(5, device=device)[:, None].to(torch.bfloat16).expand(5, 8)
    assert torch.equal(rows, index)
    assert torch.equal(
        starts, (torch.arange(5, device=device) // 2 * 2)[:, None].to(torch.bfloat16).expand(5, 8)
    )


@tc.kernel(static_shapes=True)
def signs(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    bits = torch.empty(x.size(), dtype=torch.bool, device=x.device)
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        bits[t] = torch.signbit(x[t])
        out[t] = torch.copysign(x[t], y[t])
    return bits, out


def test_signbit_and_copysign_read_the_sign_of_zero(device: str) -> None:
    x = torch.tensor([1.0, -2.0, 0.0, -0.0, 3.5, -0.5], device=device)
    y = torch.tensor([-1.0, 2.0, -0.0, 0.0, -0.0, 4.0], device=device)
    bits, out = signs(x, y)
    assert torch.equal(bits, torch.signbit(x))
    assert torch.equal(torch.signbit(out), torch.signbit(torch.copysign(x, y)))
    assert torch.equal(out, torch.copysign(x, y))


@tc.kernel(static_shapes=True)
def more_promotions(
    x8: torch.Tensor, s32: torch.Tensor, xi: torch.Tensor, xh: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    n = x8.size(0)
    diff = torch.empty([n], dtype=torch.int8, device=x8.device)
    squares = torch.empty([n], dtype=torch.float32, device=x8.device)
    filled = torch.empty_like(xi)
    inverse = torch.empty_like(xh)
    plus = torch.empty_like(x8)
    wide = torch.empty([n], dtype=torch.int64, device=x8.device)
    for t in tc.tile(n):
        diff[t] = x8[t] - s32
        squares[t] = x8[t] ** 2.0 + x8[t] ** 0 * 0
        filled[t] = torch.masked_fill(xi[t], mask[t], 0.5)
        inverse[t] = xh[t] ** -2
        plus[t] = torch.add(x8[t], 3, alpha=2)
        wide[t] = torch.add(xi[t].to(torch.int64), x8[t], alpha=2)
    return diff, squares, filled, inverse, plus, wide


def test_zero_dim_operands_int_powers_fills_and_alpha_follow_torch(device: str) -> None:
    """int8 - a 0-d int32 tensor is int8 (was int32: no wrap); int8 ** 2.0 is a float (was
    int8: 100 ** 2.0 = 16); masked_fill of int32 with a float kept x through fp32; fp16
    x ** -2 squared in fp16 (300 ** -2 = 0); add(x, 3, alpha=2) promoted to int64 (fuzzing,
    round 2)."""
    x8 = torch.tensor([100, -120, 7, 127], dtype=torch.int8, device=device)
    s32 = torch.tensor(7, dtype=torch.int32, device=device)
    xi = torch.tensor([-(2**31) + 1, 5, 2**31 - 1, 3], dtype=torch.int32, device=device)
    xh = torch.tensor([300.0, 2.0, -20.0, 0.5], dtype=torch.float16, device=device)
    mask = torch.tensor([False, True, False, True], device=device)
    diff, squares, filled, inverse, plus, wide = more_promotions(x8, s32, xi, xh, mask)
    assert torch.equal(diff, x8 - s32)
    assert torch.equal(squares, (x8**2.0).float())
    assert torch.equal(filled, torch.masked_fill(xi, mask, 0.5))
    # fp16 300 ** -2 is a subnormal 1.1e-5 (CPU torch); CUDA torch squares in fp16 first (0)
    torch.testing.assert_close(inverse, (xh.float() ** -2).half())
    assert torch.equal(plus, torch.add(x8, 3, alpha=2))
    assert torch.equal(wide, torch.add(xi.long(), x8, alpha=2))  # 2 * int8 in int64


@tc.kernel(static_shapes=True)
def fp64_literals(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hit = torch.empty(x.size(), dtype=torch.bool, device=x.device)
    shifted = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        hit[t] = x[t] == 0.1
        shifted[t] = x[t] + 0.1
    return hit, shifted


def test_fp64_math_keeps_a_literals_digits(device: str) -> None:
    """Triton's float literals are fp32: ``x_fp64 == 0.1`` compared with fp32's 0.1 (False)."""
    x = torch.tensor([0.1, 0.2, 1e-17], dtype=torch.float64, device=device)
    hit, shifted = fp64_literals(x)
    assert torch.equal(hit, x == 0.1)
    assert torch.equal(shifted, x + 0.1)


@pytest.mark.crosscompile
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_floor_division_cross_compiles_in_both_widths(dtype: torch.dtype) -> None:
    """The floor quotient divides with div_rn in fp32 (GPUs' ``/`` is 2 ulp: 1e10 // 3 was
    256 off on an H100), plain ``/`` in fp64 (div_rn has no fp64 form)."""
    from tests.cross_targets import assert_cross_compiles

    x = torch.empty(256, dtype=dtype)
    assert_cross_compiles(float_floors, (x, x), tc.Config(block_sizes=[256]))


@tc.kernel(static_shapes=True)
def swap_in(slots: torch.Tensor, ids: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    (n,) = ids.size()
    old = torch.empty_like(values)
    for t in tc.tile(n):
        old[t] = tc.atomic_xchg(slots, [ids[t]], values[t])
    return old


def test_a_float_atomic_xchg_runs_in_the_interpreter(device: str) -> None:
    """Triton's interpreter raised 'Unsupported data type' for an fp32 xchg (ints worked)."""
    slots = torch.arange(8, dtype=torch.float32, device=device) + 0.5
    ids = torch.arange(8, device=device).flip(0)
    values = torch.randn(8, device=device)
    old = swap_in(slots, ids, values)
    assert torch.equal(old, (torch.arange(8, device=device) + 0.5).flip(0).float())
    assert torch.equal(slots, values.flip(0))


@tc.kernel(static_shapes=True)
def segment_stats(
    x: torch.Tensor, cu: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per segment of x (offsets cu): the count of positives in an int32 [1] carry, an fp16
    [1] running sum plus each chunk's fp32 0-d mean, and an int8 tile minus a 0-d int64 sum."""
    (s,) = cu.size()
    counts = torch.empty([s - 1], dtype=torch.int32, device=x.device)
    sums = torch.empty([s - 1], dtype=torch.float16, device=x.device)
    shifted = torch.empty([x.size(0)], dtype=torch.int8, device=x.device)
    for tb in tc.tile(s - 1, block_size=1):
        c = tc.zeros([1], dtype=torch.int32)
        h = tc.zeros([1], dtype=torch.float16)
        for tt in tc.tile(cu[tb.begin], cu[tb.begin + 1]):
            c = c + (x[tt] > 0).to(torch.int32).sum()
            h = h + x[tt].float().sum() / 4
            small = (x[tt] * 4).to(torch.int8)
            shifted[tt] = small - (x[tt] > 0).long().sum()
        counts[tb.begin] = c.sum()
        sums[tb.begin] = h.sum()
    return counts, sums, shifted


def test_a_tile_reduced_to_0d_does_not_promote_a_tile(device: str) -> None:
    """In torch a 0-d tensor ranks below tensors with dims: an int32 [1] count plus
    ``t.sum()`` (0-d int64) stays int32, fp16 plus a 0-d fp32 mean stays fp16. Device code
    promoted them, and a loop-carried count was refused for changing dtype (fuzz 54b)."""
    x = torch.randn(30, device=device, dtype=torch.float16)
    cu = torch.tensor([0, 5, 5, 30], device=device)
    counts, sums, shifted = segment_stats(x, cu)
    ref = segment_stats.run_ref(x, cu)
    assert counts.dtype == torch.int32 and torch.equal(counts, ref[0])
    assert torch.equal(counts.cpu(), torch.tensor([(x[0:5] > 0).sum(), 0, (x[5:] > 0).sum()]).int())
    torch.testing.assert_close(sums, ref[1])
    assert torch.equal(shifted, ref[2])


@tc.kernel(static_shapes=True)
def fp64_constant_powers(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = torch.pow(x[t], 2.5) + x[t] ** -1.5 + 2.0 ** x[t] + torch.xlogy(x[t], 3.0)
    return out


@pytest.mark.crosscompile
def test_fp64_libdevice_calls_with_constants_compile(device: str) -> None:
    """libdevice / ocml have (f64, f64) and (f32, f32) overloads only, and Triton types a float
    literal fp32: ``pow(x, 2.5)`` of an fp64 tile failed to compile for sm_90 and gfx942, so
    every config failed on a GPU (fuzz 54a)."""
    x = torch.rand(300, dtype=torch.float64, device=device) + 0.5
    want = x**2.5 + x**-1.5 + 2.0**x + torch.xlogy(x, 3.0)
    # (log(3.0) was taken in fp32: 1.8e-8 off; fuzz 54a)
    torch.testing.assert_close(fp64_constant_powers(x), want, rtol=1e-14, atol=0)
    assert_defaults_cross_compile(fp64_constant_powers, (x.cpu(),))


@tc.kernel(static_shapes=True)
def blend(
    x: torch.Tensor, y: torch.Tensor, alpha: float, steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(1 - alpha) * y + alpha * x`` with the weights computed from the float argument in
    device code, and a running value that starts as such a number and is carried."""
    (n,) = x.size()
    out = torch.empty_like(x)
    decay = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = (1.0 - alpha) * y[t] + alpha * x[t] / math.sqrt(steps)
        acc = alpha * 0.5
        for _ in tc.grid(steps):
            acc = acc * (1.0 - alpha) + 1.0
        decay[t] = x[t] * acc
    return out, decay


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_math_of_python_numbers_is_double_until_it_meets_a_tile(
    dtype: torch.dtype, device: str
) -> None:
    """``1.0 - alpha`` of a float argument is a Python float (a double) in eager code: device
    code computed it in fp32 and fp64 tiles got the rounded weight (5e-8 off; fuzz 54a)."""
    x = torch.rand(200, dtype=dtype, device=device)
    y = torch.rand(200, dtype=dtype, device=device)
    got, decay = blend(x, y, 0.1, 3)
    want, want_decay = blend.run_ref(x, y, 0.1, 3)
    exact = dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=0 if exact else None, atol=1e-15 if exact else None)
    torch.testing.assert_close(decay, want_decay)
    assert decay.dtype == dtype

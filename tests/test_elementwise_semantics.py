"""Elementwise results as eager torch gives them (fuzzing round 49a): half-precision composites
computed in fp32 and rounded once, tanh with relative accuracy near 0, ``sum(dtype=int32)``
wrapping, a norm of an int tile refused, ``v op= b`` keeping ``v``'s dtype; rounds 49a and 49c:
reductions over an empty dim list, torch.norm's own signature, argmax without dim refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import tilecraft as tc
from tilecraft.errors import DeviceCodeError, UnsupportedOpError

Fn = Callable[..., torch.Tensor]


def elementwise(fn: Fn) -> tc.Kernel:
    @tc.kernel(static_shapes=True)
    def apply(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        (n,) = a.size()
        out = torch.empty_like(a)
        for t in tc.tile(n):
            out[t] = fn(a[t], b[t], c[t])
        return out

    return apply


H = torch.float16
HALF_CASES: list[tuple[str, Fn, list[float], list[float], list[float]]] = [
    ("softplus", lambda a, b, c: F.softplus(a), [12.0, 15.0, 19.0, 11.5, 1.0, -3.0], [], []),
    ("mish", lambda a, b, c: F.mish(a), [12.0, 15.0, 19.0, 11.5, 1.0, -3.0], [], []),
    ("hardswish", lambda a, b, c: F.hardswish(a), [20000.0, 12000.0, -20000.0, 1.0], [], []),
    ("hardsigmoid", lambda a, b, c: F.hardsigmoid(a), [20000.0, -2.5, 0.7, 1.0], [], []),
    ("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=1e-3), [1.0] * 4, [300.0] * 4, [300.0] * 4),
    ("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c, value=1e-3), [1.0] * 4, [3000.0] * 4, [1e-3] * 4),
    ("lerp", lambda a, b, c: torch.lerp(a, b, 0.25), [-40000.0] * 4, [40000.0] * 4, []),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fn", "a", "b", "c"), HALF_CASES, ids=[c[0] for c in HALF_CASES])
def test_half_precision_composites_round_once(
    device: str, name: str, fn: Fn, a: list[float], b: list[float], c: list[float]
) -> None:
    """Each step rounded to fp16 overflowed: softplus(12) was inf (exp(12) > 65504), where
    torch computes in fp32 and rounds once."""
    x = torch.tensor(a, dtype=H, device=device)
    y = torch.tensor(b, dtype=H, device=device) if b else x
    z = torch.tensor(c, dtype=H, device=device) if c else x
    got = elementwise(fn)(x, y, z)
    want = fn(x.float(), y.float(), z.float()).to(H)
    assert torch.isfinite(got).all(), got
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


def test_tanh_is_relatively_accurate_near_zero(device: str) -> None:
    """tanh was 2 sigmoid(2x) - 1: tanh(1e-8) gave 0 and tanh(x) / x 1.19 at 1e-7."""
    x = torch.tensor([1e-8, 1e-7, 3e-7, 1e-5, 1e-4, 4.27e-4, 1e-3, -1e-6, 0.5, -3.0, 25.0])
    x = x.to(device)
    got = elementwise(lambda a, b, c: torch.tanh(a) / a)(x, x, x)
    torch.testing.assert_close(
        got, torch.tanh(x.double()).div(x.double()).float(), rtol=3e-7, atol=0
    )
    neg_zero = torch.tensor([-0.0, 0.0], device=device)
    signs = elementwise(lambda a, b, c: torch.tanh(a))(neg_zero, neg_zero, neg_zero)
    assert torch.signbit(signs).tolist() == [True, False]


@tc.kernel(static_shapes=True)
def int32_row_sums(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = a.size()
    negative = torch.empty([m], dtype=torch.bool, device=a.device)
    half = torch.empty([m], dtype=torch.int64, device=a.device)
    for tm in tc.tile(m):
        s = a[tm, :].sum(-1, dtype=torch.int32)
        negative[tm] = s < 0
        half[tm] = (s // 2).to(torch.int64)
    return negative, half


def test_an_int32_sum_wraps_before_later_ops_read_it(device: str) -> None:
    """The tile was typed int32 but held the int64 sum: `s < 0` of a wrapped sum was False."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(2**28, 2**30, (5, 53), dtype=torch.int32, generator=gen).to(device)
    negative, half = int32_row_sums(a)
    s = a.sum(-1, dtype=torch.int32)
    assert bool((s < 0).any()), "the data must wrap for this test to mean anything"
    assert torch.equal(negative, s < 0)
    assert torch.equal(half, (s // 2).to(torch.int64))


def test_a_norm_of_an_int_tile_is_refused(device: str) -> None:
    """Computed in int8 it wrapped (norm(2) gave 0 where a.float() gives ~540); torch raises."""
    a = torch.randint(-128, 127, (37,), dtype=torch.int8, device=device)
    with pytest.raises(UnsupportedOpError, match="vector norm of a torch.int8 tile") as info:
        elementwise(lambda x, y, z: x.norm(2, -1) + x)(a, a, a)
    assert "test_elementwise_semantics.py" in str(info.value)


@tc.kernel(static_shapes=True)
def scale_in_place(x: torch.Tensor, w: torch.Tensor, a: torch.Tensor, b: torch.Tensor):  # type: ignore[no-untyped-def]
    (n,) = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    small = torch.empty([n], dtype=torch.int32, device=x.device)
    for t in tc.tile(n):
        v = x[t] * 1  # bf16
        v *= w[t]  # fp32 operand: torch's in-place op keeps v bf16
        out[t] = v
        h = a[t] * 1  # int8
        h -= b[t]  # int32 operand: h stays int8 and wraps
        small[t] = h
    return out, small


def test_augmented_assignment_keeps_the_tiles_dtype(device: str) -> None:
    """`v *= w` rebound v to the promoted `v * w` (fp32, int32); torch's in-place op keeps v's
    dtype, as ref mode does."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(37, generator=gen).bfloat16().to(device)
    w = (torch.randn(37, generator=gen) * 3).to(device)
    a = torch.randint(-128, 128, (37,), dtype=torch.int8, generator=gen).to(device)
    b = torch.randint(-100, 100, (37,), dtype=torch.int32, generator=gen).to(device)
    out, small = scale_in_place(x, w, a, b)
    v, h = x * 1, a * 1
    v *= w
    h -= b
    assert torch.equal(out, v.float())
    assert torch.equal(small, h.int())


def test_a_float_result_into_an_int_tile_is_refused(device: str) -> None:
    @tc.kernel(static_shapes=True)
    def halve(a: torch.Tensor) -> torch.Tensor:
        (n,) = a.size()
        out = torch.empty([n], dtype=torch.float32, device=a.device)
        for t in tc.tile(n):
            v = a[t] * 1
            v /= 2
            out[t] = v
        return out

    with pytest.raises(DeviceCodeError, match=r"v /= \.\.\.: the result is torch.float32") as info:
        halve(torch.arange(10, dtype=torch.int32, device=device))
    assert "v = v / ..." in (info.value.hint or "")


@tc.kernel(static_shapes=True)
def fill_below(a: torch.Tensor, s: float) -> torch.Tensor:
    (n,) = a.size()
    out = torch.empty_like(a)
    for t in tc.tile(n):
        out[t] = torch.where(a[t] > 0, a[t], s)
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_a_float_argument_in_a_low_precision_tile_rounds_as_torch(
    device: str, dtype: torch.dtype
) -> None:
    """The interpreter's tl.cast truncated a bf16 scalar (0.1 gave 0.0996), and the fp8
    conversion called .to() on the Python number."""
    if dtype in (torch.float8_e4m3fn,) and device == "cuda":
        major, _ = torch.cuda.get_device_capability()
        if major < 9:
            pytest.skip("fp8 needs sm_89+")
    x = torch.tensor([-1.0, -2.0, 0.5, -3.0] * 4).to(dtype).to(device)
    for s in (0.1, 1 / 3):
        got = fill_below(x, s).float()
        want = torch.where(x.float() > 0, x.float(), torch.tensor(s).to(dtype).float().item())
        assert torch.equal(got, want), (s, got, want)


def test_float_pow_is_within_an_ulp_or_two(device: str) -> None:
    """exp2(y log2 x) in fp32 was up to 36 ulp off (3% of elements failed assert_close)."""
    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(4099, generator=gen) * 99.5 + 0.5).to(device)
    y = (torch.rand(4099, generator=gen) * 16 - 8).to(device)
    got = elementwise(lambda a, b, c: torch.pow(a, b))(x, y, y)
    want = torch.pow(x.double(), y.double()).float()
    torch.testing.assert_close(got, want, rtol=3e-7, atol=0)


@pytest.mark.crosscompile
def test_pow_and_tanh_call_libdevice_on_gpus() -> None:
    from tests.cross_targets import TARGETS
    from tilecraft.runtime.bound import BoundKernel

    x = torch.empty(64, device="meta")
    kernel = elementwise(lambda a, b, c: torch.tanh(a) + torch.pow(b, c))
    for target in TARGETS:
        code = BoundKernel(kernel, kernel.bind_arguments((x, x, x), {}), target=target)
        text = code.to_triton_code(tc.Config(block_sizes=[64]))
        assert "_tc_libdevice.pow(" in text and "_tc_libdevice.tanh(" in text, target
    from tests.cross_targets import assert_cross_compiles

    assert_cross_compiles(kernel, (x, x, x), tc.Config(block_sizes=[64]))


@tc.kernel(static_shapes=True)
def shifts(a: torch.Tensor, b: torch.Tensor, s: int) -> torch.Tensor:
    (n,) = a.size()
    out = torch.empty([n, 7], dtype=a.dtype, device=a.device)
    for t in tc.tile(n):
        out[t, 0] = a[t] << s
        out[t, 1] = a[t] >> s
        out[t, 2] = a[t] << 33
        out[t, 3] = a[t] >> 40
        out[t, 4] = a[t] >> 3
        out[t, 5] = a[t] << b[t]
        out[t, 6] = a[t] >> b[t]
    return out


@pytest.mark.parametrize("amount", [3, 32, 40])
def test_shifts_past_the_width_follow_torch(device: str, amount: int) -> None:
    """On an H100 `x << 32` of int32 gave garbage (LLVM's shift is poison there); torch gives 0
    for <<, the sign fill for >>."""
    a = torch.tensor([5, -7, 1 << 20, -(1 << 30), 0, 123], dtype=torch.int32, device=device)
    b = torch.tensor([0, 31, 32, 33, 40, 5], dtype=torch.int32, device=device)
    got = shifts(a, b, amount)
    want = [a << amount, a >> amount, a << 33, a >> 40, a >> 3, a << b, a >> b]
    assert torch.equal(got, torch.stack(want, dim=1)), got
    meta = torch.empty(64, dtype=torch.int32, device="meta")
    code = shifts.bind((meta, meta, amount)).to_triton_code(tc.Config(block_sizes=[64]))
    assert "< 32)" in code and "* 0)" in code and ">> 31" in code  # guards, folds
    assert ("<< 3)" in code) == (amount == 3)  # a constant in range stays a plain shift


@tc.kernel(static_shapes=True)
def mask_union(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (n,) = a.size()
    out = torch.empty([n], dtype=torch.bool, device=a.device)
    for t in tc.tile(n):
        out[t] = (a[t] > 0) + (b[t] > 0)
    return out


def test_bool_plus_bool_is_or(device: str) -> None:
    """On an H100 True + True gave False (i1 addition wraps); torch gives True."""
    a = torch.tensor([1.0, 1.0, -1.0, -1.0], device=device)
    b = torch.tensor([1.0, -1.0, 1.0, -1.0], device=device)
    assert mask_union(a, b).tolist() == [True, True, True, False]
    code = mask_union.bind((a.to("meta"), b.to("meta"))).to_triton_code(tc.Config(block_sizes=[4]))
    assert " | " in code


@pytest.mark.parametrize("op", ["sub", "neg"])
def test_bool_subtraction_and_negation_are_refused(device: str, op: str) -> None:
    fn: Fn = (lambda a, b, c: (a > 0) - (b > 0)) if op == "sub" else (lambda a, b, c: -(a > 0))
    x = torch.randn(8, device=device)
    with pytest.raises(DeviceCodeError, match="torch refuses subtraction and negation of bools"):
        elementwise(lambda a, b, c: fn(a, b, c).float())(x, x, x)


def test_copysign_with_a_constant_sign_and_a_bool_exponent(device: str) -> None:
    """copysign(x, 0.0) divided by the literal (ZeroDivisionError, a CompilationError on a
    GPU); a negative constant kept a NaN's sign (|x| * -1.0); x ** True failed to compile on
    a GPU."""
    nan = float("nan")
    for dtype in (torch.float32, torch.float16):
        x = torch.tensor([1.5, -2.0, 0.0, -0.0, float("inf"), nan, -nan], device=device)
        x = x.to(dtype)
        for sign in (0.0, -0.0, -2.0, 3.0):
            got = elementwise(lambda a, b, c, sign=sign: torch.copysign(a, sign))(x, x, x)
            want = torch.copysign(x, sign)
            torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
            assert torch.equal(torch.signbit(got), torch.signbit(want)), (dtype, sign, got)
    x = torch.tensor([1.5, -2.0, 0.0, -0.0, float("inf")], device=device)
    got = elementwise(lambda a, b, c: a**True)(x, x, x)
    assert torch.equal(got, x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_tile_compares_with_the_float_rounded_to_its_dtype(
    device: str, dtype: torch.dtype
) -> None:
    """fp16 x >= 0.1 was False at x = fp16(0.1): the literal was compared unrounded."""
    x = torch.tensor([0.1, 0.2, 0.05, 0.1], dtype=dtype, device=device)
    cases: list[tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = [
        ("ge", lambda a: a >= 0.1),
        ("lt", lambda a: a < 0.1),
        ("eq", lambda a: a == 0.1),
    ]
    for name, fn in cases:
        result = elementwise(lambda a, b, c, fn=fn: fn(a).to(a.dtype))(x, x, x)
        assert torch.equal(result.bool(), fn(x)), name


@tc.kernel(static_shapes=True)
def whole_tile_reductions(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b, m, n = x.size()
    total = torch.empty([b], dtype=x.dtype, device=x.device)
    norms = torch.empty([b, m], dtype=x.dtype, device=x.device)
    for tb in tc.tile(b, block_size=1):
        t = x[tb.begin, :, :]
        total[tb.begin] = t.sum(dim=[]) + t.amax(dim=())
        norms[tb.begin, :] = torch.norm(t, dim=1)
    return total, norms


def test_an_empty_dim_list_reduces_every_dim_and_torch_norm_compiles(device: str) -> None:
    """sum(dim=[]) reduced nothing (torch: everything); torch.norm (the function) passed out=
    to a lowering without it."""
    x = torch.randn(3, 5, 7, device=device)
    total, norms = whole_tile_reductions(x)
    torch.testing.assert_close(total, x.sum(dim=(1, 2)) + x.amax(dim=(1, 2)))
    torch.testing.assert_close(norms, torch.norm(x, dim=2))


def test_argmax_without_dim_of_a_2d_tile_is_refused(device: str) -> None:
    """Dim by dim, the second step took the argmax of the first's indices."""

    @tc.kernel(static_shapes=True)
    def flat_argmax(x: torch.Tensor) -> torch.Tensor:
        b, m, n = x.size()
        out = torch.empty([b], dtype=torch.int64, device=x.device)
        for tb in tc.tile(b, block_size=1):
            out[tb.begin] = x[tb.begin, :, :].argmax()
        return out

    with pytest.raises(UnsupportedOpError, match=r"argmax\(\) without dim of a 2-D tile"):
        flat_argmax(torch.randn(3, 5, 7, device=device))


@tc.kernel(static_shapes=True)
def packed_bits(x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    packed = torch.empty([m], dtype=torch.int32, device=x.device)
    picked = torch.empty([m], dtype=torch.int32, device=x.device)
    for tm in tc.tile(m):
        weights = 1 << tc.arange(8)  # positions of a whole dim: in [0, 8)
        packed[tm] = ((x[tm, :] > 0).to(torch.int32) * weights[None, :]).sum(-1).to(torch.int32)
        picked[tm] = (pos[tm] >> (pos[tm] & 31)) & 1  # masked: in [0, 31]
    return packed, picked


def test_shift_amounts_known_to_be_in_range_need_no_guard(device: str) -> None:
    """The guard costs a compare and a select per element; an arange's positions or an amount
    masked by a constant are in range, so the shift stays plain."""
    x = torch.randn(9, 8, device=device)
    pos = torch.randint(-(2**31), 2**31 - 1, (9,), dtype=torch.int32, device=device)
    packed, picked = packed_bits(x, pos)
    assert torch.equal(
        packed, ((x > 0).int() * (1 << torch.arange(8, device=device))).sum(-1).int()
    )
    assert torch.equal(picked, (pos >> (pos & 31)) & 1)
    meta = (x.to("meta"), pos.to("meta"))
    code = packed_bits.bind(meta).to_triton_code(tc.Config(block_sizes=[16]))
    assert "tl.where(((" not in code, code  # no range guard on either shift


@tc.kernel(static_shapes=True)
def hypot_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = torch.hypot(x[tn], y[tn])
    return out


def test_hypot_of_an_infinity_beside_nan_is_inf(device: str) -> None:
    """C's hypot (and torch's): inf where either operand is infinite, NaN beside it or not
    (the interpreter's tl.maximum(inf, nan) is NaN, which the inf test missed)."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([inf, nan, -inf, 3.0, nan, 0.0], device=device)
    y = torch.tensor([nan, -inf, 2.0, 4.0, 1.0, 0.0], device=device)
    torch.testing.assert_close(hypot_of(x, y), torch.hypot(x, y), equal_nan=True)

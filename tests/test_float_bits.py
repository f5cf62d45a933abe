"""torch.frexp and torch.ldexp on tiles (frontend/float_bits.py): bit-exact against eager
PyTorch in fp32, fp16, bf16 and fp64 on zeros, infinities, NaN, subnormals and exponents that
leave the range (a 63-element tensor: a partial last tile), the generated code's bit tricks,
the errors for what torch refuses, and cross-compiles of the defaults for sm_90 and gfx942."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import UnsupportedOpError

SPECIALS = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, 1.4e-45, -8.0, 0.75]
SPECIALS += [3e38, 1.0, 2.0**-126, 5.877e-39, -1e-310, 5e-324, 1e300, 65504.0, 6e-8, -3.0]


@tc.kernel(static_shapes=True)
def frexp_parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.size(0)
    mantissa = torch.empty_like(x)
    exponent = torch.empty(n, dtype=torch.int32, device=x.device)
    for t in tc.tile(n):
        m, e = torch.frexp(x[t])
        mantissa[t] = m
        exponent[t] = e
    return mantissa, exponent


@tc.kernel(static_shapes=True)
def scaled(x: torch.Tensor, k: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for t in tc.tile(x.size(0)):
        out[t] = torch.ldexp(x[t], k[t])
    return out


def _values(dtype: torch.dtype, n: int = 63) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    tail = n - len(SPECIALS)
    scale = 10.0 ** torch.randint(-40, 40, (tail,), generator=g)
    spread = torch.randn(tail, generator=g, dtype=torch.float64) * scale
    return torch.cat([torch.tensor(SPECIALS, dtype=torch.float64), spread]).to(dtype)


def _same(have: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal values, -0.0 apart from 0.0, any NaN for NaN (compared on the CPU, where the
    references are computed: CUDA leaves frexp's exponent of inf and NaN unspecified)."""
    assert have.dtype == want.dtype
    have = have.cpu()
    nan = have.isnan() & want.isnan()
    signs = torch.signbit(have) == torch.signbit(want)
    return bool(((have == want) & signs | nan).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_frexp_matches_eager_bit_for_bit(dtype: torch.dtype, device: str) -> None:
    x = _values(dtype)
    mantissa, exponent = frexp_parts(x.to(device))
    want = torch.frexp(x)
    assert _same(mantissa, want.mantissa)
    assert exponent.dtype == torch.int32 and torch.equal(exponent.cpu(), want.exponent)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("k_dtype", [torch.int32, torch.int64, torch.int8])
def test_ldexp_by_integers_rounds_once_as_torch(
    dtype: torch.dtype, k_dtype: torch.dtype, device: str
) -> None:
    x = _values(dtype)
    g = torch.Generator().manual_seed(1)
    k = torch.randint(-120, 120, x.shape, generator=g)
    if k_dtype != torch.int8:  # past the range: one rounding, not 2**200 overflowing first
        k[5:13] = torch.tensor([200, -200, 300, -160, 127, 2000, -2000, 1100])
    k = k.to(k_dtype)
    want = torch.ldexp(x, k)
    out = torch.empty_like(want, device=device)
    assert _same(scaled(x.to(device), k.to(device), out), want)


def test_ldexp_float_exponents_and_integer_inputs(device: str) -> None:
    g = torch.Generator().manual_seed(2)
    x, k = torch.randn(37, generator=g), torch.randn(37, generator=g) * 10
    got = scaled(x.to(device), k.to(device), torch.empty(37, device=device))
    torch.testing.assert_close(got.cpu(), torch.ldexp(x, k))
    ints = torch.arange(-18, 19, dtype=torch.int32)
    want = torch.ldexp(ints, ints % 7)
    on = ints.to(device)
    got = scaled(on, on % 7, torch.empty_like(want, device=device))
    assert want.dtype == torch.float32 and _same(got, want)


def test_bit_tricks_in_the_generated_code() -> None:
    # generated code only, nothing launched: CPU tensors serve on any machine
    x = _values(torch.float32)
    bound = frexp_parts.bind((x,))
    code = bound.to_triton_code(bound.config_spec.default())
    assert "_tc_bitcast" in code and "log2" not in code
    k = torch.zeros(63, dtype=torch.int32)
    bound = scaled.bind((x, k, torch.empty_like(x)))
    code = bound.to_triton_code(bound.config_spec.default())
    assert "<< 23" in code and "exp2" not in code


def test_what_torch_refuses_is_an_error_naming_the_argument(device: str) -> None:
    with pytest.raises(UnsupportedOpError, match=r"torch\.frexp of a torch\.int32"):
        frexp_parts(torch.arange(8, dtype=torch.int32, device=device))

    @tc.kernel(static_shapes=True)
    def by_number(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in tc.tile(x.size(0)):
            out[t] = torch.ldexp(x[t], 3)
        return out

    # torch's argument parser refuses it before device code sees the call; the error is located
    with pytest.raises(UnsupportedOpError, match=r"ldexp\(\): argument 'other'.*must be Tensor"):
        by_number(torch.randn(8, device=device))


@pytest.mark.crosscompile
def test_float_bits_cross_compile() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.empty(5000, dtype=dtype, device="meta")
        assert_defaults_cross_compile(frexp_parts, (x,))
        k = torch.empty(5000, dtype=torch.int32, device="meta")
        assert_defaults_cross_compile(scaled, (x, k, torch.empty_like(x)))

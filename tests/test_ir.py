"""Tile IR: the printed form, dtype promotion (torch's rules), broadcasting errors."""

from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ShapeError, TilecraftError
from tilecraft.ir.nodes import Node, Op, SymKind, walk


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(len(shape) * 31 + shape[0])
    return (torch.rand(*shape, generator=g) * 4 - 1).to(dtype)


def _nodes(bound: tc.BoundKernel) -> list[Node]:
    return [n for loop in bound.traced.loops for n in walk(loop.body)]


def _binary(bound: tc.BoundKernel, fn: str) -> list[Node]:
    return [n for n in _nodes(bound) if n.op is Op.BINARY and n.attrs["fn"] == fn]


def _stored_value(bound: tc.BoundKernel, tensor: str) -> Node:
    (store,) = [n for n in _nodes(bound) if n.op is Op.STORE and n.attrs["tensor"].name == tensor]
    return store.inputs[0]


# ----------------------------------------------------------------------------------------------
# printed IR
# ----------------------------------------------------------------------------------------------


@tc.kernel
def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        mx = torch.amax(xt, dim=-1, keepdim=True)
        e = torch.exp(xt - mx)
        out[tm, :] = (e / e.sum(-1, keepdim=True)).to(out.dtype)
    return out


def test_ir_text_mentions_ops() -> None:
    x = _rand(37, 100)
    text = softmax_rows.bind((x,)).ir()
    assert text.startswith("device_loop 0 grid=(BLOCK_0)")
    assert "RDIM_1(extent=100)" in text
    assert re.search(r"= load\(\) tensor=x index=\[BLOCK_0, RDIM_1\]", text)
    assert "kind=max" in text and "kind=sum" in text
    assert "fn=exp" in text and "fn=sub" in text and "fn=truediv" in text
    assert re.search(r"store\(%\w+\) tensor=out index=\[BLOCK_0, RDIM_1\]", text)
    # every line of the body points back at this file
    body = [ln for ln in text.splitlines()[1:] if ln.strip()]
    assert body and all("# test_ir.py:" in ln for ln in body), text


def test_ir_text_shows_loops_and_carries() -> None:
    @tc.kernel
    def rowsum(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty(m, dtype=torch.float32)
        for tm in tc.tile(m):
            acc = tc.zeros([tm], dtype=torch.float32)
            for tn in tc.tile(n):
                acc += x[tm, tn].sum(-1)
            out[tm] = acc
        return out

    text = rowsum.bind((_rand(37, 100),)).ir()
    assert re.search(r"loop BLOCK_\d carried\(%acc\d+=%acc\d+\):", text), text
    assert re.search(r"yield %acc\d+ <- %acc\d+", text), text


def test_ir_drops_dead_code() -> None:
    @tc.kernel
    def dead(x: torch.Tensor) -> torch.Tensor:
        (n,) = x.size()
        out = torch.empty_like(x)
        for t in tc.tile(n):
            unused = torch.sigmoid(x[t])  # noqa: F841 - never stored
            out[t] = x[t] + 1.0
        return out

    text = dead.bind((_rand(100),)).ir()
    assert "sigmoid" not in text
    assert "fn=add" in text


# ----------------------------------------------------------------------------------------------
# dtype promotion
# ----------------------------------------------------------------------------------------------


@tc.kernel
def bf16_times_scalar(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    for t in tc.tile(n):
        out[t] = x[t] * 1.5  # a Python float does not promote a bf16 tensor
    return out


@tc.kernel
def bf16_times_fp32(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    for t in tc.tile(n):
        out[t] = x[t] * y[t]
    return out


@tc.kernel
def int_div(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    for t in tc.tile(n):
        out[t] = x[t] / 3
    return out


def test_bf16_tile_times_python_float_stays_bf16() -> None:
    x = _rand(100, dtype=torch.bfloat16)
    bound = bf16_times_scalar.bind((x,))
    (mul,) = _binary(bound, "mul")
    assert mul.dtype == torch.bfloat16
    assert mul.dtype == (x * 1.5).dtype
    # computed in fp32 (the interpreter has no bf16 math), rounded back to bf16 as torch does,
    # then cast to the fp32 output
    code = bound.to_triton_code()
    assert "_tc_to_bf16(" in code  # the interpreter's own cast truncates: a rounding helper
    got = bf16_times_scalar(x)
    torch.testing.assert_close(got, (x * 1.5).float(), rtol=0, atol=0)


def test_bf16_tile_times_fp32_tile_is_fp32() -> None:
    x, y = _rand(100, dtype=torch.bfloat16), _rand(100, dtype=torch.float32)
    bound = bf16_times_fp32.bind((x, y))
    (mul,) = _binary(bound, "mul")
    assert mul.dtype == torch.float32 == (x * y).dtype
    assert [i.dtype for i in mul.inputs] == [torch.float32, torch.float32]
    code = bound.to_triton_code()
    assert ".to(tl.bfloat16)" not in code
    torch.testing.assert_close(bf16_times_fp32(x, y), x.float() * y)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_int_tile_div_int_is_float32(dtype: torch.dtype) -> None:
    x = torch.arange(-50, 50, dtype=dtype) * 7
    bound = int_div.bind((x,))
    (div,) = _binary(bound, "truediv")
    assert div.dtype == torch.float32 == (x / 3).dtype
    torch.testing.assert_close(int_div(x), x / 3)


@pytest.mark.parametrize(
    ("xdtype", "ydtype"),
    [
        (torch.float16, torch.bfloat16),
        (torch.int32, torch.float16),
        (torch.int32, torch.int64),
        (torch.bool, torch.int32),
        (torch.uint8, torch.int8),
    ],
)
def test_tile_tile_promotion_matches_torch(xdtype: torch.dtype, ydtype: torch.dtype) -> None:
    @tc.kernel
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        (n,) = x.size()
        out = torch.empty(n, dtype=torch.float64, device=x.device)
        for t in tc.tile(n):
            out[t] = x[t] + y[t]
        return out

    x = torch.ones(100, dtype=xdtype)
    y = torch.ones(100, dtype=ydtype)
    (node,) = _binary(add.bind((x, y)), "add")
    assert node.dtype == (x + y).dtype


@tc.kernel
def mul_float_literal(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    for t in tc.tile(n):
        out[t] = x[t] * 2.5
    return out


@tc.kernel
def mul_int_literal(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    for t in tc.tile(n):
        out[t] = x[t] * 3
    return out


@tc.kernel
def mul_scalar_arg(x: torch.Tensor, s: float, out: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    for t in tc.tile(n):
        out[t] = x[t] * s
    return out


SCALAR_DTYPES = [torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.bool, torch.int8]


@pytest.mark.parametrize("dtype", SCALAR_DTYPES)
@pytest.mark.parametrize(("kern", "scalar"), [(mul_float_literal, 2.5), (mul_int_literal, 3)])
def test_tile_scalar_promotion_matches_torch(
    kern: tc.Kernel, scalar: float, dtype: torch.dtype
) -> None:
    x = torch.ones(100, dtype=dtype)
    out = torch.empty(100, dtype=torch.float64)
    (node,) = _binary(kern.bind((x, out)), "mul")
    assert node.dtype == (x * scalar).dtype


@pytest.mark.parametrize("scalar", [3, 2**40])
def test_int_argument_is_a_weak_scalar(scalar: int) -> None:
    x = torch.ones(100, dtype=torch.int32)
    out = torch.empty(100, dtype=torch.float64)
    (node,) = _binary(mul_scalar_arg.bind((x, scalar, out)), "mul")
    assert node.dtype == (x * scalar).dtype == torch.int32


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_float_argument_is_a_weak_scalar(dtype: torch.dtype) -> None:
    x = torch.ones(100, dtype=dtype)
    out = torch.empty(100, dtype=torch.float64)
    (node,) = _binary(mul_scalar_arg.bind((x, 2.5, out)), "mul")
    assert node.dtype == (x * 2.5).dtype == dtype


def test_reductions_accumulate_in_fp32() -> None:
    @tc.kernel
    def rowsum(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty(m, dtype=x.dtype)
        for tm in tc.tile(m):
            out[tm] = x[tm, :].sum(-1)
        return out

    x = _rand(37, 100, dtype=torch.bfloat16)
    bound = rowsum.bind((x,))
    (red,) = [n for n in _nodes(bound) if n.op is Op.REDUCE]
    assert red.dtype == torch.float32  # accumulated in fp32...
    assert _stored_value(bound, "out").dtype == torch.bfloat16  # ...the value is bf16 like torch


def test_float_only_ops_promote_ints() -> None:
    @tc.kernel
    def ex(x: torch.Tensor) -> torch.Tensor:
        (n,) = x.size()
        out = torch.empty(n, dtype=torch.float32)
        for t in tc.tile(n):
            out[t] = torch.exp(x[t]) + torch.sqrt(x[t])
        return out

    x = torch.arange(100, dtype=torch.int32) % 5
    bound = ex.bind((x,))
    for node in _nodes(bound):
        if node.op is Op.UNARY:
            assert node.dtype == torch.float32
    torch.testing.assert_close(ex(x), torch.exp(x) + torch.sqrt(x))


# ----------------------------------------------------------------------------------------------
# shapes and broadcasting
# ----------------------------------------------------------------------------------------------


def test_syms_and_shapes() -> None:
    x = _rand(37, 100)
    bound = softmax_rows.bind((x,))
    (loop,) = bound.traced.loops
    kinds = [s.kind for s in loop.syms]
    assert kinds == [SymKind.BLOCK, SymKind.RDIM]
    assert loop.syms[0].extent == 37 and loop.syms[1].extent == 100
    (load,) = [n for n in walk(loop.body) if n.op is Op.LOAD]
    assert load.shape == (loop.syms[0], loop.syms[1])
    views = [n for n in walk(loop.body) if n.op is Op.REDUCE]
    assert all(v.shape == (loop.syms[0], 1) for v in views)  # keepdim=True


def test_broadcast_tiles_of_different_loops_is_shape_error() -> None:
    @tc.kernel
    def bad(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty_like(x)
        for tm, tn in tc.tile([m, n]):
            out[tm, tn] = x[tm, tn] + w[tm]  # [M, N] + [M]: needs w[tm][:, None]
        return out

    with pytest.raises(ShapeError) as info:
        bad.bind((_rand(37, 100), _rand(37)))
    text = str(info.value)
    assert "do not broadcast" in text
    assert "BLOCK_0" in text and "BLOCK_1" in text
    assert "test_ir.py:" in text


def test_broadcast_different_extents_is_shape_error() -> None:
    @tc.kernel
    def bad(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty(m, dtype=x.dtype)
        for tm in tc.tile(m):
            out[tm] = (x[tm, :] * y[tm, :]).sum(-1)  # 100 columns vs 50 columns
        return out

    with pytest.raises(ShapeError, match="do not broadcast"):
        bad.bind((_rand(37, 100), _rand(37, 50)))


def test_broadcast_with_explicit_views_is_fine() -> None:
    @tc.kernel
    def outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        (m,) = a.size()
        (n,) = b.size()
        out = torch.empty(m, n, dtype=a.dtype)
        for tm, tn in tc.tile([m, n]):
            out[tm, tn] = a[tm][:, None] * b[tn][None, :]
        return out

    a, b = _rand(37), _rand(100)
    torch.testing.assert_close(outer(a, b), a[:, None] * b[None, :])


def test_shape_error_is_a_tilecraft_error() -> None:
    assert issubclass(ShapeError, TilecraftError)

"""The escape hatch: ``tc.triton_call`` runs a user's ``@triton.jit`` function on tiles. Its source
(and what it reads: other jit functions, constexpr constants) is copied into the generated module,
so the interpreter, cross-compiles and the standalone export all run it; ref mode runs ``ref=``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

import tilecraft as tc
from tests.test_export import run_exported
from tilecraft.errors import DeviceCodeError, UnsupportedOpError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

HAS_CUDA = torch.cuda.is_available()
SCALE = tl.constexpr(3)
_NOT_COPYABLE = torch.ones(2)


@triton.jit
def _shift(x, by):
    return x + by


@triton.jit
def softplus_plus(x, y, BETA: tl.constexpr):
    # reads another jit function and a module constexpr
    v = _shift(x * BETA, y)
    return tl.where(v > 20.0, v, tl.log(1.0 + tl.exp(v))) * SCALE


def _softplus_plus_eager(x: torch.Tensor, y: torch.Tensor, beta: int) -> torch.Tensor:
    return torch.nn.functional.softplus(x * beta + y) * 3


@triton.jit
def sort_rows(x):
    return tl.sort(x, 1)  # a Triton feature tilecraft has no torch op for


@tc.kernel(static_shapes=True)
def with_triton(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    out = torch.empty_like(x)
    ordered = torch.empty_like(x)
    for tm in tc.tile(m):
        xt, yt = x[tm, :], y[tm, :]
        v = tc.triton_call(
            softplus_plus,
            xt,
            yt,
            2,
            out_shape=[tm, n],
            out_dtype=torch.float32,
            ref=_softplus_plus_eager,
        )
        out[tm, :] = v + 1.0
        ordered[tm, :] = tc.triton_call(
            sort_rows,
            xt,
            out_shape=[tm, n],
            out_dtype=x.dtype,
            ref=lambda t: torch.sort(t, dim=1).values,
        )
    return out, ordered


def _expected(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _softplus_plus_eager(x, y, 2) + 1.0, torch.sort(x, dim=1).values


def _inputs(m: int = 37, n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(m * n)
    return torch.randn(m, n, generator=g), torch.randn(m, n, generator=g)


@pytest.mark.parametrize("block", [1, 16])
def test_triton_call_numerics_and_code(block: int) -> None:
    x, y = _inputs()
    bound = with_triton.bind((x, y))
    code = bound.to_triton_code(tc.Config(block_sizes=[block]))
    assert "def softplus_plus(x, y, BETA: tl.constexpr):" in code
    assert "def _shift(" in code and "SCALE = tl.constexpr(3)" in code
    assert "softplus_plus(" in code.split("def _tc_with_triton_0")[1]
    got = bound.run(bound.compile_config(tc.Config(block_sizes=[block])), x, y)
    for g, e in zip(got, _expected(x, y), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_ref_mode_runs_ref() -> None:
    x, y = _inputs(5, 64)
    for g, e in zip(with_triton.run_ref(x, y), _expected(x, y), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def no_ref(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = tc.triton_call(sort_rows, x[tm, :], out_shape=[tm, n], out_dtype=x.dtype)
    return out


def _plain(x: torch.Tensor) -> torch.Tensor:
    return x


@triton.jit
def reads_a_tensor(x):
    return x * _NOT_COPYABLE


@tc.kernel(static_shapes=True)
def misuse(x: torch.Tensor, which: int) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        fn = _plain if which == 0 else reads_a_tensor
        out[tm, :] = tc.triton_call(fn, x[tm, :], out_shape=[tm, n], out_dtype=x.dtype)
    return out


def test_errors_name_the_function_and_the_fix() -> None:
    x = torch.randn(4, 16)
    with pytest.raises(
        UnsupportedOpError, match=r"tc.triton_call\(sort_rows\) in ref mode"
    ) as info:
        no_ref.run_ref(x)
    assert "ref=" in str(info.value)
    with pytest.raises(DeviceCodeError, match=r"expected a @triton.jit function") as info:
        misuse(x, 0)
    assert "test_triton_call.py" in str(info.value)
    with pytest.raises(UnsupportedOpError, match=r"reads the global '_NOT_COPYABLE'"):
        misuse.bind((x, 1)).to_triton_code(tc.Config(block_sizes=[4]))


def test_standalone_export_carries_the_function(tmp_path: Path) -> None:
    x, y = _inputs(9, 64)
    source = with_triton.bind((x, y)).to_triton_code(standalone=True)
    assert "def softplus_plus(" in source and "def sort_rows(" in source
    got = run_exported(tmp_path, source, "with_triton", (x, y))
    for g, e in zip(got, _expected(x, y), strict=True):  # type: ignore[call-overload]
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.crosscompile
def test_triton_call_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x, y = _inputs(512, 128)
    rows = check_kernel(with_triton, (x, y), targets, lambda b: [b.config_spec.default()])
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_triton_call_on_gpu() -> None:
    x, y = (t.cuda() for t in _inputs(1000, 128))
    for g, e in zip(with_triton(x, y), _expected(x, y), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)

"""Standalone export: the generated module runs in a process where tilecraft cannot be imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tilecraft as tc
from examples import rms_norm
from tilecraft.errors import ArgumentError

RUNNER = """
import sys
sys.modules["tilecraft"] = None  # importing tilecraft now fails
import importlib.util, torch
spec = importlib.util.spec_from_file_location("exported", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
args = torch.load(sys.argv[2])
torch.save(getattr(module, sys.argv[3])(*args), sys.argv[4])
"""

_helper = [1.0]


@tc.kernel
def reads_a_list(x: torch.Tensor) -> torch.Tensor:
    (m,) = x.size()
    out = torch.empty_like(x) * _helper[0]
    for tm in tc.tile(m):
        out[tm] = x[tm]
    return out


def run_exported(tmp_path: Path, source: str, name: str, args: tuple[object, ...]) -> object:
    module, inputs, result = tmp_path / "exported.py", tmp_path / "in.pt", tmp_path / "out.pt"
    module.write_text(source)
    torch.save(args, inputs)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(
        [sys.executable, "-c", RUNNER, str(module), str(inputs), name, str(result)],
        check=True,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    return torch.load(result)


def test_exported_forward_and_backward_match_eager(tmp_path: Path, device: str) -> None:
    x, w = torch.randn(9, 40, device=device), torch.randn(40, device=device)
    grad = torch.randn(9, 40, device=device)
    _, rstd = rms_norm.rms_norm_fwd(x, w, rms_norm.EPS)
    want_out, want_dx, want_dw = rms_norm.reference(x, w, grad)
    fwd = rms_norm.rms_norm_fwd.bind((x, w, rms_norm.EPS)).to_triton_code(standalone=True)
    out, got_rstd = run_exported(tmp_path, fwd, "rms_norm_fwd", (x, w))  # type: ignore[misc]
    torch.testing.assert_close(out, want_out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got_rstd, rstd)
    # the backward sizes a partials buffer with a registered block size
    bwd = rms_norm.rms_norm_bwd.bind((grad, x, w, rstd)).to_triton_code(standalone=True)
    dx, dw = run_exported(tmp_path, bwd, "rms_norm_bwd", (grad, x, w, rstd))  # type: ignore[misc]
    torch.testing.assert_close(dx, want_dx, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dw, want_dw, rtol=1e-4, atol=1e-4)
    assert "from tilecraft" not in fwd + bwd and "import tilecraft" not in fwd + bwd


def test_exported_module_rejects_other_shapes(tmp_path: Path) -> None:
    x, w = torch.randn(9, 40), torch.randn(40)
    fwd = rms_norm.rms_norm_fwd.bind((x, w, rms_norm.EPS)).to_triton_code(standalone=True)
    with pytest.raises(subprocess.CalledProcessError):
        run_exported(tmp_path, fwd, "rms_norm_fwd", (torch.randn(9, 41), torch.randn(41)))


@tc.kernel(static_shapes=False)
def scale_rows(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] * 2.0
    return out


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_exported_module_checks_the_layout_it_was_compiled_for(
    tmp_path: Path, static: bool, device: str
) -> None:
    """The strides (static) or layout (dynamic) are baked into the exported code: another
    layout of the same shape (a column-major input, an output sliced from a wider buffer) is
    refused by name, not computed wrong; the same layout at another size runs."""
    kernel = tc.kernel(static_shapes=static)(scale_rows.fn)
    x, out = torch.randn(8, 16, device=device), torch.zeros(8, 16, device=device)
    source = kernel.bind((x, out)).to_triton_code(tc.Config(block_sizes=[4, 16]), standalone=True)
    column_major = torch.randn(16, 8, device=device).t()
    with pytest.raises(subprocess.CalledProcessError) as info:
        run_exported(tmp_path, source, "scale_rows", (column_major, torch.zeros_like(out)))
    assert "x: exported for" in info.value.stderr and "got" in info.value.stderr
    if static:  # a slice of a wider buffer has the same layout pattern, another stride
        with pytest.raises(subprocess.CalledProcessError) as info:
            wide = torch.zeros(8, 24, device=device)
            run_exported(tmp_path, source, "scale_rows", (x, wide[:, 4:20]))
        assert "out: exported for strides [16, 1], got [24, 1]" in info.value.stderr
    else:
        y, into = torch.randn(6, 16, device=device), torch.zeros(6, 16, device=device)
        assert torch.equal(run_exported(tmp_path, source, "scale_rows", (y, into)), y * 2)


def test_host_globals_that_cannot_be_exported_are_named() -> None:
    bound = reads_a_list.bind((torch.randn(8),))
    with pytest.raises(ArgumentError, match="'_helper'"):
        bound.to_triton_code(standalone=True)


@tc.kernel
def row_max(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm] = torch.amax(x[tm, :], dim=-1)
    return out


def test_exported_kernel_with_tilecraft_triton_helpers(tmp_path: Path, device: str) -> None:
    x = torch.randn(6, 20, device=device)
    x[2, 3] = float("nan")
    source = row_max.bind((x,)).to_triton_code(standalone=True)
    got = run_exported(tmp_path, source, "row_max", (x,))
    torch.testing.assert_close(got, torch.amax(x, dim=-1), equal_nan=True)


@tc.kernel
def shifted(x: torch.Tensor, k: int, negate: bool) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        y = x[t] + k
        out[t] = -y if negate else y
    return out


def test_exported_module_checks_the_ints_and_bools_it_compiled_in(tmp_path: Path) -> None:
    """Another ``k`` or ``negate`` ran silently as the exported one (fuzz round 55c)."""
    x = torch.randn(64)
    source = shifted.bind((x, 3, True)).to_triton_code(standalone=True)
    torch.testing.assert_close(run_exported(tmp_path, source, "shifted", (x, 3, True)), -(x + 3))
    for args in ((x, 5, True), (x, 3, False)):
        with pytest.raises(subprocess.CalledProcessError) as info:
            run_exported(tmp_path, source, "shifted", args)
        assert "compiled in" in info.value.stderr, info.value.stderr


@tc.kernel
def head_scaled(x: torch.Tensor, frac: float, bias: torch.Tensor | None) -> torch.Tensor:
    out = torch.zeros_like(x)
    n = int(x.size(0) * frac)
    for t in tc.tile(n):
        out[t] = x[t] * 2 if bias is None else x[t] * 2 + bias[t]
    return out


def test_exported_module_checks_a_none_and_the_bounds_host_code_derived(tmp_path: Path) -> None:
    """A bias passed where the export traced None was ignored, and a loop bound host code
    derived from a float ran at its traced length (fuzz round 55c)."""
    x = torch.randn(64)
    source = head_scaled.bind((x, 0.5, None)).to_triton_code(standalone=True)
    want = torch.cat([x[:32] * 2, torch.zeros(32)])
    torch.testing.assert_close(run_exported(tmp_path, source, "head_scaled", (x, 0.5, None)), want)
    for args, said in (((x, 1.0, None), "exported for the bounds"), ((x, 0.5, x), "for None")):
        with pytest.raises(subprocess.CalledProcessError) as info:
            run_exported(tmp_path, source, "head_scaled", args)
        assert said in info.value.stderr, info.value.stderr

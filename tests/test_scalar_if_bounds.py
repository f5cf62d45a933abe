"""A scalar that an ``if`` reassigns is a value wherever it is used after the ``if``: as an inner
loop's bound (the loop node takes its bounds as inputs, so the ``IF`` that computes one is kept
and emitted before the loop), as an index, in arithmetic; with or without an ``else``, and where
both branches create the name (a Python number in one of them takes the other's dtype).
Interpreter and ref mode against eager at odd sizes, the generated code, a cross-compile."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

import tilecraft as tc
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel


@tc.kernel(static_shapes=True)
def window_sums(x: torch.Tensor, window: int) -> torch.Tensor:
    """Each row of a tile gets the sum of x over [max(tile begin - window + 1, 0), tile end)."""
    n = x.size(0)
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tm in tc.tile(n):
        lo = tm.begin - window + 1
        if lo < 0:
            lo = 0
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(lo, tm.end):
            acc = acc + torch.sum(x[tn].to(torch.float32))
        out[tm] = acc
    return out


@tc.kernel(static_shapes=True)
def window_sums_else(x: torch.Tensor, window: int) -> torch.Tensor:
    """``window_sums`` with the bound created in both branches of an if / else."""
    n = x.size(0)
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tm in tc.tile(n):
        if tm.begin < window - 1:  # noqa: SIM108 (a device `a if c else b` cannot branch)
            lo = 0
        else:
            lo = tm.begin - window + 1
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(lo, tm.end):
            acc = acc + torch.sum(x[tn].to(torch.float32))
        out[tm] = acc
    return out


def _window_eager(x: torch.Tensor, window: int, block: int) -> torch.Tensor:
    """What both kernels compute with ``block`` rows a tile (the sum depends on the tile)."""
    n = x.numel()
    out = torch.empty(n)
    for begin in range(0, n, block):
        end = min(begin + block, n)
        out[begin:end] = x[max(begin - window + 1, 0) : end].sum()
    return out


def _run(kernel: Any, config: tc.Config, *args: Any) -> Any:
    bound = kernel.bind(args)
    return bound.run(bound.compile_config(config), *args)


@pytest.mark.parametrize("kernel", [window_sums, window_sums_else])
@pytest.mark.parametrize(("n", "window"), [(37, 5), (53, 20)])
def test_if_assigned_loop_bound_matches_eager(kernel: Any, n: int, window: int) -> None:
    x = torch.randn(n, generator=torch.Generator().manual_seed(n))
    for blocks in ([8, 4], [16, 8], [4, 16]):
        got = _run(kernel, tc.Config(block_sizes=blocks), x, window)
        want = _window_eager(x, window, blocks[0])
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # ref mode runs the whole extent as one tile
    torch.testing.assert_close(kernel.run_ref(x, window), _window_eager(x, window, n))


@pytest.mark.parametrize("kernel", [window_sums, window_sums_else])
def test_the_if_is_emitted_before_the_loop_it_bounds(kernel: Any) -> None:
    bound = kernel.bind((torch.randn(37), 5))
    ir = bound.ir()
    # the inner loop begins at the if's value of lo, and the if is printed with its branches
    begin = re.search(r"BLOCK_1\(begin=(%lo\d+),", ir)
    assert begin is not None and re.search(r"= if\(", ir), ir
    assert re.search(rf"yield {begin.group(1)} <- %\w+", ir), ir
    code = bound.to_triton_code(tc.Config(block_sizes=[8, 4]))
    header = re.search(r"for offset_1 in tl\.range\((?:_tc_index\()?(\w+)", code)
    assert header is not None, code
    lo = header.group(1)
    branch = code.index("if ")
    assert branch < header.start(), code
    assert re.search(rf"\n\s+{lo} = ", code[branch : header.start()]), code  # set in a branch
    assert f"{lo} = tl.full([], 0, tl.int32)" in code, code  # the literal in the carried type


@tc.kernel(static_shapes=True)
def trailing_sums(x: torch.Tensor, window: int) -> torch.Tensor:
    """out[i] = x[max(i - window + 1, 0) : i + 1].sum(): one row a program, so the result does
    not depend on the config and ref mode must agree exactly."""
    n = x.size(0)
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tb in tc.grid(n):
        lo = tb - window + 1
        if lo < 0:
            lo = 0
        acc = 0.0
        for tn in tc.tile(lo, tb + 1):
            acc = acc + torch.sum(x[tn].to(torch.float32))
        out[tb] = acc
    return out


@tc.kernel(static_shapes=True)
def rolled_and_scaled(x: torch.Tensor, shift: int) -> torch.Tensor:
    """out[i] = x[(i + shift) % n] * (2 if i < 3 else 1) + (i + shift) % n: the wrapped index
    and the scale come out of `if`s and feed an index, a product and a sum."""
    n = x.size(0)
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tb in tc.grid(n):
        src = tb + shift
        if src >= n:
            src = src - n
        scale = 1.0
        if tb < 3:
            scale = 2.0
        out[tb] = x[src].to(torch.float32) * scale + src
    return out


@tc.kernel(static_shapes=True)
def odd_rows_shifted(x: torch.Tensor) -> torch.Tensor:
    """Odd rows read one column to the right (the last column reads 0): the column offset of a
    tile index comes out of an `if`."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tb, tn in tc.tile([m, n], block_size=[1, None]):
        row = tb.begin
        off = 0
        if row % 2 == 1:
            off = 1
        cols = tn.index + off
        out[row, tn] = tc.load(x, [row, cols], extra_mask=cols < n)
    return out


def test_if_assigned_scalars_as_bounds_indices_and_operands() -> None:
    x = torch.randn(29, generator=torch.Generator().manual_seed(2))
    want = torch.stack([x[max(i - 6, 0) : i + 1].sum() for i in range(29)])
    for blocks in ([4], [16]):
        torch.testing.assert_close(_run(trailing_sums, tc.Config(block_sizes=blocks), x, 7), want)
    torch.testing.assert_close(trailing_sums.run_ref(x, 7), want)

    idx = (torch.arange(29) + 5) % 29
    want = x[idx] * torch.where(torch.arange(29) < 3, 2.0, 1.0) + idx
    bound = rolled_and_scaled.bind((x, 5))
    got = bound.run(bound.compile_config(bound.config_spec.default()), x, 5)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(rolled_and_scaled.run_ref(x, 5), want)

    y = torch.randn(7, 13)
    want = y.clone()
    want[1::2, :-1] = y[1::2, 1:]
    want[1::2, -1] = 0.0
    assert torch.equal(_run(odd_rows_shifted, tc.Config(block_sizes=[4]), y), want)
    assert torch.equal(odd_rows_shifted.run_ref(y), want)


@tc.kernel(static_shapes=True)
def typed_literals(x: torch.Tensor, ks: torch.Tensor) -> torch.Tensor:
    """Python numbers assigned in a branch to an fp16 value and an int64 one keep their types
    (Triton refuses an `if` whose branches give a variable two types)."""
    n = x.size(0)
    out = torch.empty([n], dtype=torch.float16, device=x.device)
    for tb in tc.grid(n):
        v = x[tb]
        k = ks[tb]
        if v < 0:
            v = 0.0
            k = 1
        out[tb] = v + k
    return out


@tc.kernel(static_shapes=True)
def gather_after_first(x: torch.Tensor, ks: torch.Tensor) -> torch.Tensor:
    """out[i] = x[ks[i]] but out[0] = x[0]: a Python 0 before the `if`, an int64 loaded index in
    it (the carried value is int64), then an index."""
    n = x.size(0)
    out = torch.empty_like(x)
    for tb in tc.grid(n):
        j = 0
        if tb > 0:
            j = ks[tb]
        out[tb] = x[j]
    return out


def test_python_numbers_in_a_branch_take_the_carried_dtype() -> None:
    x, ks = torch.randn(9).to(torch.float16), torch.arange(9)
    bound = typed_literals.bind((x, ks))
    code = bound.to_triton_code(tc.Config(block_sizes=[]))
    assert "tl.full([], 0.0, tl.float16)" in code and "tl.full([], 1, tl.int64)" in code, code
    want = torch.where(x < 0, torch.tensor(1.0, dtype=torch.float16), x + ks.half())
    assert torch.equal(bound.run(bound.compile_config(tc.Config(block_sizes=[])), x, ks), want)
    assert torch.equal(typed_literals.run_ref(x, ks), want)

    perm = torch.randperm(9, generator=torch.Generator().manual_seed(3))
    want = x[perm]
    want[0] = x[0]
    bound = gather_after_first.bind((x, perm))
    code = bound.to_triton_code(tc.Config(block_sizes=[]))
    assert code.count("j = tl.full([], 0, tl.int64)") == 1 and "else:\n        pass" in code, code
    assert torch.equal(bound.run(bound.compile_config(tc.Config(block_sizes=[])), x, perm), want)
    assert torch.equal(gather_after_first.run_ref(x, perm), want)


@pytest.mark.crosscompile
def test_if_assigned_bounds_crosscompile() -> None:
    targets = [Target.parse("cuda:90")]

    def default(bound: tc.BoundKernel) -> list[tc.Config]:
        return [bound.config_spec.default()]

    rows = check_kernel(window_sums, (torch.randn(1000), 64), targets, default)
    rows += check_kernel(window_sums_else, (torch.randn(1000), 64), targets, default)
    literals = (torch.randn(100).half(), torch.arange(100))
    rows += check_kernel(typed_literals, literals, targets, default)
    assert len(rows) == 3
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)

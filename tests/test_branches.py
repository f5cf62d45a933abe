"""``if`` on data in device code: conditions on loaded scalars and on tile attributes, values
assigned in branches (carried out of the ``if``), stores inside branches, blocks skipped above a
causal diagonal; interpreter and ref mode against eager, cross-compiles, and the errors."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError, ShapeError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

HAS_CUDA = torch.cuda.is_available()


@tc.kernel(static_shapes=True)
def gated_rows(x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    """Rows whose flag is set are doubled, others negated; rows with flag 2 are also counted."""
    m, n = x.size()
    out = torch.empty_like(x)
    counts = torch.zeros([m], dtype=torch.int32, device=x.device)
    for tb in tc.grid(m):
        v = x[tb, :]
        if flags[tb] > 0:
            y = v * 2.0
            if flags[tb] == 2:
                counts[tb] = 1
        else:
            y = -v
        out[tb, :] = y
    return out, counts


def _gated_ref(x: torch.Tensor, flags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    on = (flags > 0)[:, None]
    return torch.where(on, x * 2.0, -x), (flags == 2).to(torch.int32)


@tc.kernel(static_shapes=True)
def causal_row_sums(x: torch.Tensor) -> torch.Tensor:
    """sum over j <= i of x[i, j], one key block at a time, skipping blocks above the diagonal
    (the blocks causal attention never needs)."""
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            if tn.begin < tm.end:
                keep = tn.index[None, :] <= tm.index[:, None]
                acc = acc + torch.where(keep, x[tm, tn].float(), 0.0).sum(1)
        out[tm] = acc
    return out


def _causal_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.tril(x.float()).sum(1)


def _flags(m: int) -> torch.Tensor:
    return torch.arange(m, dtype=torch.int32) % 3


def test_if_on_loaded_scalars() -> None:
    x, flags = torch.randn(9, 20), _flags(9)
    bound = gated_rows.bind((x, flags))
    code = bound.to_triton_code(bound.config_spec.default())
    assert code.count("if ") >= 2 and "else:" in code, code
    got = bound.run(bound.compile_config(bound.config_spec.default()), x, flags)
    for g, e in zip(got, _gated_ref(x, flags), strict=True):
        torch.testing.assert_close(g, e)
    for g, e in zip(gated_rows.run_ref(x, flags), _gated_ref(x, flags), strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("blocks", [[16, 16], [8, 32], [32, 8]])
def test_skipping_blocks_above_the_diagonal(blocks: list[int]) -> None:
    x = torch.randn(70, 70)
    bound = causal_row_sums.bind((x,))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
    torch.testing.assert_close(got, _causal_ref(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(causal_row_sums.run_ref(x), _causal_ref(x), rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def branch_on_a_tile(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        v = x[tm]
        if v > 0:
            v = v * 2.0
        out[tm] = v
    return out


@tc.kernel(static_shapes=True)
def changes_dtype(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tb in tc.grid(x.size(0)):
        v = x[tb, :]
        if tb > 2:
            v = v.to(torch.float16)
        out[tb, :] = v
    return out


@tc.kernel(static_shapes=True)
def one_sided(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tb in tc.grid(x.size(0)):
        if tb > 2:
            w = x[tb, :]
        out[tb, :] = w
    return out


def test_branch_errors_say_what_to_write() -> None:
    x = torch.randn(8, 16)
    with pytest.raises(DeviceCodeError, match=r"`if` on a tile of shape \[BLOCK_0\]") as info:
        branch_on_a_tile(x[:, 0].contiguous())
    assert "torch.where" in str(info.value) and "test_branches.py" in str(info.value)
    with pytest.raises(DeviceCodeError, match=r"'v' changes dtype in an `if` branch"):
        changes_dtype(x)
    with pytest.raises(DeviceCodeError, match=r"name 'w' is not defined"):
        one_sided(x)


def test_shape_mismatch_between_branches_is_located() -> None:
    @tc.kernel(static_shapes=True)
    def grows(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tb in tc.grid(x.size(0)):
            v = x[tb, 0]
            if tb > 2:
                v = x[tb, :]
            out[tb, :] = v
        return out

    with pytest.raises(ShapeError, match=r"'v' changes shape in an `if` branch"):
        grows(torch.randn(4, 16))


@pytest.mark.crosscompile
def test_branches_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x = torch.randn(1000, 512, dtype=torch.bfloat16)
    rows = check_kernel(gated_rows, (x, _flags(1000)), targets, _default)
    rows += check_kernel(causal_row_sums, (torch.randn(1000, 1000),), targets, _default)
    assert len(rows) == 4
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


def _default(bound: tc.BoundKernel) -> list[tc.Config]:
    return [bound.config_spec.default()]


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_branches_on_gpu() -> None:
    x, flags = torch.randn(1000, 300, device="cuda"), _flags(1000).cuda()
    for g, e in zip(gated_rows(x, flags), _gated_ref(x, flags), strict=True):
        torch.testing.assert_close(g, e)
    y = torch.randn(2000, 2000, device="cuda")
    torch.testing.assert_close(causal_row_sums(y), _causal_ref(y), rtol=1e-4, atol=1e-3)

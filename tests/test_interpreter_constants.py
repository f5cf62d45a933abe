"""Constants of bf16 and fp8 in Triton's interpreter: its builder makes no bf16 or fp8 constant
(``'InterpreterBuilder' object has no attribute 'get_bf16'``), so every ``tl.full`` codegen
emits there (``tc.full``, a folded mask, a reduction's neutral start, a scalar carry) is an fp32
one converted (``EmitContext.full_expr``). The bf16 and fp8 fills failed on every config before,
on the CPU (the interpreter) only; a bf16 max in chunks checks a neutral start's path."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc


@tc.kernel(static_shapes=True)
def shift_by_full(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] + tc.full([tm, tn], -1.5, dtype=x.dtype)
    return out


@tc.kernel(static_shapes=True)
def fill_upper(scores: torch.Tensor) -> None:
    """-inf above the diagonal, stored as a bf16 tile of the scores' dtype."""
    s, _ = scores.size()
    for ti, tj in tc.tile([s, s]):
        above = tj.index[None, :] > ti.index[:, None]
        tc.store(scores, [ti, tj], tc.full([ti, tj], float("-inf"), dtype=scores.dtype), above)


@tc.kernel(static_shapes=True)
def row_max(x: torch.Tensor) -> torch.Tensor:
    """A max over each row in the row's own dtype (a chunked loop starts at its neutral)."""
    m, _ = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm] = torch.amax(x[tm, :], dim=1)
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_full_tiles_of_every_float_dtype(dtype: torch.dtype) -> None:
    x = torch.randn(5, 7).to(dtype)
    torch.testing.assert_close(shift_by_full(x), x - 1.5)


def test_a_bf16_fill_under_a_mask() -> None:
    scores = torch.randn(37, 37).to(torch.bfloat16)
    want = scores.masked_fill(torch.ones(37, 37, dtype=torch.bool).triu(1), float("-inf"))
    for config in (tc.Config(block_sizes=[8, 16]), tc.Config(block_sizes=[16, 16])):
        got = scores.clone()
        bound = fill_upper.bind((got,))
        bound.run(bound.compile_config(config), got)
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("chunk", [None, 16])
def test_a_bf16_max_whole_or_in_chunks(chunk: int | None) -> None:
    x = torch.randn(9, 70).to(torch.bfloat16)
    bound = row_max.bind((x,))
    config = tc.Config(block_sizes=[4], reduction_loops=[chunk])
    torch.testing.assert_close(bound.run(bound.compile_config(config), x), x.amax(1))


def test_an_fp8_fill() -> None:
    @tc.kernel(static_shapes=True)
    def fill(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty_like(x)
        for tm, tn in tc.tile([m, n]):
            out[tm, tn] = tc.full([tm, tn], 1.5, dtype=out.dtype)
        return out

    x = torch.randn(5, 7).to(torch.float8_e4m3fn)
    assert torch.equal(fill(x).float(), torch.full((5, 7), 1.5))

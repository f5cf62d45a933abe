"""Programs on either side of a diagonal (``codegen/grid_diagonal.py``): a straight-line grid
body that compares two of its grid tiles' indices is emitted per side of the diagonal, the
comparison folded where every lane agrees. The generated code, numerics in the interpreter
(blocks that do and do not divide the extents), bodies left alone, the 16-byte stores compiled
for sm_90, and the kernels on a GPU."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s29 import causal_mask_fill_, causal_mask_fill_reference
from tests.cross_targets import assert_cross_compiles, default_memory_ops


@tc.kernel(static_shapes=True)
def lower_triangle(x: torch.Tensor) -> torch.Tensor:
    """torch.tril of [M, N]: a select between two grid tiles' indices."""
    m, n = x.size()
    out = torch.empty_like(x)
    for ti, tj in tc.tile([m, n]):
        keep = ti.index[:, None] >= tj.index[None, :]
        out[ti, tj] = torch.where(keep, x[ti, tj], 0.0)
    return out


@tc.kernel(static_shapes=True)
def band(x: torch.Tensor) -> torch.Tensor:
    """Keep |i - j| < 4: a difference against a width, which the order alone does not decide."""
    m, n = x.size()
    out = torch.empty_like(x)
    for ti, tj in tc.tile([m, n]):
        near = (ti.index[:, None] - tj.index[None, :]).abs() < 4
        out[ti, tj] = torch.where(near, x[ti, tj], 0.0)
    return out


@tc.kernel(static_shapes=True)
def triangle_row_sums(x: torch.Tensor) -> torch.Tensor:
    """Row sums of tril(x) walking the columns in an inner loop: a body with a loop of its own
    (the inner loop's diagonal is codegen/diagonal.py's)."""
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for ti in tc.tile(m):
        acc = tc.zeros([ti], dtype=torch.float32)
        for tj in tc.tile(n):
            keep = ti.index[:, None] >= tj.index[None, :]
            acc = acc + torch.sum(torch.where(keep, x[ti, tj], 0.0), dim=1)
        out[ti] = acc
    return out


def _code(kernel: tc.Kernel, x: torch.Tensor, config: tc.Config) -> str:
    return kernel.bind((x,)).to_triton_code(config)


def test_a_causal_fill_is_emitted_per_side_of_the_diagonal() -> None:
    scores = torch.randn(2, 3, 40, 40)
    code = _code(causal_mask_fill_, scores, tc.Config(block_sizes=[8, 16]))
    assert "if offset_2 + _BLOCK_2 <= offset_1:" in code, code
    assert "elif offset_1 + _BLOCK_1 <= offset_2:" in code, code
    assert code.count("tl.store(") == 3, code
    # below the diagonal the mask is all false, above it all true, across it as written
    assert "tl.full([_BLOCK_1, _BLOCK_2], 0, tl.int1)" in code, code
    assert "tl.full([_BLOCK_1, _BLOCK_2], 1, tl.int1)" in code, code
    assert "(v_4 > v_5)" in code, code
    x = torch.randn(40, 40)
    code = _code(lower_triangle, x, tc.Config(block_sizes=[8, 16]))
    assert code.count("tl.where(") == 1 and code.count("tl.store(") == 3, code


def test_comparisons_the_order_does_not_decide_stay_as_written() -> None:
    x = torch.randn(40, 40)
    assert "if offset" not in _code(band, x, tc.Config(block_sizes=[8, 16]))
    code = _code(triangle_row_sums, x, tc.Config(block_sizes=[8, 16]))
    assert "if offset_0 + _BLOCK_0" not in code, code


@pytest.mark.parametrize("blocks", [[8, 16], [16, 16], [4, 32]])
def test_per_side_bodies_compute_the_same_in_the_interpreter(blocks: list[int]) -> None:
    config = tc.Config(block_sizes=blocks)
    scores = torch.randn(2, 3, 37, 37)
    bound = causal_mask_fill_.bind((scores,))
    got = scores.clone()
    bound.run(bound.compile_config(config), got)
    torch.testing.assert_close(got, causal_mask_fill_reference(scores))
    for shape in ((37, 45), (45, 37), (32, 32)):
        x = torch.randn(*shape)
        bound = lower_triangle.bind((x,))
        torch.testing.assert_close(bound.run(bound.compile_config(config), x), torch.tril(x))
        bound = band.bind((x,))
        want = torch.triu(torch.tril(x, 3), -3)
        torch.testing.assert_close(bound.run(bound.compile_config(config), x), want)


@pytest.mark.crosscompile
def test_stores_above_the_diagonal_are_16_byte_vectors_on_sm90() -> None:
    """The causal fill's masked stores were all 2-byte (H200: 0.508 ms for [4, 16, 2048,
    2048] bf16 against torch.compile's 0.256, heldout_s29)."""
    scores = torch.empty(4, 16, 2048, 2048, dtype=torch.bfloat16, device="meta")
    ops = default_memory_ops(causal_mask_fill_, (scores,))
    assert "st.global.v4.b32" in ops and "st.global.b16" in ops, ops


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_per_side_bodies_on_gpu() -> None:
    scores = torch.randn(2, 4, 1000, 1000, device="cuda").to(torch.bfloat16)
    got = scores.clone()
    causal_mask_fill_(got)
    torch.testing.assert_close(got, causal_mask_fill_reference(scores))
    x = torch.randn(1000, 1500, device="cuda")
    torch.testing.assert_close(lower_triangle(x), torch.tril(x))
    torch.testing.assert_close(band(x), torch.triu(torch.tril(x, 3), -3))


@pytest.mark.parametrize("pid_type", ["persistent_blocked", "persistent_interleaved"])
def test_per_side_bodies_inside_a_persistent_loop(pid_type: str) -> None:
    x = torch.randn(37, 45)
    config = tc.Config(block_sizes=[8, 16], pid_type=pid_type)
    bound = lower_triangle.bind((x,))
    assert "if offset_1 + _BLOCK_1 <= offset_0:" in bound.to_triton_code(config)
    torch.testing.assert_close(bound.run(bound.compile_config(config), x), torch.tril(x))


@pytest.mark.crosscompile
def test_per_side_bodies_cross_compile() -> None:
    x = torch.empty(2048, 2048, dtype=torch.bfloat16, device="meta")
    for pid_type in ("flat", "persistent_blocked"):
        assert_cross_compiles(
            lower_triangle, (x,), tc.Config(block_sizes=[32, 64], pid_type=pid_type)
        )

"""Indexing with a one-wide tile's ``.begin`` (``x[te.begin, tm, tk]``) is indexing with the
tile: the frontend gives it a tile item, so block pointers and tensor descriptors (TMA) can
serve it; any other scalar stays a value index. Numerics in the interpreter, and the sm_90
default of a grouped GEMM written that way gets the Hopper dot pipeline."""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s19 import grouped_gemm_experts
from tilecraft.ir.nodes import Op
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target


@tc.kernel(static_shapes=True)
def pick_rows(x: torch.Tensor, shift: int) -> torch.Tensor:
    """Row ``b`` of every batch through its tile's begin, and a begin moved by ``shift``."""
    b, m = x.size(0), x.size(1)
    out = torch.empty([b, m], dtype=x.dtype, device=x.device)
    for tb, tm in tc.tile([b, m], block_size=[1, None]):
        row = x[tb.begin, tm]
        moved = x[(tb.begin + shift) % b, tm]
        out[tb.begin, tm] = row + moved
    return out


def _loads(kernel: tc.Kernel, *args: object) -> list[list[str]]:
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=Target.parse("cuda:90"))
    _, _, traced, _ = bound.generate(tc.Config())
    return [
        [item[0] for item in n.attrs["index"]]
        for n in traced.loops[0].walk()
        if n.op in (Op.LOAD, Op.STORE)
    ]


def test_a_one_wide_tiles_begin_indexes_as_the_tile() -> None:
    assert _loads(pick_rows, torch.randn(5, 37), 2) == [
        ["tile", "tile"],  # x[tb.begin, tm]
        ["value", "tile"],  # (tb.begin + shift) % b: another scalar
        ["tile", "tile"],  # the store
    ]


def test_begin_indexing_matches_eager() -> None:
    x = torch.randn(5, 37)
    torch.testing.assert_close(pick_rows(x, 2), x + torch.roll(x, -2, 0))


def test_grouped_gemm_by_expert_begin_gets_descriptors_on_sm90() -> None:
    args = (
        torch.empty(8, 2048, 4096, dtype=torch.bfloat16, device="meta"),
        torch.empty(8, 4096, 1408, dtype=torch.bfloat16, device="meta"),
        torch.empty(8, 1408, dtype=torch.float32, device="meta"),
    )
    kernel = grouped_gemm_experts
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=Target.parse("cuda:90"))
    default = bound.config_spec.default()
    assert list(default.indexing[:2]) == ["tensor_descriptor", "tensor_descriptor"]
    code = bound.to_triton_code(default)
    assert "x_desc.load([offset_0 * 2048 + offset_1, offset_3])" in code

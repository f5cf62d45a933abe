"""Computed indices outside the tensor (``codegen/memory.access``): compiled code reads 0 there
and writes nothing, where an unmasked address would read another allocation or end the
caller's CUDA context with an illegal address; ref mode reports the index instead. Interpreter
numerics, the generated mask, cross-compiling for sm_90 and gfx942, and the H200 (where a bad
id in an embedding lookup must leave the process able to run CUDA afterwards)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_cross_compiles
from tilecraft.errors import IndexOutOfBoundsError
from tilecraft.runtime.kernel import BoundKernel

SHIFT = 3


@tc.kernel(static_shapes=True)
def shifted_rows(x: torch.Tensor) -> torch.Tensor:
    """out[b, t] = x[b, t - SHIFT] with no mask of the user's: rows before the start read 0."""
    b, seq, d = x.size()
    out = torch.empty_like(x)
    for tb, tt in tc.tile([b, seq]):
        out[tb, tt, :] = x[tb, tt.index - SHIFT, :]
    return out


@tc.kernel(static_shapes=True)
def embedding_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """out[i] = table[ids[i]]: a gather at loaded ids."""
    n = ids.size(0)
    d = table.size(1)
    out = torch.empty([n, d], dtype=table.dtype, device=table.device)
    for tn in tc.tile(n):
        out[tn, :] = table[ids[tn], :]
    return out


@tc.kernel(static_shapes=True)
def scatter_rows(x: torch.Tensor, ids: torch.Tensor, out: torch.Tensor) -> None:
    """out[ids[i]] = x[i]: a scatter at loaded ids, into the caller's tensor."""
    n = ids.size(0)
    for tn in tc.tile(n):
        out[ids[tn], :] = x[tn, :]


def _fixed(kernel: tc.Kernel, blocks: list[int]) -> tc.Kernel:
    """The kernel with a given config: no tuning, whose ref-mode baseline would report the
    bad index (test_ref_mode_reports_the_bad_id)."""
    return tc.kernel(kernel.fn, static_shapes=True, config=tc.Config(block_sizes=blocks))


def _bad_ids(n: int, rows: int) -> torch.Tensor:
    ids = torch.randint(0, rows, (n,))
    ids[::5] = rows  # one past the end
    ids[1::7] = -1
    ids[2::11] = rows + 1000
    return ids


def test_a_shifted_read_before_the_row_reads_zero() -> None:
    x = torch.randn(2, 37, 8)
    want = torch.nn.functional.pad(x, (0, 0, SHIFT, 0))[:, :37]
    torch.testing.assert_close(_fixed(shifted_rows, [1, 16])(x), want)
    config = tc.Config(block_sizes=[1, 16])
    code = BoundKernel(shifted_rows, shifted_rows.bind_arguments((x,), {})).to_triton_code(config)
    assert "< 37)" in code and ">= 0)" in code  # the index's own bounds in the mask


def test_gathers_and_scatters_at_bad_ids_touch_nothing_outside() -> None:
    table, ids = torch.randn(50, 16), _bad_ids(40, 50)
    inside = (ids >= 0) & (ids < 50)
    got = _fixed(embedding_rows, [16])(table, ids)
    torch.testing.assert_close(got[inside], table[ids[inside]])
    assert torch.all(got[~inside] == 0)
    guard = torch.randn(60, 16)  # rows 50.. stand for memory after the tensor
    out, x = guard[:50].clone(), torch.randn(40, 16)
    _fixed(scatter_rows, [8])(x, ids, out)
    want = guard[:50].clone()
    want[ids[inside]] = x[inside]  # ids repeat: compare only rows one id writes
    once = torch.bincount(ids[inside], minlength=50) == 1
    torch.testing.assert_close(out[once], want[once])
    untouched = torch.bincount(ids[inside], minlength=50) == 0
    torch.testing.assert_close(out[untouched], guard[:50][untouched])


@tc.kernel(static_shapes=True)
def table_rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), table.size(1)], dtype=table.dtype, device=table.device)
    for tn in tc.tile(idx.size(0)):
        out[tn, :] = table[idx[tn], :]
    return out


def test_an_int32_index_into_a_table_past_2_31_elements_is_widened() -> None:
    """Offsets past 2^31 elements are int64; an int32 id times the row stride (4096) would
    wrap in int32 from id 524288 on, so the id is widened before the multiply."""
    from tilecraft.targets.target import Target

    args = (
        torch.empty(1 << 20, 4096, dtype=torch.bfloat16, device="meta"),
        torch.empty(64, dtype=torch.int32, device="meta"),
    )
    bound = BoundKernel(table_rows, table_rows.bind_arguments(args, {}), Target.parse("cuda:90"))
    code = bound.to_triton_code(bound.config_spec.default())
    load = next(line for line in code.splitlines() if "tl.load(table" in line)
    assert "(load).to(tl.int64)[:, None] * 4096" in load, load


def test_ref_mode_reports_the_bad_id() -> None:
    table, ids = torch.randn(50, 16), _bad_ids(40, 50)
    with pytest.raises(IndexOutOfBoundsError, match="table"):
        embedding_rows.run_ref(table, ids)


def test_a_negative_id_is_reported_as_not_wrapping() -> None:
    """PyTorch counts a negative index from the end; compiled code reads 0 there: ref mode
    says so, with the fix."""
    table, ids = torch.randn(50, 16), torch.tensor([3, -1, 7])
    with pytest.raises(IndexOutOfBoundsError, match="-1 is not in") as info:
        embedding_rows.run_ref(table, ids)
    assert "torch.where(idx < 0, idx + 50, idx)" in str(info.value)


def test_bounded_gathers_cross_compile() -> None:
    table = torch.empty(32000, 4096, dtype=torch.bfloat16, device="meta")
    ids = torch.empty(8192, dtype=torch.int64, device="meta")
    assert_cross_compiles(embedding_rows, (table, ids), tc.Config(block_sizes=[16]))
    x = torch.empty(8, 4096, 1024, dtype=torch.bfloat16, device="meta")
    assert_cross_compiles(shifted_rows, (x,), tc.Config(block_sizes=[1, 64]))


@pytest.mark.gpu
def test_bad_ids_on_gpu_leave_cuda_usable() -> None:
    table = torch.randn(32000, 1024, device="cuda", dtype=torch.bfloat16)
    ids = _bad_ids(8192, 32000).cuda()
    ids[100] = 1 << 40  # far past any allocation
    got = _fixed(embedding_rows, [64])(table, ids)
    inside = (ids >= 0) & (ids < 32000)
    torch.testing.assert_close(got[inside], table[ids[inside]])
    assert torch.all(got[~inside] == 0)
    torch.cuda.synchronize()  # an illegal address would raise here and poison the context
    assert float((table[:4] * 2).sum()) == pytest.approx(float(table[:4].float().sum()) * 2, 1e-2)

"""Loads that may read another thread's store in the same program (``ir/read_after_write.py``):
a block barrier comes before them in the generated code, and none where each lane reads only
what it wrote itself (same index items) or where nothing was stored before; numerics in the
interpreter against eager PyTorch; cross-compiles for cuda:90 and hip:gfx942."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

BARRIER = "tl.debug_barrier()"


@tc.kernel(static_shapes=True)
def roll_through_scratch(x: torch.Tensor) -> torch.Tensor:
    """Each row doubled into a scratch row, then read back rolled by one column."""
    m, n = x.size()
    scratch = torch.empty_like(x)
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        scratch[tm, :] = x[tm, :] * 2.0
        cols = (tc.arange(n) + 1) % n
        out[tm, :] = scratch[tm.index[:, None], cols[None, :]]
    return out


@tc.kernel(static_shapes=True)
def reread_own_lanes(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A row stored then read back by the same index; an accumulator updated in place."""
    m, n = x.size()
    scratch = torch.empty_like(x)
    total = torch.zeros_like(x)
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        scratch[tm, :] = x[tm, :] * 2.0
        out[tm, :] = scratch[tm, :] + 1.0
        for tn in tc.tile(n):
            total[tm, tn] = total[tm, tn] + x[tm, tn]
    return out, total


@tc.kernel(static_shapes=True)
def shift_by_chunks(x: torch.Tensor) -> torch.Tensor:
    """Each chunk of a row adds the column left of it, which the loop's previous iteration
    stored (a recurrence through memory: the store is later in the body than the load)."""
    m, n = x.size()
    out = torch.zeros_like(x)
    for tm in tc.tile(m):
        for tn in tc.tile(n):
            left = torch.clamp(tn.begin - 1, min=0)
            carry = out[tm, left]
            out[tm, tn] = x[tm, tn] + carry[:, None]
    return out


def _shift_ref(x: torch.Tensor, block: int) -> torch.Tensor:
    out = torch.zeros_like(x)
    for start in range(0, x.shape[1], block):
        carry = out[:, max(start - 1, 0)]
        out[:, start : start + block] = x[:, start : start + block] + carry[:, None]
    return out


def _code(kernel: tc.Kernel, x: torch.Tensor, config: tc.Config | None = None) -> str:
    bound = kernel.bind((x,))
    return bound.to_triton_code(config or bound.config_spec.default())


def test_a_shifted_reread_of_a_store_waits_for_every_thread() -> None:
    x = torch.randn(6, 32)
    code = _code(roll_through_scratch, x)
    lines = code.splitlines()
    barrier = next(i for i, line in enumerate(lines) if BARRIER in line)
    shifted = lines[barrier + 1]  # right before the shifted load (its lanes along the row)
    assert "tl.load(" in shifted and "scratch + (" in shifted, code
    assert code.count(BARRIER) == 1, code
    torch.testing.assert_close(roll_through_scratch(x), torch.roll(x * 2.0, -1, dims=1))


def test_own_lanes_and_loads_before_stores_need_no_barrier() -> None:
    x = torch.randn(6, 40)
    assert BARRIER not in _code(reread_own_lanes, x)
    out, total = reread_own_lanes(x)
    torch.testing.assert_close(out, x * 2.0 + 1.0)
    torch.testing.assert_close(total, x)


def test_a_store_the_next_iteration_reads_waits_too() -> None:
    x = torch.randn(5, 40)
    config = tc.Config(block_sizes=[4, 8])
    assert BARRIER in _code(shift_by_chunks, x, config)
    bound = shift_by_chunks.bind((x,))
    got = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(got, _shift_ref(x, 8))


@pytest.mark.crosscompile
def test_barriers_cross_compile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x = torch.randn(256, 128)
    rows = check_kernel(roll_through_scratch, (x,), targets, lambda b: [tc.Config(block_sizes=[4])])
    rows += check_kernel(shift_by_chunks, (x,), targets, lambda b: [tc.Config(block_sizes=[4, 32])])
    assert len(rows) == 4
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_re_reads_see_every_thread_on_gpu() -> None:
    """Without the barrier a shifted re-read may see another warp's element before its store
    lands; many programs and wide rows give the race room (run repeatedly)."""
    x = torch.randn(4096, 1024, device="cuda")
    want = torch.roll(x * 2.0, -1, dims=1)
    for _ in range(20):
        torch.testing.assert_close(roll_through_scratch(x), want)
    config = tc.Config(block_sizes=[16, 128], num_warps=8)
    bound = shift_by_chunks.bind((x,))
    program = bound.compile_config(config)
    torch.testing.assert_close(bound.run(program, x), _shift_ref(x, 128).cuda())


def test_tma_never_reads_or_writes_across_a_store() -> None:
    """A TMA copy runs in the async proxy, which does not see the program's ordinary stores in
    order: the loads that may follow a store to their tensor (own lanes or not) and those
    stores are offered only pointer or block-pointer indexing on cuda:90; x, read by
    nothing that a store wrote, keeps its tensor-descriptor choice."""
    from tilecraft.runtime.kernel import BoundKernel

    x = torch.empty(256, 256, device="meta")
    target = Target.parse("cuda:90")
    bound = BoundKernel(reread_own_lanes, reread_own_lanes.bind_arguments((x,), {}), target)
    space = bound.config_spec.space
    kinds = {
        (n.op.name, n.attrs["tensor"].name): space.indexing_choices[n.attrs["mem_slot"]]
        for n in space.accesses
    }
    for access in [("STORE", "scratch"), ("LOAD", "scratch"), ("LOAD", "total")]:
        assert "tensor_descriptor" not in kinds[access], (access, kinds)
    assert "tensor_descriptor" in kinds[("LOAD", "x")], kinds
    assert "tensor_descriptor" in kinds[("STORE", "out")], kinds

"""Row loops run chunks outer (the ``chunk_outer`` knob; ir/ and codegen/chunk_outer.py): a row
loop whose ``[n]`` accumulators live in memory runs its row statistics first, then column chunks
outer with its rows inner and the accumulators in registers.

Covers the legality analysis (refusals with their reasons), the knob's resolution (on by default
where the width is chunked, repaired elsewhere, flipped by the search), the generated code (the
accumulators' rows written once per chunk, never read back), numerics against eager PyTorch in the
interpreter (statistics of two phases, keepdim, ragged rows and widths, loops without
statistics) and, on a GPU, a softmax's column mass at a realistic size.
"""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.autotune.candidates import neighbors
from tilecraft.ir.chunk_outer import chunk_outer_refusal
from tilecraft.ir.nodes import Op

HAS_CUDA = torch.cuda.is_available()


@tc.kernel(static_shapes=True)
def softmax_column_mass(x: torch.Tensor, scale: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Row softmax of ``x * scale`` stored, and per program of rows the column sums of the
    probabilities: statistics of two phases (max, then a sum that needs it; kept as [rows, 1])."""
    m, n = x.size()
    rows = tc.register_block_size(m)
    probs = torch.empty_like(x)
    mass = torch.empty((m + rows - 1) // rows, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = x.new_zeros(n, dtype=torch.float32)
        for r in tc.tile(cta.begin, cta.end):
            z = x[r, :].to(torch.float32) * scale
            top = torch.amax(z, dim=-1, keepdim=True)
            total = torch.sum(torch.exp(z - top), dim=-1, keepdim=True)
            p = torch.exp(z - top) / total
            probs[r, :] = p.to(x.dtype)
            acc += torch.sum(p, dim=0)
        mass[cta.id, :] = acc
    return probs, mass


def _mass_reference(x: torch.Tensor, rows: int, scale: float = 0.5) -> tuple[torch.Tensor, ...]:
    p = torch.softmax(x.float() * scale, dim=-1)
    mass = torch.stack([p[i : i + rows].sum(0) for i in range(0, x.shape[0], rows)])
    return p, mass


@tc.kernel(static_shapes=True)
def in_place_rows(x: torch.Tensor) -> torch.Tensor:
    """Reads and writes x in the row loop: the two passes would reorder its accesses."""
    m, n = x.size()
    rows = tc.register_block_size(m)
    part = torch.empty((m + rows - 1) // rows, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = x.new_zeros(n, dtype=torch.float32)
        for r in tc.tile(cta.begin, cta.end):
            v = x[r, :].to(torch.float32)
            s = torch.sum(v, dim=-1)
            x[r, :] = (v - s[:, None]).to(x.dtype)
            acc += torch.sum(v, dim=0)
        part[cta.id, :] = acc
    return part


@tc.kernel(static_shapes=True)
def counted_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Also carries a row count: not only [n] accumulators."""
    m, n = x.size()
    rows = tc.register_block_size(m)
    blocks = (m + rows - 1) // rows
    part = torch.empty(blocks, n, dtype=torch.float32, device=x.device)
    seen = torch.empty(blocks, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = x.new_zeros(n, dtype=torch.float32)
        count = tc.zeros([], dtype=torch.float32)
        for r in tc.tile(cta.begin, cta.end):
            acc += torch.sum(x[r, :].to(torch.float32), dim=0)
            count = count + 1.0
        part[cta.id, :] = acc
        seen[cta.id] = count
    return part, seen


@tc.kernel(static_shapes=True)
def centered_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One row at a time (tc.grid: scalar statistics), a per-row store beside the width (pass A
    stores it once), and an accumulator whose update needs the statistic."""
    m, n = x.size()
    rows = tc.register_block_size(m)
    centered = torch.empty_like(x)
    means = torch.empty([m], dtype=torch.float32, device=x.device)
    part = torch.empty((m + rows - 1) // rows, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = x.new_zeros(n, dtype=torch.float32)
        for r in tc.grid(cta.begin, cta.end):
            v = x[r, :].to(torch.float32)
            mu = torch.sum(v, dim=-1) / n
            means[r] = mu
            c = v - mu
            centered[r, :] = c.to(x.dtype)
            acc += c * c
        part[cta.id, :] = acc
    return centered, means, part


def _row_loop(bound: tc.BoundKernel):  # type: ignore[no-untyped-def]
    (loop,) = bound.config_spec.loops
    owner = next(n for n in loop.body if n.op is Op.LOOP)
    width = next(s for s in loop.syms if s.kind.value == "rdim")
    return loop, owner, width


def test_refusals_name_why() -> None:
    x = torch.randn(40, 64)
    loop, owner, width = _row_loop(softmax_column_mass.bind((x,)))
    assert chunk_outer_refusal(loop, owner, width) == ""
    loop, owner, width = _row_loop(in_place_rows.bind((x,)))
    assert "reads and writes x" in chunk_outer_refusal(loop, owner, width)
    bound = counted_rows.bind((x,))
    spec = bound.config_spec
    plan = spec.resolve(tc.Config(block_sizes=[8, 2], reduction_loops=[16], chunk_outer=True))
    assert plan.config.chunk_outer is None
    assert any("chunk_outer=True" in r for r in plan.repairs)


def test_on_by_default_where_the_width_is_chunked() -> None:
    x = torch.randn(40, 64)
    spec = softmax_column_mass.bind((x,)).config_spec
    chunked = spec.resolve(tc.Config(block_sizes=[8, 2], reduction_loops=[16]), warn=False)
    assert chunked.config.chunk_outer is True and chunked.carried_homes
    assert "chunks outer" in chunked.describe()
    whole = spec.resolve(tc.Config(block_sizes=[8, 2], reduction_loops=[None]), warn=False)
    assert whole.config.chunk_outer is None  # nothing lives in memory: not spelled out
    moves = neighbors(spec, chunked.config)
    assert sum(1 for c in moves if c.chunk_outer is False) == 1


def test_generated_code_writes_each_row_once_per_chunk() -> None:
    x = torch.randn(37, 100)
    bound = softmax_column_mass.bind((x,))
    code = bound.to_triton_code(tc.Config(block_sizes=[8, 2], reduction_loops=[32]))
    kernel = code[code.index("@triton.jit") : code.index("def launch_0")]
    assert kernel.count("tl.store(mass") == 1 and "tl.load(mass" not in kernel
    assert kernel.count("tl.store(_tc_stats_") == 2 and kernel.count("tl.load(_tc_stats_") == 2
    assert kernel.count("tl.debug_barrier()") == 2  # between the passes, after pass B
    assert "torch.empty(" in code[code.index("def launch_0") :]  # the launcher allocates them
    plain = bound.to_triton_code(
        tc.Config(block_sizes=[8, 2], reduction_loops=[32], chunk_outer=False)
    )
    assert "_tc_stats_" not in plain and "tl.load(mass" in plain


CASES = [
    # (m, n, config): ragged rows (m not a multiple of the block) and widths (n of the chunk)
    (37, 100, tc.Config(block_sizes=[8, 2], reduction_loops=[32])),
    (37, 100, tc.Config(block_sizes=[16, 4], reduction_loops=[64], pid_type="persistent_blocked")),
    (64, 257, tc.Config(block_sizes=[16, 1], reduction_loops=[16], num_warps=2)),
    (5, 300, tc.Config(block_sizes=[4, 4], reduction_loops=[128])),
]


@pytest.mark.parametrize(("m", "n", "config"), CASES)
def test_two_phase_statistics_match_eager(m: int, n: int, config: tc.Config) -> None:
    x = torch.randn(m, n) * 3
    bound = softmax_column_mass.bind((x,))
    program = bound.compile_config(config)
    assert program.plan.config.chunk_outer is True
    probs, mass = bound.run(program, x)
    ref_p, ref_mass = _mass_reference(x, config.block_sizes[0])
    torch.testing.assert_close(probs, ref_p, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mass, ref_mass, rtol=1e-5, atol=1e-4)


def test_scalar_rows_and_per_row_stores_match_eager() -> None:
    x = torch.randn(37, 100)
    bound = centered_rows.bind((x,))
    config = tc.Config(block_sizes=[8], reduction_loops=[32])
    code = bound.to_triton_code(config)
    assert code.count("tl.store(means") == 1 and "_tc_stats_0" in code
    centered, means, part = bound.run(bound.compile_config(config), x)
    ref_mu = x.mean(-1)
    ref_c = x - ref_mu[:, None]
    ref_part = torch.stack([(ref_c[i : i + 8] ** 2).sum(0) for i in range(0, 37, 8)])
    torch.testing.assert_close(means, ref_mu, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(centered, ref_c, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(part, ref_part, rtol=1e-5, atol=1e-4)


def test_loops_without_statistics_keep_accumulators_in_registers() -> None:
    """No reduction over the width in the loop: no statistics pass, no scratch."""
    x = torch.randn(45, 90)
    bound = counted_rows.bind((x,))
    assert bound.config_spec.reductions[0].chunk_outer is False  # (the count: refused above)
    from tests.test_row_homes import colsum_rows

    cbound = colsum_rows.bind((x,))
    config = tc.Config(block_sizes=[8, 2], reduction_loops=[32])
    code = cbound.to_triton_code(config)
    assert "_tc_stats_" not in code and "tl.load(part" not in code
    assert code.count("tl.debug_barrier()") == 1
    out = cbound.run(cbound.compile_config(config), x)
    expected = []
    for start in range(0, 45, 8):
        acc = torch.ones(90)
        for r in range(start, min(start + 8, 45), 2):
            acc = torch.maximum(acc, x[r : r + 2].abs().amax(0)) + 0.5
        expected.append(acc)
    torch.testing.assert_close(out, torch.stack(expected))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_softmax_column_mass_gpu() -> None:
    x = torch.randn(3000, 20000, device="cuda", dtype=torch.bfloat16)
    bound = softmax_column_mass.bind((x,))
    for chunk_outer in (True, False):
        config = tc.Config(
            block_sizes=[32, 2], reduction_loops=[2048], num_warps=8, chunk_outer=chunk_outer
        )
        program = bound.compile_config(config)
        assert program.plan.config.chunk_outer is chunk_outer
        probs, mass = bound.run(program, x)
        ref_p, ref_mass = _mass_reference(x, 32)
        torch.testing.assert_close(probs.float(), ref_p, rtol=2e-2, atol=1e-3)
        torch.testing.assert_close(mass, ref_mass, rtol=1e-3, atol=1e-3)


def test_seed_default_streams_two_programs_per_sm_with_vector_chunks() -> None:
    """Seed 000's LayerNorm backward at its shape (cross-target, meta tensors): the default runs
    chunks outer, halves the rows a program takes until two programs per SM (row_loops.
    streams_per_sm), and keeps a chunk that gives each of its 256 threads a 16-byte vector."""
    from tests.test_row_homes import SEED_CASE, _meta_ln, _on

    bound = _on(SEED_CASE.kernels[0], _meta_ln(4608, 40920), "cuda:90")
    spec = bound.config_spec
    plan = spec.resolve(spec.default(), warn=False)
    sms = spec.target.limits.num_sms
    (programs,) = plan.resources.programs
    assert plan.config.chunk_outer is True and plan.carried_homes
    assert programs is not None and 2 * sms <= programs < 4 * sms
    threads = plan.num_warps * spec.target.warp_size
    assert plan.reduction_loops[0] is not None and plan.reduction_loops[0] * 2 // 16 >= threads

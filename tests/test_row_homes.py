"""The row-does-not-fit schedule: a looped (chunked) width dim whose ``[n]`` accumulators are
carried across a nested row loop keeps them in their output rows (``ir/carried_homes.py``,
``codegen/homes.py``).

Covers the legality analysis (homes found, refusals with their reasons), the Plan and the
heuristic default (chunked only when the whole row is predicted to spill), the generated code, the
numbers against eager PyTorch in the interpreter (ragged widths and row counts, several configs and
pid layouts), cross-compiles for cuda:90 / hip:gfx942 (no spills) and, on a GPU, the seed-sized
LayerNorm backward.
"""

from __future__ import annotations

import random

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels import CASES
from tilecraft.config.resources import BASE_REGISTERS
from tilecraft.errors import ConfigError
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

SEED_CASE = CASES["layer_norm_bwd_seed"]  # its inputs and eager reference


@tc.kernel(static_shapes=True)
def ln_bwd_rows(
    dy: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    w: torch.Tensor,
    with_bias: tc.constexpr = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """LayerNorm backward with per-CTA ``[n]`` partials over a nested row loop (seed 000's shape
    of code: a row block registered on the host, the weight upcast outside the row loop)."""
    rows = tc.register_block_size(x.size(0))
    n = tc.specialize(x.size(1))
    dx = torch.empty_like(x)
    parts = (x.size(0) + rows - 1) // rows
    dw_rows = x.new_empty([parts, n], dtype=torch.float32)
    db_rows = x.new_empty([parts, n], dtype=torch.float32)
    for cta in tc.tile(x.size(0), block_size=rows):
        dw = w.new_zeros(n, dtype=torch.float32)
        if with_bias:
            db = w.new_zeros(n, dtype=torch.float32)
        wf = w[None, :].to(torch.float32)
        for r in tc.tile(cta.begin, cta.end):
            g = dy[r, :].to(torch.float32)
            xh = (x[r, :].to(torch.float32) - mean[r][:, None]) * rstd[r][:, None]
            dw += torch.sum(g * xh, dim=0)
            if with_bias:
                db += torch.sum(g, dim=0)
            wg = wf * g
            a = torch.sum(xh * wg, dim=-1) / n
            b = torch.sum(wg, dim=-1) / n
            dx[r, :] = ((wg - xh * a[:, None] - b[:, None]) * rstd[r][:, None]).to(x.dtype)
        dw_rows[cta.id, :] = dw
        if with_bias:
            db_rows[cta.id, :] = db
    if with_bias:
        return dx, dw_rows.sum(0).to(w.dtype), db_rows.sum(0).to(w.dtype)
    return dx, dw_rows.sum(0).to(w.dtype), None


@tc.kernel
def colsum_rows(x: torch.Tensor) -> torch.Tensor:
    """Column sums through per-CTA rows: the smallest kernel with a carried ``[n]`` accumulator."""
    m, n = x.size()
    rows = tc.register_block_size(m)
    part = torch.empty((m + rows - 1) // rows, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = x.new_zeros(n, dtype=torch.float32) + 1.0
        for r in tc.tile(cta.begin, cta.end):
            acc = torch.maximum(acc, x[r, :].to(torch.float32).abs().amax(0)) + 0.5
        part[cta.id, :] = acc
    return part


# -- kernels whose accumulator lives in a scratch row (its row store is not a plain store) ------


@tc.kernel
def scaled_store(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    rows = tc.register_block_size(m)
    part = torch.empty((m + rows - 1) // rows, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = x.new_zeros(n, dtype=torch.float32)
        for r in tc.tile(cta.begin, cta.end):
            acc += x[r, :].to(torch.float32).sum(0)
        part[cta.id, :] = acc * 2.0
    return part


@tc.kernel
def cast_and_total(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The accumulator leaves the loop cast to bf16 and reduced over the width (a rolled
    reduction that reads the scratch row chunk by chunk)."""
    m, n = x.size()
    rows = tc.register_block_size(m)
    blocks = (m + rows - 1) // rows
    part = torch.empty(blocks, n, dtype=torch.bfloat16, device=x.device)
    total = torch.empty(blocks, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = x.new_zeros(n, dtype=torch.float32)
        for r in tc.tile(cta.begin, cta.end):
            acc = acc + x[r, :].to(torch.float32).pow(2).sum(0)
        part[cta.id, :] = acc.to(torch.bfloat16)
        total[cta.id] = torch.sum(acc)
    return part, total


@tc.kernel
def row_read_back(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    rows = tc.register_block_size(m)
    part = torch.ones((m + rows - 1) // rows, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = part[cta.id, :] * 3.0
        for r in tc.tile(cta.begin, cta.end):
            acc = acc + x[r, :].to(torch.float32).sum(0)
        part[cta.id, :] = acc
    return part


# -- kernels whose accumulator has no home (each refused with a reason) ------------------------


@tc.kernel
def reduced_in_loop(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    rows = tc.register_block_size(m)
    part = torch.empty((m + rows - 1) // rows, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = x.new_zeros(n, dtype=torch.float32)
        for r in tc.tile(cta.begin, cta.end):
            acc = acc + x[r, :].to(torch.float32).sum(0) * torch.sum(acc)
        part[cta.id, :] = acc
    return part


@tc.kernel(static_shapes=False)
def scaled_dynamic(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    rows = tc.register_block_size(m)
    part = torch.empty((m + rows - 1) // rows, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        acc = x.new_zeros(n, dtype=torch.float32)
        for r in tc.tile(cta.begin, cta.end):
            acc += x[r, :].to(torch.float32).sum(0)
        part[cta.id, :] = acc * 2.0
    return part


@tc.kernel
def scaled_after_reduction(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    rows = tc.register_block_size(m)
    part = torch.empty((m + rows - 1) // rows, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=rows):
        g = torch.sum(w[:].to(torch.float32))
        acc = x.new_zeros(n, dtype=torch.float32)
        for r in tc.tile(cta.begin, cta.end):
            acc += x[r, :].to(torch.float32).sum(0) * g
        part[cta.id, :] = acc * 2.0
    return part


def _ln_inputs(m: int, n: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    """``(dy, x, mean, rstd, w)`` with the forward's statistics (the generalization case's)."""
    return SEED_CASE.make_inputs((m, n), device, m * 1000 + n)


def _meta_ln(m: int, n: int) -> tuple[torch.Tensor, ...]:
    e = torch.empty
    bf = torch.bfloat16
    return (
        e(m, n, dtype=bf, device="meta"),
        e(m, n, dtype=bf, device="meta"),
        e(m, device="meta"),
        e(m, device="meta"),
        e(n, dtype=bf, device="meta"),
    )


def _on(kernel: tc.Kernel, args: tuple[object, ...], target: str) -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=Target.parse(target))


# -- analysis and plan --------------------------------------------------------------------------


def test_homes_of_layer_norm_backward() -> None:
    spec = ln_bwd_rows.bind(_ln_inputs(37, 100)).config_spec
    (red,) = spec.reductions
    assert red.loopable, red.reason
    assert {(h.name, h.tensor) for h in red.homes} == {("dw", "dw_rows"), ("db", "db_rows")}
    assert all(h.where.startswith("test_row_homes.py:") for h in red.homes)


@pytest.mark.parametrize(
    ("kernel", "reason"),
    [
        (reduced_in_loop, "it feeds a reduce in its loop"),
        (scaled_dynamic, "a scratch row needs a static width and grid"),
        (scaled_after_reduction, "its loop follows a reduction over the dim"),
    ],
)
def test_accumulator_without_a_home_keeps_the_whole_row(
    kernel: tc.Kernel, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = (torch.randn(20, 48),) if kernel is not scaled_after_reduction else _x_w()
    spec = kernel.bind(args).config_spec
    (red,) = spec.reductions
    assert not red.loopable and not red.homes
    assert "loop-carried value 'acc' spans it" in red.reason and reason in red.reason, red.reason
    with pytest.warns(UserWarning, match="cannot be looped") as info:
        plan = spec.resolve(tc.Config(block_sizes=[8, 4], reduction_loops=[16]))
    assert reason in str(info[0].message) and "using None" in str(info[0].message)
    assert plan.config.reduction_loops == (None,)  # repaired to the whole dim
    monkeypatch.setenv("TILECRAFT_STRICT", "1")
    with pytest.raises(ConfigError, match="cannot be looped"):
        kernel.bind(args).config_spec.resolve(tc.Config(block_sizes=[8, 4], reduction_loops=[16]))
    assert spec.default().reduction_loops == (None,)


def _x_w() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(20, 48), torch.randn(48)


@pytest.mark.parametrize("kernel", [scaled_store, cast_and_total, row_read_back])
def test_other_uses_after_the_loop_keep_the_accumulator_in_a_scratch_row(
    kernel: tc.Kernel,
) -> None:
    x = torch.randn(45, 90, generator=torch.Generator().manual_seed(0))
    bound = kernel.bind((x,))
    (red,) = bound.config_spec.reductions
    assert red.loopable and [h.scratch for h in red.homes] == [True], red.reason
    chunked = tc.Config(block_sizes=[8, 2], reduction_loops=[32])
    plan = bound.config_spec.resolve(chunked)
    assert "'acc' is kept in a scratch row per program" in plan.describe()
    code = bound.to_triton_code(chunked)
    assert "_tc_home_0 = torch.empty(6 * 90" not in code  # allocated as one flat buffer
    assert "_tc_home_0 = torch.empty(540, dtype=torch.float32" in code
    got = bound.run(bound.compile_config(chunked), x)
    whole = bound.run(bound.compile_config(chunked.replace(reduction_loops=[None])), x)
    for a, b in zip(_tuple(got), _tuple(whole), strict=True):
        # fp32 sums in another order; a bf16 result may then round one ulp apart
        tol = (1e-4, 1e-5) if a.dtype == torch.float32 else (1e-2, 2**-8)
        torch.testing.assert_close(a, b, atol=tol[0], rtol=tol[1])


def _tuple(value: object) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)  # type: ignore[return-value]


def test_plan_records_homes_only_when_the_width_is_chunked() -> None:
    spec = ln_bwd_rows.bind(_ln_inputs(37, 100)).config_spec
    whole = spec.resolve(tc.Config(block_sizes=[8, 2], reduction_loops=[None]))
    chunked = spec.resolve(tc.Config(block_sizes=[8, 2], reduction_loops=[32]))
    assert whole.carried_homes == ()
    assert {h.tensor for h in chunked.carried_homes} == {"dw_rows", "db_rows"}
    assert "'dw' is kept in its output row of dw_rows" in chunked.describe()
    assert whole.key() != chunked.key()


def test_default_chunks_the_row_only_when_the_whole_row_spills() -> None:
    wide = _on(ln_bwd_rows, _meta_ln(4608, 40920), "cuda:90").config_spec
    whole = wide.resolve(wide.default().replace(reduction_loops=[None], num_warps=32))
    assert whole.resources.spills  # the whole row does not fit even with 32 warps
    plan = wide.resolve(wide.default())
    assert plan.reduction_loops[0] is not None and plan.carried_homes
    assert not plan.resources.spills
    threads = plan.num_warps * 32
    per_sm = 65536 // (plan.resources.registers * threads)
    assert plan.resources.programs[0] is not None
    one_wave = plan.resources.programs[0] <= per_sm * 132  # all programs resident at once
    # ... unless a halved chunk would leave a thread less than a 16-byte vector of a bf16 row
    vector_floor = (plan.reduction_loops[0] // 2) * 2 // 16 < threads
    assert one_wave or vector_floor
    narrow = _on(ln_bwd_rows, _meta_ln(512, 1000), "cuda:90").config_spec
    assert narrow.default().reduction_loops == (None,)


def test_model_does_not_keep_homed_accumulators_in_registers() -> None:
    spec = _on(ln_bwd_rows, _meta_ln(4608, 40920), "cuda:90").config_spec
    rows = tc.Config(block_sizes=[32, 1], reduction_loops=[1024], num_warps=4, chunk_outer=False)
    small = spec.resolve(rows)
    big = spec.resolve(rows.replace(reduction_loops=[4096]))
    # per thread: [1, 1024] chunks are 8 elements, [1, 4096] chunks 32; two [n] accumulators
    # would add 2 x 40920 / 128 = 640 registers if they stayed in registers
    assert BASE_REGISTERS < small.resources.registers < big.resources.registers < 255
    # run chunks outer, only each accumulator's chunk is held: 2 x 1024 / 128 = 16 more
    outer = spec.resolve(rows.replace(chunk_outer=True))
    assert 0 < outer.resources.registers - small.resources.registers <= 16


# -- generated code and numerics ---------------------------------------------------------------


def test_generated_code_keeps_accumulators_in_their_rows() -> None:
    bound = ln_bwd_rows.bind(_ln_inputs(37, 100))
    in_rows = tc.Config(block_sizes=[8, 2], reduction_loops=[32], chunk_outer=False)
    code = bound.to_triton_code(in_rows)
    kernel = code[code.index("@triton.jit") : code.index("def launch_0")]
    assert kernel.count("tl.debug_barrier()") == 2  # after the zero-fill, after each row
    assert kernel.count("tl.store(dw_rows") == 2  # zero-fill and per-row update; no final store
    assert kernel.count("tl.load(dw_rows") == 1
    assert "tl.full([_RBLOCK_1], 0.0, tl.float32)" in kernel  # the initial value, per chunk
    whole = bound.to_triton_code(tc.Config(block_sizes=[8, 2], reduction_loops=[None]))
    assert "tl.debug_barrier()" not in whole and "tl.load(dw_rows" not in whole
    # on CUDA the rows, read again every row step, ask L2 to keep them
    cuda = _on(ln_bwd_rows, _meta_ln(37, 100), "cuda:90")
    code = cuda.to_triton_code(in_rows)
    (load,) = [line for line in code.splitlines() if "tl.load(dw_rows" in line]
    assert "eviction_policy='evict_last'" in load


LN_CASES = [
    # (m, n, config): ragged n (not a multiple of the chunk) and m (not a multiple of the rows)
    (37, 100, tc.Config(block_sizes=[8, 2], reduction_loops=[32])),
    (37, 100, tc.Config(block_sizes=[16, 4], reduction_loops=[64], pid_type="persistent_blocked")),
    (64, 257, tc.Config(block_sizes=[16, 1], reduction_loops=[16])),
    (
        5,
        300,
        tc.Config(block_sizes=[4, 4], reduction_loops=[128], pid_type="persistent_interleaved"),
    ),
]


@pytest.mark.parametrize(("m", "n", "config"), LN_CASES)
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("chunk_outer", [False, True])
def test_layer_norm_backward_matches_eager(
    m: int, n: int, config: tc.Config, with_bias: bool, chunk_outer: bool
) -> None:
    """Both schedules of the homed rows: updated in memory every row step, or (chunk_outer,
    ir/chunk_outer.py) statistics first, then column chunks outer."""
    args = _ln_inputs(m, n)
    bound = ln_bwd_rows.bind((*args, with_bias))
    config = config.replace(chunk_outer=chunk_outer)
    program = bound.compile_config(config)
    assert program.plan.carried_homes and program.plan.config.chunk_outer is chunk_outer
    assert ("_tc_stats_" in bound.to_triton_code(config)) is chunk_outer
    dx, dw, db = bound.run(program, *args, with_bias)
    ref_dx, ref_dw, ref_db = (t.float() for t in SEED_CASE.reference(*args))
    torch.testing.assert_close(dx.float(), ref_dx, atol=0.04, rtol=0.02)
    torch.testing.assert_close(dw.float(), ref_dw, atol=0.1, rtol=0.02)
    if with_bias:
        torch.testing.assert_close(db.float(), ref_db, atol=0.1, rtol=0.02)
    else:
        assert db is None


def _random_chunked(spec: tc.ConfigSpec, seed: int, chunks: tuple[int, ...]) -> tc.Config:
    """A random config of the space (pid layouts, eviction, range knobs...) with a chunked row."""
    rng = random.Random(seed)
    return spec.random(rng).replace(reduction_loops=[rng.choice(chunks)])


@pytest.mark.parametrize("seed", [0, 5, 7])
def test_random_configs_with_chunked_rows_match_eager(seed: int) -> None:
    args = _ln_inputs(37, 100)
    bound = ln_bwd_rows.bind((*args, True))
    program = bound.compile_config(_random_chunked(bound.config_spec, seed, (16, 32, 64)))
    assert program.plan.carried_homes
    outs = bound.run(program, *args, True)
    for out, ref in zip(outs, SEED_CASE.reference(*args), strict=True):
        torch.testing.assert_close(out.float(), ref.float(), atol=0.1, rtol=0.02)


@pytest.mark.parametrize("rows,chunk", [(4, 16), (8, 64), (32, 32)])
def test_elementwise_updates_match_eager(rows: int, chunk: int) -> None:
    x = torch.randn(45, 90)
    bound = colsum_rows.bind((x,))
    config = tc.Config(block_sizes=[rows, 2], reduction_loops=[chunk])
    out = bound.run(bound.compile_config(config), x)
    expected = []
    for start in range(0, 45, rows):
        acc = torch.ones(90)
        for r in range(start, min(start + rows, 45), 2):
            acc = torch.maximum(acc, x[r : r + 2].abs().amax(0)) + 0.5
        expected.append(acc)
    torch.testing.assert_close(out, torch.stack(expected))


# -- GPU targets -------------------------------------------------------------------------------


@pytest.mark.crosscompile
def test_chunked_default_cross_compiles_without_spills() -> None:
    from tilecraft.tools.check import check_kernel

    args = _meta_ln(4608, 40920)  # the seed's shape: nothing runs, only triton.compile
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    configs = lambda b: [  # noqa: E731
        b.config_spec.default(),
        tc.Config(block_sizes=[32, 1], reduction_loops=[1024], num_warps=4),
    ]
    rows = check_kernel(ln_bwd_rows, args, targets, configs, timeout_s=600)
    assert len(rows) == 4
    for row in rows:
        assert row.report is not None and row.report.ok, row.status
        assert row.config.reduction_loops[0] is not None
        assert row.report.spills == 0, (row.target.key, row.config, row.report.spills)
    # a scratch row is one more pointer parameter, allocated by the launcher
    chunked = [tc.Config(block_sizes=[32, 2], reduction_loops=[2048], num_warps=8)]
    x = torch.empty(4096, 8192, device="meta")
    scratch = check_kernel(cast_and_total, (x,), targets, lambda b: chunked, timeout_s=600)
    assert [r.report is not None and r.report.ok for r in scratch] == [True, True]


@pytest.mark.gpu
def test_seed_sized_layer_norm_backward_gpu() -> None:
    args = _ln_inputs(4608, 40920, "cuda")
    bound = ln_bwd_rows.bind(args)
    plan = bound.config_spec.resolve(bound.config_spec.default())
    assert plan.carried_homes, plan.describe()
    dx, dw, db = ln_bwd_rows(*args)
    ref_dx, ref_dw, ref_db = (t.float() for t in SEED_CASE.reference(*args))
    assert (dx.float() - ref_dx).abs().max().item() < 0.1
    for out, ref in ((dw, ref_dw), (db, ref_db)):
        assert ((out.float() - ref).abs().max() / ref.abs().max()).item() < 2e-2


def test_row_schedule_benchmark_times_both_schedules() -> None:
    from benchmarks.row_schedule import candidates

    kernel = SEED_CASE.kernels[0]
    spec = _on(kernel, _meta_ln(4608, 40920), "cuda:90").config_spec
    plans = [spec.resolve(c, warn=False) for _, c in candidates(spec.default(), quick=True)]
    assert plans[0].config == spec.default() and plans[0].carried_homes
    assert any(not p.carried_homes and p.reduction_loops == (None,) for p in plans)
    assert len({p.key() for p in plans if p.carried_homes}) >= 5


def test_block_accesses_of_a_tile_finer_than_its_cta_fall_back_to_pointers() -> None:
    """Rows walked in 2-row tiles inside 1-row CTAs: a block pointer's or descriptor's bounds
    stop at the tensor's end, not at the CTA's, so its store would write the next CTA's row
    (on the H200 dx came out all wrong, racing that row's own program; the interpreter, which
    runs programs in order, hid it). Such accesses are emitted with pointers and masks."""
    bound = _on(ln_bwd_rows, _meta_ln(1000, 9000), "cuda:90")
    for indexing in ("block_ptr", "tensor_descriptor"):
        config = tc.Config(block_sizes=[1, 2], reduction_loops=[256], indexing=indexing)
        plan = bound.config_spec.resolve(config, warn=False)
        stores = [a for a in plan.accesses if a.op == "store" and a.requested == indexing]
        assert stores and all(a.indexing == "pointer" for a in stores), stores
        assert all("past the loop's bound" in a.fallback_reason for a in stores)
        aligned = bound.config_spec.resolve(config.replace(block_sizes=[2, 2]), warn=False)
        assert any(a.indexing == indexing for a in aligned.accesses if a.op == "store")


@pytest.mark.gpu
def test_random_configs_with_chunked_rows_gpu() -> None:
    """Random configs of the space with the row chunked: the per-row read/update/write of the
    rows in memory must be race-free with every pid layout, stage count and range knob."""
    from triton.runtime.errors import OutOfResources, PTXASError

    args = _ln_inputs(1000, 9000, "cuda")
    bound = ln_bwd_rows.bind(args)
    refs = SEED_CASE.reference(*args)
    ran = 0
    for seed in range(8):
        config = _random_chunked(bound.config_spec, seed, (256, 1024, 2048))
        try:  # Triton compiles at the first launch: a config too big for the GPU fails there
            program = bound.compile_config(config)
            outs = bound.run(program, *args)
        except (PTXASError, OutOfResources) as exc:  # a random config may exceed the GPU
            print(f"skipped {config}: {str(exc).splitlines()[0][:100]}")
            continue
        assert program.plan.carried_homes
        for out, ref in zip(outs, refs, strict=True):
            err = (out.float() - ref.float()).abs().max() / ref.float().abs().max()
            assert err.item() < 2e-2, (config, err.item())
        ran += 1
    assert ran >= 5

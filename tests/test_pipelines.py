"""Hopper dot pipelines (tilecraft.config.pipelines): what the space offers on sm_90, the
heuristic default per target, the warp-specialization gates, the shared-memory model, quick's
first generation, generated code, numerics in the interpreter and cross-compiles for sm_90.
"""

from __future__ import annotations

import io
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import tilecraft as tc
from tilecraft.config.pipelines import pipeline_configs, pipeline_cost, store_staging_bytes
from tilecraft.errors import ConfigError
from tilecraft.ir.nodes import Op
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from examples.matmul import matmul, matmul_bias_gelu  # noqa: E402
from tests.test_default_rules import sum_of_squares  # noqa: E402

SM90 = Target.parse("cuda:90")
TMA = "tensor_descriptor"


def _bound(target: str | Target, m: int = 4096, k: int = 4096, n: int = 4096) -> BoundKernel:
    a = torch.empty(m, k, dtype=torch.bfloat16)
    b = torch.empty(k, n, dtype=torch.bfloat16)
    tgt = Target.parse(target) if isinstance(target, str) else target
    return BoundKernel(matmul, matmul.bind_arguments((a, b), {}), target=tgt)


def test_sm90_default_is_a_tma_pipeline() -> None:
    spec = _bound(SM90).config_spec
    config = spec.default()
    assert config.indexing == (TMA, TMA, TMA)
    assert config.pid_type == "persistent_interleaved" and config.l2_groupings == (8,)
    assert list(config.block_sizes) == [128, 256, 64] and config.num_warps == 8
    assert 3 <= (config.num_stages or 0) <= 5
    plan = spec.resolve(config)
    assert not plan.repairs and all(a.indexing == TMA for a in plan.accesses)
    assert plan.resources.shared_bytes <= SM90.limits.max_shared_bytes
    assert not plan.resources.spills
    plain = spec.plain_default()  # the same tiles without the pipeline
    assert set(plain.indexing) == {"pointer"} and plain.pid_type == "flat"


def test_fma_dot_operands_also_used_elementwise_load_by_pointer() -> None:
    """fp32 (ieee) dots run on the FMA units; a tile that feeds one and a row norm too loads by
    pointer (by descriptor it spilled: 25 ms against 0.86 on the H200), while a plain fp32
    GEMM's operands keep their descriptors."""
    from benchmarks.default_change import case_calls
    from benchmarks.gen_kernels import HELDOUT

    results = {}
    for name in ("pairwise_sq_dist", "matmul_fp32"):
        case = HELDOUT[name]
        kernel, args = case_calls(case, case.gpu_shapes[0])[0]
        bound = BoundKernel(kernel, kernel.bind_arguments(tuple(args), {}), target=SM90)
        code = bound.to_triton_code(bound.config_spec.default())
        results[name] = code
    pairwise = results["pairwise_sq_dist"]
    assert "tl.dot(" in pairwise and "input_precision='ieee'" in pairwise
    assert "a_desc" not in pairwise and "b_desc" not in pairwise and "tl.load(a +" in pairwise
    assert "_desc.load(" in results["matmul_fp32"]


@pytest.mark.parametrize("target", ["hip:gfx942", "cuda:80", "interpret"])
def test_default_without_tma_is_unchanged(target: str) -> None:
    spec = _bound(target).config_spec
    assert pipeline_configs(spec) == []
    config = spec.default()
    assert config == spec.plain_default()
    assert config.pid_type == "flat" and set(config.indexing) == {"pointer"}


def test_unaligned_strides_keep_the_plain_default() -> None:
    """TMA needs 16-byte aligned strides: k = 100 bf16 (200 B rows) has none for `a`."""
    spec = _bound(SM90, m=256, k=100, n=256).config_spec
    assert pipeline_configs(spec) == []
    assert spec.default() == spec.plain_default()


def test_decode_default_fills_the_device_with_narrow_tiles() -> None:
    spec = _bound(SM90, m=1, k=4096, n=14336).config_spec
    config = spec.default()
    assert config.block_sizes[0] == 16 and config.indexing == (TMA, TMA, TMA)
    plan = spec.resolve(config)
    (programs,) = plan.resources.programs
    assert programs is not None and programs >= 100  # not 56 programs of 16x256 on 132 SMs
    # 16-row tiles compile to mma.sync, never specialized: no warp-specialized variant
    assert not any(any(c.range_warp_specializes) for c in pipeline_configs(spec))


def test_ranking_prefers_wide_tiles_for_large_squares() -> None:
    spec = _bound(SM90).config_spec
    ranked = pipeline_configs(spec)
    costs = [pipeline_cost(spec, spec.resolve(c, warn=False)) for c in ranked]
    assert costs == sorted(costs)
    shapes = [tuple(c.block_sizes) for c in ranked]
    assert shapes.index((128, 256, 64)) < shapes.index((128, 128, 64))
    specialized = [c for c in ranked if any(c.range_warp_specializes)]
    assert specialized and all(c.num_warps == 4 for c in specialized)
    assert all(c.range_warp_specializes == (None, True) for c in specialized)


def test_warp_specialize_needs_four_warps_on_sm90() -> None:
    spec = _bound(SM90).config_spec
    asked = tc.Config(
        block_sizes=[128, 128, 64], num_warps=8, num_stages=3, indexing=TMA,
        range_warp_specializes=[None, True],
    )  # fmt: skip
    plan = spec.resolve(asked, warn=False)
    assert plan.ranges[1].warp_specialize is None
    assert any("num_warps=4" in r for r in plan.repairs)
    ok = spec.resolve(asked.replace(num_warps=4), warn=False)
    assert ok.ranges[1].warp_specialize is True and not ok.repairs
    assert "warp_specialize=True" in ok.ranges[1].kwargs()


def test_warp_specialize_needs_four_warps_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_STRICT", "1")
    spec = _bound(SM90).config_spec
    with pytest.raises(ConfigError, match="num_warps=4"):
        spec.resolve(
            tc.Config(
                block_sizes=[128, 128, 64],
                num_warps=8,
                indexing=TMA,
                range_warp_specializes=[None, True],
            )  # fmt: skip
        )


def test_warp_specialize_dropped_when_a_load_falls_back_to_pointers() -> None:
    """A 512-wide block is over TMA's 256-element box: b's load falls back to pointers, and a
    specialized loop with a pointer load does not compile in Triton 3.6."""
    spec = _bound(SM90).config_spec
    plan = spec.resolve(
        tc.Config(
            block_sizes=[64, 512, 64],
            num_warps=4,
            num_stages=2,
            indexing=TMA,
            range_warp_specializes=[None, True],
        ),  # fmt: skip
        warn=False,
    )
    assert plan.accesses[1].indexing == "pointer" and "256" in plan.accesses[1].fallback_reason
    assert plan.ranges[1].warp_specialize is None
    assert plan.config.range_warp_specializes in ((), (None, None))
    assert any("not a 2-D descriptor" in r for r in plan.repairs)


def test_shared_memory_counts_store_staging_of_persistent_tma() -> None:
    """Cross-compiled for sm_90 (128x256x64 bf16, 3 stages): flat 147480 B, persistent
    213016 B: the persistent program keeps a 64 KiB store tile beside the operand stages."""
    spec = _bound(SM90).config_spec
    flat = tc.Config(block_sizes=[128, 256, 64], num_warps=8, num_stages=3, indexing=TMA)
    persistent = flat.replace(pid_type="persistent_interleaved")
    flat_c, persistent_c = (spec.normalize(c, warn=False) for c in (flat, persistent))
    assert store_staging_bytes(spec, flat_c) == 0
    assert store_staging_bytes(spec, persistent_c) == 128 * 256 * 2
    assert spec.estimated_shared_bytes(flat_c) == 3 * (128 * 64 + 64 * 256) * 2
    pointer_store = persistent_c.replace(indexing=[TMA, TMA, "pointer"])
    assert store_staging_bytes(spec, pointer_store) == 0


def test_candidates_follow_the_pipeline_with_its_tiles_by_pointer_then_the_plain_default() -> None:
    """A pipeline default that fails (a compile error, a miscompile) is retried at its own tiles
    and stages without TMA, persistence or specialization, then at the plain default's tiles."""
    from tilecraft.autotune.candidates import _pointer_fed, candidates

    spec = _bound(SM90).config_spec
    ranked, _ = candidates(spec)
    default = spec.default()
    assert ranked[0] == default and ranked[0].indexing == (TMA, TMA, TMA)
    assert ranked[1].block_sizes == default.block_sizes and ranked[1].pid_type == "flat"
    assert ranked[1].num_stages == default.num_stages and set(ranked[1].indexing) == {"pointer"}
    assert ranked[2] == spec.plain_default()
    specialized = next(c for c in pipeline_configs(spec) if any(c.range_warp_specializes))
    assert specialized.num_warps == 4

    fed = _pointer_fed(spec, specialized)
    assert fed.num_warps == 8 and not any(fed.range_warp_specializes)


def test_generated_code_of_the_pipelines() -> None:
    bound = _bound(SM90)
    code = bound.to_triton_code(bound.config_spec.default())
    assert code.count("tl.make_tensor_descriptor(") == 3
    assert "tl.dot(" in code and "for virtual_pid in tl.range(" in code
    assert "group_rows" in code  # L2 grouping of the tile order
    assert "num_stages=3" in code
    specialized = next(
        c for c in pipeline_configs(bound.config_spec) if any(c.range_warp_specializes)
    )
    code = bound.to_triton_code(specialized)
    assert "warp_specialize=True" in code and "num_warps=4" in code


def test_quick_times_the_pipelines_in_its_first_generation() -> None:
    from tilecraft.autotune.classify import Attempt
    from tilecraft.autotune.progress import Reporter
    from tilecraft.autotune.runner import Runner
    from tilecraft.autotune.search import EFFORTS, UnknownRepros, _Search

    bound = _bound(SM90)
    spec = bound.config_spec
    batches: list[list[Any]] = []

    class FakeRunner(Runner):  # times every config at its model cost: nothing is compiled
        def check(self, configs: list[Any], **options: Any) -> list[Attempt]:
            batches.append(list(configs))
            out = []
            for config in configs:
                ms = pipeline_cost(spec, spec.resolve(config, warn=False)) / 1e5
                attempt = Attempt(config, None, "", 0.1, ms=ms)
                options["on_result"](attempt)
                out.append(attempt)
            return out

        def bench(self, config: Any, **options: Any) -> Attempt:
            return Attempt(config, None, "", 0.1, ms=1.0)

    search = _Search(
        bound, FakeRunner(), Reporter("matmul", stream=io.StringIO()),  # type: ignore[arg-type]
        EFFORTS["quick"], deadline=time.monotonic() + 30, timeout_s=10, seed=0, batch=4,
        on_unknown=UnknownRepros(bound, (), {}),
    )  # fmt: skip
    search.run(spec.plain_default())
    assert [c.key() for c in batches[0]] == [spec.plain_default().key()]
    seeds = [c.key() for c in batches[1]]  # before any local-search move
    for config in pipeline_configs(spec)[: EFFORTS["quick"].pipelines]:
        assert config.key() in seeds


@pytest.mark.parametrize("which", ["default", "specialized"])
def test_pipeline_configs_compute_matmul(which: str, device: str) -> None:
    """The sm_90 pipeline configs compute a matmul whose tiles do not divide (TMA's zero fill
    is the mask): on the GPU where there is one, else in Triton's interpreter (descriptors
    emulated, no warp specialization there)."""
    m, k, n = 80, 96, 144
    spec = _bound(SM90, m, k, n).config_spec
    ranked = pipeline_configs(spec, spec.plain_default().replace(block_sizes=[64, 64, 32]))
    specialized = [c for c in ranked if any(c.range_warp_specializes)]
    config = ranked[0] if which == "default" else specialized[0]
    assert config.indexing == (TMA, TMA, TMA)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(device=device, dtype=torch.bfloat16)
    b = (torch.randn(k, n, generator=gen) / k**0.5).to(device=device, dtype=torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the interpreter drops warp_specialize (one warning)
        bound = matmul.bind((a, b))
        out = bound.run(bound.compile_config(config), a, b)
    torch.testing.assert_close(out.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.crosscompile
def test_pipelines_cross_compile_for_sm90() -> None:
    """The default and the specialized pipeline compile for sm_90; the specialized one runs 12
    warps (Triton added the producer warpgroup), and the shared memory fits."""
    from tilecraft.tools.crosscompile import CompileJob
    from tilecraft.tools.worker import run_compile_jobs

    bound = _bound(SM90)
    spec = bound.config_spec
    specialized = next(c for c in pipeline_configs(spec) if any(c.range_warp_specializes))
    jobs = []
    for config in (spec.default(), specialized):
        _, _, traced, generated = bound.generate(config)
        jobs += [CompileJob.of(g, loop, SM90) for g, loop in zip(generated, traced.loops)]
    default_report, ws_report = run_compile_jobs(jobs, 600.0)
    for report in (default_report, ws_report):
        assert report.ok, report.error
        assert report.fits and report.spills == 0
    assert default_report.num_warps == 8
    assert ws_report.num_warps == 12


def test_bias_gelu_default_keeps_pointer_bias() -> None:
    """A broadcast load (``bias[None, tn]``) cannot be a descriptor; the dot operands can."""
    a = torch.empty(1024, 1024, dtype=torch.bfloat16)
    bias = torch.empty(1024, dtype=torch.bfloat16)
    bound = BoundKernel(
        matmul_bias_gelu, matmul_bias_gelu.bind_arguments((a, a, bias), {}), target=SM90
    )
    config = bound.config_spec.default()
    assert config.indexing == (TMA, TMA, "pointer", TMA)


def _step(qk: Any, m_i: Any, l_i: Any, acc: Any, vt: Any) -> tuple[Any, Any, Any]:
    m_new = torch.maximum(m_i, torch.amax(qk, dim=-1))
    p = torch.exp(qk - m_new[:, None])
    alpha = torch.exp(m_i - m_new)
    l_i = l_i * alpha + torch.sum(p, dim=-1)
    return m_new, l_i, tc.dot(p.to(vt.dtype), vt, acc=acc * alpha[:, None])


@tc.kernel(static_shapes=True)
def causal_2d(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention on one head (no batch dim), split like examples/attention.py: keys
    before the query tile (``tc.tile(tm.begin)``), then the diagonal (``tm.begin..tm.end``)."""
    s, d = q.size()
    d = tc.specialize(d)
    out = torch.empty_like(q)
    for tm in tc.tile(s):
        qt = q[tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        acc = tc.zeros([tm, d], dtype=torch.float32)
        for tn in tc.tile(tm.begin):
            qk = tc.dot(qt, k[tn, :].t(), out_dtype=torch.float32)
            m_i, l_i, acc = _step(qk, m_i, l_i, acc, v[tn, :])
        for tn in tc.tile(tm.begin, tm.end):
            qk = tc.dot(qt, k[tn, :].t(), out_dtype=torch.float32)
            qk = torch.where(tm.index[:, None] >= tn.index[None, :], qk, float("-inf"))
            m_i, l_i, acc = _step(qk, m_i, l_i, acc, v[tn, :])
        out[tm, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


def test_nested_tile_over_a_tiles_bounds_may_use_descriptors() -> None:
    """``k[tn, :]`` for ``tn in tc.tile(tm.begin, tm.end)``: a descriptor when tn's block divides
    tm's (each block lies inside the loop's range), else pointers with the reason."""
    q = torch.empty(200, 64, dtype=torch.bfloat16)
    bound = BoundKernel(causal_2d, causal_2d.bind_arguments((q, q, q), {}), target=SM90)
    spec = bound.config_spec
    assert all(TMA in choices for choices in spec.space.indexing_choices)
    aligned = spec.resolve(tc.Config(block_sizes=[64, 32, 16], indexing=TMA), warn=False)
    assert [a.indexing for a in aligned.accesses] == [TMA] * 6
    ragged = spec.resolve(tc.Config(block_sizes=[32, 32, 64], indexing=TMA), warn=False)
    # the loop up to tm.begin divides; the diagonal loop's 64-blocks do not divide 32
    assert [a.indexing for a in ragged.accesses] == [TMA] * 3 + ["pointer"] * 2 + [TMA]
    assert "does not divide" in ragged.accesses[3].fallback_reason


def test_nested_tile_descriptors_compute_causal_attention(device: str) -> None:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(200, 64, generator=gen).to(device, torch.bfloat16) for _ in range(3))
    bound = causal_2d.bind((q, k, v))
    config = tc.Config(block_sizes=[64, 32, 16], indexing=TMA, num_warps=4)
    assert all(a.indexing == TMA for a in bound.config_spec.resolve(config).accesses)
    out = bound.run(bound.compile_config(config), q, k, v)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.float()[None], k.float()[None], v.float()[None], is_causal=True, scale=1.0
    )[0]
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)


def _attention(
    s: int, causal: bool, d: int = 64, bh: int = 4, target: Target = SM90
) -> BoundKernel:
    from examples.attention import attention

    q = torch.empty(bh, s, d, dtype=torch.bfloat16)
    args = (q, q, q, causal)
    return BoundKernel(attention, attention.bind_arguments(args, {}), target=target)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_default_on_sm90_streams_k_and_v_by_tma(causal: bool) -> None:
    """``q[tb, tm, :]`` with a scalar batch index: a 2-D descriptor over ``[bh * s, d]`` (the
    batch dim merged into the rows) when s divides by the blocks."""
    bound = _attention(4096, causal)
    config = bound.config_spec.default()
    plan = bound.config_spec.resolve(config)
    assert all(a.indexing == TMA and a.merged_dims == 1 for a in plan.accesses)
    assert (config.num_stages or 0) >= 3 and not plan.repairs
    code = bound.to_triton_code(config)
    assert "tl.make_tensor_descriptor(k, [16384, 64], [64, 1]" in code
    assert "k_desc.load([offset_0 * 4096 + offset_" in code and ".reshape(" not in code
    assert "tl.exp2(" in code and "tl.exp(" not in code
    if causal:  # the diagonal loop masks, the loop before it does not
        lines = [line for line in code.splitlines() if "# src" not in line]
        assert sum(">=" in line for line in lines) == 1


def test_attention_ragged_seq_reshapes_3d_blocks_and_is_not_specialized() -> None:
    """s = 1000: a merged row block could cross into the next batch row; the descriptor keeps
    the batch dim (blocks of 1, reshaped), and such a loop is not warp-specialized (sm_100,
    where an online-softmax loop may be specialized otherwise)."""
    bound = _attention(1000, False, target=Target.parse("cuda:100"))
    spec = bound.config_spec
    config = tc.Config(
        block_sizes=[128, 64], num_warps=4, num_stages=2, indexing=TMA,
        range_warp_specializes=[None, True],
    )  # fmt: skip
    plan = spec.resolve(config, warn=False)
    assert all(a.indexing == TMA and a.merged_dims == 0 for a in plan.accesses)
    assert plan.ranges[1].warp_specialize is None
    assert any("scalar-indexed dims cannot merge" in r for r in plan.repairs)
    code = bound.to_triton_code(config)
    assert "[1, _BLOCK_1, _RDIM_2])" in code and ".reshape([_BLOCK_3, _RDIM_2])" in code
    assert ".reshape([1, _BLOCK_1, _RDIM_2])" in code  # the store


@pytest.mark.parametrize("causal", [False, True])
def test_online_softmax_loops_are_not_specialized_on_sm90(causal: bool) -> None:
    """Attention's key loops carry the running max and sum besides the dot accumulator: on
    sm_90 warp specialization is neither offered nor kept when asked for (Triton 3.6 gave NaN on
    the H200), while a GEMM's k loop (only a dot accumulator) keeps it."""
    spec = _attention(4096, causal).config_spec
    key_loops = spec.space.dot_slots
    assert key_loops and all("m_i" in spec.space.ws_carry_problems[i] for i in key_loops)
    assert all(True not in spec.space.range_choices["range_warp_specializes"][i] for i in key_loops)
    ws = [True if i in key_loops else None for i in range(spec.space.n_ranges)]
    blocks = [128, 64, 64] if causal else [128, 64]  # the causal loops tile keys twice
    asked = tc.Config(
        block_sizes=blocks, num_warps=4, num_stages=3, indexing=TMA, range_warp_specializes=ws
    )
    plan = spec.resolve(asked, warn=False)
    assert all(not r.warp_specialize for r in plan.ranges)
    assert any("not only tl.dot accumulators" in r for r in plan.repairs)
    assert "warp_specialize" not in _attention(4096, causal).to_triton_code(asked)
    gemm = _bound(SM90).config_spec
    assert not any(gemm.space.ws_carry_problems)
    assert True in gemm.space.range_choices["range_warp_specializes"][gemm.space.dot_slots[0]]


@pytest.mark.parametrize("s,causal", [(200, False), (200, True), (256, False), (256, True)])
def test_attention_with_descriptors_computes_sdpa(s: int, causal: bool, device: str) -> None:
    """Merged (s = 256) and reshaped (s = 200) descriptors, causal and not."""
    from examples.attention import attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, s, 64, generator=gen).to(device, torch.bfloat16) for _ in range(3))
    args = tuple(t.reshape(2, s, 64) for t in (q, k, v))
    bound = attention.bind((*args, causal))
    config = tc.Config(block_sizes=[64, 32, 32][: 3 if causal else 2], indexing=TMA, num_warps=4)
    plan = bound.config_spec.resolve(config)
    assert all(a.indexing == TMA and a.merged_dims == (s % 64 == 0) for a in plan.accesses)
    out = bound.run(bound.compile_config(config), *args, causal)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=causal
    ).reshape(2, s, 64)
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.crosscompile
def test_attention_pipelines_cross_compile_for_sm90() -> None:
    """The attention defaults (d 128, causal and not) compile for sm_90 within shared memory
    and without spills; no pipeline of theirs is warp-specialized (their key loops carry the
    online softmax's running max and sum)."""
    from tilecraft.tools.crosscompile import CompileJob
    from tilecraft.tools.worker import run_compile_jobs

    jobs, names, warps = [], [], []
    for causal in (False, True):
        bound = _attention(4096, causal, d=128)
        ranked = pipeline_configs(bound.config_spec)
        assert ranked[0] == bound.config_spec.default()
        assert not [c for c in ranked if any(c.range_warp_specializes)]
        for config in ranked[:1]:
            _, _, traced, generated = bound.generate(config)
            jobs += [CompileJob.of(g, loop, SM90) for g, loop in zip(generated, traced.loops)]
            names.append((causal, any(config.range_warp_specializes)))
            # a warpgroup per 64 query rows: 128-row tiles 8 warps; causal 4 x 4096 takes
            # 64-row tiles (128 tiles of 128 rows would leave SMs idle) and 4 warps
            warps.append(4 * config.block_sizes[0] // 64)
    reports = run_compile_jobs(jobs, 900.0)
    assert names == [(False, False), (True, False)] and warps == [8, 4]
    for (causal, _), report, want in zip(names, reports, warps, strict=True):
        assert report.ok and report.fits and report.spills == 0, (causal, report.error)
        assert report.num_warps == want


def test_causal_loops_over_query_bounds_need_no_masks_when_blocks_divide() -> None:
    """``tc.tile(tm.begin)`` and ``tc.tile(tm.begin, tm.end)`` with key blocks dividing the
    query block: every key block is whole (the diagonal one cut only at s), so no mask is
    computed or applied; with key blocks larger than query blocks the loop end masks."""
    bound = _attention(4096, True)
    aligned = bound.to_triton_code(tc.Config(block_sizes=[128, 64, 64]))
    assert "mask_" not in aligned and "tl.where(" in aligned  # the causal where stays
    ragged = _attention(1000, True).to_triton_code(tc.Config(block_sizes=[128, 64, 32]))
    assert "mask_3" not in ragged and "mask_4 = indices_4 < 1000" in ragged
    larger = bound.to_triton_code(tc.Config(block_sizes=[32, 64, 64]))
    assert "mask_3 = indices_3 < offset_1" in larger
    assert "mask_4 = indices_4 < tl.minimum(offset_1 + _BLOCK_1, 4096)" in larger


def test_short_k_loops_default_to_warp_specialized_pipelines() -> None:
    """A tile's fill and drain weigh on few k-steps: 16 steps (k = 1024) over 4 tiles an SM take
    the specialized pipeline (4 warps, a producer loading the next tile meanwhile); 64 steps, or
    one tile an SM (no next tile to overlap), keep 8 warps."""
    from tilecraft.config.pipelines import tile_steps

    assert tile_steps(4, 16, True) < tile_steps(4, 16, False)
    assert tile_steps(4, 64, True) > tile_steps(4, 64, False)
    assert tile_steps(1, 16, True) > tile_steps(1, 16, False)
    assert tile_steps(3, None, False) == 3.0
    short = _bound(SM90, m=4096, k=1024, n=4096).config_spec.default()
    assert short.num_warps == 4 and any(short.range_warp_specializes)
    square = _bound(SM90).config_spec.default()
    assert square.num_warps == 8 and not any(square.range_warp_specializes)
    one_wave = _bound(SM90, m=1000, k=1000, n=1000).config_spec.default()
    assert not any(one_wave.range_warp_specializes)


def test_plain_pipelines_give_a_warpgroup_per_64_rows() -> None:
    """wgmma gives each warpgroup 64 accumulator rows: a 64-row tile at 8 warps splits its
    columns over two warpgroups and its softmax rows reduce across them (causal attention
    3x5x1000x64 on the H200: 0.0324 ms at 8 warps, 0.0232 at 4)."""
    spec = _attention(1000, True, bh=15).config_spec
    ranked = [c for c in pipeline_configs(spec) if not any(c.range_warp_specializes)]
    rows = {c.block_sizes[0]: c.num_warps for c in ranked}
    assert rows.get(64) == 4 and spec.default().num_warps == 4
    plain = [
        c for c in pipeline_configs(_bound(SM90).config_spec) if not any(c.range_warp_specializes)
    ]
    assert {c.num_warps for c in plain if c.block_sizes[0] == 128} == {8}


def test_specialized_loops_keep_to_four_stages_on_sm90() -> None:
    """Triton 3.6 computed NaN for warp-specialized sm_90 loops with 5+ stages (bmm
    16x1024^3 at 128x128x64 x 5 / 6 stages, 128x256x32 x 6 / 8); 3-4 stages were exact. The
    ranked pipelines never offer more, and a user's config is repaired with a message."""
    spec = _bound(SM90, m=1024, k=1024, n=1024).config_spec
    specialized = [c for c in pipeline_configs(spec) if any(c.range_warp_specializes)]
    assert specialized and all((c.num_stages or 0) <= 4 for c in specialized)
    assert any(c.num_stages == 4 for c in specialized)  # the cap, not fewer, where it fits
    wanted = specialized[0].replace(num_stages=6)
    with pytest.warns(UserWarning, match=r"num_stages=6 with a warp-specialized loop .*using 4"):
        plan = spec.resolve(wanted)
    assert plan.num_stages == 4
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILECRAFT_STRICT", "1")
        with pytest.raises(ConfigError, match="num_stages=6"):
            spec.resolve(wanted)
    plain = specialized[0].replace(num_stages=6, range_warp_specializes=[])
    assert spec.resolve(plain, warn=False).num_stages == 6  # only specialized loops


def _heldout_spec(case_name: str, target: Target = SM90) -> Any:
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT[case_name]
    kernel = case.kernels[0]
    args = case.make_inputs(case.gpu_shapes[0], "meta", 0)
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target).config_spec


def test_computed_left_operand_loads_are_not_descriptors_on_sm90() -> None:
    """tril(a) @ b (``where(mask, a[tm, tk], 0)`` as the left operand) came out wrong with
    descriptor loads on the H200 (Triton 3.6): its loads are pointers on sm_9x, its store may
    still be a descriptor, and its default is a pipeline of pointer loads at wide tiles."""
    spec = _heldout_spec("trmm_lower")
    loads, store = spec.space.indexing_choices[:2], spec.space.indexing_choices[2]
    assert all(TMA not in c for c in loads) and TMA in store
    assert spec.space.off_descriptors == {0, 1}
    config = spec.default()
    assert config.indexing[:2] == ("pointer", "pointer") and list(config.block_sizes) == [
        128,
        256,
        64,
    ]
    # a plain matmul (both operands loaded as they are) keeps its descriptors
    assert _bound(SM90).config_spec.space.off_descriptors == set()


def test_computed_right_operand_keeps_the_plain_default() -> None:
    """An int8 weight dequantized in the k loop is written to shared memory by the threads each
    step: the TMA pipelines measured 1.1-1.8x slower than the plain pointer-fed default. (Kept
    in the loop here; by default it is computed by a pre-pass, below.)"""
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT["int8_weight_gemm"]
    kernel = tc.kernel(static_shapes=True, hoist_operands=False)(case.kernels[0].fn)
    args = case.make_inputs(case.gpu_shapes[0], "meta", 0)
    spec = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=SM90).config_spec
    assert TMA in spec.space.indexing_choices[1]  # allowed (the search may try it) ...
    assert pipeline_configs(spec) == []  # ... but no pipeline default
    assert spec.default() == spec.plain_default()


def test_a_hoisted_operand_makes_the_matmul_a_tma_pipeline() -> None:
    """With its weight dequantized by a pre-pass (ir/hoist.py), the int8-weight GEMM's k loop
    loads plain bf16 tiles: its default streams both operands by descriptors."""
    spec = _heldout_spec("int8_weight_gemm")
    assert len(spec.loops) == 2 and spec.loops[0].prepass_for == spec.loops[1].index
    config = spec.default()
    matmul_loads = [n.attrs["mem_slot"] for n in spec.loops[1].walk() if n.op is Op.LOAD]
    assert all(config.indexing[slot] == TMA for slot in matmul_loads), config


def test_vector_loads_outside_the_dot_loop_stay_pointers() -> None:
    """fp8 GEMM's row and column scales (1-D, read once in the epilogue) load by pointer in its
    pipeline default, its K-major weight by a permuted descriptor (H200, 1000x1536x1000:
    0.0164 ms with descriptor scales, 0.0135 with pointer ones)."""
    from examples.fp8_quant import fp8_gemm

    a = torch.empty(4096, 7168, dtype=torch.float8_e4m3fn)
    b = torch.empty(4096, 7168, dtype=torch.float8_e4m3fn).t()
    scale_a, scale_b = torch.empty(4096), torch.empty(4096)
    args = (a, b, scale_a, scale_b)
    spec = BoundKernel(fp8_gemm, fp8_gemm.bind_arguments(args, {}), target=SM90).config_spec
    assert spec.default().indexing == (TMA, TMA, "pointer", "pointer", TMA)


# a loop whose loads Triton stages in shared memory when its loop has its own stages
global_sum_of_squares = sum_of_squares


def _sum_spec(target: Target = SM90) -> Any:
    x = torch.empty(32000, 4096, dtype=torch.bfloat16, device="meta")
    bound = BoundKernel(
        global_sum_of_squares, global_sum_of_squares.bind_arguments((x,), {}), target=target
    )
    return bound.config_spec


_STAGED = tc.Config(block_sizes=[64, 128], num_warps=8, pid_type="persistent_blocked")


def test_shared_memory_counts_loads_of_loops_with_their_own_stages() -> None:
    """A [64, 128] bf16 tile (16 KiB) in a persistent loop: none staged by num_stages, one
    buffer at range_num_stages 2, two at 3 or unrolled twice; none on gfx942 (its pipeliner
    keeps such loads in registers); a [512, 128] tile unrolled 4 times does not fit an SM."""
    spec = _sum_spec()
    shared = [
        spec.estimated_shared_bytes(spec.normalize(c, warn=False))
        for c in (
            _STAGED.replace(num_stages=4),
            _STAGED.replace(range_num_stages=[2]),
            _STAGED.replace(range_num_stages=[3]),
            _STAGED.replace(range_num_stages=[2], range_unroll_factors=[2]),
        )
    ]
    assert shared == [0, 16384, 32768, 32768]
    amd = _sum_spec(Target.parse("hip:gfx942"))
    assert amd.estimated_shared_bytes(_STAGED.replace(range_num_stages=[3])) == 0
    huge = _STAGED.replace(block_sizes=[512, 128], num_warps=16, range_num_stages=[2])
    huge = spec.normalize(huge.replace(range_unroll_factors=[4]), warn=False)
    assert spec.estimated_shared_bytes(huge) > SM90.limits.max_shared_bytes


def test_configs_whose_staged_loads_do_not_fit_are_never_tried() -> None:
    """Random configs are fitted (their loops' stages dropped first), and the static check
    rejects one given by hand before anything compiles."""
    import random

    from tilecraft.autotune.candidates import static_check

    spec = _sum_spec()
    limit = SM90.limits.max_shared_bytes
    rng = random.Random(0)
    configs = [spec.random(rng) for _ in range(300)]
    assert any(any(c.range_num_stages) for c in configs)
    assert all(spec.estimated_shared_bytes(c) <= limit for c in configs)
    huge = _STAGED.replace(block_sizes=[512, 128], num_warps=16, range_num_stages=[2])
    huge = spec.normalize(huge.replace(range_unroll_factors=[4]), warn=False)
    assert "shared memory" in (static_check(spec, huge) or "")


@pytest.mark.crosscompile
def test_staged_load_estimate_matches_ptxas() -> None:
    """The estimate is what sm_90 allocates for the staged tiles (beside 4 KiB of the
    reduction's scratch)."""
    from tilecraft.tools.check import check_kernel

    x = torch.empty(32000, 4096, dtype=torch.bfloat16, device="meta")
    spec = _sum_spec()
    configs = [_STAGED.replace(range_num_stages=[s]) for s in (2, 3)]
    rows = check_kernel(global_sum_of_squares, (x,), [SM90], lambda b: configs)
    for config, row in zip(configs, rows, strict=True):
        estimate = spec.estimated_shared_bytes(spec.normalize(config, warn=False))
        assert row.report is not None and row.report.shared_bytes is not None
        assert estimate <= row.report.shared_bytes <= estimate + 8192, (config, row.report)


def test_a_gathered_dot_operand_adds_a_layout_buffer() -> None:
    """T5 relative-bias attention adds a bias gathered by computed buckets to its scores: at
    [256, 64] x 2 stages Triton needed 294912 B (cross-compiled for sm_90), over the 232448 an
    SM has, and the default did not launch; the model counted 229376. One more buffer of the
    gathered tile (65536 B) matches it, and the default now fits (212992 at [128, 64] x 3,
    predicted and compiled alike)."""
    from benchmarks.default_change import case_calls
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT["t5_relative_bias_attention"]
    kernel, args = case_calls(case, case.gpu_shapes[0], "meta")[0]
    spec = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=SM90).config_spec
    wide = spec.default().replace(block_sizes=[256, 64], num_stages=2)
    assert spec.estimated_shared_bytes(wide) == 294912
    default = spec.default()
    assert default.block_sizes[0] == 128 and spec.estimated_shared_bytes(default) == 212992

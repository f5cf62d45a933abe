"""Tiles of unequal work (ir/tile_work.py, config/tile_schedule.py, codegen/grid.py): which grid
dims run longer inner loops at later tiles, the longest-first launch order codegen emits for
them (numerics in the interpreter against eager PyTorch), the schedule model that prices a
static persistent split against the hardware's list schedule, and the sm_90 defaults it picks."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

import tilecraft as tc
from tilecraft.config.pipelines import legal_plan, pipeline_configs, pipeline_cost
from tilecraft.config.tile_schedule import busiest_sm, launch_tile
from tilecraft.ir.tile_work import growing_dims, tile_trips, work_trends
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.gen_kernels.heldout_dots import attn_bwd_dkdv as attention_bwd_dkdv  # noqa: E402
from benchmarks.gen_kernels.heldout_dots import trmm_lower  # noqa: E402
from examples.attention import attention  # noqa: E402

SM90 = Target.parse("cuda:90")


@tc.kernel(static_shapes=True)
def causal_cumsum(x: torch.Tensor) -> torch.Tensor:
    """``cumsum(x, 0)`` as a masked lower-triangular matmul: row block ``tm`` reads the rows up
    to its end, so later blocks do more work."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        acc = tc.zeros([tm, n], dtype=torch.float32)
        for tk in tc.tile(tm.end):
            keep = torch.where(tk.index[None, :] <= tm.index[:, None], 1.0, 0.0)
            acc = tc.dot(keep, x[tk, :], acc=acc)
        out[tm, :] = acc
    return out


@tc.kernel(static_shapes=True)
def reverse_cumsum(x: torch.Tensor) -> torch.Tensor:
    """Sums of the rows from each row on: row block ``tm`` reads from its begin to the end, so
    later blocks do less work (already longest first)."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        acc = tc.zeros([tm, n], dtype=torch.float32)
        for tk in tc.tile(tm.begin, m):
            keep = torch.where(tk.index[None, :] >= tm.index[:, None], 1.0, 0.0)
            acc = tc.dot(keep, x[tk, :], acc=acc)
        out[tm, :] = acc
    return out


def _loops(kernel: tc.Kernel, *args: object, target: Target = SM90) -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)


def _attention(causal: bool, bh: int = 64, s: int = 4096, d: int = 128) -> BoundKernel:
    q = torch.empty(bh, s, d, dtype=torch.bfloat16)
    return _loops(attention, q, q, q, causal)


def test_growing_dims_follow_the_inner_loop_bounds() -> None:
    x = torch.empty(256, 32)
    assert [growing_dims(lp) for lp in _loops(causal_cumsum, x).config_spec.loops] == [[0]]
    assert [growing_dims(lp) for lp in _loops(reverse_cumsum, x).config_spec.loops] == [[]]
    assert [growing_dims(lp) for lp in _attention(True).config_spec.loops] == [[1]]
    assert [growing_dims(lp) for lp in _attention(False).config_spec.loops] == [[]]


def test_tile_trips_of_causal_attention() -> None:
    """The keys before the query block (no mask), then the diagonal block."""
    (loop,) = _attention(True).config_spec.loops
    trips = tile_trips(loop, 1, 128)
    assert trips is not None and len(trips) == 32
    assert trips[0] == [0, 128] and trips[5] == [640, 128] and trips[-1] == [3968, 128]
    assert tile_trips(loop, 0, 1) == [[None, None]] * 64  # the head dim: bounds not on it


@pytest.mark.parametrize("kernel", [causal_cumsum, reverse_cumsum])
@pytest.mark.parametrize("pid_type", ["flat", "persistent_interleaved", "persistent_blocked"])
def test_longest_first_order_keeps_numerics(kernel: tc.Kernel, pid_type: str) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(200, 32, generator=gen)  # 7 row blocks of 32, the last partial
    config = tc.Config(block_sizes=[32, 32], pid_type=pid_type)
    bound = kernel.bind((x,))
    got = bound.run(bound.compile_config(config), x)
    want = torch.cumsum(x, 0) if kernel is causal_cumsum else torch.cumsum(x.flip(0), 0).flip(0)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    code = bound.to_triton_code(config)
    reversed_line = "pid_0 = tl.cdiv(200, _BLOCK_0) - 1 - pid_0"
    reversed_static = "pid_0 = 7 - 1 - pid_0"
    has_reversal = reversed_line in code or reversed_static in code
    assert has_reversal == (kernel is causal_cumsum)


def test_launch_tile_visits_every_tile_once() -> None:
    for counts, order, group in (([5, 7], [0, 1], 3), ([4, 6, 3], [1, 2, 0], 2), ([9], [0], 1)):
        total = 1
        for c in counts:
            total *= c
        tiles = {tuple(launch_tile(v, counts, order, group)) for v in range(total)}
        assert len(tiles) == total
        assert all(all(0 <= t[d] < counts[d] for d in range(len(counts))) for t in tiles)


def test_static_split_of_a_triangle_is_slower_than_the_list_schedule() -> None:
    """With equal tiles both strategies take ceil(tiles / SMs) tiles; with a triangle the
    interleaved static split leaves an SM with more than its share."""
    spec = _attention(True).config_spec
    flat = legal_plan(spec, spec.default())
    assert flat is not None and flat.pid_type == "flat"
    persistent = legal_plan(spec, spec.default().replace(pid_type="persistent_interleaved"))
    assert persistent is not None
    equal = [1.0] * 300
    assert busiest_sm(equal, flat, 132) == busiest_sm(equal, persistent, 132) == 3.0
    triangle = [float(i % 32 + 1) for i in range(2048)]
    triangle.sort(reverse=True)
    share = sum(triangle) / 132
    assert busiest_sm(triangle, flat, 132) < 1.02 * share
    assert busiest_sm(triangle, persistent, 132) > 1.05 * share


def test_causal_attention_defaults_to_the_hardware_schedule() -> None:
    """sm_90: causal attention's tiles differ by up to 32x, so the default is a flat grid
    (H200, 2x32x4096 d 64: 0.40 ms flat vs 0.60 persistent, both longest first); non-causal
    attention's equal tiles keep the persistent program."""
    spec = _attention(True).config_spec
    ranked = pipeline_configs(spec)
    assert ranked[0].pid_type == "flat"
    costs = {c.pid_type: pipeline_cost(spec, legal_plan(spec, c)) for c in ranked}  # type: ignore[arg-type]
    assert costs["flat"] < costs["persistent_interleaved"]
    full = _attention(False).config_spec
    ranked_full = pipeline_configs(full)
    assert ranked_full[0].pid_type == "persistent_interleaved"
    same = {c.pid_type: pipeline_cost(full, legal_plan(full, c)) for c in ranked_full}  # type: ignore[arg-type]
    assert same["flat"] == same["persistent_interleaved"]


HAS_CUDA = torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("d", [64, 128])
def test_causal_attention_default_on_gpu(d: int) -> None:
    """The flat, longest-first causal default computes causal SDPA; so does the persistent
    longest-first order (the same tiles, a static split)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        torch.randn(8, 2048, d, device="cuda", generator=gen, dtype=torch.bfloat16)
        for _ in range(3)
    )
    want = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=True
    )
    bound = attention.bind((q, k, v, True))
    default = bound.config_spec.default()
    assert default.pid_type == "flat"
    for config in (default, default.replace(pid_type="persistent_interleaved")):
        out = bound.run(bound.compile_config(config), q, k, v, True)
        torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
    ragged = torch.randn(3, 1000, d, device="cuda", generator=gen, dtype=torch.bfloat16)
    got = attention(ragged, ragged, ragged, True).float()
    ref = torch.nn.functional.scaled_dot_product_attention(
        ragged.float(), ragged.float(), ragged.float(), is_causal=True
    )
    torch.testing.assert_close(got, ref, rtol=2e-2, atol=2e-2)


def test_longest_first_with_dynamic_shapes() -> None:
    """With dynamic shapes the tile count is computed in the kernel; the order still reverses
    and two sizes through one specialization compute cumsum."""
    dynamic = tc.kernel(causal_cumsum.fn, static_shapes=False)
    config = tc.Config(block_sizes=[32, 32])
    gen = torch.Generator().manual_seed(1)
    for rows in (96, 150):
        x = torch.randn(rows, 16, generator=gen)
        bound = dynamic.bind((x,))
        (loop,) = bound.config_spec.loops
        assert growing_dims(loop) == [0]
        code = bound.to_triton_code(config)
        assert "pid_0 = tl.cdiv(" in code and "- 1 - pid_0" in code
        got = bound.run(bound.compile_config(config), x)
        torch.testing.assert_close(got, torch.cumsum(x, 0), rtol=1e-4, atol=1e-4)


def test_trmm_computes_tril_matmul() -> None:
    gen = torch.Generator().manual_seed(2)
    a, b = torch.randn(96, 96, generator=gen), torch.randn(96, 48, generator=gen)
    bound = trmm_lower.bind((a, b))
    config = tc.Config(block_sizes=[32, 16, 32])
    got = bound.run(bound.compile_config(config), a, b)
    torch.testing.assert_close(got, a.tril() @ b, rtol=1e-4, atol=1e-4)
    assert "pid_0 = 3 - 1 - pid_0" in bound.to_triton_code(config)  # row blocks longest first


@pytest.mark.crosscompile
def test_masked_left_operand_loads_count_in_shared_memory() -> None:
    """``where(mask, a[tm, tk], 0)`` is a computed left operand, but its load is staged in
    shared memory like a direct one: the sm_90 default of tril(a) @ b at 4096^2 must fit (it
    asked for 5 stages, 245840 B of 232448, when such loads counted nothing)."""
    from tilecraft.tools.crosscompile import CompileJob
    from tilecraft.tools.worker import run_compile_jobs

    a = torch.empty(4096, 4096, dtype=torch.bfloat16)
    bound = _loops(trmm_lower, a, a)
    spec = bound.config_spec
    config = spec.default()
    # a pipeline of pointer loads (descriptors miscompile here: test_pipelines.py)
    assert config.indexing[:2] == ("pointer", "pointer") and config.num_stages == 4
    five = config.replace(num_stages=5)
    assert spec.estimated_shared_bytes(five) > SM90.limits.max_shared_bytes
    _, _, traced, generated = bound.generate(config)
    (report,) = run_compile_jobs([CompileJob.of(generated[0], traced.loops[0], SM90)], 600.0)
    assert report.ok and report.fits, (report.error, report.shared_bytes)
    predicted = spec.estimated_shared_bytes(config)
    assert abs(predicted - (report.shared_bytes or 0)) < 0.02 * predicted


def _bwd_inputs(bh: int, s: int, d: int, dtype: torch.dtype = torch.float32) -> tuple:
    gen = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(bh, s, d, generator=gen).to(dtype) for _ in range(4))
    scores = (q.float() @ k.float().transpose(-1, -2) / math.sqrt(d)).masked_fill(
        ~torch.ones(s, s, dtype=torch.bool).tril(), float("-inf")
    )
    out = torch.softmax(scores, -1) @ v.float()
    return q, k, v, do, torch.logsumexp(scores, -1), (out * do.float()).sum(-1)


def test_attention_backward_dkdv_numerics_and_trend() -> None:
    args = _bwd_inputs(2, 100, 64)
    q, k, v, do = (t.clone().requires_grad_(True) for t in args[:4])
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.backward(do)
    bound = attention_bwd_dkdv.bind(args)
    (loop,) = bound.config_spec.loops
    assert work_trends(loop) == {1: -1} and growing_dims(loop) == []
    config = tc.Config(block_sizes=[32, 32])
    dk, dv = bound.run(bound.compile_config(config), *args)
    torch.testing.assert_close(dk, k.grad, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(dv, v.grad, rtol=1e-3, atol=1e-3)
    assert " - 1 - pid_1" not in bound.to_triton_code(config)  # already longest first


@pytest.mark.crosscompile
def test_dot_kernel_that_spills_shrinks_its_tiles_not_adds_warps() -> None:
    """The dk/dv loop holds two [tn, d] accumulators beside [tm, tn] scores: at 128 x 64 it
    spills at 8 warps, and 32 warps (what a pointwise kernel would get) spilled 952 B a thread
    (sm_90). Dot kernels stop at 8 warps and halve their grid tile instead; the shrinking work
    makes the default a flat grid; no specialized loop (several dots)."""
    from tilecraft.tools.crosscompile import CompileJob
    from tilecraft.tools.worker import run_compile_jobs

    e = torch.empty
    bf, f32 = torch.bfloat16, torch.float32
    args = (
        *(e(32, 4096, 128, dtype=bf) for _ in range(4)),
        e(32, 4096, dtype=f32),
        e(32, 4096, dtype=f32),
    )
    bound = _loops(attention_bwd_dkdv, *args)
    spec = bound.config_spec
    plain = spec.plain_default()
    assert plain.num_warps == 8 and plain.block_sizes[0] == 64
    config = spec.default()
    assert config.pid_type == "flat" and not any(config.range_warp_specializes)
    plan = spec.resolve(config)
    assert not plan.resources.spills
    _, _, traced, generated = bound.generate(config)
    (report,) = run_compile_jobs([CompileJob.of(generated[0], traced.loops[0], SM90)], 600.0)
    assert report.ok and report.fits and report.spills == 0, (report.error, report.spills)

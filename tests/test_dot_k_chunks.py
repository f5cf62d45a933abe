"""fp32 FMA dots over a whole K dim run in K chunks (codegen/dot_chunks.py), and rolled
reductions of a dot's output reduce each chunk into a row accumulator (codegen/row_reductions.py):
the generated code, numerics against eager (ties, NaN, a K that is not a multiple of the chunk,
an operand scaled by a value off K), the cases left whole, and sm_90 registers of the pattern
that spilled (a k-means assignment whose whole-K operands filled the register file)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s41a import kmeans_assign_whole_k
from tests.cross_targets import TARGETS
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

SM90 = TARGETS[0]


# the held-out k-means assignment: whole-K points against all centroids, amin and argmin
nearest = kmeans_assign_whole_k.fn


def nearest_reference(x: torch.Tensor, centroids: torch.Tensor) -> tuple[Any, Any]:
    d2 = (x * x).sum(-1)[:, None] - 2.0 * (x @ centroids.t()) + (centroids * centroids).sum(-1)
    return d2.amin(-1), d2.argmin(-1)


def cosine_rows(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of a against every row of b, both normalized: the best similarity's total over
    b (a sum of the dot's output) and its largest value."""
    m, _ = a.size()
    total = torch.empty([m], dtype=torch.float32, device=a.device)
    top = torch.empty([m], dtype=torch.float32, device=a.device)
    for tm in tc.tile(m):
        x = a[tm, :]
        x = x / x.norm(dim=-1, keepdim=True)
        y = b[:, :]
        y = y / y.norm(dim=-1, keepdim=True)
        sim = x @ y.t()
        total[tm] = sim.sum(-1)
        top[tm] = sim.amax(-1)
    return total, top


def attention_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T) v: the second dot's K is the softmax's dim (not elementwise along it)."""
    m, d = q.size()
    out = torch.empty([m, d], dtype=torch.float32, device=q.device)
    for tm in tc.tile(m):
        p = torch.softmax(q[tm, :] @ k[:, :].t(), dim=-1)
        out[tm, :] = p @ v[:, :]
    return out


ROLLED = tc.Config(block_sizes=[16], reduction_loops=[None, 16], num_warps=4)


def _code(fn: Any, args: tuple[Any, ...], config: tc.Config, **options: Any) -> str:
    kernel = tc.kernel(fn, static_shapes=True, **options)
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=SM90).to_triton_code(config)


def test_a_whole_k_fp32_dot_runs_in_k_chunks_and_its_rolled_argmin_in_rows() -> None:
    args = (torch.empty(64, 100, device="meta"), torch.empty(48, 100, device="meta"))
    code = _code(nearest, args, ROLLED)
    loop = re.search(r"for koffset_\d+ in tl\.range\(0, 100, 32\):", code)
    assert loop is not None, code
    assert re.search(r"kmask_\d+ = kindex_\d+ < 100", code), code  # 100 is not 4 chunks of 32
    assert re.search(r"tl\.dot\(\w+, \w+, acc=v_acc\w*, input_precision='ieee'\)", code), code
    # one (best, index) tuple per centroid chunk serves both amin and argmin; rows carried
    assert code.count("_tc_argmin_nan)") == 1 and "_tc_min_nan)" not in code, code
    assert re.search(r"\w+_row\w* = tl\.full\(\[_BLOCK_0\], float\('inf'\)", code), code
    tf32 = _code(nearest, args, ROLLED, dot_precision="tf32")
    assert "koffset" not in tf32 and "input_precision='tf32'" in tf32  # tensor cores: whole K


def test_an_operand_reduced_along_k_keeps_its_dot_whole() -> None:
    args = tuple(torch.empty(32, 64, device="meta") for _ in range(3))
    code = _code(attention_rows, args, tc.Config(block_sizes=[16], reduction_loops=[None, None]))
    assert code.count("tl.dot(") == 2 and code.count("koffset") == 2, code  # q k^T only


@pytest.mark.parametrize("config", [ROLLED, tc.Config(block_sizes=[32], num_warps=4)])
def test_nearest_centroid_matches_eager_with_ties_and_nan(config: tc.Config, device: str) -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(70, 100, generator=g)
    x[5, 17] = float("nan")  # every distance NaN: amin NaN, argmin the first
    half = torch.randn(24, 100, generator=g)
    centroids = torch.cat([half, half])  # each best twice, in different chunks: the first wins
    x, centroids = x.to(device), centroids.to(device)
    kernel = tc.kernel(nearest, static_shapes=True, config=config)
    dist, assign = kernel(x, centroids)
    want_dist, want_assign = nearest_reference(x, centroids)
    torch.testing.assert_close(dist, want_dist, rtol=1e-4, atol=1e-3, equal_nan=True)
    assert torch.equal(assign, want_assign)
    assert assign.max() < 24 and assign[5] == 0


def test_scaled_operands_and_a_rolled_sum_of_the_dot_match_eager(device: str) -> None:
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(40, 80, generator=g), torch.randn(56, 80, generator=g)
    a[3] = float("nan")
    a, b = a.to(device), b.to(device)
    config = tc.Config(block_sizes=[16], reduction_loops=[None, 16], num_warps=4)
    total, top = tc.kernel(cosine_rows, static_shapes=True, config=config)(a, b)
    sim = torch.nn.functional.normalize(a, dim=-1) @ torch.nn.functional.normalize(b, dim=-1).t()
    torch.testing.assert_close(total, sim.sum(-1), rtol=1e-4, atol=1e-4, equal_nan=True)
    torch.testing.assert_close(top, sim.amax(-1), rtol=1e-5, atol=1e-5, equal_nan=True)


def test_attention_whose_second_dot_stays_whole_matches_eager(device: str) -> None:
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(33, 64, generator=g).to(device) for _ in range(3))
    out = tc.kernel(attention_rows, static_shapes=True)(q, k, v)
    torch.testing.assert_close(out, torch.softmax(q @ k.t(), -1) @ v, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "config",
    [
        tc.Config(block_sizes=[128], reduction_loops=[None, 128], num_warps=8),
        tc.Config(block_sizes=[32], reduction_loops=[None, None], num_warps=8),
    ],
)
def test_k_chunked_fma_dots_do_not_spill_on_sm90(config: tc.Config) -> None:
    """Whole K, a k-means assignment over 64-wide points spilled 5.6 KB a thread at [32] x 256
    centroids (8 warps); chunked, neither that nor 128 x 128 spills."""
    args = (torch.empty(1 << 20, 64, device="meta"), torch.empty(256, 64, device="meta"))
    kernel = tc.kernel(nearest, static_shapes=True)
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=SM90)
    _, _, traced, kernels = bound.generate(bound.config_spec.normalize(config, warn=False))
    (report,) = run_compile_jobs([CompileJob.of(kernels[0], traced.loops[0], SM90)], 300)
    assert report.ok, report.error
    assert report.spills == 0 and report.registers is not None and report.registers <= 255


def test_fma_dot_defaults_give_each_thread_64_outputs() -> None:
    """An FMA dot's thread reads r + c operand values for r x c multiply-adds: the default's
    warps leave each thread 64 of the accumulator (config/fma_tiles.py; at 8 warps, 32)."""
    args = (torch.empty(1 << 20, 64, device="meta"), torch.empty(256, 64, device="meta"))
    kernel = tc.kernel(nearest, static_shapes=True)
    config = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=SM90).config_spec.default()
    rows = config.block_sizes[0]
    assert rows * 256 // (config.num_warps * 32) >= 64, config

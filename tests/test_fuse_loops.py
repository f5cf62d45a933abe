"""Sibling loops over one range fused into one (``ir/fuse_loops.py``), the copies of one source
loop sharing a block size (``frontend/loop_nest.block_sym``), and the split of a loop whose
accumulators are summed in a loop nested in it (``ir/split._nested_accumulator``): which loops
fuse and which must not, interpreter numerics against eager PyTorch, the default's split at a
GPU shape, cross-compiling for sm_90 and gfx942, and the H200."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s19b import (
    CONV_WIDTH,
    conv1d_depthwise_bwd_weight,
    conv1d_depthwise_bwd_weight_reference,
)
from tests.cross_targets import assert_cross_compiles
from tilecraft.ir.deferred_sums import deferrable_sums
from tilecraft.ir.nodes import DeviceLoop, Op
from tilecraft.ir.split import SplitSite, split_site
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

TAPS = CONV_WIDTH
conv_weight_grad = conv1d_depthwise_bwd_weight  # four taps of a batch x time reduction
conv_weight_grad_reference = conv1d_depthwise_bwd_weight_reference


@tc.kernel(static_shapes=True)
def sum_and_squares(x: torch.Tensor) -> torch.Tensor:
    """Two loops over the rows, written one after the other with one block size: the sum and
    the sum of squares of each column."""
    m, n = x.size()
    out = torch.empty([2, n], dtype=torch.float32, device=x.device)
    block = tc.register_block_size(8, 64)
    for tn in tc.tile(n):
        s = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m, block_size=block):
            s = s + x[tm, tn].to(torch.float32).sum(dim=0)
        out[0, tn] = s
        q = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m, block_size=block):
            v = x[tm, tn].to(torch.float32)
            q = q + (v * v).sum(dim=0)
        out[1, tn] = q
    return out


@tc.kernel(static_shapes=True)
def mean_then_variance(x: torch.Tensor) -> torch.Tensor:
    """The second loop needs the first one's result: never fused."""
    m, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        for k in tc.static_range(2):
            if k == 0:
                s = tc.zeros([tn], dtype=torch.float32)
                for tm in tc.tile(m):
                    s = s + x[tm, tn].to(torch.float32).sum(dim=0)
                mean = s / m
            else:
                q = tc.zeros([tn], dtype=torch.float32)
                for tm in tc.tile(m):
                    d = x[tm, tn].to(torch.float32) - mean[None, :]
                    q = q + (d * d).sum(dim=0)
                out[tn] = q / m
    return out


@tc.kernel(static_shapes=True)
def write_then_read(x: torch.Tensor) -> torch.Tensor:
    """The second copy reads what the first one wrote (a running buffer): never fused."""
    m, n = x.size()
    out = torch.zeros([m, n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        for _ in tc.static_range(2):
            for tm in tc.tile(m):
                out[tm, tn] = out[tm, tn] + x[tm, tn].to(torch.float32) * 2.0
    return out


@tc.kernel(static_shapes=True)
def different_ranges(x: torch.Tensor) -> torch.Tensor:
    """Copies over different ranges keep their own loops (and block sizes)."""
    m, n = x.size()
    out = torch.empty([2, n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        for k in tc.static_range(2):
            acc = tc.zeros([tn], dtype=torch.float32)
            for tm in tc.tile(m // (k + 1)):
                acc = acc + x[tm, tn].to(torch.float32).sum(dim=0)
            out[k, tn] = acc
    return out


@tc.kernel(static_shapes=True)
def three_nests(x: torch.Tensor) -> torch.Tensor:
    """Three loop nests over batch and time written three ways (one multi-dim tile, two nested
    tiles, nested tiles under a branch) with shared block sizes: fused as far as they go."""
    b, s, c = x.size()
    out = torch.empty([3, c], dtype=torch.float32, device=x.device)
    bb = tc.register_block_size(1, 8)
    bs = tc.register_block_size(8, 64)
    for tch in tc.tile(c):
        a = tc.zeros([tch], dtype=torch.float32)
        for tb, tt in tc.tile([b, s], block_size=[bb, bs]):
            a = a + torch.sum(x[tb, tt, tch].to(torch.float32), dim=[0, 1])
        out[0, tch] = a
        q = tc.zeros([tch], dtype=torch.float32)
        for tb in tc.tile(b, block_size=bb):
            for tt in tc.tile(s, block_size=bs):
                v = x[tb, tt, tch].to(torch.float32)
                q = q + torch.sum(v * v, dim=[0, 1])
        out[1, tch] = q
        m = tc.full([tch], float("-inf"), dtype=torch.float32)
        for tb in tc.tile(b, block_size=bb):
            if tb.begin >= 0:
                for tt in tc.tile(s, block_size=bs):
                    m = torch.maximum(m, torch.amax(x[tb, tt, tch].to(torch.float32), dim=[0, 1]))
        out[2, tch] = m
    return out


def _bind(kernel: tc.Kernel, *args: torch.Tensor, target: Target | None = None) -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)


def _loop(kernel: tc.Kernel, *args: torch.Tensor) -> DeviceLoop:
    _, _, traced, _ = _bind(kernel, *args).generate(tc.Config())
    return traced.loops[0]


def _top_loops(loop: DeviceLoop) -> int:
    return sum(1 for n in loop.body if n.op is Op.LOOP)


def _conv_inputs(shape: tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x, dy = (torch.randn(shape, generator=g).to(torch.bfloat16) for _ in range(2))
    return x, dy


def test_static_range_copies_fuse_into_one_nest_reading_dy_once() -> None:
    x, dy = _conv_inputs((2, 20, 12))
    loop = _loop(conv_weight_grad, x, dy)
    assert _top_loops(loop) == 1
    outer = next(n for n in loop.body if n.op is Op.LOOP)
    assert len(outer.attrs["carried"]) == TAPS
    assert len([s for s in loop.syms if s.kind.value == "block"]) == 3  # tch, tb, tt
    loads = [n.attrs["tensor"].name for n in loop.walk() if n.op is Op.LOAD]
    assert sorted(loads) == ["dy"] + ["x"] * TAPS  # dy's copies merged
    stores = [n for n in loop.body if n.op is Op.STORE]
    assert len(stores) == TAPS and loop.body.index(outer) < loop.body.index(stores[0])
    assert len(_bind(conv_weight_grad, x, dy).config_spec.default().block_sizes) == 3


def test_loops_sharing_a_registered_block_size_fuse() -> None:
    x = torch.randn(50, 24)
    assert _top_loops(_loop(sum_and_squares, x)) == 1
    config = tc.Config(block_sizes=[16, 8])
    kernel = tc.kernel(sum_and_squares.fn, static_shapes=True, config=config)
    want = torch.stack([x.sum(0), (x * x).sum(0)])
    torch.testing.assert_close(kernel(x), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("blocks", [[2, 16, 8], [4, 32, 4], [1, 8, 16]])
def test_nests_written_differently_fuse_and_match_eager(blocks: list[int]) -> None:
    x = torch.randn(3, 37, 20)
    loop = _loop(three_nests, x)
    assert _top_loops(loop) == 1
    outer = next(n for n in loop.body if n.op is Op.LOOP)
    assert [n.op for n in outer.body or []].count(Op.LOOP) == 1  # the branch keeps its loop
    kernel = tc.kernel(three_nests.fn, static_shapes=True, config=tc.Config(block_sizes=blocks))
    want = torch.stack([x.sum((0, 1)), (x * x).sum((0, 1)), x.amax((0, 1))])
    torch.testing.assert_close(kernel(x), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    ("kernel", "want"),
    [
        (mean_then_variance, lambda x: x.var(0, unbiased=False)),
        (write_then_read, lambda x: 4.0 * x),
        (different_ranges, lambda x: torch.stack([x.sum(0), x[: x.shape[0] // 2].sum(0)])),
    ],
)
def test_dependent_or_unequal_loops_stay_apart_and_match_eager(kernel: tc.Kernel, want) -> None:
    x = torch.randn(45, 24)
    assert _top_loops(_loop(kernel, x)) == 2
    torch.testing.assert_close(kernel(x), want(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "config",
    [
        tc.Config(block_sizes=[8, 1, 16]),
        tc.Config(block_sizes=[16, 1, 8], split_reductions=[3]),
        tc.Config(block_sizes=[8, 2, 32], split_reductions=[2]),
        tc.Config(block_sizes=[8, 2, 32], split_reductions=[2], deferred_sums=False),
    ],
)
def test_fused_conv_weight_grad_matches_eager(config: tc.Config) -> None:
    x, dy = _conv_inputs((3, 37, 20))
    kernel = tc.kernel(conv_weight_grad.fn, static_shapes=True, config=config)
    want = conv_weight_grad_reference(x, dy)
    torch.testing.assert_close(kernel(x, dy), want, rtol=1e-4, atol=1e-4)


def test_copies_over_run_time_extents_fuse_and_split() -> None:
    """With dynamic shapes the copies' extents are one size argument: still one range."""
    config = tc.Config(block_sizes=[8, 1, 16], split_reductions=[2])
    kernel = tc.kernel(conv_weight_grad.fn, static_shapes=False, config=config)
    for shape in ((3, 37, 20), (2, 50, 24)):
        x, dy = _conv_inputs(shape)
        assert _top_loops(_loop(kernel, x, dy)) == 1
        torch.testing.assert_close(kernel(x, dy), conv_weight_grad_reference(x, dy))


def test_a_sum_over_batch_and_time_defers_whole_tiles_or_the_loops_own_dim() -> None:
    """``sum(dim=[0, 1])`` in the loop over time (time summed first as traced) may defer: the
    four taps' whole [batch, time, channel] tiles where they fit 32 fp32 a thread together,
    else each step sums batch and the time dim waits for the end of the loop."""
    x, dy = _conv_inputs((2, 20, 12))
    loop = _loop(conv_weight_grad, x, dy)
    inner = [n for n in loop.walk() if n.op is Op.LOOP][-1]
    assert inner.attrs["sym"] is loop.syms[2]  # the loop over time
    assert len(deferrable_sums(inner)) == TAPS
    cases = (
        ([8, 2, 16], True, 0),  # 4 x 256 elements: 32 a thread at one warp
        ([16, 2, 16], True, TAPS),  # 4 x 512: the batch sums stay
        ([16, 2, 16], False, 2 * TAPS),
    )
    for blocks, deferred, per_step in cases:
        config = tc.Config(block_sizes=blocks, num_warps=1, deferred_sums=deferred)
        code = _bind(conv_weight_grad, x, dy).generate(config)[1]
        assert _loop_body(code, "for offset_2 ").count("tl.sum(") == per_step, (blocks, code)
        got = _bind(conv_weight_grad, x, dy).run(
            _bind(conv_weight_grad, x, dy).compile_config(config), x, dy
        )
        torch.testing.assert_close(got, conv_weight_grad_reference(x, dy))


def _loop_body(code: str, header: str) -> str:
    """The lines of the generated loop that starts with ``header`` (by indentation)."""
    lines = code.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(header))
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return "\n".join(body)


def test_a_nest_that_sums_splits_and_the_default_fills_the_gpu() -> None:
    x, dy = _conv_inputs((2, 20, 12))
    site, why = split_site(_loop(conv_weight_grad, x, dy))
    assert isinstance(site, SplitSite), why
    assert [a.kind for a in site.accumulators] == ["sum"] * TAPS
    meta = tuple(torch.empty(8, 4096, 4096, dtype=torch.bfloat16, device="meta") for _ in "xy")
    default = _bind(conv_weight_grad, *meta, target=Target.parse("cuda:90")).config_spec.default()
    tiles = 4096 // default.block_sizes[0]
    assert tiles * default.split_reductions[0] >= 132  # channel tiles alone: under a wave
    assert default.block_sizes[1] * default.split_reductions[0] <= 8  # every share has a batch
    assert default.block_sizes[0] * 2 >= 256  # channel tiles read 256 bytes of each row
    assert default.split_reductions[0] == 8 and default.block_sizes[1] == 1  # conv_split_s21


def test_fused_split_cross_compiles() -> None:
    meta = tuple(torch.empty(8, 4096, 4096, dtype=torch.bfloat16, device="meta") for _ in "xy")
    config = tc.Config(block_sizes=[32, 2, 128], num_warps=8, split_reductions=[4])
    assert_cross_compiles(conv_weight_grad, meta, config)


@pytest.mark.gpu
def test_fused_conv_weight_grad_on_gpu() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    x, dy = (
        torch.randn(8, 4096, 1024, device="cuda", generator=g, dtype=torch.bfloat16) for _ in "xy"
    )
    want = conv_weight_grad_reference(x, dy)
    torch.testing.assert_close(conv_weight_grad(x, dy), want, rtol=1e-3, atol=1e-2)
    for split in (1, 4):
        config = tc.Config(block_sizes=[32, 1, 128], split_reductions=[split])
        kernel = tc.kernel(conv_weight_grad.fn, static_shapes=True, config=config)
        torch.testing.assert_close(kernel(x, dy), want, rtol=1e-3, atol=1e-2)

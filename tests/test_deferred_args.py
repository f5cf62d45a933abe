"""Deferred running arg-bests (``ir/`` and ``codegen/deferred_args.py``, the ``deferred_args``
knob): ``v, i = torch.min(x, dim=1); better = v < best; arg = where(better,
i + tk.begin, arg); best = where(better, v, best)`` keeps a best and an index a lane and reduces
once after the loop. What is recognized and what is left alone, the generated code, numerics in
the interpreter against ref mode and eager (ties, ragged tiles, NaN rows the user's code skips),
cross-compiles for cuda:90 / gfx942, and the GPU."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.ir.deferred_args import deferrable_args
from tilecraft.ir.nodes import Op, walk
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

HAS_CUDA = torch.cuda.is_available()


@tc.kernel(static_shapes=True)
def nearest(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each query row of q [N, 2] the nearest key of k [M, 2] (squared distance, index)."""
    n, m = q.size(0), k.size(0)
    dist = torch.empty([n], dtype=torch.float32, device=q.device)
    idx = torch.empty([n], dtype=torch.int64, device=q.device)
    for tq in tc.tile(n):
        qx, qy = q[tq, 0][:, None], q[tq, 1][:, None]
        best = tc.full([tq], float("inf"), dtype=torch.float32)
        arg = tc.zeros([tq], dtype=torch.int64)
        for tk in tc.tile(m):
            dx = qx - k[tk, 0][None, :]
            dy = qy - k[tk, 1][None, :]
            v, i = torch.min(dx * dx + dy * dy, dim=1)
            better = v < best
            arg = torch.where(better, i.to(torch.int64) + tk.begin, arg)
            best = torch.where(better, v, best)
        dist[tq] = best
        idx[tq] = arg
    return dist, idx


@tc.kernel(static_shapes=True)
def column_argmax(x: torch.Tensor) -> torch.Tensor:
    """The first row index of each column's max, over row tiles (``best < v`` spelled)."""
    m, n = x.size()
    out = torch.empty([n], dtype=torch.int64, device=x.device)
    for tn in tc.tile(n):
        best = tc.full([tn], -1.0, dtype=torch.float32)
        at = tc.zeros([tn], dtype=torch.int64)
        for tm in tc.tile(m):
            v, i = torch.max(x[tm, tn].to(torch.float32), dim=0)
            better = best < v
            at = torch.where(better, tm.begin + i, at)
            best = torch.where(better, v, best)
        out[tn] = at
    return out


@tc.kernel(static_shapes=True)
def last_of_ties(x: torch.Tensor) -> torch.Tensor:
    """``<=``: a later step wins a tie. Not the first index: left as written."""
    m, n = x.size()
    out = torch.empty([m], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        best = tc.full([tm], float("inf"), dtype=torch.float32)
        at = tc.zeros([tm], dtype=torch.int64)
        for tn in tc.tile(n):
            v, i = torch.min(x[tm, tn], dim=1)
            better = v <= best
            at = torch.where(better, i.to(torch.int64) + tn.begin, at)
            best = torch.where(better, v, best)
        out[tm] = at
    return out


@tc.kernel(static_shapes=True)
def running_index_read(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The index is read in the loop (a count of improvements): left as written."""
    m, n = x.size()
    out = torch.empty([m], dtype=torch.int64, device=x.device)
    moves = torch.empty([m], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        best = tc.full([tm], float("inf"), dtype=torch.float32)
        at = tc.zeros([tm], dtype=torch.int64)
        count = tc.zeros([tm], dtype=torch.int64)
        for tn in tc.tile(n):
            v, i = torch.min(x[tm, tn], dim=1)
            better = v < best
            count = count + (at != i.to(torch.int64) + tn.begin).to(torch.int64)
            at = torch.where(better, i.to(torch.int64) + tn.begin, at)
            best = torch.where(better, v, best)
        out[tm] = at
        moves[tm] = count
    return out, moves


def _inner_loop(kernel: tc.Kernel, *args: torch.Tensor) -> object:
    spec = kernel.bind(args).config_spec
    return next(n for loop in spec.loops for n in walk(loop.body) if n.op is Op.LOOP)


def _points(n: int, m: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    # on a coarse grid: equal distances are common, so the first-index rule is exercised
    q = torch.randint(-8, 8, (n, 2), generator=g).float() / 4
    k = torch.randint(-8, 8, (m, 2), generator=g).float() / 4
    return q, k


def test_the_idiom_is_found_in_either_spelling() -> None:
    (pair,) = deferrable_args(_inner_loop(nearest, *_points(8, 8)))
    assert (pair.kind, pair.axis, pair.best.hint, pair.arg.hint) == ("min", 1, "best", "arg")
    (pair,) = deferrable_args(_inner_loop(column_argmax, torch.randn(8, 8)))
    assert (pair.kind, pair.axis) == ("max", 0)


def test_other_updates_are_left_as_written() -> None:
    x = torch.randn(8, 8)
    assert deferrable_args(_inner_loop(last_of_ties, x)) == []
    assert deferrable_args(_inner_loop(running_index_read, x)) == []
    config = tc.Config(block_sizes=[4, 4], num_warps=4, deferred_args=True)
    assert "_lanes" not in running_index_read.bind((x,)).to_triton_code(config)


def test_the_loop_keeps_lanes_and_reduces_once_after_it() -> None:
    q, k = _points(100, 300)
    bound = nearest.bind((q, k))
    config = tc.Config(block_sizes=[16, 64], num_warps=4, deferred_args=True)
    code = bound.to_triton_code(config)
    body = code[code.index("for offset_1") : code.index("best_pair")]
    assert "best_lanes = tl.where(best_take, best_step, best_lanes)" in body
    assert "tl.reduce" not in body and "_tc_arg_best_interp" not in body
    after = code[code.index("best_pair") : code.index("tl.store(dist")]
    assert "if (tl.max((best_lanes != best_lanes)" in after  # the NaN fallback: the loop again
    assert "_lanes" not in bound.to_triton_code(config.replace(deferred_args=False))


def _eager_nearest(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = (q[:, None, :] - k[None, :, :]).pow(2).sum(-1)
    return d.min(dim=1)


@pytest.mark.parametrize("shape", [(100, 300), (64, 256), (5, 1000)])
@pytest.mark.parametrize("blocks", [[16, 64], [32, 32]])
def test_deferred_nearest_matches_eager(
    shape: tuple[int, int], blocks: list[int], device: str
) -> None:
    q, k = (t.to(device) for t in _points(*shape, seed=shape[0]))
    bound = nearest.bind((q, k))
    config = tc.Config(block_sizes=blocks, num_warps=4, deferred_args=True)
    dist, idx = bound.run(bound.compile_config(config), q, k)
    want_d, want_i = _eager_nearest(q, k)
    torch.testing.assert_close(dist, want_d)
    assert torch.equal(idx, want_i)  # the first index among equal distances


def _skipping_step(
    q: torch.Tensor, k: torch.Tensor, step: int, bad: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """What the user's loop gives when key ``bad`` is NaN: its whole step of ``step`` keys
    is skipped (its min is NaN, never ``< best``), the other keys count."""
    lo = bad // step * step
    kept = torch.cat([k[:lo], k[lo + step :]])
    d, i = _eager_nearest(q, kept)
    return d, torch.where(i >= lo, i + step, i)


def test_a_step_holding_a_nan_is_skipped_as_written(device: str) -> None:
    """A NaN distance makes its step's min NaN, which the user's ``v < best`` never takes, even
    where that step also holds the row's least distance: the deferred lanes would take it, so
    the tile runs the loop again as written. (Ref mode is no judge here: it runs the loop in
    other steps, and which keys a NaN hides depends on the step.)"""
    q, k = (t.to(device) for t in _points(40, 200, seed=3))
    # every row's step over keys 64..127 is skipped
    k[70] = torch.tensor([float("nan"), 0.0], device=device)
    bound = nearest.bind((q, k))
    config = tc.Config(block_sizes=[16, 64], num_warps=4, deferred_args=True)
    dist, idx = bound.run(bound.compile_config(config), q, k)
    want_d, want_i = _skipping_step(q, k, 64, 70)
    torch.testing.assert_close(dist, want_d)
    assert torch.equal(idx, want_i)
    assert not torch.equal(idx, _eager_nearest(q, torch.nan_to_num(k, nan=1e9))[1])


@pytest.mark.parametrize("shape", [(300, 40), (77, 50)])
def test_deferred_column_argmax_matches_eager(shape: tuple[int, int], device: str) -> None:
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(*shape, generator=g) * 2).round().to(torch.bfloat16)  # many ties
    x = x.to(device)
    bound = column_argmax.bind((x,))
    default = bound.config_spec.default()
    config = default.replace(block_sizes=[default.block_sizes[0], 32])  # 3 steps or more
    assert config.deferred_args and "_lanes" in bound.to_triton_code(config)
    got = bound.run(bound.compile_config(config), x)
    want = x.float().argmax(0)  # the first row of the max (every column's max is above -1)
    assert torch.equal(got, want)


def test_the_knob_is_on_by_default_and_a_loop_of_one_step_keeps_no_lanes() -> None:
    """On by default where a pair defers (the search flips it off); a loop whose tile covers its
    whole extent (one step) has no per-step reduction to save, so it keeps no lanes, on or
    off."""
    from tilecraft.autotune.candidates import neighbors
    from tilecraft.errors import ConfigError

    spec = nearest.bind(_points(64, 64)).config_spec
    default = spec.default()
    assert spec.deferrable_args and not spec.deferrable_sums
    assert default.deferred_args is True
    assert [c.deferred_args for c in neighbors(spec, default) if c.deferred_args is False]
    one_step = nearest.bind(_points(64, 64))
    assert "_lanes" not in one_step.to_triton_code(default.replace(block_sizes=[16, 64]))
    assert "_lanes" in one_step.to_triton_code(default.replace(block_sizes=[16, 32]))
    from tilecraft.config.resolve import predicted_registers

    def registers(config: tc.Config) -> float:  # the model counts lanes only where they exist
        return predicted_registers(spec, config, 4).per_thread

    whole, half = default.replace(block_sizes=[16, 64]), default.replace(block_sizes=[16, 32])
    assert registers(whole) == registers(whole.replace(deferred_args=False))
    assert registers(half) != registers(half.replace(deferred_args=False))
    plain = running_index_read.bind((torch.randn(8, 8),)).config_spec
    assert not plain.deferrable_args
    assert not any(c.deferred_args for c in neighbors(plain, plain.default()))
    with pytest.raises(ConfigError, match="deferred_args"):
        tc.Config(deferred_args=1)


def test_the_lanes_fit_a_budget_and_the_model_counts_them() -> None:
    """[32, 128] at 8 warps: two 4096-element lane tiles are 32 registers a thread, counted by
    the resource model; [128, 128] at 4 warps would be 256 (over 64 values a thread): no lanes."""
    from tilecraft.config.resolve import predicted_registers

    bound = nearest.bind(_points(512, 512))
    spec = bound.config_spec
    small = tc.Config(block_sizes=[32, 128], num_warps=8, deferred_args=True)
    on = predicted_registers(spec, small, 8).per_thread
    off = predicted_registers(spec, small.replace(deferred_args=False), 8).per_thread
    assert on >= 32 and on != off
    big = tc.Config(block_sizes=[128, 128], num_warps=4, deferred_args=True)
    assert "_lanes" not in bound.to_triton_code(big)
    assert "_lanes" in bound.to_triton_code(small)


@pytest.mark.crosscompile
def test_deferred_args_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    q, k = _points(4096, 4096)
    configs = [tc.Config(block_sizes=[32, 128], num_warps=8, deferred_args=True)]
    rows = check_kernel(nearest, (q, k), targets, lambda b: configs)
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok and row.report.spills == 0, row.status


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_deferred_args_on_gpu() -> None:
    q, k = (t.cuda() for t in _points(3000, 5000, seed=7))
    bound = nearest.bind((q, k))
    default = bound.config_spec.default().replace(deferred_args=True)
    assert "_lanes" in bound.to_triton_code(default)
    dist, idx = bound.run(bound.compile_config(default), q, k)
    want_d, want_i = _eager_nearest(q, k)
    torch.testing.assert_close(dist, want_d)
    assert torch.equal(idx, want_i)
    k[1234, 0] = float("nan")
    dist, idx = bound.run(bound.compile_config(default), q, k)
    want_d, want_i = _skipping_step(q, k, default.block_sizes[1], 1234)
    torch.testing.assert_close(dist, want_d)
    assert torch.equal(idx, want_i)


def test_the_default_tile_is_sized_without_lanes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default's tile rules were measured without lanes. Counted while the rules ran, lanes
    at [128, 64] kept a column walk's grid from filling: a bf16 column argmax of 4096 x 50000
    took [128, 128] at 8 warps with the knob on, [32, 256] at 4 off (H100, a column argmin of
    4096 x 50000: [128, 128] / 8 0.507 ms against [64, 128] / 4 0.341). The tile is the same
    either way; lanes are added where they fit it."""
    from tilecraft.config import flags
    from tilecraft.runtime.kernel import BoundKernel

    x = torch.empty(4096, 50000, dtype=torch.bfloat16)

    def default() -> tc.Config:
        arguments = column_argmax.bind_arguments((x,), {})
        bound = BoundKernel(column_argmax, arguments, target=Target.parse("cuda:90"))
        return bound.config_spec.default()

    on = default()
    monkeypatch.setitem(flags.UNSET, "deferred_args", False)
    off = default()
    assert on.deferred_args is True and off.deferred_args is False
    assert (on.block_sizes, on.num_warps) == (off.block_sizes, off.num_warps)


@tc.kernel(static_shapes=True)
def segment_argmax(x: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per segment of rows offsets[s]..offsets[s + 1] and column: the max and its row."""
    d = x.size(1)
    s = offsets.size(0) - 1
    values = torch.empty([s, d], dtype=torch.float32, device=x.device)
    rows = torch.empty([s, d], dtype=torch.int64, device=x.device)
    for seg, td in tc.tile([s, d], block_size=[1, None]):
        best = tc.full([td], float("-inf"), dtype=torch.float32)
        arg = tc.full([td], -1, dtype=torch.int64)
        for tt in tc.tile(offsets[seg.begin], offsets[seg.begin + 1]):
            v, i = torch.max(x[tt, td], dim=0)
            better = v > best
            arg = torch.where(better, i + tt.begin, arg)
            best = torch.where(better, v, best)
        values[seg.begin, td] = best
        rows[seg.begin, td] = arg
    return values, rows


def _segments(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(300, 24, generator=torch.Generator().manual_seed(5)).to(device)
    return x, torch.tensor([0, 40, 41, 300], dtype=torch.int64, device=device)


def test_lanes_of_a_loop_with_int64_bounds_hold_int64_positions(device: str) -> None:
    """Bounds read from int64 offsets make the loop's positions int64: int32 lanes changed
    type in the loop, which the interpreter ran and a GPU compile refused."""
    x, offsets = _segments(device)
    bound = segment_argmax.bind((x, offsets))
    config = tc.Config(block_sizes=[32, 16], num_warps=4)
    code = bound.to_triton_code(config)
    assert config.deferred_args is None and "_lanes = tl.zeros" in code and "tl.int64)" in code
    values, rows = bound.run(bound.compile_config(config), x, offsets)
    for s in range(3):
        lo, hi = int(offsets[s]), int(offsets[s + 1])
        want_v, want_i = x[lo:hi].max(0)
        assert torch.equal(values[s], want_v) and torch.equal(rows[s], want_i + lo)


@pytest.mark.crosscompile
def test_lanes_of_a_loop_with_int64_bounds_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    configs = [tc.Config(block_sizes=[32, 64], num_warps=4)]
    rows = check_kernel(segment_argmax, _segments("cpu"), targets, lambda b: configs)
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok, row.status


@tc.kernel(static_shapes=True)
def narrow_index_argmin(x: torch.Tensor) -> torch.Tensor:
    """The row argmin carried as int16: ``i.to(torch.int16) + tk.begin`` stays int16, as a
    Python int keeps a tensor's dtype in eager code (it was int32: the carry changed dtype)."""
    m, n = x.size()
    out = torch.empty([m], dtype=torch.int16, device=x.device)
    for tm in tc.tile(m):
        best = tc.full([tm], float("inf"), dtype=torch.float32)
        arg = tc.zeros([tm], dtype=torch.int16)
        for tk in tc.tile(n):
            v, i = torch.min(x[tm, tk], dim=1)
            better = v < best
            arg = torch.where(better, i.to(torch.int16) + tk.begin, arg)
            best = torch.where(better, v, best)
        out[tm] = arg
    return out


def test_a_narrow_index_plus_an_inner_loops_begin_keeps_its_dtype(device: str) -> None:
    x = torch.randn(20, 300, generator=torch.Generator().manual_seed(2)).to(device)
    bound = narrow_index_argmin.bind((x,))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=[8, 64], num_warps=4)), x)
    assert got.dtype == torch.int16 and torch.equal(got, x.argmin(1).to(torch.int16))
    assert torch.equal(narrow_index_argmin.run_ref(x), got)

"""Split reductions / split-K (``split_reductions``): which loops qualify, the knob's checks, the
heuristic, generated code, interpreter numerics against eager PyTorch, cross-compiling."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from kernels import rms_norm as rms_rows

import tilecraft as tc
from benchmarks.gen_kernels.reductions import column_sum as col_sum
from examples.matmul import matmul_bias_gelu as mm_bias
from tilecraft.config import occupancy
from tilecraft.errors import ConfigError
from tilecraft.ir.split import RolledSite, split_site
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs

H200 = Target("cuda", 90, 32)


@tc.kernel(static_shapes=False)
def col_max_and_sum(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    hi = torch.empty([n], dtype=torch.float32, device=x.device)
    total = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        top = tc.full([tn], -1.0, dtype=torch.float32)  # not the neutral element
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            xt = x[tm, tn].to(torch.float32)
            top = torch.maximum(top, torch.amax(xt, dim=0))
            acc = acc + xt.sum(dim=0)
        hi[tn] = top
        total[tn] = acc * 0.5
    return hi, total


@tc.kernel(static_shapes=True)
def online_max_rescale(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        mx = tc.full([tm], float("-inf"), dtype=torch.float32)
        s = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            xt = x[tm, tn].to(torch.float32)
            new = torch.maximum(mx, torch.amax(xt, dim=1))
            s = s * torch.exp(mx - new) + torch.exp(xt - new[:, None]).sum(dim=1)
            mx = new
        out[tm] = s
    return out


@tc.kernel(static_shapes=True)
def store_in_loop(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([n], dtype=torch.float32, device=x.device)
    copy = torch.empty_like(x)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tm in tc.tile(m):
            xt = x[tm, tn]
            copy[tm, tn] = xt
            acc += xt.to(torch.float32).sum(dim=0)
        out[tn] = acc
    return out


@tc.kernel(static_shapes=True)
def bf16_carry(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=x.dtype)
        for tm in tc.tile(m):
            acc = acc + x[tm, tn].sum(dim=0)
        out[tn] = acc
    return out


@tc.kernel(static_shapes=True)
def absmax_scale(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    out = torch.empty_like(x)
    scale = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        top = torch.amax(torch.abs(x[tm, :]), dim=-1)
        scale[tm] = top  # a store off the split dim: every share writes the same value
        out[tm, :] = x[tm, :] / top[:, None]
    return out, scale


@tc.kernel(static_shapes=True)
def row_softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.softmax(x[tm, :], dim=-1)
    return out


@tc.kernel(static_shapes=True)
def row_centred(x: torch.Tensor) -> torch.Tensor:
    """Sums of squares about the row's mean: a second pass over the first pass's sum that no
    share's partial result can be rescaled to."""
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm] = ((x[tm, :] - x[tm, :].mean(dim=-1, keepdim=True)) ** 2).sum(dim=-1)
    return out


def _gelu(y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(y, approximate="tanh")


def _bind(kernel: object, *args: torch.Tensor, target: Target | None = None) -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)  # type: ignore[attr-defined]


def _run(kernel: object, config: tc.Config, *args: torch.Tensor) -> object:
    bound = _bind(kernel, *args)
    return bound.run(bound.compile_config(config), *args)


# -- where it is legal ---------------------------------------------------------------------
def test_sites_of_accumulating_loops() -> None:
    x = torch.randn(64, 32)
    for kernel, args, kinds in [
        (col_sum, (x,), ["sum"]),
        (col_max_and_sum, (x,), ["max", "sum"]),
        (online_max_rescale, (x,), ["sum", "max"]),  # a softmax's sum and its running max
        (mm_bias, (torch.randn(16, 64), torch.randn(64, 32), torch.randn(32)), ["sum"]),
    ]:
        loop = _bind(kernel, *args).traced.loops[0]
        site, why = split_site(loop)
        assert site is not None, why
        assert [a.kind for a in site.accumulators] == kinds


@pytest.mark.parametrize(
    "kernel,dtype,reason",
    [
        (store_in_loop, torch.float32, "stores inside the loop"),
        (bf16_carry, torch.bfloat16, "partial sums need fp32"),
    ],
)
def test_illegal_loops_are_not_offered(kernel: object, dtype: torch.dtype, reason: str) -> None:
    x = torch.randn(4096, 16).to(dtype)
    bound = _bind(kernel, x, target=H200)
    spec = bound.config_spec
    site, why = spec.split_sites[0]
    assert site is None and reason in why
    assert spec.default().split_reductions == (1,)  # the heuristic never offers it
    with pytest.raises(ConfigError, match=reason):
        spec.normalize(spec.default().replace(split_reductions=[4]))


def test_knob_validation_and_repairs() -> None:
    with pytest.raises(ConfigError, match="split_reductions"):
        tc.Config(split_reductions=[0])
    spec = _bind(col_sum, torch.randn(1000, 48)).config_spec
    with pytest.raises(ConfigError, match="2 entries"):
        spec.normalize(tc.Config(split_reductions=[2, 2]))
    base = spec.default()
    persistent = spec.resolve(base.replace(split_reductions=[4], pid_type="persistent_blocked"))
    assert persistent.splits == (1,) and any("pid_type='flat'" in r for r in persistent.repairs)
    # more shares than iterations: clamped to the iterations (1000 rows in 32-row blocks = 32)
    clamped = spec.normalize(base.replace(block_sizes=[32, 16], split_reductions=[64]))
    assert clamped.split_reductions == (32,)
    plan = spec.resolve(base.replace(block_sizes=[32, 16], split_reductions=[4]))
    assert plan.split(0) == 4 and plan.resources.programs == (3 * 4,)
    assert "over 4 programs" in plan.describe()
    assert base.replace(split_reductions=[4]).key() != base.key()  # in the cache key


def test_random_configs_keep_splits_legal() -> None:
    import random

    spec = _bind(col_sum, torch.empty(65536, 1024), target=H200).config_spec
    rng = random.Random(0)
    factors = [spec.normalize(spec.random(rng), warn=False).split_reductions for _ in range(40)]
    assert any(f and f[0] > 1 for f in factors)  # the space offers splits...
    assert all(1 <= f[0] <= 256 for f in factors if f)  # ...within MAX_SPLIT


# -- heuristic -----------------------------------------------------------------------------
def test_the_interpreter_default_splits_nothing() -> None:
    """The interpreter runs one program after another: a split only adds partials and their
    combine (a ragged softmax's default split 64 ways ran 370 times longer than unsplit; fuzz
    54b). The same call on an H200 splits."""
    tall = torch.empty(65536, 1024, dtype=torch.bfloat16)
    assert _bind(col_sum, tall, target=H200).config_spec.default().split_reductions[0] > 1
    interpreted = _bind(col_sum, tall, target=Target.parse("interpret")).config_spec.default()
    assert interpreted.split_reductions == (1,), interpreted


def test_heuristic_splits_tall_skinny_column_sum_on_h200() -> None:
    tall = _bind(col_sum, torch.empty(65536, 1024, dtype=torch.bfloat16), target=H200)
    default = tall.config_spec.default()
    assert default.split_reductions[0] > 1
    plan = tall.config_spec.resolve(default)
    # several programs per SM (H200: 256 programs 0.093 ms, 512 programs 0.057-0.063 ms)
    assert plan.resources.programs[0] >= 3 * H200.limits.num_sms
    square = _bind(col_sum, torch.empty(4096, 4096, dtype=torch.bfloat16), target=H200)
    square_default = square.config_spec.default()
    assert square_default.split_reductions[0] <= default.split_reductions[0]
    square_programs = square.config_spec.resolve(square_default).resources.programs[0]
    wave = 132 * occupancy.resident_programs(square.config_spec, square_default)
    assert 132 <= square_programs <= 2 * wave
    wide = _bind(col_sum, torch.empty(1024, 262144, dtype=torch.bfloat16), target=H200)
    assert wide.config_spec.default().split_reductions in ((), (1,))  # 1024 programs already


def test_dynamic_shapes_split_as_the_traced_call_would() -> None:
    """With static_shapes=False the grid's size is a run-time value, but each compile serves
    one power-of-two bucket of sizes: the heuristic counts the traced call's programs (a
    dynamic tall column sum ran 8 programs over 65536 rows each)."""
    x = torch.empty(65536, 1024, dtype=torch.bfloat16)
    dynamic = tc.kernel(col_sum.fn, static_shapes=False)
    bound = _bind(dynamic, x, target=H200)
    got = bound.config_spec.default()
    assert got.split_reductions[0] > 1, got
    assert bound.config_spec.resolve(got).resources.programs[0] >= 3 * H200.limits.num_sms


def test_heuristic_keeps_partials_traffic_small() -> None:
    from tilecraft.config.split import with_default_splits

    a, b = (
        torch.empty(128, 4096, dtype=torch.bfloat16),
        torch.empty(4096, 128, dtype=torch.bfloat16),
    )
    spec = _bind(mm_bias, a, b, torch.empty(128, dtype=torch.bfloat16), target=H200).config_spec
    # one 128x128 tile, 256 k-steps of 16: 64 shares would write and read 8 MB of fp32
    # partials for 2 MB of operands; a quarter of the operands' bytes allows 4 shares
    config = tc.Config(block_sizes=[128, 128, 16], num_warps=8)
    assert with_default_splits(spec, config, 8192).split_reductions == (4,)


# -- generated code ------------------------------------------------------------------------
def test_generated_code_has_partials_and_ordered_combine() -> None:
    mi300 = Target("hip", "gfx942", 64)  # no arrival counters: a second, combine kernel
    bound = _bind(col_max_and_sum, torch.randn(1000, 48), target=mi300)
    code = bound.to_triton_code(tc.Config(block_sizes=[16, 32], split_reductions=[3]))
    partials, combine = code.split("def _tc_col_max_and_sum_0(")
    assert "_partials(" in partials and "tl.program_id(1)" in partials
    assert "tl.range(split_start" in partials
    assert "tl.store(_tc_split_top_0" in partials and "tl.store(_tc_split_acc_1" in partials
    assert "tl.program_id(1)" not in combine.split("def launch_0")[0]
    # the combine adds share 0, 1, 2 in that order, starting from the loop's init value
    loads = [line for line in combine.splitlines() if "tl.load(acc_part +" in line]
    assert [f"{s} * acc_stride" in line for s, line in enumerate(loads)] == [True] * 3
    assert "tl.maximum" in combine and "tl.atomic_add" not in code
    assert "[(split_tiles, 3,)]" in code and "torch.empty(3 * split_tiles" in code


def test_one_launch_last_program_combines() -> None:
    bound = _bind(col_max_and_sum, torch.randn(1000, 48), target=H200)
    config = tc.Config(block_sizes=[16, 32], split_reductions=[3])
    assert bound.config_spec.resolve(config).split_one_launch
    code = bound.to_triton_code(config)
    combine, partials = code.split("@triton.jit\ndef _tc_col_max_and_sum_0_partials(")
    # a called function, not inlined (inlined, ptxas issued the partials loop's loads one at a
    # time to make room for the combine's registers)
    assert "@triton.jit(noinline=True)\ndef _tc_col_max_and_sum_0_combine(" in combine
    # every share's partials are stored, then counted in; the third to arrive combines in order
    barrier = partials.index("tl.debug_barrier()")
    assert partials.rindex("tl.store(_tc_split_acc_1") < barrier
    assert 'tl.atomic_add(_tc_split_count + tl.program_id(0), 1, sem="acq_rel", scope="gpu")' in (
        partials
    )
    assert "== 2:" in partials and "_tc_col_max_and_sum_0_combine(" in partials
    assert "tl.store(_tc_split_count + tl.program_id(0), 0)" in partials
    loads = [line for line in combine.splitlines() if "tl.load(acc_part +" in line]
    assert len(loads) == 3 and all("volatile=True" in line for line in loads)
    launcher = code.split("def launch_0")[1]
    assert launcher.count("[(") == 1 and "split_counters(" in launcher
    # split_atomics keeps its own path, and a rolled site keeps the second kernel
    atomic = tc.Config(block_sizes=[32, 16], split_reductions=[4], split_atomics=True)
    atomic_code = _bind(col_sum, torch.randn(1000, 48), target=H200).to_triton_code(atomic)
    assert "split_counters(" not in atomic_code and "tl.atomic_add(_tc_split_acc_0" in atomic_code
    rows = _bind(rms_rows, torch.randn(3, 1000), torch.randn(1000), target=H200)
    rolled = rows.to_triton_code(
        tc.Config(block_sizes=[1], reduction_loops=[64], split_reductions=[4])
    )
    assert "split_counters(" not in rolled and rolled.count("[(split_tiles, 4,)]") == 2


def test_counters_stay_zero_between_launches(device: str) -> None:
    from tilecraft.runtime.device import split_counters

    x = torch.randn(1000, 48, device=device)
    config = tc.Config(block_sizes=[16, 32], split_reductions=[4])
    for _ in range(3):  # the counters each launch leaves behind serve the next
        hi, total = _run(col_max_and_sum, config, x)
        torch.testing.assert_close(total, x.sum(0) * 0.5, rtol=1e-5, atol=1e-4)
    counters = split_counters(x, 3)
    assert counters.numel() >= 3 and not counters.any()


def test_a_candidate_stopped_part_way_leaves_the_counters_zeroed(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """A time limit that interrupts a split launch in the interpreter (or an error in one of
    its programs) leaves the counts of tiles whose last program never ran: every later split
    launch in the process combined those tiles early, from partials not yet written (CI: a
    RoI pool's first candidate ran past 60 s, then all 14 others and two tests here read
    1e36). The runner zeroes the counters after a failed candidate."""
    from tilecraft.autotune import runner as runner_module
    from tilecraft.autotune.alarm import CandidateTimeout
    from tilecraft.autotune.classify import Category
    from tilecraft.runtime.device import split_counters

    x = torch.randn(1000, 48, device=device)
    config = tc.Config(block_sizes=[16, 32], split_reductions=[4])
    counters = split_counters(x, 3)
    counters[:3] = 2  # as a launch of 4 shares a tile, stopped after two, leaves them

    def stopped(*args: object, **kwargs: object) -> None:
        raise CandidateTimeout("candidate ran past its time limit of 1s")

    bound = _bind(col_max_and_sum, x)
    monkeypatch.setattr(runner_module, "check_config", stopped)
    attempt = runner_module.InProcessRunner(bound, (x,), {}, None)._check_one(config, 1.0)
    assert attempt.category is Category.RUNTIME_TIMEOUT
    assert not counters.any()
    _, total = _run(col_max_and_sum, config, x)
    torch.testing.assert_close(total, x.sum(0) * 0.5, rtol=1e-5, atol=1e-4)


def test_two_launch_combine_matches_eager(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    """The second-kernel combine (AMD, XPU), run in the interpreter (or on the GPU)."""
    monkeypatch.setattr(Target, "arrival_counters", property(lambda self: False))
    x = torch.randn(1000, 40, device=device) - 2.0
    bound = _bind(col_max_and_sum, x)
    config = tc.Config(block_sizes=[16, 32], split_reductions=[4])
    assert not bound.config_spec.resolve(config).split_one_launch
    hi, total = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(hi, torch.clamp(x.amax(0), min=-1.0))
    torch.testing.assert_close(total, x.sum(0) * 0.5, rtol=1e-5, atol=1e-4)


# -- rolled reduction dims (a few long rows) ----------------------------------------------
def test_rolled_sites_and_repairs() -> None:
    x, w = torch.randn(3, 1000), torch.randn(1000)
    spec = _bind(rms_rows, x, w).config_spec
    site, _ = spec.split_sites[0]
    assert (
        site is not None
        and site.loop is None
        and [r.attrs["kind"] for r in site.reduces] == ["sum"]
    )
    whole = spec.resolve(tc.Config(block_sizes=[1], split_reductions=[4]))  # not rolled
    assert whole.splits == (1,) and any("reduction_loops" in r for r in whole.repairs)
    # a softmax's second pass sums exp(x - max): each share runs both passes (test_split_softmax)
    soft_site, why = _bind(row_softmax, x).config_spec.split_sites[0]
    assert isinstance(soft_site, RolledSite) and soft_site.passes == 2, why
    centred_site, why = _bind(row_centred, x).config_spec.split_sites[0]
    assert centred_site is None and "depend on each other" in why


def test_heuristic_splits_few_long_rows_on_h200() -> None:
    w = torch.empty(1 << 20, dtype=torch.bfloat16)
    long = _bind(rms_rows, torch.empty(8, 1 << 20, dtype=torch.bfloat16), w, target=H200)
    plan = long.config_spec.resolve(long.config_spec.default())
    assert plan.split(0) > 1 and plan.resources.programs[0] >= H200.limits.num_sms
    many = _bind(rms_rows, torch.empty(4096, 4096, dtype=torch.bfloat16), w[:4096], target=H200)
    assert many.config_spec.resolve(many.config_spec.default()).split(0) == 1


@pytest.mark.parametrize("split", [3, 16])
def test_rolled_split_matches_eager(split: int, device: str) -> None:
    # 1000 = 15 chunks of 64 and a ragged tail
    x, w = torch.randn(3, 1000, device=device), torch.randn(1000, device=device)
    config = tc.Config(block_sizes=[2], reduction_loops=[64], split_reductions=[split])
    bound = _bind(rms_rows, x, w)
    code = bound.to_triton_code(config)
    # both chunk loops are shared (the interpreter's code wraps the bound in _tc_index)
    assert len(re.findall(r"tl\.range\((?:_tc_index\()?split_start_1\b", code)) == 2, code
    assert (f"in tl.range(1, {split})" in code) == (split > 8), code  # a loop over shares
    out = bound.run(bound.compile_config(config), x, w)
    expect = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w
    torch.testing.assert_close(out, expect, rtol=1e-5, atol=1e-5)
    y = torch.randn(5, 777, device=device)
    y[1, 500] = 9.0  # the row's max sits in one share only
    out, scale = _run(
        absmax_scale, tc.Config(block_sizes=[1], reduction_loops=[32], split_reductions=[split]), y
    )
    top = y.abs().amax(-1)
    torch.testing.assert_close(scale, top)
    torch.testing.assert_close(out, y / top[:, None])


# -- numerics in the interpreter -----------------------------------------------------------
@pytest.mark.parametrize("split", [2, 3, 8])
def test_column_sum_split_matches_eager(split: int, device: str) -> None:
    x = torch.randn(1000, 48, device=device)  # 1000 rows: not a multiple of split * 32
    out = _run(col_sum, tc.Config(block_sizes=[32, 16], split_reductions=[split]), x)
    torch.testing.assert_close(out, x.sum(0), rtol=1e-5, atol=1e-4)


def test_max_and_sum_split_with_dynamic_shapes_and_init(device: str) -> None:
    config = tc.Config(block_sizes=[16, 32], split_reductions=[4])
    for m in (1000, 37):  # 37 rows in 16-row blocks: 3 iterations for 4 shares (one is empty)
        x = torch.randn(m, 40, device=device) - 2.0
        hi, total = _run(col_max_and_sum, config, x)
        torch.testing.assert_close(hi, torch.clamp(x.amax(0), min=-1.0))
        torch.testing.assert_close(total, x.sum(0) * 0.5, rtol=1e-5, atol=1e-4)


def test_split_k_matches_eager(device: str) -> None:
    a, b = torch.randn(37, 300, device=device), torch.randn(300, 50, device=device) / 17
    bias = torch.randn(50, device=device)
    config = tc.Config(block_sizes=[16, 16, 32], split_reductions=[3])
    out = _run(mm_bias, config, a, b, bias)
    torch.testing.assert_close(out, _gelu(a @ b + bias), rtol=1e-4, atol=1e-4)
    a16, b16, bias16 = a.to(torch.bfloat16), b.to(torch.bfloat16), bias.to(torch.bfloat16)
    out16 = _run(mm_bias, config, a16, b16, bias16)
    expect = _gelu(a16.float() @ b16.float() + bias16.float()).to(torch.bfloat16)
    torch.testing.assert_close(out16, expect, rtol=2e-2, atol=2e-2)


def test_atomic_variant_is_opt_in(device: str) -> None:
    x = torch.randn(1000, 48, device=device)
    config = tc.Config(block_sizes=[32, 16], split_reductions=[4], split_atomics=True)
    bound = _bind(col_sum, x)
    code = bound.to_triton_code(config)
    assert "tl.atomic_add(_tc_split_acc_0" in code and "torch.zeros(split_tiles" in code
    assert "tl.atomic_add(_tc_split_acc_0" not in bound.to_triton_code(
        config.replace(split_atomics=False)
    )
    torch.testing.assert_close(
        bound.run(bound.compile_config(config), x), x.sum(0), rtol=1e-5, atol=1e-4
    )
    rows = _bind(rms_rows, torch.randn(3, 1000), torch.randn(1000))
    rolled = tc.Config(block_sizes=[1], reduction_loops=[64], split_reductions=[4])
    assert rows.config_spec.resolve(rolled.replace(split_atomics=True)).split_atomics
    # a max has no deterministic-free atomic here: the plan keeps the ordered combine
    maxes = _bind(col_max_and_sum, x).config_spec
    plan = maxes.resolve(tc.Config(block_sizes=[16, 32], split_reductions=[4], split_atomics=True))
    assert not plan.split_atomics and any("split_atomics" in r for r in plan.repairs)
    assert not _bind(col_sum, x, target=H200).config_spec.default().split_atomics


def test_split_program_exports_standalone(tmp_path: Path, device: str) -> None:
    from test_export import run_exported

    x = torch.randn(300, 24, device=device)
    config = tc.Config(block_sizes=[32, 16], split_reductions=[4])
    source = _bind(col_sum, x).to_triton_code(config, standalone=True)
    torch.testing.assert_close(run_exported(tmp_path, source, "column_sum", (x,)), x.sum(0))


# -- cross-compiling -----------------------------------------------------------------------
def test_split_kernels_cross_compile() -> None:
    jobs = []
    for target in (H200, Target("hip", "gfx942", 64)):
        for kernel, args, config in [
            (col_sum, (torch.empty(65536, 1024, dtype=torch.bfloat16),), None),
            (rms_rows, (torch.empty(8, 1 << 20), torch.empty(1 << 20)), None),
            (
                col_sum,
                (torch.empty(65536, 1024),),
                tc.Config(block_sizes=[256, 64], split_reductions=[16], split_atomics=True),
            ),
            (
                mm_bias,
                (torch.empty(16, 4096), torch.empty(4096, 1024), torch.empty(1024)),
                tc.Config(block_sizes=[16, 64, 64], split_reductions=[8], num_stages=3),
            ),
        ]:
            args16 = tuple(t.to(torch.bfloat16) for t in args)
            bound = _bind(kernel, *args16, target=target)
            config = config or bound.config_spec.default()
            _, _, traced, kernels = bound.generate(config)
            assert bound.config_spec.resolve(config).split(0) > 1
            main = kernels[0]
            plan = bound.config_spec.resolve(config)
            assert plan.split_one_launch == (target == H200 and not plan.split_atomics)
            one_launch = plan.split_one_launch and kernel is not rms_rows  # rolled: 2 kernels
            assert len(main.companions) == (0 if one_launch else 1)
            assert ("split_counters(" in main.launcher_source) == one_launch
            jobs += [CompileJob.of(k, traced.loops[0], target) for k in (main, *main.companions)]
    for job, report in zip(jobs, run_compile_jobs(jobs, 300), strict=True):
        assert report.ok, f"{job.kernel_name} for {job.target.key}: {report.error}"


# -- GPU -----------------------------------------------------------------------------------
@pytest.mark.gpu
def test_one_launch_split_in_cuda_graphs_and_streams() -> None:
    """The arrival counters: zeroed by a captured memset in a graph, per stream outside one,
    and left zeroed by every launch (eager calls before, between and after graph replays)."""
    x = torch.randn(65536, 1024, device="cuda", dtype=torch.bfloat16)
    config = tc.Config(block_sizes=[256, 32], split_reductions=[16])
    kernel = tc.kernel(col_sum.fn, static_shapes=True, config=config)
    assert kernel.bind((x,)).config_spec.resolve(config).split_one_launch
    expect = x.float().sum(0)
    first = kernel(x)
    torch.testing.assert_close(first, expect, rtol=1e-4, atol=1e-2)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        on_side = kernel(x)
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(on_side, first)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = kernel(x)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, first)
        assert torch.equal(kernel(x), first)  # eager launches between replays


@pytest.mark.gpu
def test_split_on_gpu() -> None:
    x = torch.randn(65536, 1024, device="cuda", dtype=torch.bfloat16)
    for split in (1, 4, 16):
        out = _run(col_sum, tc.Config(block_sizes=[256, 64], split_reductions=[split]), x)
        torch.testing.assert_close(out, x.float().sum(0), rtol=1e-4, atol=1e-2)
    a = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 14336, device="cuda", dtype=torch.bfloat16) / 64
    bias = torch.randn(14336, device="cuda", dtype=torch.bfloat16)
    expect = _gelu(a.float() @ b.float() + bias.float()).to(torch.bfloat16)
    for split in (2, 8):
        config = tc.Config(block_sizes=[16, 128, 64], split_reductions=[split], num_stages=3)
        out = _run(mm_bias, config, a, b, bias)
        torch.testing.assert_close(out, expect, rtol=2e-2, atol=2e-2)
    x = torch.randn(8, 1 << 20, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1 << 20, device="cuda", dtype=torch.bfloat16)
    xf = x.float()
    expect = (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-5) * w.float()).to(x.dtype)
    bound = _bind(rms_rows, x, w)
    default = bound.config_spec.default()
    assert bound.config_spec.resolve(default).split(0) > 1  # the heuristic splits 8 long rows
    for config in (default, default.replace(split_reductions=[128])):
        torch.testing.assert_close(
            bound.run(bound.compile_config(config), x, w), expect, rtol=2e-2, atol=2e-2
        )

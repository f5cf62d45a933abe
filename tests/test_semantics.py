"""PyTorch semantics in device code: NaN-propagating max/min reductions (and arg-reductions),
bitwise integer ops, fmod, bf16 rounding — each compiled kernel (interpreter) against eager
PyTorch, and the generated code checked for the NaN-aware combine."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError

ROWS = tc.Config(block_sizes=[4], reduction_loops=[None])
LOOPED = tc.Config(block_sizes=[4], reduction_loops=[8])


@tc.kernel(config=ROWS)
def row_stats(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, 6], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        xt = x[tm, :]
        out[tm, 0] = torch.amax(xt, dim=-1)
        out[tm, 1] = torch.amin(xt, dim=-1)
        out[tm, 2] = torch.max(xt, dim=-1).values
        out[tm, 3] = torch.min(xt, dim=-1).values
        out[tm, 4] = torch.argmax(xt, dim=-1).to(torch.float32)
        out[tm, 5] = torch.argmin(xt, dim=-1).to(torch.float32)
    return out


@tc.kernel(config=LOOPED)
def row_max_looped(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        out[tm] = torch.amax(x[tm, :], dim=-1)
    return out


def _eager_stats(x: torch.Tensor) -> torch.Tensor:
    cols = [x.amax(-1), x.amin(-1), x.max(-1).values, x.min(-1).values]
    cols += [x.argmax(-1).float(), x.argmin(-1).float()]
    return torch.stack(cols, dim=1)


def _with_nans() -> torch.Tensor:
    x = torch.randn(6, 20)
    x[1, 3] = float("nan")
    x[2, 0] = x[2, 17] = float("nan")
    x[3, :] = float("nan")
    x[4, 5] = float("inf")
    x[5, 7] = float("-inf")
    return x


def test_nan_propagates_through_reductions() -> None:
    x = _with_nans()
    got, want = row_stats(x), _eager_stats(x)
    torch.testing.assert_close(got, want, equal_nan=True)


def test_nan_propagates_through_looped_reduction() -> None:
    x = _with_nans()
    torch.testing.assert_close(row_max_looped(x), x.amax(-1), equal_nan=True)
    code = row_max_looped.bind((x,)).to_triton_code(LOOPED)
    assert "propagate_nan=tl.PropagateNan.ALL" in code and "_tc_max_nan" in code


def _ties_and_edges() -> torch.Tensor:
    """Rows whose best repeats across chunks (the first must win), NaNs after a number, a row
    of -inf (torch gives index 0), the best in the last partial chunk."""
    x = torch.randn(8, 37, generator=torch.Generator().manual_seed(1))
    x[0, 3] = x[0, 20] = x[0, 35] = 9.0  # ties in chunks 0, 2, 4
    x[1, 30] = 9.0
    x[1, 5] = 9.0  # the tie's first occurrence is the earlier chunk
    x[2, 12] = float("nan")
    x[2, 33] = float("nan")
    x[3, :] = float("-inf")
    x[4, 36] = 9.0  # the last (masked) chunk
    x[5, 0] = -9.0
    x[5, 36] = -9.0
    return x


@pytest.mark.parametrize("chunk", [8, 16, None])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_looped_arg_reductions_match_eager(chunk: int | None, dtype: torch.dtype) -> None:
    """argmax/argmin over a row walked in chunks keep each lane's best and its index; ties keep
    the first index, NaN wins over numbers (as torch)."""
    x = _ties_and_edges()
    if dtype == torch.int32:
        x = torch.nan_to_num(x * 4, nan=0.0, neginf=-100.0).to(dtype)
    else:
        x = x.to(dtype)
    config = tc.Config(block_sizes=[4], reduction_loops=[chunk])
    bound = row_stats.bind((x,))
    got = bound.run(bound.compile_config(config), x)
    want = _eager_stats(x.float() if dtype == torch.int32 else x)
    torch.testing.assert_close(got[:, 4:], want[:, 4:], equal_nan=True)
    if chunk is not None:
        code = bound.to_triton_code(config)
        assert "for roffset" in code and "_tc_argmax_nan" in code and "_tc_argmin_nan" in code


def _gpu_code(kernel: tc.Kernel, *args: torch.Tensor) -> str:
    """The kernel's code for sm_90 (the interpreter's reduces with NumPy instead)."""
    from tilecraft.runtime.kernel import BoundKernel
    from tilecraft.targets.target import Target

    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=Target.parse("cuda:90"))
    return bound.to_triton_code(ROWS)


def test_float_reductions_use_nan_combines() -> None:
    code = _gpu_code(row_stats, _with_nans())
    for helper in ("_tc_max_nan", "_tc_min_nan", "_tc_argmax_nan", "_tc_argmin_nan"):
        assert "tl.reduce(" in code and helper in code


@pytest.mark.crosscompile
def test_nan_max_compiles_to_one_instruction_per_element() -> None:
    """The NaN-propagating combine is PTX's ``max.NaN`` (one instruction), not a compare-and-
    select chain (four per element: 11% of an attention forward on the H200)."""
    from tilecraft.runtime.kernel import BoundKernel
    from tilecraft.targets.target import Target
    from tilecraft.tools.crosscompile import CompileJob
    from tilecraft.tools.worker import run_compile_jobs

    x = torch.empty(64, 1024, device="meta")
    target = Target.parse("cuda:90")
    bound = BoundKernel(row_max_looped, row_max_looped.bind_arguments((x,), {}), target=target)
    _, _, traced, kernels = bound.generate(ROWS)
    (report,) = run_compile_jobs([CompileJob.of(kernels[0], traced.loops[0], target)], 120)
    assert report.ok, report.error
    assert "max.NaN.f32" in report.ptx
    assert "setp.nan" not in report.ptx and "selp.f32" not in report.ptx


@tc.kernel(config=tc.Config(block_sizes=[16]))
def int_ops(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (n,) = a.size()
    out = torch.empty([8, n], dtype=a.dtype, device=a.device)
    for t in tc.tile(n):
        x, y = a[t], b[t]
        out[0, t] = ~x
        out[1, t] = x ^ y
        out[2, t] = x & y
        out[3, t] = x | y
        out[4, t] = x << 3
        out[5, t] = x >> 2
        out[6, t] = torch.bitwise_xor(torch.bitwise_not(x), y)
        out[7, t] = torch.fmod(x, y)
    return out


def test_integer_ops_match_torch() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-1000, 1000, (37,), generator=g, dtype=torch.int32)
    b = torch.randint(1, 50, (37,), generator=g, dtype=torch.int32) * torch.where(a % 2 == 0, 1, -1)
    want = torch.stack(
        [~a, a ^ b, a & b, a | b, a << 3, a >> 2, torch.bitwise_xor(~a, b), torch.fmod(a, b)]
    )
    assert torch.equal(int_ops(a, b), want)


@tc.kernel(config=tc.Config(block_sizes=[16]))
def float_fmod(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (n,) = a.size()
    out = torch.empty_like(a)
    for t in tc.tile(n):
        out[t] = torch.fmod(a[t], b[t])
    return out


def test_float_fmod_keeps_the_dividend_sign() -> None:
    a, b = torch.randn(40) * 10, torch.randn(40) + 3
    torch.testing.assert_close(float_fmod(a, b), torch.fmod(a, b))


@tc.kernel(config=tc.Config(block_sizes=[16]))
def invert_float(a: torch.Tensor) -> torch.Tensor:
    (n,) = a.size()
    out = torch.empty_like(a)
    for t in tc.tile(n):
        out[t] = ~a[t]
    return out


def test_bitwise_op_on_float_tile_is_an_error() -> None:
    with pytest.raises(DeviceCodeError, match="bitwise_not.*integer or bool"):
        invert_float(torch.randn(8))


@pytest.mark.crosscompile
@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_nan_reductions_cross_compile(target: str) -> None:
    from tilecraft.runtime.kernel import BoundKernel
    from tilecraft.targets.target import Target
    from tilecraft.tools.crosscompile import CompileJob
    from tilecraft.tools.worker import run_compile_job

    x = _with_nans()
    for kernel, config in ((row_stats, ROWS), (row_max_looped, LOOPED)):
        bound = BoundKernel(kernel, kernel.bind_arguments((x,), {}), target=Target.parse(target))
        _, _, traced, generated = bound.generate(config)
        job = CompileJob.of(generated[0], traced.loops[0], bound.target)
        report = run_compile_job(job, timeout_s=300)
        assert report.ok, report.error


@tc.kernel(config=tc.Config(block_sizes=[16]))
def add_big_literals(a: torch.Tensor) -> torch.Tensor:
    (n,) = a.size()
    out = torch.empty([2, n], dtype=a.dtype, device=a.device)
    for t in tc.tile(n):
        out[0, t] = a[t] + 2**40
        out[1, t] = a[t] + 2**31 + 5
    return out


@tc.kernel(config=tc.Config(block_sizes=[16]))
def add_huge_literal(a: torch.Tensor) -> torch.Tensor:
    (n,) = a.size()
    out = torch.empty_like(a)
    for t in tc.tile(n):
        out[t] = a[t] + 2**70
    return out


def test_integer_literals_wrap_like_torch() -> None:
    a = torch.arange(-20, 20, dtype=torch.int32)
    assert torch.equal(add_big_literals(a), torch.stack([a + 2**40, a + 2**31 + 5]))


def test_literal_past_64_bits_is_a_located_error() -> None:
    with pytest.raises(DeviceCodeError, match="does not fit in 64 bits") as info:
        add_huge_literal(torch.arange(4, dtype=torch.int32))
    assert "test_semantics.py:" in str(info.value)


@tc.kernel(static_shapes=True)
def add_rms_in_place(x: torch.Tensor, residual: torch.Tensor) -> None:
    """vLLM-style fused add + RMSNorm: the residual is updated in place before the statistics."""
    t, d = x.size()
    for tt in tc.tile(t):
        hid = x[tt, :].to(torch.float32) + residual[tt, :].to(torch.float32)
        residual[tt, :] = hid.to(residual.dtype)
        inv = torch.rsqrt(torch.mean(hid * hid, dim=-1) + 1e-6)
        x[tt, :] = (hid * inv[:, None]).to(x.dtype)


@tc.kernel(static_shapes=True)
def scale_rows_in_place(x: torch.Tensor) -> None:
    t, d = x.size()
    for tt in tc.tile(t):
        row = x[tt, :]
        x[tt, :] = row / torch.amax(torch.abs(row), dim=-1, keepdim=True)


def test_a_row_stored_before_a_later_pass_rereads_it_stays_whole() -> None:
    """Looped, the recompute pass would re-load the residual the first pass already overwrote
    (x + (x + r): every element wrong, and discovery found no working config at 16384 wide).
    A row stored in the pass that reads it (x = f(x)) still loops."""
    from tilecraft.errors import ConfigError

    x0, r0 = torch.randn(5, 300), torch.randn(5, 300)
    bound = add_rms_in_place.bind((x0, r0))
    (red,) = bound.config_spec.reductions
    assert not red.loopable and "residual is stored along it" in red.reason
    with pytest.warns(UserWarning, match="read again by a later pass"):  # repaired whole
        fixed = bound.config_spec.normalize(tc.Config(block_sizes=[1], reduction_loops=[64]))
    assert fixed.reduction_loops == (None,)
    with pytest.MonkeyPatch.context() as mp:  # strict mode refuses the repair
        mp.setenv("TILECRAFT_STRICT", "1")
        with pytest.raises(ConfigError, match="read again by a later pass"):
            add_rms_in_place.bind((x0, r0)).config_spec.normalize(
                tc.Config(block_sizes=[1], reduction_loops=[64])
            )
    x, r = x0.clone(), r0.clone()
    add_rms_in_place(x, r)
    hid = x0 + r0
    torch.testing.assert_close(r, hid)
    torch.testing.assert_close(x, hid * torch.rsqrt(hid.pow(2).mean(-1, keepdim=True) + 1e-6))
    scaled = scale_rows_in_place.bind((x0,))
    assert scaled.config_spec.reductions[0].loopable
    y = x0.clone()
    scaled.run(scaled.compile_config(tc.Config(block_sizes=[2], reduction_loops=[64])), y)
    torch.testing.assert_close(y, x0 / x0.abs().amax(-1, keepdim=True))


@tc.kernel(static_shapes=True)
def first_best_column(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        best = tc.full([tm], float("-inf"), dtype=torch.float32)
        at = tc.zeros([tm], dtype=torch.int64)
        for tn in tc.tile(n):
            chunk = x[tm, tn]
            local = torch.argmax(chunk, dim=-1)  # int64, as torch's
            top = torch.amax(chunk, dim=-1)
            at = torch.where(top > best, local + tn.begin, at)  # int64 + the loop's int offset
            best = torch.maximum(best, top)
        out[tm] = at
    return out


def test_an_int64_plus_a_tile_begin_runs_in_the_interpreter() -> None:
    """A ``tl.range`` offset is a Python int in Triton's interpreter: its cast to int64 is
    ``tl.cast`` there (``offset.to(...)`` raised AttributeError on every config)."""
    x = torch.randn(37, 100, generator=torch.Generator().manual_seed(3))
    bound = first_best_column.bind((x,))
    for blocks in ([8, 32], [16, 16]):
        got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
        assert torch.equal(got, x.argmax(-1)), blocks


@tc.kernel(static_shapes=True)
def to_bf16(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Casts to bf16 of a loaded fp32 tile and of a computed one (a dot's operand's path)."""
    (n,) = x.size()
    out = torch.empty([n], dtype=torch.bfloat16, device=x.device)
    doubled = torch.empty([n], dtype=torch.bfloat16, device=x.device)
    for tn in tc.tile(n):
        xt = x[tn]
        out[tn] = xt.to(torch.bfloat16)
        doubled[tn] = (xt * 3.0).to(torch.bfloat16)
    return out, doubled


def test_bf16_casts_round_to_nearest_even_like_torch() -> None:
    """Triton's interpreter truncates fp32 -> bf16; the kernel must round as torch does, ties to
    even, inf, NaN, subnormals and values that round up into the next binade included."""
    g = torch.Generator().manual_seed(0)
    special = [-16.617, 9.1725, 1.005859, 1.00390625, 1.01171875, 3.4e38, -3.4e38, 1e-40, -0.0]
    special += [float("inf"), -float("inf"), float("nan"), 1.9990234375, 255.9]
    x = torch.cat([torch.tensor(special), torch.randn(1000, generator=g) * 100])
    out, doubled = to_bf16(x)
    torch.testing.assert_close(out, x.to(torch.bfloat16), rtol=0, atol=0, equal_nan=True)
    want = (x * 3.0).to(torch.bfloat16)
    torch.testing.assert_close(doubled, want, rtol=0, atol=0, equal_nan=True)


def test_bf16_casts_on_gpus_stay_plain_conversions() -> None:
    from tilecraft.targets.target import Target
    from tilecraft.tools.check import _bind_for

    bound = _bind_for(to_bf16, (torch.randn(64),), Target.parse("cuda:90"))
    code = bound.to_triton_code(bound.config_spec.default())
    assert ".to(tl.bfloat16)" in code and "_tc_to_bf16(" not in code, code
    interpreted = to_bf16.bind((torch.randn(64),))
    assert "_tc_to_bf16(" in interpreted.to_triton_code(interpreted.config_spec.default())


@tc.kernel(static_shapes=True)
def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        out[tm] = torch.logsumexp(x[tm, :], dim=-1)
    return out


def test_logsumexp_of_infinite_rows_follows_torch() -> None:
    """A row of -inf (a masked-out row in CTC or an HMM) gives -inf, not NaN; +inf gives inf."""
    inf = float("inf")
    x = torch.tensor([[-inf] * 6, [0.0, 1.0, -inf, 2.0, -inf, 3.0], [inf, 1.0, 2.0, 3.0, 4.0, 5.0]])
    x = torch.cat([x, torch.randn(4, 6) * 30])
    for config in (tc.Config(block_sizes=[2]), tc.Config(block_sizes=[1], reduction_loops=[4])):
        bound = row_logsumexp.bind((x,))
        got = bound.run(bound.compile_config(config), x)
        torch.testing.assert_close(got, torch.logsumexp(x, -1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(row_logsumexp.run_ref(x), torch.logsumexp(x, -1))


@tc.kernel(config=ROWS)
def row_max_and_index(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    values = torch.empty([m], dtype=x.dtype, device=x.device)
    indices = torch.empty([m], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        best, where = torch.max(x[tm, :], dim=-1)
        values[tm] = best
        indices[tm] = where
    return values, indices


def test_max_and_its_index_are_one_tuple_reduction() -> None:
    """``torch.max(x, dim)``'s values and indices come from one (value, index) reduction (each
    reduction crosses the warps once); NaN wins and ties keep the first index, as torch."""
    x = _with_nans()
    x[0, 2] = x[0, 9] = x[0].nan_to_num().max() + 1  # a tie: the first index
    code = _gpu_code(row_max_and_index, x)
    body = code.split("def launch")[0]
    assert body.count("tl.reduce(") == 1 and "_tc_argmax_nan)" in body
    values, indices = row_max_and_index(x)
    want = torch.max(x, dim=-1)
    torch.testing.assert_close(values, want.values, equal_nan=True)
    assert torch.equal(indices, want.indices)


@pytest.mark.gpu
def test_max_and_its_index_match_torch_on_the_gpu() -> None:
    x = torch.randn(1000, 700, device="cuda").round(decimals=1)  # many ties
    x[3, 5] = float("nan")
    values, indices = row_max_and_index(x)
    want = torch.max(x, dim=-1)
    torch.testing.assert_close(values, want.values, equal_nan=True)
    assert torch.equal(indices, want.indices)

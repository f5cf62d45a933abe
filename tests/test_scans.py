"""Scans and custom reductions: torch.cumsum / cumprod, tc.associative_scan and tc.reduce with a
user's combine function. Generated code, numerics in the interpreter against eager PyTorch (two
configs, padded tiles; on the GPU where there is one), ref mode, dtypes, cross-compiles for cuda:90
and hip:gfx942, errors."""

from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import DeviceCodeError, ShapeError, UnsupportedOpError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel


def running_max(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.maximum(a, b)


def add_then_halve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(a > b, a, b) * 1.0


@tc.kernel(static_shapes=True)
def scans(
    x: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.size()
    csum, cprod, cmax = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    rmax, tiled = x.new_empty([m]), torch.empty_like(x)
    for tm in tc.tile(m):
        v = x[tm, :]
        csum[tm, :] = torch.cumsum(v, dim=1)
        cprod[tm, :] = v.cumprod(-1)
        cmax[tm, :] = tc.associative_scan(running_max, v, 1)
        rmax[tm] = tc.reduce(add_then_halve, v, 1, other=float("-inf"))
    for tn in tc.tile(n):  # a scan down whole columns (a grid block's dim is refused)
        tiled[:, tn] = torch.cumsum(x[:, tn], dim=0)
    return csum, cprod, cmax, rmax, tiled


def _expected(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x.cumsum(1), x.cumprod(1), x.cummax(1).values, x.amax(1), x.cumsum(0)


def test_scan_codegen() -> None:
    x = torch.rand(13, 37) + 0.5
    bound = scans.bind((x,))
    code = bound.to_triton_code(bound.config_spec.default())
    assert "tl.cumsum(" in code and "tl.cumprod(" in code, code
    assert (
        "def _combine_0_running_max(lhs, rhs):" in code
        and "tl.maximum(lhs, rhs, propagate_nan=tl.PropagateNan.ALL)" in code
    )
    assert "tl.associative_scan(" in code and ", 1, _combine_0_running_max)" in code, code
    # a custom reduction's padded elements hold the user's identity
    assert "tl.reduce(tl.where(rmask_1[None, :], v, float('-inf')), 1, _combine_1" in code, code


@pytest.mark.parametrize("blocks", [[16, 16], [4, 8]])
def test_scan_numerics(blocks: list[int], device: str) -> None:
    x = torch.rand(13, 37, device=device) + 0.5
    bound = scans.bind((x,))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
    for g, e in zip(got, _expected(x), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    ref = scans.run_ref(x)  # ref mode runs one whole tile
    for g, e in zip(ref, _expected(x), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def int_and_half_cumsum(x: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    a = torch.empty_like(x)
    b = k.new_empty(k.shape, dtype=torch.int64)
    for tm in tc.tile(m):
        a[tm, :] = torch.cumsum(x[tm, :], dim=-1)
        b[tm, :] = torch.cumsum(k[tm, :], dim=-1)
    return a, b


def test_cumsum_dtypes_follow_torch(device: str) -> None:
    x = torch.randn(6, 50, device=device).to(torch.bfloat16)
    k = torch.randint(-5, 5, (6, 50), dtype=torch.int32, device=device)
    a, b = int_and_half_cumsum(x, k)
    assert a.dtype == torch.bfloat16 and b.dtype == torch.int64
    torch.testing.assert_close(a, x.float().cumsum(1).to(torch.bfloat16), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(b, k.cumsum(1))
    code = int_and_half_cumsum.bind((x.cpu(), k.cpu())).to_triton_code(tc.Config(block_sizes=[2]))
    # bf16 in fp32 (the interpreter widens through the bits: it got subnormals wrong)
    assert "v = _tc_from_bf16(load)\n    v_1 = tl.cumsum(v, 1)" in code, code
    assert "v_3 = load_1.to(tl.int64)\n    v_4 = tl.cumsum(v_3, 1)" in code, code


def test_scan_dim_cannot_be_chunked() -> None:
    spec = scans.bind((torch.rand(13, 37),)).config_spec
    assert len(spec.reductions) == 2  # the rows' dim and the columns' (both scanned whole)
    for reduction in spec.reductions:
        assert not reduction.loopable and "scan" in reduction.reason, reduction


@pytest.mark.crosscompile
def test_scans_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x = torch.randn(512, 1000, dtype=torch.bfloat16)
    rows = check_kernel(scans, (x,), targets, lambda b: [b.config_spec.default()])
    assert len(rows) == 4  # two device loops per target
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


def pair(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return a, b


@tc.kernel(static_shapes=True)
def scans_tuple(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = tc.associative_scan(pair, x[tm, :], 1)
    return out


def test_combine_returning_two_values_is_an_error(device: str) -> None:
    with pytest.raises(DeviceCodeError, match=r"combine function 'pair' returned 2 values") as info:
        scans_tuple(torch.rand(4, 8, device=device))
    assert "test_scans.py" in str(info.value)


def test_eager_meanings() -> None:
    x = torch.rand(3, 9).to(torch.bfloat16)
    torch.testing.assert_close(
        tc.associative_scan(running_max, x, 1), x.float().cummax(1).values.to(x.dtype)
    )
    torch.testing.assert_close(
        tc.reduce(running_max, x, 0, keep_dims=True), x.float().amax(0, keepdim=True).to(x.dtype)
    )


@tc.kernel(static_shapes=True)
def reverse_scan(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = tc.associative_scan(lambda a, b: a + b, x[tm, :], 1, reverse=True)
    return out


@tc.kernel(static_shapes=True)
def reverse_scan_by_index(x: torch.Tensor) -> torch.Tensor:
    """The refusal's hint: a forward scan over the data loaded in reverse order."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        backwards = (n - 1) - tc.arange(n)
        out[tm, backwards] = torch.cumsum(x[tm, backwards], dim=1)
    return out


def test_reverse_scan_along_a_whole_dim(device: str) -> None:
    """Flipped, scanned forward and flipped back: the padding (300 -> 512) stays at the end."""
    x = torch.randn(5, 300, generator=torch.Generator().manual_seed(2)).to(device)
    expected = x.flip(1).cumsum(1).flip(1)
    for got in (reverse_scan(x), reverse_scan.run_ref(x), reverse_scan_by_index(x)):
        # fp32 sums of 300 values in another order: errors of ~1e-5 where the sum nears 0
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    code = reverse_scan.bind((x.cpu(),)).to_triton_code(tc.Config(block_sizes=[2]))
    # the loaded row's flip reads x at the mirrored positions (300 > 32 elements a line: a
    # register gather costs shuffles per element); the scanned values' flip back goes
    # through a scratch row (300 > 256 positions: codegen/gather_memory.py)
    assert "tl.gather(" not in code and "tl.associative_scan(" in code, code
    assert code.count("gather_row = _tc_gather_") == 1, code
    x = torch.randn(5, 64, device=device)  # a whole power-of-two row: both flips are tl.flip
    torch.testing.assert_close(reverse_scan(x), x.flip(1).cumsum(1).flip(1), rtol=1e-5, atol=1e-5)
    code = reverse_scan.bind((x.cpu(),)).to_triton_code(tc.Config(block_sizes=[2]))
    assert code.count("tl.flip(") == 2 and "tl.gather(" not in code, code


@tc.kernel(static_shapes=True)
def discounted_returns(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = r_t + gamma G_{t+1}: a reverse linear recurrence, scanned as (a, b) pairs."""
    m, n = rewards.size()
    out = torch.empty_like(rewards)
    for tm in tc.tile(m):
        r = rewards[tm, :]
        decay = torch.full_like(r, gamma)
        _, returns = tc.associative_scan(linear_step, (decay, r), 1, reverse=True)
        out[tm, :] = returns
    return out


def test_reverse_linear_recurrence(device: str) -> None:
    r = torch.randn(4, 45, device=device)
    want = torch.zeros_like(r)
    running = torch.zeros(4, device=device)
    for i in reversed(range(45)):
        running = r[:, i] + 0.9 * running
        want[:, i] = running
    for got in (discounted_returns(r, 0.9), discounted_returns.run_ref(r, 0.9)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def reverse_scan_of_a_block(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in tc.tile([x.size(0), x.size(1)]):
        out[tm, tn] = tc.associative_scan(lambda a, b: a + b, x[tm, tn], 1, reverse=True)
    return out


def test_reverse_scan_of_a_block_is_refused_with_a_working_hint(device: str) -> None:
    with pytest.raises(ShapeError, match=r"tc.associative_scan along dim 1 .* restart") as info:
        reverse_scan_of_a_block(torch.randn(5, 37, device=device))
    assert "inner `for tk in tc.tile(n)`" in str(info.value) and "test_scans.py" in str(info.value)


def linear_step(
    a1: torch.Tensor, b1: torch.Tensor, a2: torch.Tensor, b2: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Composes h -> a1 h + b1 then h -> a2 h + b2 (associative)."""
    return a1 * a2, a2 * b1 + b2


@tc.kernel(static_shapes=True)
def recurrence(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """h[t] = a[t] * h[t - 1] + b[t] along each row (h[-1] = 0), and the running product of a."""
    m, n = a.size()
    h = torch.empty_like(b)
    decay = torch.empty_like(a)
    for tm in tc.tile(m):
        pairs = (a[tm, :].to(torch.float32), b[tm, :].to(torch.float32))
        prod, state = tc.associative_scan(linear_step, pairs, 1)
        h[tm, :] = state.to(h.dtype)
        decay[tm, :] = prod.to(decay.dtype)
    return h, decay


def _sequential(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h, p = torch.zeros(a.shape[0], device=a.device), torch.ones(a.shape[0], device=a.device)
    hs, ps = [], []
    for t in range(a.shape[1]):
        h, p = a[:, t].float() * h + b[:, t].float(), p * a[:, t].float()
        hs.append(h)
        ps.append(p)
    return torch.stack(hs, 1).to(b.dtype), torch.stack(ps, 1).to(a.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tuple_scan_computes_a_linear_recurrence(dtype: torch.dtype, device: str) -> None:
    gen = torch.Generator().manual_seed(0)
    a = (0.5 + 0.5 * torch.rand(5, 300, generator=gen)).to(dtype)  # 300: a padded tile
    b = torch.randn(5, 300, generator=gen).to(dtype)
    code = recurrence.bind((a, b)).to_triton_code(tc.Config(block_sizes=[2]))
    a, b = a.to(device), b.to(device)
    want = _sequential(a, b)
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    for got in (recurrence(a, b), recurrence.run_ref(a, b)):
        torch.testing.assert_close(got[0], want[0], **tol)
        torch.testing.assert_close(got[1], want[1], **tol)
    assert "def _combine_0_linear_step(lhs0, lhs1, rhs0, rhs1):" in code
    # one scan of the pair, whose results both outputs index
    assert code.count("tl.associative_scan((") == 1
    assert "scanned[0]" in code and "scanned[1]" in code


@pytest.mark.gpu
def test_tuple_scan_on_gpu() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = 0.5 + 0.5 * torch.rand(64, 1000, generator=gen, device="cuda")
    b = torch.randn(64, 1000, generator=gen, device="cuda")
    want = _sequential(a.cpu(), b.cpu())
    got = recurrence(a, b)
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got[1].cpu(), want[1], rtol=1e-4, atol=1e-4)


def linear_step_pairs(
    left: tuple[torch.Tensor, torch.Tensor], right: tuple[torch.Tensor, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's convention: one tuple per side."""
    return linear_step(*left, *right)


@tc.kernel(static_shapes=True)
def recurrence_pairs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    h = torch.empty_like(b)
    for tm in tc.tile(a.size(0)):
        _, state = tc.associative_scan(linear_step_pairs, (a[tm, :], b[tm, :]), 1)
        h[tm, :] = state
    return h


def test_tuple_scan_takes_torch_convention_combines(device: str) -> None:
    gen = torch.Generator().manual_seed(1)
    a, b = 0.5 + 0.5 * torch.rand(3, 50, generator=gen), torch.randn(3, 50, generator=gen)
    a, b = a.to(device), b.to(device)
    want = _sequential(a, b)[0]
    torch.testing.assert_close(recurrence_pairs(a, b), want, rtol=1e-4, atol=1e-4)
    eager = tc.associative_scan(linear_step_pairs, (a, b), 1)[1]
    torch.testing.assert_close(eager, want, rtol=1e-5, atol=1e-5)


def test_tuple_scan_eager_and_shape_errors(device: str) -> None:
    a, b = torch.rand(3, 9), torch.randn(3, 9)
    got = tc.associative_scan(linear_step, (a, b), 1)
    torch.testing.assert_close(got[1], _sequential(a, b)[0])

    @tc.kernel(static_shapes=True)
    def mismatched(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm in tc.tile(x.size(0)):
            _, s = tc.associative_scan(linear_step, (x[tm, :], y[tm, :8]), 1)
            out[tm, :8] = s
        return out

    with pytest.raises(ShapeError, match="differ in shape"):
        mismatched(torch.rand(4, 16, device=device), torch.rand(4, 16, device=device))


@pytest.mark.crosscompile
def test_tuple_scan_crosscompiles() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    a = torch.rand(64, 4096, dtype=torch.bfloat16)
    rows = check_kernel(recurrence, (a, a), targets, lambda b: [b.config_spec.default()])
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


def test_lambda_combines_scan_and_reduce(device: str) -> None:
    """A lambda's ``__name__`` is ``<lambda>``: the helper it becomes still has a valid name
    (it was ``_combine_0_<lambda>``, a SyntaxError in every config)."""

    @tc.kernel(static_shapes=True)
    def lambda_combines(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m, n = x.size()
        running = torch.empty_like(x)
        top = torch.empty([m], dtype=x.dtype, device=x.device)
        for tm in tc.tile(m):
            xt = x[tm, :]
            running[tm, :] = tc.associative_scan(lambda a, b: a + b, xt, dim=1)
            top[tm] = tc.reduce(lambda a, b: torch.maximum(a, b), xt, dim=1)
        return running, top

    x = torch.randn(5, 37, device=device)
    running, top = lambda_combines(x)
    torch.testing.assert_close(running, x.cumsum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(top, x.amax(1))
    code = lambda_combines.bind((x.cpu(),)).to_triton_code()
    assert "def _combine_0_lambda(" in code and "<lambda>" not in code.split("# src")[0], code


def _logaddexp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    hi = torch.maximum(a, b)
    return hi + torch.log1p(torch.exp(-torch.abs(a - b)))


def test_eager_scan_and_reduce_combine_in_a_tree() -> None:
    """Ref mode (the tuner's accuracy baseline) combines in log2(n) levels, as compiled code
    does: a logcumsumexp over 131072 fp32 values combined one after another was 4.3e-3 off the
    exact result (the compiled scan 2.3e-4), and the tuner then rejected accurate configs."""
    x = torch.randn(2, 131072, generator=torch.Generator().manual_seed(0)) * 3
    exact = torch.logcumsumexp(x.double(), dim=1)
    scanned = tc.associative_scan(_logaddexp, x, 1)
    assert (scanned.double() - exact).abs().max().item() < 5e-4
    backward = tc.associative_scan(_logaddexp, x, 1, reverse=True)
    exact_rev = torch.logcumsumexp(x.double().flip(1), dim=1).flip(1)
    assert (backward.double() - exact_rev).abs().max().item() < 5e-4
    tenths = torch.full((1 << 20,), 0.1)
    total = tc.reduce(lambda a, b: a + b, tenths, 0)  # 1M fp32 additions in sequence: 4% off
    assert abs(total.item() - 104857.6) < 0.1


def _affine(
    a0: torch.Tensor, b0: torch.Tensor, a1: torch.Tensor, b1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return a0 * a1, a1 * b0 + b1  # not commutative: the order of the halves matters


def test_eager_tree_scan_keeps_the_combine_order() -> None:
    gen = torch.Generator().manual_seed(3)
    a, b = 0.5 + 0.5 * torch.rand(3, 37, generator=gen), torch.randn(3, 37, generator=gen)
    got_a, got_b = tc.associative_scan(_affine, (a, b), 1)
    h = torch.zeros(3)
    for i in range(37):
        h = a[:, i] * h + b[:, i]
        torch.testing.assert_close(got_b[:, i], h)
    torch.testing.assert_close(got_a, torch.cumprod(a, 1))
    x = torch.randn(2, 37, generator=gen)  # "first" and "last" are associative, not commutative
    torch.testing.assert_close(tc.reduce(lambda p, q: p, x, 1), x[:, 0])
    torch.testing.assert_close(tc.reduce(lambda p, q: q, x, 1, keep_dims=True), x[:, -1:])


@pytest.mark.crosscompile
def test_reverse_scans_cross_compile() -> None:
    assert_defaults_cross_compile(discounted_returns, (torch.randn(4096, 1000), 0.99))


@pytest.mark.gpu
def test_reverse_linear_recurrence_on_gpu() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    r = torch.randn(256, 1000, generator=gen, device="cuda")
    want = torch.zeros_like(r)
    running = torch.zeros(256, device="cuda", dtype=torch.float64)
    for i in reversed(range(1000)):
        running = r[:, i].double() + 0.99 * running
        want[:, i] = running.float()
    torch.testing.assert_close(discounted_returns(r, 0.99), want, rtol=1e-4, atol=1e-4)


@tc.kernel(static_shapes=True)
def suffix_sums(x: torch.Tensor) -> torch.Tensor:
    """Torch's idiom for a reverse cumsum: flip, cumsum, flip back."""
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = x[tm, :].flip(1).cumsum(1).flip(1)
    return out


def test_suffix_sums_by_flips(device: str) -> None:
    x = torch.randn(6, 37, device=device)  # 37 pads to 64: the padding stays after the flipped row
    torch.testing.assert_close(suffix_sums(x), x.flip(1).cumsum(1).flip(1), rtol=1e-5, atol=1e-5)
    code = suffix_sums.bind((x.cpu(),)).to_triton_code(tc.Config(block_sizes=[2]))
    assert code.count("tl.gather(") == 1 and "tl.cumsum(" in code, code  # a short line
    # past 256 positions the cumsum's flip goes through a scratch row
    x = torch.randn(6, 300, device=device)
    torch.testing.assert_close(suffix_sums(x), x.flip(1).cumsum(1).flip(1), rtol=1e-4, atol=1e-4)
    code = suffix_sums.bind((x.cpu(),)).to_triton_code(tc.Config(block_sizes=[2]))
    assert code.count("gather_row = _tc_gather_") == 1 and "tl.gather(" not in code, code


@tc.kernel(static_shapes=True)
def suffix_products(x: torch.Tensor) -> torch.Tensor:
    """A reverse cumprod of bf16 rows by flips: scanned in fp32, rounded to bf16 once."""
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = torch.flip(torch.cumprod(torch.flip(x[tm, :], [1]), dim=1), [1]).to(x.dtype)
    return out


def test_flip_scan_flip_of_a_power_of_two_row_is_one_reverse_scan(device: str) -> None:
    """Along a whole power-of-two dim (no padding to move) the flips around a sum or product
    scan become ``reverse=True`` (H200, suffix sums of 4096 fp32 a row: the two tl.flip
    butterflies ran 1.18 ms against torch.compile's 0.223)."""
    x = torch.randn(6, 64, device=device)
    code = suffix_sums.bind((x.cpu(),)).to_triton_code(tc.Config(block_sizes=[2]))
    assert "tl.cumsum(" in code and "reverse=True" in code, code
    assert "tl.flip(" not in code and "tl.gather(" not in code, code
    for blocks in ([1], [4]):
        bound = suffix_sums.bind((x,))
        got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
        torch.testing.assert_close(got, x.flip(1).cumsum(1).flip(1), rtol=1e-5, atol=1e-5)
    y = (1.0 + 0.05 * torch.randn(5, 32, device=device)).to(torch.bfloat16)
    code = suffix_products.bind((y.cpu(),)).to_triton_code(tc.Config(block_sizes=[2]))
    assert "tl.cumprod(" in code and "reverse=True" in code and "tl.flip(" not in code, code
    want = y.float().flip(1).cumprod(1).flip(1).to(torch.bfloat16)
    torch.testing.assert_close(suffix_products(y), want)
    # a combine function's reverse scan keeps its flips (its argument order is the eager one's)
    code = reverse_scan.bind((x.cpu(),)).to_triton_code(tc.Config(block_sizes=[2]))
    assert code.count("tl.flip(") == 2 and not re.search(r"tl\.\w+\(.*reverse=True", code), code


@tc.kernel(static_shapes=True)
def running_extremes(
    x: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """torch.cummax / Tensor.cummin along each row (values and indices)."""
    m, n = x.size()
    top, top_at = torch.empty_like(x), torch.empty(m, n, dtype=torch.int64, device=x.device)
    low, low_at = torch.empty_like(x), torch.empty(m, n, dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        values, indices = torch.cummax(x[tm, :], dim=1)
        top[tm, :], top_at[tm, :] = values, indices
        smallest = x[tm, :].cummin(1)
        low[tm, :], low_at[tm, :] = smallest.values, smallest.indices
    return top, top_at, low, low_at


def test_cummax_and_cummin_match_torch_on_ties_and_nans(device: str) -> None:
    """Small integers give ties (torch takes the later index); a NaN, once met, stays (with
    the last NaN's index); 37 columns pad to 64."""
    x = torch.randint(0, 5, (7, 37), device=device).float()
    x[2, 5] = x[3, 9] = x[3, 20] = float("nan")
    want = (*torch.cummax(x, 1), *torch.cummin(x, 1))
    for got in (running_extremes(x), running_extremes.run_ref(x)):
        for have, expect in zip(got, want, strict=True):
            torch.testing.assert_close(have, expect, equal_nan=True)
    assert_defaults_cross_compile(running_extremes, (torch.randn(512, 1000),))


@tc.kernel(static_shapes=True)
def running_max_only(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The values of one cummax and the indices of another: a running max needs no positions,
    a running argmax needs both."""
    m, n = x.size()
    top = torch.empty_like(x)
    at = torch.empty(m, n, dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        values, _ = torch.cummax(x[tm, :], dim=1)
        top[tm, :] = values
        at[tm, :] = torch.cummin(x[tm, :], dim=1).indices
    return top, at


def test_a_cummax_whose_indices_are_unused_scans_the_values_alone(device: str) -> None:
    """ir/tuple_scans.py: the positions' scan member goes with its dead result (a [16, 512]
    fp32 column cummax: 190 -> 128 registers on sm_90); the cummin's indices keep both members
    (its pick reads the values)."""
    x = torch.randint(0, 5, (7, 37)).float()
    x[2, 5] = x[3, 9] = x[3, 20] = float("nan")
    bound = running_max_only.bind((x,))
    code = bound.to_triton_code(bound.config_spec.default())
    x = x.to(device)
    helpers = re.findall(r"def (_combine_\d+_\w+)\((.*)\):", code)
    assert sorted(params for _, params in helpers) == ["lhs, rhs", "lhs0, lhs1, rhs0, rhs1"], code
    assert code.count("tl.associative_scan(") == 2, code
    top, at = running_max_only(x)
    torch.testing.assert_close(top, torch.cummax(x, 1).values, equal_nan=True)
    torch.testing.assert_close(at, torch.cummin(x, 1).indices)
    assert_defaults_cross_compile(running_max_only, (torch.randn(512, 1000),))


@tc.kernel(static_shapes=True)
def reduce_a_pair(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tm in tc.tile(x.size(0)):
        row = x[tm, :]
        best, _ = tc.reduce(lambda a, b: (a, b), (row, row), 1)
        out[tm] = best
    return out


def test_a_tuple_reduce_names_the_call_and_what_to_use(device: str) -> None:
    with pytest.raises(UnsupportedOpError, match="tc.reduce of a tuple of 2 tiles") as info:
        reduce_a_pair(torch.randn(4, 8, device=device))
    assert "torch.max(x, dim)" in str(info.value) and "test_scans.py" in str(info.value)

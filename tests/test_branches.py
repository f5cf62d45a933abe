"""``if`` on data in device code: conditions on loaded scalars and on tile attributes, values
assigned in branches (carried out of the ``if``), stores inside branches, blocks skipped above a
causal diagonal; interpreter and ref mode against eager, cross-compiles, and the errors."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError, ShapeError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

HAS_CUDA = torch.cuda.is_available()


@tc.kernel(static_shapes=True)
def gated_rows(x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    """Rows whose flag is set are doubled, others negated; rows with flag 2 are also counted."""
    m, n = x.size()
    out = torch.empty_like(x)
    counts = torch.zeros([m], dtype=torch.int32, device=x.device)
    for tb in tc.grid(m):
        v = x[tb, :]
        if flags[tb] > 0:
            y = v * 2.0
            if flags[tb] == 2:
                counts[tb] = 1
        else:
            y = -v
        out[tb, :] = y
    return out, counts


def _gated_ref(x: torch.Tensor, flags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    on = (flags > 0)[:, None]
    return torch.where(on, x * 2.0, -x), (flags == 2).to(torch.int32)


@tc.kernel(static_shapes=True)
def causal_row_sums(x: torch.Tensor) -> torch.Tensor:
    """sum over j <= i of x[i, j], one key block at a time, skipping blocks above the diagonal
    (the blocks causal attention never needs)."""
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            if tn.begin < tm.end:
                keep = tn.index[None, :] <= tm.index[:, None]
                acc = acc + torch.where(keep, x[tm, tn].float(), 0.0).sum(1)
        out[tm] = acc
    return out


def _causal_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.tril(x.float()).sum(1)


def _flags(m: int) -> torch.Tensor:
    return torch.arange(m, dtype=torch.int32) % 3


def test_if_on_loaded_scalars() -> None:
    x, flags = torch.randn(9, 20), _flags(9)
    bound = gated_rows.bind((x, flags))
    code = bound.to_triton_code(bound.config_spec.default())
    assert code.count("if ") >= 2 and "else:" in code, code
    got = bound.run(bound.compile_config(bound.config_spec.default()), x, flags)
    for g, e in zip(got, _gated_ref(x, flags), strict=True):
        torch.testing.assert_close(g, e)
    for g, e in zip(gated_rows.run_ref(x, flags), _gated_ref(x, flags), strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("blocks", [[16, 16], [8, 32], [32, 8]])
def test_skipping_blocks_above_the_diagonal(blocks: list[int]) -> None:
    x = torch.randn(70, 70)
    bound = causal_row_sums.bind((x,))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
    torch.testing.assert_close(got, _causal_ref(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(causal_row_sums.run_ref(x), _causal_ref(x), rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def branch_on_a_tile(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        v = x[tm]
        if v > 0:
            v = v * 2.0
        out[tm] = v
    return out


@tc.kernel(static_shapes=True)
def changes_dtype(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tb in tc.grid(x.size(0)):
        v = x[tb, :]
        if tb > 2:
            v = v.to(torch.float16)
        out[tb, :] = v
    return out


@tc.kernel(static_shapes=True)
def one_sided(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tb in tc.grid(x.size(0)):
        if tb > 2:
            w = x[tb, :]
        out[tb, :] = w
    return out


def test_branch_errors_say_what_to_write() -> None:
    x = torch.randn(8, 16)
    with pytest.raises(DeviceCodeError, match=r"`if` on a tile of shape \[BLOCK_0\]") as info:
        branch_on_a_tile(x[:, 0].contiguous())
    assert "torch.where" in str(info.value) and "test_branches.py" in str(info.value)
    with pytest.raises(DeviceCodeError, match=r"'v' changes dtype in an `if` branch"):
        changes_dtype(x)
    with pytest.raises(DeviceCodeError, match=r"name 'w' is not defined"):
        one_sided(x)


def test_shape_mismatch_between_branches_is_located() -> None:
    @tc.kernel(static_shapes=True)
    def grows(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tb in tc.grid(x.size(0)):
            v = x[tb, 0]
            if tb > 2:
                v = x[tb, :]
            out[tb, :] = v
        return out

    with pytest.raises(ShapeError, match=r"'v' changes shape in an `if` branch"):
        grows(torch.randn(4, 16))


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def sum_or_rows(x: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
    """One branch leaves ``s`` a scalar, the other a row: broadcast, ``torch.sum(s)`` would add
    the scalar 16 times (1024 instead of 64 on ones)."""
    (n,) = x.size()
    out = torch.zeros([1], device=x.device)
    for tn in tc.tile(n):
        if flag[0] > 0:  # noqa: SIM108 (a device `if`, the form under test)
            s = torch.sum(x[tn])
        else:
            s = x[tn]
        tc.atomic_add(out, [0], torch.sum(s))
    return out


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def shrinks(x: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
    """``s`` is a row before the ``if`` and a scalar after its branch."""
    (n,) = x.size()
    out = torch.zeros([1], device=x.device)
    for tn in tc.tile(n):
        s = x[tn]
        if flag[0] > 0:
            s = torch.sum(s)
        tc.atomic_add(out, [0], torch.sum(s))
    return out


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def zero_or_rows(x: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
    """A Python number in one branch fills the row's shape (as in any elementwise use)."""
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        v = x[tn]
        if flag[0] > 0:
            v = 0.0
        out[tn] = v + 1.0
    return out


def test_a_branch_value_of_another_shape_is_an_error_not_a_broadcast() -> None:
    x, on = torch.ones(64), torch.ones(1, dtype=torch.int32)
    for kernel in (sum_or_rows, shrinks):
        with pytest.raises(ShapeError, match=r"'s' changes shape in an `if` branch") as info:
            kernel(x, on)
        assert "one shape on every path" in str(info.value)
        assert "test_branches.py" in str(info.value)
    torch.testing.assert_close(zero_or_rows(x, on), torch.ones(64))
    torch.testing.assert_close(zero_or_rows(x, 0 * on), torch.full((64,), 2.0))


@pytest.mark.crosscompile
def test_branches_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x = torch.randn(1000, 512, dtype=torch.bfloat16)
    rows = check_kernel(gated_rows, (x, _flags(1000)), targets, _default)
    rows += check_kernel(causal_row_sums, (torch.randn(1000, 1000),), targets, _default)
    assert len(rows) == 4
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


def _default(bound: tc.BoundKernel) -> list[tc.Config]:
    return [bound.config_spec.default()]


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_branches_on_gpu() -> None:
    x, flags = torch.randn(1000, 300, device="cuda"), _flags(1000).cuda()
    for g, e in zip(gated_rows(x, flags), _gated_ref(x, flags), strict=True):
        torch.testing.assert_close(g, e)
    y = torch.randn(2000, 2000, device="cuda")
    torch.testing.assert_close(causal_row_sums(y), _causal_ref(y), rtol=1e-4, atol=1e-3)


@tc.kernel(static_shapes=True)
def jagged_sums(x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: the sum of its first lengths[row] values (a loop bound loaded from memory), and
    the index of its first value <= -1 (a condition on loaded data each iteration)."""
    m, n = x.size()
    sums = torch.empty([m], dtype=torch.float32, device=x.device)
    firsts = torch.empty([m], dtype=torch.int32, device=x.device)
    for tb in tc.grid(m):
        limit = lengths[tb]
        i = 0
        acc = 0.0
        while i < limit:
            acc = acc + x[tb, i]
            i = i + 1
        sums[tb] = acc
        j = 0
        while x[tb, j] > -1.0:
            j += 1
        firsts[tb] = j
    return sums, firsts


def _jagged_inputs(m: int, n: int, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(m + n)
    x = torch.rand(m, n, generator=g) * 1.8 - 0.9  # in (-0.9, 0.9): no value <= -1 ...
    stop = torch.randint(0, n, (m,), generator=g)
    x[torch.arange(m), stop] = -2.0  # ... but one per row
    lengths = torch.randint(0, n + 1, (m,), generator=g, dtype=torch.int32)
    return x.to(device), lengths.to(device)


def _jagged_ref(x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    cols = torch.arange(x.size(1), device=x.device)[None, :]
    sums = torch.where(cols < lengths[:, None].long(), x, 0.0).sum(1)
    firsts = (x <= -1.0).int().argmax(1).int()
    return sums, firsts


def test_while_with_data_dependent_bounds() -> None:
    x, lengths = _jagged_inputs(11, 40)
    bound = jagged_sums.bind((x, lengths))
    code = bound.to_triton_code(bound.config_spec.default())
    assert sum(line.strip().startswith("while go") for line in code.splitlines()) == 2, code
    got = bound.run(bound.compile_config(bound.config_spec.default()), x, lengths)
    for g, e in zip(got, _jagged_ref(x, lengths), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    for g, e in zip(jagged_sums.run_ref(x, lengths), _jagged_ref(x, lengths), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def counted_while(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        k = 0  # a Python int the body changes: carried, so the loop runs on the device
        while k < 3:
            k += 1
        out[tm] = x[tm] * k
    return out


@tc.kernel(static_shapes=True)
def static_while(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        k = 3
        while k > 5:  # nothing in the loop changes k: never or forever
            out[tm] = x[tm]
    return out


def test_while_on_a_compile_time_condition_is_refused() -> None:
    x = torch.randn(8)
    torch.testing.assert_close(counted_while(x), x * 3)
    with pytest.raises(DeviceCodeError, match=r"`while` on a compile-time condition") as info:
        static_while(x)
    assert "tc.static_range" in str(info.value) and "test_branches.py" in str(info.value)


@pytest.mark.crosscompile
def test_while_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    rows = check_kernel(jagged_sums, _jagged_inputs(100, 300), targets, _default)
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_while_on_gpu() -> None:
    x, lengths = _jagged_inputs(1000, 500, "cuda")
    for g, e in zip(jagged_sums(x, lengths), _jagged_ref(x, lengths), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


@tc.kernel(static_shapes=True)
def per_row_mode(x: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Each row by its code: doubled, centred on its max, or plus one (stores and a reduction
    in the elif / else branches)."""
    m, _ = x.size()
    out = torch.zeros_like(x)
    for tm in tc.tile(m, block_size=1):
        if codes[tm.begin] == 0:
            out[tm.begin, :] = x[tm.begin, :] * 2.0
        elif codes[tm.begin] == 1:
            out[tm.begin, :] = x[tm.begin, :] - torch.amax(x[tm.begin, :])
        else:
            out[tm.begin, :] = x[tm.begin, :] + 1.0
    return out


def test_else_branches_that_store_and_reduce() -> None:
    """The resource model numbered only an if's body: a store or reduction in its else branch
    had no program position (a KeyError from the default's register estimate)."""
    x, codes = torch.randn(11, 21), torch.randint(0, 3, (11,))
    first = (codes == 0)[:, None]
    want = torch.where(first, x * 2, torch.where((codes == 1)[:, None], x - x.amax(1, True), x + 1))
    torch.testing.assert_close(per_row_mode(x, codes), want)
    torch.testing.assert_close(per_row_mode.run_ref(x, codes), want)
    rows = check_kernel(
        per_row_mode,
        (torch.randn(4096, 1000), torch.randint(0, 3, (4096,))),
        [Target.parse("cuda:90")],
        lambda bound: [bound.config_spec.default()],
    )
    assert rows and all(r.report is not None and r.report.ok for r in rows), rows


@tc.kernel(static_shapes=True)
def bag_sums(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Sums of the rows of x in each bag [offsets[i], offsets[i + 1]) (the last bag runs to
    the end), its end chosen by a ternary on device data."""
    n, d = x.size()
    b = offsets.size(0)
    out = torch.empty([b, d], dtype=torch.float32, device=x.device)
    for tb in tc.tile(b, block_size=1):
        start = offsets[tb.begin]
        end = offsets[tb.begin + 1] if tb.begin + 1 < b else n
        scale = 2.0 if d > 4 else 1.0  # a host condition: plain Python
        acc = tc.zeros([d], dtype=torch.float32)
        for tk in tc.tile(start, end, block_size=4):
            rows = torch.where(tk.index[:, None] < end, x[tk, :], 0.0)
            acc = acc + torch.sum(rows, dim=0)
        out[tb.begin, :] = acc * scale
    return out


def test_a_ternary_on_device_data_branches_like_an_if() -> None:
    """``end = offsets[i + 1] if i + 1 < b else n`` raised 'a scalar device value was used as
    a Python bool'; it is the ``if`` statement it stands for."""
    x = torch.randn(11, 6)
    offsets = torch.tensor([0, 3, 3, 7])
    ends = [3, 3, 7, 11]
    want = torch.stack([x[s:e].sum(0) for s, e in zip(offsets.tolist(), ends, strict=True)]) * 2
    torch.testing.assert_close(bag_sums(x, offsets), want)

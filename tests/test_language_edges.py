"""The language's advanced features at their edges (fuzz round 51d): a tuple of floats as an
argument specializes by value, ``tc.register_block_size(lo, hi)`` keeps blocks at least ``lo``,
``tc.reduce`` without ``other=`` skips a partial tile's padding (any combine), and a number
constant a ``tc.triton_call`` function reads compiles for GPUs. Interpreter numerics against
eager, cross-compiles for cuda:90 / gfx942."""

from __future__ import annotations

import operator

import pytest
import torch
import triton
import triton.language as tl

import tilecraft as tc
from tilecraft.errors import ArgumentError, ConfigError, DeviceCodeError, UnsupportedOpError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

TARGETS = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]


@tc.kernel(static_shapes=True)
def affine(x: torch.Tensor, coefficients: tuple[float, float]) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = x[tn] * coefficients[0] + coefficients[1]  # read in device code: baked in
    return out


def test_a_tuple_of_floats_specializes_by_value(device: str) -> None:
    """The second call reused the first's compile (its key held the floats' type only)."""
    x = torch.randn(50, device=device)
    torch.testing.assert_close(affine(x, (1.0, 2.0)), x + 2.0)
    torch.testing.assert_close(affine(x, (3.0, -1.0)), x * 3.0 - 1.0)
    torch.testing.assert_close(
        affine(x, [0.5, float("nan")]), x * 0.5 + float("nan"), equal_nan=True
    )


@tc.kernel(static_shapes=True)
def blocked_sums(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    block = tc.register_block_size(32, 64)
    out = torch.zeros([tc.cdiv(n, block)], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n, block_size=block):
        out[tn.id] = x[tn].sum()
    return out


def test_a_registered_block_is_at_least_its_lo() -> None:
    x = torch.randn(256)
    spec = blocked_sums.bind((x,)).config_spec
    assert spec.blocks[0].lo == 32
    with pytest.raises(ConfigError, match="below 32 .*register_block_size"):
        spec.normalize(tc.Config(block_sizes=[4]))
    assert spec.default().block_sizes[0] >= 32
    rng = __import__("random").Random(0)
    assert all(spec.random(rng).block_sizes[0] in (32, 64) for _ in range(20))


@tc.kernel(static_shapes=True)
def row_products(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    prods = torch.empty([m], dtype=x.dtype, device=x.device)
    best = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        prods[tm] = tc.reduce(operator.mul, x[tm, :], 1)
        best[tm] = tc.reduce(torch.maximum, x[tm, :] - 10.0, 1)
    return prods, best


def test_a_custom_reduction_without_other_skips_the_padding(device: str) -> None:
    """23 columns pad to 32: the padding's 0 made every product 0 and every max of negative
    values 0, depending on the config."""
    x = (torch.rand(37, 23) + 0.5).to(device)
    prods, best = row_products(x)
    torch.testing.assert_close(prods, x.prod(1), rtol=1e-5, atol=0)
    torch.testing.assert_close(best, x.amax(1) - 10.0)
    rows = check_kernel(row_products, (x.cpu(),), TARGETS, lambda b: [b.config_spec.default()])
    assert len(rows) == 2 and all(r.report is not None and r.report.ok for r in rows)


OFFSET = 0.5


@triton.jit
def _shift(x):  # type: ignore[no-untyped-def]
    return x + OFFSET


@tc.kernel(static_shapes=True)
def shifted(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = tc.triton_call(
            _shift, x[t], out_shape=[t], out_dtype=x.dtype, ref=lambda v: v + 0.5
        )
    return out


@pytest.mark.crosscompile
def test_a_triton_call_reading_a_number_constant_compiles_for_gpus() -> None:
    """The constant was copied as ``OFFSET = 0.5``: the interpreter read it, Triton's GPU code
    generator refuses a plain global."""
    x = torch.randn(40)
    code = shifted.bind((x,)).to_triton_code(tc.Config(block_sizes=[16]))
    assert "OFFSET = tl.constexpr(0.5)" in code
    rows = check_kernel(shifted, (x,), TARGETS, lambda b: [tc.Config(block_sizes=[16])])
    assert len(rows) == 2 and all(r.report is not None and r.report.ok for r in rows), rows


def test_a_triton_call_reading_a_number_constant_runs(device: str) -> None:
    x = torch.randn(40, device=device)
    torch.testing.assert_close(shifted(x), x + 0.5)


def _rows(x: torch.Tensor, tm: object) -> torch.Tensor:
    return x[tm, :]


@tc.kernel(static_shapes=True)
def doubled_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m // 2, n], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m // 2):
        out[tm, :] = _rows(x, tm) * 2.0
    return out


def test_a_helper_subscripting_with_a_tile_runs_in_ref_mode(device: str) -> None:
    """Ref mode rewrites the kernel's own subscripts only: in a helper torch took the tile as
    its size (row 8 for every row here), and the autotuner's baseline then failed every
    config."""
    x = torch.randn(16, 6, device=device)
    torch.testing.assert_close(doubled_rows.run_ref(x), x[:8] * 2.0)
    torch.testing.assert_close(doubled_rows(x), x[:8] * 2.0)


def _row_sums(x: torch.Tensor, tm: object, n: int) -> object:
    acc = tc.zeros([tm], dtype=torch.float32)
    for tn in tc.tile(n):
        acc = acc + x[tm, tn].sum(1)
    return acc


@tc.kernel(static_shapes=True)
def sums_in_a_helper(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        out[tm] = _row_sums(x, tm, n)
    return out


def test_a_loop_in_a_helper_is_refused_by_name() -> None:
    with pytest.raises(DeviceCodeError, match="in a helper function called from device code"):
        sums_in_a_helper(torch.randn(8, 40))


@tc.kernel(static_shapes=True)
def pair_reduce(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm] = tc.reduce(operator.add, (x[tm, :], x[tm, :]), 1)
    return out


@tc.kernel(static_shapes=True)
def empty_max(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm] = tc.reduce(torch.maximum, x[tm, :], 1, other=float("-inf"))
    return out


def test_ref_mode_reduce_refuses_a_tuple_and_returns_other_for_an_empty_dim() -> None:
    """Ref mode raised an internal AttributeError / IndexError where compiled code refuses the
    tuple by name and gives ``other`` for a dim of 0 elements."""
    x = torch.randn(4, 6)
    for run in (pair_reduce, pair_reduce.run_ref):
        with pytest.raises(UnsupportedOpError, match="tc.reduce of a tuple of 2 tiles"):
            run(x)
    empty = torch.randn(4, 0)
    assert torch.equal(empty_max.run_ref(empty), torch.full([4], float("-inf")))


@tc.kernel(static_shapes=True)
def plus_one(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] + 1.0
    return out


@tc.kernel(static_shapes=True)
def calls_a_kernel_in_device_code(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = plus_one(x[t]) * 2.0
    return out


def test_a_kernel_called_from_device_code_is_refused_by_name() -> None:
    """The message was about the callee's loop bounds ('must be host ints, got a Sym')."""
    with pytest.raises(DeviceCodeError, match="kernel 'plus_one' called from device code") as e:
        calls_a_kernel_in_device_code(torch.randn(20))
    assert "test_language_edges.py" in str(e.value)


@tc.kernel(static_shapes=True)
def exp_into(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(m):
        torch.exp(x[t, :], out=out[t, :])  # dropped before: out kept torch.empty's garbage
    return out


@tc.kernel(static_shapes=True)
def asserts_data(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        v = x[t]
        assert (v > 0).all(), "positive"  # dropped before; ref mode raised
        out[t] = v
    return out


@tc.kernel(static_shapes=True)
def prints_a_tile(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        print("tile:", x[t])  # printed a tracer placeholder once
        out[t] = x[t]
    return out


@pytest.mark.parametrize(
    ("kernel", "needle"),
    [
        (exp_into, r"torch.exp\(..., out=...\) in device code"),
        (asserts_data, "`assert` on a device value"),
        (prints_a_tile, r"print\(\) of a tile in device code"),
    ],
)
def test_first_hour_mistakes_are_refused_at_their_line(kernel: tc.Kernel, needle: str) -> None:
    with pytest.raises((DeviceCodeError, UnsupportedOpError), match=needle) as info:
        kernel(torch.rand(4, 8) + 1.0 if kernel is exp_into else torch.rand(16) + 1.0)
    assert "test_language_edges.py" in str(info.value)


@tc.kernel(static_shapes=True)
def host_total(x: torch.Tensor) -> torch.Tensor:
    s = torch.zeros([1], dtype=x.dtype, device=x.device)
    total = 0.0
    for t in tc.tile(x.size(0)):
        total = total + x[t, :].sum()  # compiled: nothing carried, the host kept 0.0
    s[0] = total
    return s


@tc.kernel(static_shapes=True)
def running_best(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    best = -1e30
    for t in tc.tile(x.size(0)):
        best = torch.maximum(best, x[t, :].amax(1))  # each tile's own max, compiled
        out[t] = best
    return out


@tc.kernel(static_shapes=True)
def rebinds_in_the_body(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    scale = 3.0
    for t in tc.tile(x.size(0)):
        scale = x[t] * 2.0  # bound in the body first: a tile value from here on
        scale = scale + 1.0
        out[t] = scale
    return out


def test_a_host_value_carried_across_a_device_loops_tiles_is_refused(device: str) -> None:
    x = torch.randn(16, 8, device=device)
    for kernel, name in ((host_total, "total"), (running_best, "best")):
        with pytest.raises(DeviceCodeError, match=f"'{name}' is updated from itself") as info:
            kernel(x)
        assert "tc.atomic_add" in str(info.value)
    y = torch.randn(16, device=device)
    torch.testing.assert_close(rebinds_in_the_body(y), y * 2.0 + 1.0)


@tc.kernel(static_shapes=True)
def allocates_in_the_loop(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        tmp = torch.empty_like(x)  # an output made in device code
        tmp[t, :] = x[t, :]
        out[t, :] = x[t, :]
    return out


def test_an_allocation_in_the_device_loop_gets_the_allocation_hint() -> None:
    with pytest.raises(DeviceCodeError, match="torch.empty_like of a host tensor") as info:
        allocates_in_the_loop(torch.randn(8, 4))
    assert "allocate outputs in host code" in str(info.value)


GLOBAL_WEIGHT = torch.randn(16)


@tc.kernel(static_shapes=True)
def scales_by_a_global(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t, :] = x[t, :] * GLOBAL_WEIGHT[None, :]
    return out


def test_a_global_tensor_in_device_code_is_named_with_a_hint() -> None:
    """It said 'cannot use a Tensor as a device value', without a name or a hint."""
    with pytest.raises(UnsupportedOpError, match=r"tensor of shape \[1, 16\] that is not the"):
        scales_by_a_global(torch.randn(8, 16))


def test_wrong_definitions_and_ref_calls_name_the_kernel() -> None:
    """tc.kernel(42) raised AttributeError '__name__', a lambda 'got Assign', and run_ref with
    the wrong arguments a TypeError naming ref mode's internal wrapper."""
    with pytest.raises(ArgumentError, match="got int 42"):
        tc.kernel(42)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="got a lambda"):
        tc.kernel(lambda x: x * 2)
    with pytest.raises(ArgumentError, match=r"plus_one\(\): too many positional arguments"):
        plus_one.run_ref(torch.randn(4), torch.randn(4))


@tc.kernel(static_shapes=True)
def scores(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty([a.size(0), b.size(0)], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([a.size(0), b.size(0)]):
        out[tm, tn] = a[tm, :] @ b[tn, :].T
    return out


def test_an_inner_dim_mismatch_prints_both_sizes() -> None:
    from tilecraft.errors import ShapeError

    with pytest.raises(ShapeError, match=r"inner dims differ: .*\(32\).* @ .*\(24\)"):
        scores(torch.randn(16, 32), torch.randn(16, 24))


@tc.kernel(static_shapes=True)
def calls_tl_exp(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = tl.exp(x[t])
    return out


@tc.kernel(static_shapes=True)
def calls_tl_sum(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = tl.sum(x[t], axis=0) + x[t]
    return out


@tc.kernel(static_shapes=True)
def calls_a_jit_function(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = _shift(x[t])
    return out


@pytest.mark.parametrize(
    ("kernel", "call", "hint"),
    [
        (calls_tl_exp, "tl.exp()", "torch.exp(...)"),
        (calls_tl_sum, "tl.sum()", "torch.sum(...)"),
        (calls_a_jit_function, "_shift()", "tc.triton_call(_shift, ...)"),
    ],
)
def test_triton_functions_in_tile_code_are_refused_at_the_call(
    kernel: tc.Kernel, call: str, hint: str, device: str
) -> None:
    """tl.exp failed inside Triton ("Did you forget to add @triton.jit?"); tl.sum under the
    interpreter as a failure of "the kernel's host code" on a torch dtype."""
    with pytest.raises(UnsupportedOpError, match="is a Triton function") as info:
        kernel(torch.randn(16, device=device))
    text = str(info.value)
    assert call in text and hint in text and "test_language_edges.py:" in text, text


@tc.kernel(static_shapes=False)
def row_power_sums(x: torch.Tensor, q: int) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        out[tm] = (x[tm, :].float() ** q).sum(-1)
    return out


@tc.kernel(static_shapes=False)
def widened_by(x: torch.Tensor, r: int) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n * r], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :].repeat_interleave(r, dim=1)
    return out


def test_run_time_ints_as_exponents_and_counts(device: str) -> None:
    """With static_shapes=False an int argument is a run-time value: ``x ** q`` works (a device
    scalar exponent, negative bases too); a repeat count says to specialize it. Both failed
    with 'a scalar device value was used as a Python bool (in and, or, not...)', which the
    user had not written (a lowering compared it)."""
    x = torch.randn(6, 20, device=device)
    for q in (3, 2):
        torch.testing.assert_close(row_power_sums(x, q), (x**q).sum(-1), rtol=1e-5, atol=1e-5)
    with pytest.raises(DeviceCodeError, match="is known only at run time") as info:
        widened_by(x, 3)
    assert "tc.specialize" in str(info.value) and "Python bool" not in str(info.value)


@tc.kernel(static_shapes=True)
def grouped_in_body(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n // 10], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :].view(-1, n // 10, 10).amax(-1)
    return out


@tc.kernel(static_shapes=True)
def host_view_in_body(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :] * w.view(1, n)[0, :]
    return out


@tc.kernel(static_shapes=True)
def blocks_of_ten(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0), block_size=10):
        out[t] = x[t] * 2.0
    return out


@tc.kernel(static_shapes=False)
def arange_of_a_run_time_dim(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        row = x[tm, :]
        out[tm, :] = row * tc.arange(row.size(1))[None, :]
    return out


@pytest.mark.parametrize(
    ("kernel", "args", "error", "hint"),
    [
        (grouped_in_body, (40, 30), UnsupportedOpError, "view the host tensor before the loop"),
        (host_view_in_body, (8, 16), DeviceCodeError, "make the view in host code, above"),
        (blocks_of_ten, (40,), DeviceCodeError, "view the tensor in host code"),
        (arange_of_a_run_time_dim, (8, 16), DeviceCodeError, "torch.arange(n) with n"),
    ],
)
def test_grouping_mistakes_name_the_host_view(
    kernel: tc.Kernel, args: tuple[int, ...], error: type, hint: str, device: str
) -> None:
    """Fuzz round 52b: a regroup by 10 in the body, a host tensor's view in the loop, a block of
    10 and tc.arange of a run-time dim pointed at sliced stores, gave no hint, or leaked a
    TypeError; each now names the fix (a view of the host tensor before the loop)."""
    tensors = [torch.randn(*args, device=device)]
    if kernel is host_view_in_body:
        tensors.append(torch.randn(args[1], device=device))
    with pytest.raises(error) as info:
        kernel(*tensors)
    assert hint in str(info.value) and "TypeError" not in str(info.value), str(info.value)


@tc.kernel(static_shapes=True)
def unflattened_pairs(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n // 2], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = x[tm, :].unflatten(1, (n // 2, 2)).sum(-1)
    return out


def test_unflatten_is_a_view(device: str) -> None:
    """Tensor.unflatten was not supported in device code (view and flatten were)."""
    x = torch.randn(6, 32, device=device)
    torch.testing.assert_close(unflattened_pairs(x), x.view(6, 16, 2).sum(-1))

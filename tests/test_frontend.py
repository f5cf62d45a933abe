"""Frontend: host/device split, loop-carried values, unrolling, specialization, closures, and host
code that depends on registered block sizes."""

from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tc

SCALE = 3.0  # a module-level constant read by device code
OFFSET = 2  # an int global used as a loop bound / index


def _randn(*shape: int, device: str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape) * 7 + len(shape))
    return (torch.randn(*shape, generator=g) + 0.5).to(device=device, dtype=dtype)


# ----------------------------------------------------------------------------------------------
# host / device split
# ----------------------------------------------------------------------------------------------


@tc.kernel
def scale_then_shift(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    # host code before the loop: plain PyTorch on real tensors
    bias = y.sum(dim=0) * 0.5
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] * 2.0 + bias[tn][None, :]
    # host code after the loop
    out = out - 1.0
    return out.transpose(0, 1).contiguous()


def test_host_code_before_and_after_loop(device: str) -> None:
    x, y = _randn(37, 100, device=device), _randn(5, 100, device=device)
    got = scale_then_shift(x, y)
    want = (x * 2.0 + y.sum(0) * 0.5 - 1.0).t().contiguous()
    torch.testing.assert_close(got, want)


@tc.kernel
def branchy(x: torch.Tensor, double: bool) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    if double:
        for t in tc.tile(n):
            out[t] = x[t] * 2.0
    else:
        for t in tc.tile(n):
            out[t] = x[t] - 1.0
    return out


def test_device_loop_inside_host_if(device: str) -> None:
    x = _randn(1000, device=device)
    torch.testing.assert_close(branchy(x, True), x * 2.0)
    torch.testing.assert_close(branchy(x, False), x - 1.0)
    # each branch is its own specialization; only the reached loop is traced
    assert len(branchy.bind((x, True)).traced.loops) == 1
    assert "2.0" in branchy.bind((x, True)).to_triton_code()
    code_false = branchy.bind((x, False)).to_triton_code()
    assert "- 1" in code_false and "* 2.0" not in code_false


@tc.kernel
def two_launches(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    tmp = torch.empty_like(x)
    for tm in tc.tile(m):
        tmp[tm, :] = x[tm, :] * x[tm, :]
    rowmax = tmp.amax(dim=1)  # host code between launches
    out = torch.empty(m, device=x.device, dtype=x.dtype)
    for tm in tc.tile(m):
        out[tm] = tmp[tm, :].sum(-1) / rowmax[tm]
    return out


def test_two_device_loops_with_host_code_between(device: str) -> None:
    x = _randn(37, 100, device=device)
    bound = two_launches.bind((x,))
    assert len(bound.traced.loops) == 2
    code = bound.to_triton_code()
    assert "def _tc_two_launches_0(" in code and "def _tc_two_launches_1(" in code
    want = (x * x).sum(-1) / (x * x).amax(1)
    torch.testing.assert_close(two_launches(x), want)


# ----------------------------------------------------------------------------------------------
# loop-carried values
# ----------------------------------------------------------------------------------------------


@tc.kernel
def rowsum_aug(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            acc += x[tm, tn].to(torch.float32).sum(-1)
        out[tm] = acc
    return out


@tc.kernel
def rowsum_assign(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            acc = acc + x[tm, tn].to(torch.float32).sum(-1)
        out[tm] = acc
    return out


@pytest.mark.parametrize("kern", [rowsum_aug, rowsum_assign], ids=["aug", "assign"])
def test_loop_carried_accumulator(kern: tc.Kernel, device: str) -> None:
    x = _randn(37, 100, device=device)
    bound = kern.bind((x,))
    ir = bound.ir()
    assert re.search(r"loop BLOCK_\d+ carried\(%acc\d+=", ir), ir
    assert "yield %acc" in ir
    for blocks in ([8, 16], [16, 32]):
        program = bound.compile_config(tc.Config(block_sizes=blocks))
        torch.testing.assert_close(bound.run(program, x), x.sum(-1), rtol=1e-5, atol=1e-4)


@tc.kernel
def nested_two_levels(x: torch.Tensor) -> torch.Tensor:
    # x: [b, m, n]; out[b] = sum over m and n, accumulated with a doubly nested loop
    b, m, n = x.size()
    out = torch.empty(b, dtype=torch.float32, device=x.device)
    for tb in tc.tile(b):
        total = tc.zeros([tb], dtype=torch.float32)
        for tm in tc.tile(m):
            row = tc.zeros([tb, tm], dtype=torch.float32)
            for tn in tc.tile(n):
                row += x[tb, tm, tn].sum(-1)
            total = total + row.sum(-1)
        out[tb] = total
    return out


def test_loop_carried_in_nested_loops(device: str) -> None:
    x = _randn(6, 37, 50, device=device)
    bound = nested_two_levels.bind((x,))
    ir = bound.ir()
    # the outer device-side loop carries `total`, the inner one carries `row`
    assert re.search(r"carried\(%total\d+=", ir), ir
    assert re.search(r"carried\(%row\d+=", ir), ir
    program = bound.compile_config(tc.Config(block_sizes=[2, 16, 16]))
    torch.testing.assert_close(bound.run(program, x), x.sum((1, 2)), rtol=1e-5, atol=1e-4)


@tc.kernel
def not_carried(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        for tn in tc.tile(n):
            tmp = x[tm, tn] * 2.0  # assigned in the loop but not read across iterations
            out[tm, tn] = tmp + 1.0
    return out


def test_body_local_is_not_loop_carried(device: str) -> None:
    x = _randn(37, 100, device=device)
    bound = not_carried.bind((x,))
    assert "carried()" in bound.ir()
    torch.testing.assert_close(not_carried(x), x * 2.0 + 1.0)


# ----------------------------------------------------------------------------------------------
# static_range, grid, specialize, constexpr
# ----------------------------------------------------------------------------------------------


@tc.kernel
def weighted_cols(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for j in tc.static_range(4):
            acc = acc + x[tm, j] * (j + 1)
        out[tm] = acc
    return out


def test_static_range_is_unrolled(device: str) -> None:
    x = _randn(37, 9, device=device)
    bound = weighted_cols.bind((x,))
    code = bound.to_triton_code()
    device_fn = code.split("@triton.jit")[1].split("def launch_0")[0]
    loops = [ln for ln in device_fn.splitlines() if ln.strip().startswith("for ")]
    assert loops == [], code
    # four loads of x, one per unrolled iteration, at columns 0..3
    assert code.count("tl.load(x") == 4
    want = sum(x[:, j] * (j + 1) for j in range(4))
    torch.testing.assert_close(weighted_cols(x), want)


@tc.kernel
def per_row_scale(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for i in tc.grid(m):
        out[i, :] = x[i, :] * s[i]
    return out


def test_grid_gives_scalar_index(device: str) -> None:
    x, s = _randn(37, 100, device=device), _randn(37, device=device)
    bound = per_row_scale.bind((x, s))
    ir = bound.ir()
    # the row index is a scalar: loads of x give a 1-D [RDIM] tile, s[i] a 0-D value
    assert re.search(r"load\(\) tensor=x index=\[BLOCK_0, RDIM_\d+\]", ir), ir
    assert re.search(r"torch.float32 \[RDIM_\d+\] = load\(\) tensor=x", ir), ir
    assert re.search(r"torch.float32 \[\] = load\(\) tensor=s", ir), ir
    assert bound.config_spec.blocks == []  # nothing to tune: block size 1


def test_grid_runs(device: str) -> None:
    x, s = _randn(37, 100, device=device), _randn(37, device=device)
    code = per_row_scale.bind((x, s)).to_triton_code()
    assert "tl.arange(0, _BLOCK_0)" not in code
    assert "_tc_per_row_scale_0[(37,)]" in code
    torch.testing.assert_close(per_row_scale(x, s), x * s[:, None])


@tc.kernel
def grid_then_tile(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for i in tc.grid(m):
        for tn in tc.tile(n):
            out[i, tn] = x[i, tn] * s[i] + i  # the scalar index is also usable as a value
    return out


def test_grid_scalar_index_with_inner_tile(device: str) -> None:
    x, s = _randn(37, 100, device=device), _randn(37, device=device)
    bound = grid_then_tile.bind((x, s))
    code = bound.to_triton_code(tc.Config(block_sizes=[32]))
    assert "_tc_grid_then_tile_0[(37,)]" in code
    rows = torch.arange(37, device=device, dtype=torch.float32)[:, None]
    torch.testing.assert_close(grid_then_tile(x, s), x * s[:, None] + rows)


@tc.kernel
def poly(x: torch.Tensor, coeffs: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    k = tc.specialize(coeffs.size(0))
    out = torch.empty_like(x)
    for t in tc.tile(n):
        xt = x[t]
        acc = tc.zeros([t], dtype=torch.float32)
        for j in tc.static_range(k):  # needs a compile-time int
            acc = acc * xt + coeffs[j]
        out[t] = acc
    return out


def test_specialize_bakes_size(device: str) -> None:
    x = _randn(1000, device=device)
    for k in (3, 5):
        c = _randn(k, device=device)
        code = poly.bind((x, c)).to_triton_code()
        assert code.count("tl.load(coeffs") == k
        want = torch.zeros_like(x)
        for j in range(k):
            want = want * x + c[j]
        torch.testing.assert_close(poly(x, c), want, rtol=1e-5, atol=1e-5)


@tc.kernel
def maybe_write_both(
    x: torch.Tensor, out: torch.Tensor, extra: torch.Tensor, write_extra: tc.constexpr
) -> torch.Tensor:
    (n,) = x.size()
    for t in tc.tile(n):
        v = x[t] * 2.0
        out[t] = v
        if write_extra:
            extra[t] = v + 1.0
    return out


def test_constexpr_bool_removes_code(device: str) -> None:
    x = _randn(1000, device=device)
    out, extra = torch.zeros_like(x), torch.full_like(x, -5.0)
    code_off = maybe_write_both.bind((x, out, extra, False)).to_triton_code()
    code_on = maybe_write_both.bind((x, out, extra, True)).to_triton_code()
    assert "tl.store(extra" not in code_off
    assert "tl.store(extra" in code_on
    maybe_write_both(x, out, extra, False)
    torch.testing.assert_close(out, x * 2.0)
    assert torch.all(extra == -5.0)
    maybe_write_both(x, out, extra, True)
    torch.testing.assert_close(extra, x * 2.0 + 1.0)


def _make_closure_kernel(alpha: float, col: int) -> tc.Kernel:
    @tc.kernel
    def closure_kernel(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty(m, dtype=x.dtype, device=x.device)
        for tm in tc.tile(m):
            out[tm] = x[tm, col] * alpha * SCALE + x[tm, OFFSET]
        return out

    return closure_kernel


@tc.kernel
def globals_kernel(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm] = x[tm, OFFSET] * SCALE
    return out


def test_global_constants_in_device_code(device: str) -> None:
    x = _randn(37, 100, device=device)
    torch.testing.assert_close(globals_kernel(x), x[:, OFFSET] * SCALE)
    assert "3.0" in globals_kernel.bind((x,)).to_triton_code()


def test_closure_values_in_ref_mode(device: str) -> None:
    x = _randn(37, 100, device=device)
    for alpha, col in ((0.5, 7), (-2.0, 0)):
        k = _make_closure_kernel(alpha, col)
        torch.testing.assert_close(k.run_ref(x), x[:, col] * alpha * SCALE + x[:, OFFSET])


def test_closure_values_in_device_code(device: str) -> None:
    x = _randn(37, 100, device=device)
    for alpha, col in ((0.5, 7), (-2.0, 0)):
        k = _make_closure_kernel(alpha, col)
        torch.testing.assert_close(k(x), x[:, col] * alpha * SCALE + x[:, OFFSET])


def _make_closure_kernel_host_use(alpha: float) -> tc.Kernel:
    @tc.kernel
    def closure_host(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        a = alpha  # read on the host: becomes a captured local of the device loop
        out = torch.empty_like(x)
        for tm in tc.tile(m):
            out[tm, :] = x[tm, :] * a
        return out

    return closure_host


def test_closure_value_read_on_host(device: str) -> None:
    x = _randn(37, 100, device=device)
    torch.testing.assert_close(_make_closure_kernel_host_use(1.5)(x), x * 1.5)


# ----------------------------------------------------------------------------------------------
# register_block_size: a block size that host code also uses
# ----------------------------------------------------------------------------------------------


@tc.kernel
def colsum_partials(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    m_block = tc.register_block_size(m)
    # the partials buffer has one row per CTA: its size depends on the config
    partial = torch.empty((m + m_block - 1) // m_block, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=m_block):
        acc = x.new_zeros(n, dtype=torch.float32)
        for mb in tc.tile(cta.begin, cta.end):
            acc += x[mb, :].to(torch.float32).sum(0)
        partial[cta.id, :] = acc
    return partial.sum(0)


@pytest.mark.parametrize("blocks", [[8, 4], [16, 16]])
def test_register_block_size_sizes_host_buffer(blocks: list[int], device: str) -> None:
    x = _randn(37, 100, device=device)
    bound = colsum_partials.bind((x,))
    program = bound.compile_config(tc.Config(block_sizes=blocks))
    assert program.config.block_sizes == tuple(blocks)
    # the generated launcher's grid is one program per CTA row of the buffer
    grid = -(-37 // blocks[0])
    assert f"[({grid},)]" in bound.to_triton_code(tc.Config(block_sizes=blocks))
    torch.testing.assert_close(bound.run(program, x), x.sum(0), rtol=1e-5, atol=1e-4)


def test_register_block_size_two_configs_same_bound(device: str) -> None:
    x = _randn(37, 100, device=device)
    bound = colsum_partials.bind((x,))
    p1 = bound.compile_config(tc.Config(block_sizes=[4, 2]))
    p2 = bound.compile_config(tc.Config(block_sizes=[32, 8]))
    assert p1 is not p2
    # running the first program again after the second still uses its own block size
    for p in (p1, p2, p1):
        torch.testing.assert_close(bound.run(p, x), x.sum(0), rtol=1e-5, atol=1e-4)


@tc.kernel
def repeated_steps(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    buf = x.clone()
    for step in range(3):  # a host loop around a device loop: three launches
        for t in tc.tile(n):
            buf[t] = buf[t] * 2.0 + step
    return buf


def _repeated_steps_eager(x: torch.Tensor) -> torch.Tensor:
    want = x.clone()
    for step in range(3):
        want = want * 2.0 + step
    return want


def test_device_loop_in_host_loop_ref(device: str) -> None:
    x = _randn(100, device=device)
    torch.testing.assert_close(repeated_steps.run_ref(x), _repeated_steps_eager(x))


def test_device_loop_in_host_loop_sees_new_ints(device: str) -> None:
    x = _randn(100, device=device)
    torch.testing.assert_close(repeated_steps(x), _repeated_steps_eager(x))

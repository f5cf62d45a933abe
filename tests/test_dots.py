"""The matmul family on tiles: torch.bmm / torch.baddbmm / matmul on 3-D (batched) tiles,
torch.addmm with beta/alpha, tc.dot(out_dtype=); numerics in the interpreter and ref mode against
eager PyTorch, cross-compiles for cuda:90 and hip:gfx942, and the located errors for shapes a dot
cannot take."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ConfigError, ShapeError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

HAS_CUDA = torch.cuda.is_available()


def _rand(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape) * 11 + len(shape))
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)


@tc.kernel(static_shapes=True)
def batched(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """acc + torch.bmm(...) over a K loop (3-D tiles): the sum happens inside tl.dot."""
    nb, m, k = a.size()
    n = b.size(2)
    out = torch.empty([nb, m, n], dtype=a.dtype, device=a.device)
    for tb, tm, tn in tc.tile([nb, m, n]):
        acc = tc.zeros([tb, tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = acc + torch.bmm(a[tb, tm, tk], b[tb, tk, tn])
        out[tb, tm, tn] = acc.to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def batched_whole_k(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """torch.bmm and `@` over the whole K, tc.dot(out_dtype=), baddbmm with beta and alpha."""
    nb, m, k = a.size()
    n = b.size(2)
    out = torch.empty([nb, m, n], dtype=torch.float32, device=a.device)
    for tb, tm, tn in tc.tile([nb, m, n]):
        x, y = a[tb, tm, :], b[tb, :, tn]
        p = torch.bmm(x, y).to(torch.float32) + (x @ y).float()
        q = tc.dot(x, y, out_dtype=torch.float32)
        r = torch.baddbmm(c[tb, tm, tn], x, y, beta=0.5, alpha=2.0)
        s = torch.baddbmm(c[tb, tm, tn].float(), x.float(), y.float())
        out[tb, tm, tn] = p + q + r.float() + s
    return out


def _batched_whole_k_ref(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    prod = torch.bmm(a.float(), b.float())
    return 4 * prod + (0.5 * c.float() + 2.0 * prod).to(c.dtype).float() + c.float()


@tc.kernel(static_shapes=True)
def addmm_scaled(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=c.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = torch.addmm(c[tm, tn], a[tm, :], b[:, tn], beta=0.0, alpha=0.5)
    return out


@pytest.mark.parametrize("blocks", [[1, 16, 16, 16], [2, 32, 16, 32]])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_baddbmm_loop_numerics(blocks: list[int], dtype: torch.dtype, device: str) -> None:
    a, b = (
        _rand(3, 37, 40, dtype=dtype, device=device),
        _rand(3, 40, 20, dtype=dtype, device=device),
    )
    bound = batched.bind((a, b))
    assert "acc=" in bound.to_triton_code(tc.Config(block_sizes=blocks))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), a, b)
    expected = torch.bmm(a.float(), b.float()).to(dtype)
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol)
    torch.testing.assert_close(batched.run_ref(a, b), expected, rtol=tol, atol=tol)


@tc.kernel(static_shapes=True)
def gram_bf16_widened(f: torch.Tensor) -> torch.Tensor:
    b, c, k = f.size()
    out = torch.empty([b, c, c], dtype=torch.float32, device=f.device)
    for tb, ti, tj in tc.tile([b, c, c]):
        acc = tc.zeros([tb, ti, tj], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = acc + torch.bmm(f[tb, ti, tk], f[tb, tj, tk].transpose(1, 2)).float()
        out[tb, ti, tj] = acc
    return out


def test_a_widened_bf16_product_accumulates_inside_the_dot(device: str) -> None:
    """``acc + torch.bmm(bf16, bf16).float()`` over a K loop: each step's product was rounded
    to bf16 before the fp32 sum, so the result moved with the config's K block (0.33 on
    values near 117 at one block); it accumulates in fp32 inside tl.dot, as ``acc + a @ b``."""
    f = _rand(2, 32, 117, dtype=torch.bfloat16, device=device)
    want = f.float() @ f.float().transpose(1, 2)
    bound = gram_bf16_widened.bind((f,))
    for blocks in ([1, 16, 16, 16], [2, 32, 32, 64]):
        config = tc.Config(block_sizes=blocks)
        assert "acc=" in bound.to_triton_code(config)
        got = bound.run(bound.compile_config(config), f)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-3)


def test_whole_k_forms_numerics_and_code(device: str) -> None:
    a, b = _rand(2, 20, 24, device=device), _rand(2, 24, 33, device=device)
    c = _rand(2, 20, 33, device=device)
    bound = batched_whole_k.bind((a, b, c))
    config = tc.Config(block_sizes=[2, 16, 32])
    code = bound.to_triton_code(config)
    assert code.count("tl.dot(") == 5, code  # bmm, @, tc.dot and two baddbmm
    assert "acc=" in code, code  # fp32 sums (baddbmm with beta = alpha = 1) go into tl.dot
    got = bound.run(bound.compile_config(config), a, b, c)
    torch.testing.assert_close(got, _batched_whole_k_ref(a, b, c), rtol=1e-4, atol=1e-4)
    ref = batched_whole_k.run_ref(a, b, c)
    torch.testing.assert_close(ref, _batched_whole_k_ref(a, b, c), rtol=1e-4, atol=1e-4)


def test_addmm_beta_zero_ignores_input(device: str) -> None:
    a, b = _rand(20, 16, device=device), _rand(16, 24, device=device)
    c = torch.full((20, 24), float("nan"), device=device)
    got = addmm_scaled(a, b, c)
    torch.testing.assert_close(got, torch.addmm(c, a, b, beta=0.0, alpha=0.5))
    torch.testing.assert_close(addmm_scaled.run_ref(a, b, c), got, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def small_k(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = a[tm, :] @ b[:, tn]
    return out


@tc.kernel(static_shapes=True)
def small_k_block(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn])
        for tk in tc.tile(k, block_size=8):
            acc = tc.dot(a[tm, tk], b[tk, tn], acc=acc)
        out[tm, tn] = acc
    return out


@tc.kernel(static_shapes=True)
def mismatched(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    nb, m, k = a.size()
    out = torch.empty([nb, m, m], dtype=a.dtype, device=a.device)
    for tb, tm in tc.tile([nb, m]):
        out[tb, tm, :] = torch.bmm(a[tb, tm, :], b[tb, tm, :])
    return out


def test_dot_shape_errors_name_the_op_and_the_fix(device: str) -> None:
    # a whole K too short for tl.dot: @ is the product summed over K (as einsum writes it)
    a, b = _rand(32, 8, device=device), _rand(8, 32, device=device)
    torch.testing.assert_close(small_k(a, b), a @ b, rtol=1e-5, atol=1e-5)
    # an explicit tc.dot of a K block of 8 stays an error naming the fix
    with pytest.raises(ShapeError, match=r"tc.dot: the inner \(K\) dim .* is 8") as info:
        small_k_block(_rand(32, 64, device=device), _rand(64, 32, device=device))
    message = str(info.value)
    assert "K >= 16" in message and "test_dots.py" in message and ".sum(1)" in message
    with pytest.raises(ShapeError, match=r"torch.bmm: inner dims differ") as info:
        mismatched(_rand(2, 32, 32, device=device), _rand(2, 32, 32, device=device))
    assert "same k tile" in str(info.value)


def test_dot_block_sizes_must_fit_tl_dot(device: str) -> None:
    a, b = _rand(3, 37, 40, device=device), _rand(3, 40, 20, device=device)
    bound = batched.bind((a, b))
    with pytest.raises(ConfigError, match=r"block_sizes\[1\]=8 is below 16 \(tl.dot"):
        bound.compile_config(tc.Config(block_sizes=[1, 8, 16, 16]))
    with pytest.raises(ConfigError, match=r"power of two"):
        bound.compile_config(tc.Config(block_sizes=[1, 24, 16, 16]))


@pytest.mark.crosscompile
def test_batched_dots_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    a, b = _rand(4, 256, 128, dtype=torch.bfloat16), _rand(4, 128, 192, dtype=torch.bfloat16)
    rows = check_kernel(batched, (a, b), targets, lambda bound: [bound.config_spec.default()])
    c = _rand(4, 256, 192, dtype=torch.bfloat16)
    rows += check_kernel(
        batched_whole_k, (a, b, c), targets, lambda bound: [tc.Config(block_sizes=[2, 32, 32])]
    )
    assert len(rows) == 4
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_batched_dots_on_gpu() -> None:
    a = _rand(8, 300, 256, dtype=torch.bfloat16).cuda()
    b = _rand(8, 256, 200, dtype=torch.bfloat16).cuda()
    expected = torch.bmm(a.float(), b.float())
    torch.testing.assert_close(batched(a, b).float(), expected, rtol=2e-2, atol=2e-2)
    c = _rand(8, 300, 200, dtype=torch.bfloat16).cuda()
    got = batched_whole_k(a, b, c)
    torch.testing.assert_close(got, _batched_whole_k_ref(a, b, c), rtol=2e-2, atol=0.5)


@tc.kernel(static_shapes=True)
def addmm_mixed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """An fp32 accumulator of bf16 tiles through ``torch.addmm`` and ``Tensor.addmm`` (the
    documented accumulator form), which eager torch refuses on mixed dtypes."""
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = torch.addmm(acc, a[tm, tk], b[tk, tn])
        out[tm, tn] = acc.addmm(a[tm, :], b[:, tn], beta=0.5, alpha=0.5)
    return out


def test_addmm_accumulating_other_dtypes_runs_in_ref_mode_and_checks_accuracy(
    device: str,
) -> None:
    a = _rand(40, 48, dtype=torch.bfloat16, device=device)
    b = _rand(48, 24, dtype=torch.bfloat16, device=device)
    want = a.float() @ b.float()  # 0.5 * ab + 0.5 * ab
    torch.testing.assert_close(addmm_mixed.run_ref(a, b), want, rtol=1e-4, atol=1e-4)
    addmm_mixed.reset()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "the accuracy baseline failed" would raise here
        got = addmm_mixed(a, b)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


def _int_matmul(cast: torch.dtype | None) -> tc.Kernel:
    @tc.kernel(static_shapes=True)
    def int_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.size()
        _, n = b.size()
        kind = cast or a.dtype
        out = torch.empty([m, n], dtype=kind, device=a.device)
        for tm, tn in tc.tile([m, n]):
            acc = tc.zeros([tm, tn], dtype=kind)
            for tk in tc.tile(k):
                acc += a[tm, tk].to(kind) @ b[tk, tn].to(kind)
            out[tm, tn] = acc
        return out

    return int_mm


@pytest.mark.parametrize(
    ("dtype", "cast"),
    [
        (torch.int8, torch.int32),
        (torch.int32, None),
        (torch.int64, None),
        (torch.uint8, torch.int16),
    ],
)
def test_integer_matmuls_tl_dot_has_no_form_for_are_exact(
    device: str, dtype: torch.dtype, cast: torch.dtype | None
) -> None:
    """int32 @ int32 (and int16, int64, uint8) asserted in the interpreter ('Unsupported lhs
    dtype int32'); int8 tiles cast to int32 are an int8 tl.dot with int32 accumulation."""
    gen = torch.Generator().manual_seed(0)
    low, high = (0, 255) if dtype == torch.uint8 else (-100, 100)
    a = torch.randint(low, high, (37, 70), generator=gen).to(dtype)
    b = torch.randint(low, high, (70, 29), generator=gen).to(dtype)
    kernel = _int_matmul(cast)
    kind = cast or dtype
    want = (a.to(torch.int64) @ b.to(torch.int64)).to(kind)  # eager CUDA has no int matmul
    got = kernel(a.to(device), b.to(device))
    assert got.dtype == kind and torch.equal(got.cpu(), want)
    code = kernel.bind((a.to("meta"), b.to("meta"))).to_triton_code(
        tc.Config(block_sizes=[16, 16, 32])
    )
    assert ("tl.dot" in code) == (dtype == torch.int8), code


@pytest.mark.crosscompile
@pytest.mark.parametrize(("dtype", "cast"), [(torch.int8, torch.int32), (torch.int32, None)])
def test_integer_matmuls_cross_compile(dtype: torch.dtype, cast: torch.dtype | None) -> None:
    from tests.cross_targets import assert_cross_compiles

    a = torch.empty(64, 128, dtype=dtype, device="meta")
    b = torch.empty(128, 64, dtype=dtype, device="meta")
    assert_cross_compiles(_int_matmul(cast), (a, b), tc.Config(block_sizes=[32, 32, 32]))

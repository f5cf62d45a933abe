"""fp32 dots whose operands are exact upcasts of narrower floats (frontend/exact_dots.py,
codegen/dots.py): both operands upcast -> one 16-bit tl.dot (fp8 widened to the other's dtype,
factors constant along K applied to the product); one bf16 upcast and one true fp32 operand ->
three bf16 dots of the fp32 operand's parts under "ieee" precision, a widened tf32 dot under
"tf32".
Numerics against fp64 (in the interpreter on a CPU, on the GPU where there is one), generated code
(for cuda:90), cross-compiles, and a larger GPU run."""

from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tc
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

HAS_CUDA = torch.cuda.is_available()


def _rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


@tc.kernel(static_shapes=True)
def upcast_both(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b.T with both operands upcast to fp32 first, as users write for 'precision'."""
    m, k = a.size()
    n = b.size(0)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            af = a[tm, tk].to(torch.float32)
            bf = b[tn, tk].to(torch.float32)
            acc = acc + torch.matmul(af, bf.t())
        out[tm, tn] = acc
    return out


@tc.kernel(static_shapes=True)
def upcast_one(p: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """An fp32 operand (full 24-bit mantissa) times a bf16 tile upcast to fp32."""
    m, k = p.size()
    n = v.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=p.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = acc + p[tm, tk] @ v[tk, tn].to(torch.float32)
        out[tm, tn] = acc
    return out


@tc.kernel(static_shapes=True)
def upcast_mixed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A bf16 and an fp16 source: no common 16-bit dtype, the dot stays fp32."""
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = a[tm, :].to(torch.float32) @ b[:, tn].to(torch.float32)
    return out


CONFIG = tc.Config(block_sizes=[16, 16, 16])


def _gpu_code(kernel: tc.Kernel, args: tuple[torch.Tensor, ...], config: tc.Config) -> str:
    """The source generated for an H100/H200 (the interpreter's own code upcasts 16-bit dots)."""
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=Target.parse("cuda:90"))
    return bound.to_triton_code(config)


def _dot_lines(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines() if "tl.dot(" in line]


def test_both_upcast_operands_feed_a_16bit_dot(device: str) -> None:
    a, b = _rand(40, 48, dtype=torch.bfloat16), _rand(24, 48, dtype=torch.bfloat16, seed=1)
    code = _gpu_code(upcast_both, (a, b), CONFIG)
    (line,) = _dot_lines(code)
    assert "input_precision" not in line and ".to(tl.float32)" not in line, line
    assert "tl.trans(" in code  # the transpose moved onto the 16-bit tile
    a, b = a.to(device), b.to(device)
    got = upcast_both(a, b)
    expected = (a.double() @ b.double().t()).float()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_one_upcast_operand_splits_the_fp32_one_under_ieee(device: str) -> None:
    p, v = _rand(40, 64), _rand(64, 24, dtype=torch.bfloat16, seed=1)
    code = _gpu_code(upcast_one, (p, v), CONFIG)
    assert len(_dot_lines(code)) == 3, code
    assert len(re.findall(r"\.to\(tl\.bfloat16\)", code)) >= 3, code
    p, v = p.to(device), v.to(device)
    bound = upcast_one.bind((p, v))
    got = bound.run(bound.compile_config(CONFIG), p, v)
    expected = p.double() @ v.double()
    # three parts carry all 24 bits of p: fp32-level error (bf16 p alone: ~1e-2 relative)
    torch.testing.assert_close(got.double(), expected, rtol=2e-6, atol=2e-5)
    torch.testing.assert_close(upcast_one.run_ref(p, v), got, rtol=1e-5, atol=1e-4)


def test_split_keeps_infinities_of_the_fp32_operand(device: str) -> None:
    p, v = _rand(16, 32), _rand(32, 16, dtype=torch.bfloat16, seed=1).abs() + 0.5
    p[3, 5], p[7, 0] = float("inf"), float("-inf")
    p, v = p.to(device), v.to(device)
    got = upcast_one(p, v)
    assert torch.isposinf(got[3]).all() and torch.isneginf(got[7]).all(), got[[3, 7]]
    assert torch.isfinite(got[0]).all()


def test_tf32_precision_widens_instead_of_splitting() -> None:
    p, v = _rand(32, 32), _rand(32, 16, dtype=torch.bfloat16, seed=1)
    kernel = tc.kernel(upcast_one.fn, static_shapes=True, dot_precision="tf32")
    code = _gpu_code(kernel, (p, v), CONFIG)
    (line,) = _dot_lines(code)
    assert "input_precision='tf32'" in line and ".to(tl.float32)" in line, line


def test_different_16bit_sources_split_the_fp16_one(device: str) -> None:
    """No common 16-bit dtype: the bf16 operand stays bf16, the fp16 one (11 significant bits)
    is split into bf16 parts."""
    a, b = _rand(32, 32, dtype=torch.bfloat16), _rand(32, 16, dtype=torch.float16, seed=1)
    code = _gpu_code(upcast_mixed, (a, b), tc.Config(block_sizes=[16, 16]))
    assert len(_dot_lines(code)) == 3 and "input_precision" not in code, code
    a, b = a.to(device), b.to(device)
    expected = (a.double() @ b.double()).float()
    torch.testing.assert_close(upcast_mixed(a, b), expected, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def scaled_scores(q: torch.Tensor, k: torch.Tensor, k_scale: torch.Tensor) -> torch.Tensor:
    """Attention scores as users write them: bf16 queries upcast times 1/sqrt(d), fp8 keys
    upcast times their dequantization scale (a loaded scalar)."""
    m, d = q.size()
    n = k.size(0)
    out = torch.empty([m, n], dtype=torch.float32, device=q.device)
    sm_scale = 1.0 / d**0.5
    for tm, tn in tc.tile([m, n]):
        qt = q[tm, :].to(torch.float32) * sm_scale
        kt = k[tn, :].to(torch.float32) * k_scale[0]
        out[tm, tn] = qt @ kt.t()
    return out


@tc.kernel(static_shapes=True)
def cosine_scores(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine similarity: each bf16 row upcast and divided by its norm (a factor per row of the
    left operand, per column of the right one after the transpose)."""
    m, _ = a.size()
    n = b.size(0)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        at, bt = a[tm, :].to(torch.float32), b[tn, :].to(torch.float32)
        an = at / at.norm(dim=1, keepdim=True)
        bn = bt / bt.norm(dim=1, keepdim=True)
        out[tm, tn] = an @ bn.t()
    return out


@tc.kernel(static_shapes=True)
def scaled_along_k(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A factor that varies along K (per column of the left operand) cannot leave the dot."""
    m, _ = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = (a[tm, :].to(torch.float32) * w[:][None, :]) @ b[:, tn].to(torch.float32)
    return out


def test_scaled_upcasts_feed_a_16bit_dot_and_scale_the_product(device: str) -> None:
    q = _rand(40, 64, dtype=torch.bfloat16)
    k, ks = _rand(72, 64, seed=1).to(torch.float8_e4m3fn), torch.tensor([0.37])
    code = _gpu_code(scaled_scores, (q, k, ks), tc.Config(block_sizes=[16, 16]))
    (line,) = _dot_lines(code)
    assert "input_precision" not in line and "tl.float32" not in line.split("out_dtype")[0], code
    assert "load_1.to(tl.bfloat16)" in code, code  # fp8 keys widen exactly to the queries' bf16
    q, k, ks = q.to(device), k.to(device), ks.to(device)
    expected = (q.double() / 8.0) @ (k.double() * 0.37).t()
    torch.testing.assert_close(scaled_scores(q, k, ks).double(), expected, rtol=1e-5, atol=1e-5)


def test_row_norms_leave_the_dot_through_the_transpose(device: str) -> None:
    a, b = _rand(40, 64, dtype=torch.bfloat16), _rand(56, 64, dtype=torch.bfloat16, seed=1)
    code = _gpu_code(cosine_scores, (a, b), tc.Config(block_sizes=[16, 16]))
    (line,) = _dot_lines(code)
    assert "input_precision" not in line, code
    a, b = a.to(device), b.to(device)
    a64, b64 = a.double(), b.double()
    expected = (a64 / a64.norm(dim=1, keepdim=True)) @ (b64 / b64.norm(dim=1, keepdim=True)).t()
    torch.testing.assert_close(cosine_scores(a, b).double(), expected, rtol=1e-5, atol=1e-6)


def test_a_factor_along_k_stays_in_the_operand(device: str) -> None:
    a, b = _rand(32, 48, dtype=torch.bfloat16), _rand(48, 16, dtype=torch.bfloat16, seed=1)
    w = _rand(48, seed=2)
    code = _gpu_code(scaled_along_k, (a, b, w), tc.Config(block_sizes=[16, 16]))
    # the scaled left operand is true fp32: the bf16 right one stays, the left one splits
    assert len(_dot_lines(code)) == 3, code
    a, b, w = a.to(device), b.to(device), w.to(device)
    expected = (a.double() * w.double()) @ b.double()
    torch.testing.assert_close(scaled_along_k(a, b, w).double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.crosscompile
def test_exact_dots_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    p, v = _rand(256, 128), _rand(128, 128, dtype=torch.bfloat16, seed=1)
    a, b = _rand(256, 128, dtype=torch.bfloat16), _rand(128, 128, dtype=torch.bfloat16)
    configs = lambda bound: [bound.config_spec.default()]  # noqa: E731
    rows = check_kernel(upcast_one, (p, v), targets, configs)
    rows += check_kernel(upcast_both, (a, b), targets, configs)
    k, ks = _rand(128, 128, seed=2).to(torch.float8_e4m3fn), torch.tensor([0.5])
    rows += check_kernel(scaled_scores, (a, k, ks), targets, configs)
    rows += check_kernel(cosine_scores, (a, b), targets, configs)
    assert len(rows) == 8
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_exact_dots_on_gpu() -> None:
    p, v = _rand(512, 384).cuda(), _rand(384, 256, dtype=torch.bfloat16, seed=1).cuda()
    expected = p.double() @ v.double()
    torch.testing.assert_close(upcast_one(p, v).double(), expected, rtol=1e-5, atol=1e-4)
    a, b = _rand(512, 384, dtype=torch.bfloat16).cuda(), v.t().contiguous()
    expected = a.double() @ b.double().t()
    torch.testing.assert_close(upcast_both(a, b).double(), expected, rtol=1e-5, atol=1e-4)
    k, ks = _rand(256, 384, seed=2).to(torch.float8_e4m3fn).cuda(), torch.tensor([0.37]).cuda()
    expected = (a.double() / 384**0.5) @ (k.double() * 0.37).t()
    torch.testing.assert_close(scaled_scores(a, k, ks).double(), expected, rtol=1e-5, atol=1e-4)
    expected = (a.double() / a.double().norm(dim=1, keepdim=True)) @ (
        b.double() / b.double().norm(dim=1, keepdim=True)
    ).t()
    torch.testing.assert_close(cosine_scores(a, b).double(), expected, rtol=1e-5, atol=1e-5)

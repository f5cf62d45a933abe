"""GPU tests of the compiler core (marker ``gpu``; skipped without CUDA).

Each kernel shape of the core runs on the GPU with its default config and several random configs,
against an eager PyTorch reference; the max errors are printed (``pytest -s``) for the record.
"""

from __future__ import annotations

import random

import pytest
import torch
from kernels import rms_norm

import tilecraft as tc

pytestmark = pytest.mark.gpu


@tc.kernel(static_shapes=False)
def softmax_dynamic(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.softmax(x[tm, :], dim=-1)
    return out


@tc.kernel
def matmul_bias_relu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    _, n = b.size()
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = torch.relu(acc + bias[None, tn]).to(out.dtype)
    return out


@tc.kernel
def layer_norm_bwd_partials(
    dy: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m_block = tc.register_block_size(x.size(0))
    n = tc.specialize(x.size(1))
    dx = torch.empty_like(x)
    blocks = (x.size(0) + m_block - 1) // m_block
    dw_part = x.new_empty([blocks, n], dtype=torch.float32)
    db_part = x.new_empty([blocks, n], dtype=torch.float32)
    for cta in tc.tile(x.size(0), block_size=m_block):
        dw_acc = w.new_zeros(n, dtype=torch.float32)
        db_acc = w.new_zeros(n, dtype=torch.float32)
        wf = w[None, :].to(torch.float32)
        for mb in tc.tile(cta.begin, cta.end):
            xh = (x[mb, :].to(torch.float32) - mean[mb][:, None]) * rstd[mb][:, None]
            g = dy[mb, :].to(torch.float32)
            dw_acc += torch.sum(g * xh, dim=0)
            db_acc += torch.sum(g, dim=0)
            wg = wf * g
            c1 = torch.sum(xh * wg, dim=-1) / n
            c2 = torch.sum(wg, dim=-1) / n
            dx[mb, :] = ((wg - (xh * c1[:, None] + c2[:, None])) * rstd[mb][:, None]).to(x.dtype)
        dw_part[cta.id, :] = dw_acc
        db_part[cta.id, :] = db_acc
    return dx, dw_part.sum(0).to(w.dtype), db_part.sum(0).to(w.dtype)


def _err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def _configs(bound: tc.BoundKernel, n: int) -> list[tc.Config]:
    rng = random.Random(0)
    return [bound.config_spec.default()] + [bound.config_spec.random(rng) for _ in range(n)]


def _run_all(
    bound: tc.BoundKernel, configs: list[tc.Config], *args: torch.Tensor
) -> list[torch.Tensor]:
    """Outputs of every config that compiles. A random config may legitimately exceed the GPU's
    resources (ptxas: too few registers under maxnreg; shared memory); the default must not."""
    from triton.runtime.errors import OutOfResources, PTXASError

    outs = []
    for i, config in enumerate(configs):
        try:
            program = bound.compile_config(config)
        except (PTXASError, OutOfResources) as exc:
            assert i > 0, f"the default config failed to compile: {exc}"
            print(f"skipped (out of resources): {config}: {str(exc).splitlines()[0][:120]}")
            continue
        outs.append(bound.run(program, *args))
    return outs


def test_rms_norm_gpu() -> None:
    torch.manual_seed(0)
    x = torch.randn(4097, 8192, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
    ref = (
        x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()
    ).bfloat16()
    bound = rms_norm.bind((x, w))
    configs = _configs(bound, 5) + [tc.Config(block_sizes=[2], reduction_loops=[1024], num_warps=8)]
    outs = _run_all(bound, configs, x, w)
    print("rms_norm max errors", [_err(out, ref) for out in outs])
    for out in outs:  # |out| reaches ~20, where one bf16 ulp of rounding is 0.125
        torch.testing.assert_close(out.float(), ref.float(), rtol=2.0**-7, atol=0.07)


def test_softmax_dynamic_gpu() -> None:
    for m, n in [(1000, 4000), (1500, 3000), (3, 40000)]:
        x = torch.randn(m, n, device="cuda", dtype=torch.float16)
        err = _err(softmax_dynamic(x), torch.softmax(x.float(), -1))
        print("softmax", m, n, err)
        assert err < 2e-3


def test_matmul_gpu() -> None:
    a = torch.randn(1000, 777, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(777, 1100, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(1100, device="cuda", dtype=torch.bfloat16)
    ref = torch.relu(a.float() @ b.float() + bias.float())
    bound = matmul_bias_relu.bind((a, b, bias))
    outs = _run_all(bound, _configs(bound, 5), a, b, bias)
    errors = [_err(out, ref) / ref.abs().max().item() for out in outs]
    print("matmul relative errors", errors)
    assert max(errors) < 2e-2


@pytest.mark.parametrize("m,n", [(4608, 40920), (1152, 16384), (37, 5000)])
def test_layer_norm_bwd_gpu(m: int, n: int) -> None:
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    mean = x.float().mean(-1)
    rstd = torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5)
    xr = x.float().requires_grad_(True)
    wr = w.float().requires_grad_(True)
    br = torch.zeros_like(wr, requires_grad=True)
    torch.nn.functional.layer_norm(xr, [n], wr, br, 1e-5).backward(dy.float())
    dx, dw, db = layer_norm_bwd_partials(dy, x, mean, rstd, w)
    errs = (
        _err(dx, xr.grad),
        _err(dw, wr.grad) / wr.grad.abs().max().item(),
        _err(db, br.grad) / br.grad.abs().max().item(),
    )
    print("layer_norm_bwd", m, n, "dx abs, dw rel, db rel:", errs)
    assert errs[0] < 0.1 and errs[1] < 2e-2 and errs[2] < 2e-2


@pytest.mark.parametrize("maxnreg", [128, 64, 24])  # this kernel needs ~35 registers uncapped
def test_seed_003_config_with_maxnreg_gpu(maxnreg: int) -> None:
    """Seed 003's shape of code (persistent pid, tensor descriptors, rolled reduction, range
    knobs) with maxnreg: correct, and the compiled kernel's registers respect maxnreg."""
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    ref = (
        x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()
    ).bfloat16()
    config = tc.Config(
        block_sizes=[4],
        reduction_loops=[256],  # tensor-descriptor boxes are at most 256 elements per dim
        pid_type="persistent_interleaved",
        indexing="tensor_descriptor",
        range_unroll_factors=[2],
        range_multi_buffers=[False],
        range_flattens=[True],
        maxnreg=maxnreg,
        num_warps=4,
    )
    bound = rms_norm.bind((x, w))
    program = bound.compile_config(config)
    assert "maxnreg" in program.source and "make_tensor_descriptor" in program.source
    err = _err(bound.run(program, x, w), ref)
    stats = program.compiled_stats()
    print(f"seed-003 config maxnreg={maxnreg}: max error {err}, compiled {stats}")
    assert err < 0.07
    assert stats and all(s["n_regs"] <= maxnreg for s in stats)

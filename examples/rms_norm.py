"""RMSNorm forward (``out``, ``rstd``) and backward (``dx``, ``dw``). Shape: ``(rows, hidden)``.

The backward kernel runs one program per block of rows: it writes ``dx`` for its rows and one row
of per-block partial sums of ``dw``, which the host code adds up.
"""

from __future__ import annotations

from typing import Any

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn

EPS = 1e-6


@tc.kernel(static_shapes=True)
def rms_norm_fwd(
    x: torch.Tensor, w: torch.Tensor, eps: float = EPS
) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    out = torch.empty_like(x)
    rstd = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        r = torch.rsqrt(torch.mean(xt * xt, dim=-1) + eps)
        rstd[tm] = r
        out[tm, :] = (xt * r[:, None] * w[None, :].to(torch.float32)).to(out.dtype)
    return out, rstd


@tc.kernel(static_shapes=True)
def rms_norm_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    m_block = tc.register_block_size(x.size(0))
    m = x.size(0)
    n = tc.specialize(x.size(1))
    grad_x = torch.empty_like(x)
    dw_partial = x.new_empty([(m + m_block - 1) // m_block, n], dtype=torch.float32)
    for tm in tc.tile(m, block_size=m_block):
        xt = x[tm, :].to(torch.float32)
        dy = grad_out[tm, :].to(torch.float32)
        r = rstd[tm]
        x_hat = xt * r[:, None]
        wdy = w[None, :].to(torch.float32) * dy
        proj = torch.sum(x_hat * wdy, dim=-1) / n
        grad_x[tm, :] = ((wdy - x_hat * proj[:, None]) * r[:, None]).to(grad_x.dtype)
        dw_partial[tm.id, :] = torch.sum(dy * x_hat, dim=0)
    return grad_x, dw_partial.sum(0).to(w.dtype)


def _rms_norm_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    x, w, _ = inputs
    ctx.mark_non_differentiable(output[1])  # rstd is saved for the backward, not a result
    ctx.save_for_backward(x, w, output[1])


def _rms_norm_backward(ctx: Any, grad_out: torch.Tensor, _grad_rstd: Any) -> tuple[Any, ...]:
    x, w, rstd = ctx.saved_tensors
    grad_x, grad_w = rms_norm_bwd(grad_out.contiguous(), x, w, rstd)
    return grad_x, grad_w, None


# rms_norm_fwd is differentiable in x and w (eager and under torch.compile)
rms_norm_fwd.register_backward(_rms_norm_backward, setup_context=_rms_norm_setup)

KERNELS = {"rms_norm_fwd": rms_norm_fwd, "rms_norm_bwd": rms_norm_bwd}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BENCH_SHAPES = [
    (4096, 4096),
    (32768, 4096),
    (8192, 8192),
    (2048, 128256),
    (4608, 40920),
    (1000, 1000),
]
TEST_SHAPES = [(37, 100), (1, 7), (64, 64), (9, 3000)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x, w, grad_out)``."""
    gen = torch.Generator().manual_seed(seed)
    x = randn(shape, dtype, device, gen)
    w = (1.0 + 0.5 * randn(shape[-1:], torch.float32, device, gen)).to(dtype)
    return x, w, randn(shape, dtype, device, gen)


def reference(
    x: torch.Tensor, w: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(out, dx, dw)`` with fp32 math and autograd."""
    xf = x.float().requires_grad_(True)
    wf = w.float().requires_grad_(True)
    out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * wf
    dx, dw = torch.autograd.grad(out, (xf, wf), grad_out.float())
    return out.detach().to(x.dtype), dx.to(x.dtype), dw.to(w.dtype)


def run(
    inputs: tuple[torch.Tensor, ...], call: Call = default_call
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x, w, grad_out = inputs
    out, rstd = call(rms_norm_fwd, x, w, EPS)
    dx, dw = call(rms_norm_bwd, grad_out, x, w, rstd)
    return out, dx, dw

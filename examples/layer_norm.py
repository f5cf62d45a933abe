"""LayerNorm forward (``out``, ``mean``, ``rstd``) and backward (``dx``, ``dw``, ``db``).
Shape: ``(rows, hidden)``.

The backward kernel has two levels: each program (a "CTA") owns a block of rows, keeps ``dw``/``db``
partial sums for the whole hidden dim in registers while an inner tile loop walks its rows (and
writes ``dx``), then stores one row of partials; the host adds the partials up.
"""

from __future__ import annotations

from typing import Any

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn

EPS = 1e-5


@tc.kernel(static_shapes=True)
def layer_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.size()
    out = torch.empty_like(x)
    mean = torch.empty([m], dtype=torch.float32, device=x.device)
    rstd = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        mu = torch.mean(xt, dim=-1)
        centered = xt - mu[:, None]
        r = torch.rsqrt(torch.mean(centered * centered, dim=-1) + eps)
        mean[tm] = mu
        rstd[tm] = r
        y = centered * r[:, None] * weight[None, :].to(torch.float32)
        out[tm, :] = (y + bias[None, :].to(torch.float32)).to(out.dtype)
    return out, mean, rstd


@tc.kernel(static_shapes=True)
def layer_norm_bwd(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
    with_bias: tc.constexpr = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    rows = x.size(0)
    rows_per_cta = tc.register_block_size(rows)
    n = tc.specialize(x.size(1))
    n_ctas = (rows + rows_per_cta - 1) // rows_per_cta
    grad_x = torch.empty_like(x)
    dw_partial = x.new_empty([n_ctas, n], dtype=torch.float32)
    db_partial = x.new_empty([n_ctas, n], dtype=torch.float32)
    for cta in tc.tile(rows, block_size=rows_per_cta):
        dw_acc = weight.new_zeros(n, dtype=torch.float32)
        db_acc = weight.new_zeros(n, dtype=torch.float32)
        w_row = weight[None, :].to(torch.float32)
        for rb in tc.tile(cta.begin, cta.end):
            r = rstd[rb][:, None]
            x_hat = (x[rb, :].to(torch.float32) - mean[rb][:, None]) * r
            dy = grad_out[rb, :].to(torch.float32)
            dw_acc += torch.sum(dy * x_hat, dim=0)
            if with_bias:
                db_acc += torch.sum(dy, dim=0)
            g = w_row * dy
            proj = torch.sum(x_hat * g, dim=-1)[:, None] / n
            shift = torch.sum(g, dim=-1)[:, None] / n
            grad_x[rb, :] = ((g - x_hat * proj - shift) * r).to(grad_x.dtype)
        dw_partial[cta.id, :] = dw_acc
        if with_bias:
            db_partial[cta.id, :] = db_acc
    grad_w = dw_partial.sum(0).to(weight.dtype)
    if with_bias:
        return grad_x, grad_w, db_partial.sum(0).to(weight.dtype)
    return grad_x, grad_w, None


def _layer_norm_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    x, weight, _, _ = inputs
    _, mean, rstd = output
    ctx.mark_non_differentiable(mean, rstd)
    ctx.save_for_backward(x, weight, mean, rstd)


def _layer_norm_backward(ctx: Any, grad_out: torch.Tensor, *_stats: Any) -> tuple[Any, ...]:
    x, weight, mean, rstd = ctx.saved_tensors
    grad_x, grad_w, grad_b = layer_norm_bwd(grad_out.contiguous(), x, mean, rstd, weight, True)
    return grad_x, grad_w, grad_b, None


# layer_norm_fwd is differentiable in x, weight and bias (eager and under torch.compile)
layer_norm_fwd.register_backward(_layer_norm_backward, setup_context=_layer_norm_setup)

KERNELS = {"layer_norm_fwd": layer_norm_fwd, "layer_norm_bwd": layer_norm_bwd}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BENCH_SHAPES = [
    (4096, 4096),
    (32768, 4096),
    (8192, 8192),
    (4608, 40920),
    (2048, 5000),
    (1000, 1000),
]
TEST_SHAPES = [(37, 100), (1, 7), (64, 64), (100, 300)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, ...]:
    """``(x, weight, bias, grad_out)``."""
    gen = torch.Generator().manual_seed(seed)
    x = randn(shape, dtype, device, gen) * 2 + 0.5
    weight = (1.0 + 0.5 * randn(shape[-1:], torch.float32, device, gen)).to(dtype)
    bias = randn(shape[-1:], dtype, device, gen)
    return x, weight, bias, randn(shape, dtype, device, gen)


def reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """``(out, mean, rstd, dx, dw, db)`` with fp32 math and autograd."""
    xf, wf, bf = (t.float().requires_grad_(True) for t in (x, weight, bias))
    out = torch.nn.functional.layer_norm(xf, xf.shape[-1:], wf, bf, EPS)
    dx, dw, db = torch.autograd.grad(out, (xf, wf, bf), grad_out.float())
    mean = x.float().mean(-1)
    rstd = torch.rsqrt(x.float().var(-1, unbiased=False) + EPS)
    low = x.dtype
    return out.detach().to(low), mean, rstd, dx.to(low), dw.to(low), db.to(low)


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> tuple[torch.Tensor, ...]:
    x, weight, bias, grad_out = inputs
    out, mean, rstd = call(layer_norm_fwd, x, weight, bias, EPS)
    dx, dw, db = call(layer_norm_bwd, grad_out, x, mean, rstd, weight, True)
    return out, mean, rstd, dx, dw, db

"""User-style normalization kernels: a LayerNorm backward with per-CTA ``[n]`` accumulators and a
nested row loop, a Welford LayerNorm looped over the hidden dim, and a full-row RMSNorm written
like a Hugging Face module. Each comes with its eager reference (see :mod:`.case`)."""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, randn

EPS = 1e-5


@tc.kernel(static_shapes=True)
def ln_bwd_cta_partials(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m_block = tc.register_block_size(x.size(0))
    m, n = x.size()
    blocks = (m + m_block - 1) // m_block
    grad_x = torch.empty_like(x)
    dw_part = torch.empty([blocks, n], dtype=torch.float32, device=x.device)
    db_part = torch.empty([blocks, n], dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=m_block):
        dw_sum = x.new_zeros(n, dtype=torch.float32)
        db_sum = x.new_zeros(n, dtype=torch.float32)
        for mb in tc.tile(cta.begin, cta.end):
            xf = x[mb, :].to(torch.float32)
            dy = grad_out[mb, :].to(torch.float32)
            inv = rstd[mb]
            xhat = (xf - mean[mb][:, None]) * inv[:, None]
            db_sum += torch.sum(dy, dim=0)
            dw_sum += torch.sum(xhat * dy, dim=0)
            wdy = dy * weight[None, :].to(torch.float32)
            c1 = torch.sum(xhat * wdy, dim=-1) / n
            c2 = torch.sum(wdy, dim=-1) / n
            dx = (wdy - xhat * c1[:, None] - c2[:, None]) * inv[:, None]
            grad_x[mb, :] = dx.to(x.dtype)
        dw_part[cta.id, :] = dw_sum
        db_part[cta.id, :] = db_sum
    return grad_x, dw_part.sum(0).to(weight.dtype), db_part.sum(0).to(weight.dtype)


def _ln_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``(grad_out, x, mean, rstd, weight)``: the forward's saved statistics come from x."""
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g) * 1.5 + 0.25
    weight = (1 + 0.3 * randn(shape[-1:], torch.float32, device, g)).to(torch.bfloat16)
    xf = x.float()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + EPS)
    return randn(shape, torch.bfloat16, device, g), x, mean, rstd, weight


def ln_bwd_reference(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LayerNorm backward by its formulas in fp32 (the eager code a user writes)."""
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    dy = grad_out.float()
    wdy = dy * weight.float()
    n = x.shape[-1]
    c1 = (xhat * wdy).sum(-1, keepdim=True) / n
    c2 = wdy.sum(-1, keepdim=True) / n
    dx = (wdy - xhat * c1 - c2) * rstd[:, None]
    return dx.to(x.dtype), (dy * xhat).sum(0).to(weight.dtype), dy.sum(0).to(weight.dtype)


@tc.kernel(static_shapes=True)
def welford_layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS
) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        count = tc.zeros([tm], dtype=torch.float32)
        mean = tc.zeros([tm], dtype=torch.float32)
        m2 = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            valid = tn.index[None, :] < n
            chunk = x[tm, tn].to(torch.float32)
            k = torch.sum(torch.where(valid, 1.0, 0.0), dim=-1)
            c_mean = torch.sum(torch.where(valid, chunk, 0.0), dim=-1) / k
            dev = torch.where(valid, chunk - c_mean[:, None], 0.0)
            c_m2 = torch.sum(dev * dev, dim=-1)
            # Chan et al.: merge the chunk's (k, mean, M2) into the running ones
            total = count + k
            delta = c_mean - mean
            mean = mean + delta * (k / total)
            m2 = m2 + c_m2 + delta * delta * (count * k / total)
            count = total
        rstd = torch.rsqrt(m2 / n + eps)
        for tn in tc.tile(n):
            xhat = (x[tm, tn].to(torch.float32) - mean[:, None]) * rstd[:, None]
            y = xhat * weight[None, tn].to(torch.float32) + bias[None, tn].to(torch.float32)
            out[tm, tn] = y.to(out.dtype)
    return out


def _affine_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``(x, weight, bias)`` with a non-zero mean so that the variance is not trivial."""
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g) * 2 + 3
    weight = (1 + 0.3 * randn(shape[-1:], torch.float32, device, g)).to(torch.bfloat16)
    return x, weight, randn(shape[-1:], torch.bfloat16, device, g)


def layer_norm_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.layer_norm(x.float(), x.shape[-1:], weight.float(), bias.float(), EPS)
    return y.to(x.dtype)


@tc.kernel(static_shapes=True)
def rms_norm_llama(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        hidden = x[tm, :].to(torch.float32)
        variance = torch.mean(hidden * hidden, dim=-1)
        hidden = hidden * torch.rsqrt(variance + eps)[:, None]
        out[tm, :] = weight[None, :] * hidden.to(x.dtype)
    return out


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The Llama RMSNorm module's forward: fp32 statistics, the weight applied in bf16."""
    hidden = x.float()
    hidden = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + 1e-6)
    return weight * hidden.to(x.dtype)


CASES = [
    Case(
        name="layer_norm_bwd_seed",
        kernels=(ln_bwd_cta_partials,),
        make_inputs=_ln_bwd_inputs,
        reference=ln_bwd_reference,
        run=lambda k, inp: k["ln_bwd_cta_partials"](*inp),
        gpu_shapes=((4608, 40920),),
        cpu_shapes=((37, 100),),
        atol=0.1,
    ),
    Case(
        name="welford_layer_norm",
        kernels=(welford_layer_norm,),
        make_inputs=_affine_inputs,
        reference=layer_norm_reference,
        run=lambda k, inp: k["welford_layer_norm"](*inp),
        gpu_shapes=((4096, 16384),),
        cpu_shapes=((19, 300),),
        atol=0.05,
    ),
    Case(
        name="rms_norm_full_row",
        kernels=(rms_norm_llama,),
        make_inputs=lambda shape, device, seed: _affine_inputs(shape, device, seed)[:2],
        reference=rms_norm_reference,
        run=lambda k, inp: k["rms_norm_llama"](*inp),
        gpu_shapes=((4096, 40920),),
        cpu_shapes=((13, 250),),
        atol=0.05,
    ),
]

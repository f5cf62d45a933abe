"""Held-out row and column kernels: written after the heuristic was frozen, by someone reading only
the docs, to see how the discovered default does on kernels nobody tuned for. A chunked cross
entropy, a token log-prob gather, a softmax backward, add + RMSNorm, a LayerNorm backward dx,
logsumexp over a middle dim, a few very long row sums, a varlen mean over ``cu_seqlens``, a column
softmax and a bias/scale/GELU epilogue. Each comes with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Inputs, MakeInputs, gen, one_kernel_case, randn


@tc.kernel(static_shapes=True)
def cross_entropy_chunks(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    m, n = logits.size()
    loss = torch.empty([m], dtype=torch.float32, device=logits.device)
    for tm in tc.tile(m):
        mx = tc.full([tm], float("-inf"), dtype=torch.float32)
        se = tc.zeros([tm], dtype=torch.float32)
        picked = tc.zeros([tm], dtype=torch.float32)
        t = target[tm]
        for tn in tc.tile(n):
            x = logits[tm, tn].to(torch.float32)
            new = torch.maximum(mx, torch.amax(x, dim=-1))
            se = se * torch.exp(mx - new) + torch.sum(torch.exp(x - new[:, None]), dim=-1)
            mx = new
            hit = tn.index[None, :] == t[:, None]
            picked = picked + torch.sum(torch.where(hit, x, 0.0), dim=-1)
        loss[tm] = mx + torch.log(se) - picked
    return loss


def _logits_targets(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    g = gen(seed)
    logits = randn(shape, torch.bfloat16, device, g) * 3
    target = torch.randint(0, shape[1], (shape[0],), generator=g).to(device)
    return logits, target


def cross_entropy_reference(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.float(), target, reduction="none")


@tc.kernel(static_shapes=True)
def token_logprob(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[target] per row, the vocab looped in chunks, two passes."""
    m, n = logits.size()
    out = torch.empty([m], dtype=torch.float32, device=logits.device)
    for tm in tc.tile(m):
        mx = tc.full([tm], float("-inf"), dtype=torch.float32)
        for tn in tc.tile(n):
            mx = torch.maximum(mx, torch.amax(logits[tm, tn].to(torch.float32), dim=-1))
        se = tc.zeros([tm], dtype=torch.float32)
        picked = tc.zeros([tm], dtype=torch.float32)
        t = target[tm]
        for tn in tc.tile(n):
            x = logits[tm, tn].to(torch.float32)
            se = se + torch.sum(torch.exp(x - mx[:, None]), dim=-1)
            hit = tn.index[None, :] == t[:, None]
            picked = picked + torch.sum(torch.where(hit, x, 0.0), dim=-1)
        out[tm] = picked - mx - torch.log(se)
    return out


def token_logprob_reference(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits.float(), -1).gather(-1, target[:, None])[:, 0]


@tc.kernel(static_shapes=True)
def softmax_bwd(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    m, n = y.size()
    dx = torch.empty_like(y)
    for tm in tc.tile(m):
        yt = y[tm, :].to(torch.float32)
        g = dy[tm, :].to(torch.float32)
        dot = torch.sum(yt * g, dim=-1, keepdim=True)
        dx[tm, :] = (yt * (g - dot)).to(y.dtype)
    return dx


def _softmax_and_grad(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    g = gen(seed)
    y = torch.softmax(randn(shape, torch.float32, device, g) * 2, -1).to(torch.bfloat16)
    return y, randn(shape, torch.bfloat16, device, g)


def softmax_bwd_reference(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    yf, g = y.float(), dy.float()
    return (yf * (g - (yf * g).sum(-1, keepdim=True))).to(y.dtype)


@tc.kernel(static_shapes=True)
def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    out = torch.empty_like(x)
    new_res = torch.empty_like(x)
    for tm in tc.tile(m):
        h = x[tm, :].to(torch.float32) + residual[tm, :].to(torch.float32)
        new_res[tm, :] = h.to(x.dtype)
        rms = torch.rsqrt(torch.mean(h * h, dim=-1, keepdim=True) + 1e-6)
        out[tm, :] = (h * rms * w[None, :].to(torch.float32)).to(x.dtype)
    return out, new_res


def _x_res_w(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    g = gen(seed)
    x, res = randn(shape, torch.bfloat16, device, g), randn(shape, torch.bfloat16, device, g)
    return x, res, (1 + 0.1 * randn(shape[-1:], torch.float32, device, g)).to(torch.bfloat16)


def add_rms_norm_reference(
    x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    h = x.float() + residual.float()
    out = h * torch.rsqrt((h * h).mean(-1, keepdim=True) + 1e-6) * w.float()
    return out.to(x.dtype), h.to(x.dtype)


@tc.kernel(static_shapes=True)
def layer_norm_bwd_dx(
    dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    m, n = x.size()
    dx = torch.empty_like(x)
    for tm in tc.tile(m):
        xhat = (x[tm, :].to(torch.float32) - mean[tm][:, None]) * rstd[tm][:, None]
        wdy = dy[tm, :].to(torch.float32) * w[None, :].to(torch.float32)
        c1 = torch.mean(xhat * wdy, dim=-1, keepdim=True)
        c2 = torch.mean(wdy, dim=-1, keepdim=True)
        dx[tm, :] = ((wdy - (xhat * c1 + c2)) * rstd[tm][:, None]).to(x.dtype)
    return dx


def _ln_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g) + 0.5
    mean = x.float().mean(-1)
    rstd = torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5)
    w = (1 + 0.2 * randn(shape[-1:], torch.float32, device, g)).to(torch.bfloat16)
    return randn(shape, torch.bfloat16, device, g), x, w, mean, rstd


def layer_norm_bwd_dx_reference(
    dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    wdy = dy.float() * w.float()
    c1 = (xhat * wdy).mean(-1, keepdim=True)
    c2 = wdy.mean(-1, keepdim=True)
    return ((wdy - (xhat * c1 + c2)) * rstd[:, None]).to(x.dtype)


@tc.kernel(static_shapes=True)
def logsumexp_middle(x: torch.Tensor) -> torch.Tensor:
    """logsumexp over the middle dim of ``[b, t, h]``: the whole t in one tile."""
    b, t, h = x.size()
    out = torch.empty([b, h], dtype=torch.float32, device=x.device)
    for tb, th in tc.tile([b, h]):
        xt = x[tb, :, th].to(torch.float32)
        mx = torch.amax(xt, dim=1)
        out[tb, th] = mx + torch.log(torch.sum(torch.exp(xt - mx[:, None, :]), dim=1))
    return out


def logsumexp_middle_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(x.float(), 1)


@tc.kernel(static_shapes=True)
def long_row_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        acc = tc.zeros([tm], dtype=torch.float32)
        for tn in tc.tile(n):
            acc = acc + torch.sum(x[tm, tn].to(torch.float32), dim=-1)
        out[tm] = acc
    return out


def long_row_sum_reference(x: torch.Tensor) -> torch.Tensor:
    return x.float().sum(-1)


@tc.kernel(static_shapes=True)
def varlen_mean(x: torch.Tensor, cu: torch.Tensor) -> torch.Tensor:
    """Mean of each sequence's rows: sequence i spans rows ``cu[i]`` to ``cu[i + 1]``."""
    t, h = x.size()
    b = cu.size(0) - 1
    out = torch.empty([b, h], dtype=torch.float32, device=x.device)
    for i, th in tc.tile([b, h], block_size=[1, None]):
        start = cu[i]
        end = cu[i + 1]
        acc = tc.zeros([th], dtype=torch.float32)
        for tt in tc.tile(start, end):
            acc = acc + torch.sum(x[tt, th].to(torch.float32), dim=0)
        out[i, th] = acc / (end - start).to(torch.float32)
    return out


def _packed_sequences(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (sequences, tokens, hidden)``: uneven lengths summing to ``tokens``."""
    b, t, h = shape
    g = gen(seed)
    cuts = torch.randperm(t - 1, generator=g)[: b - 1].sort().values + 1
    cu = torch.cat([torch.tensor([0]), cuts, torch.tensor([t])]).to(torch.int32)
    return randn((t, h), torch.bfloat16, device, g), cu.to(device)


def varlen_mean_reference(x: torch.Tensor, cu: torch.Tensor) -> torch.Tensor:
    rows = torch.arange(x.shape[0], device=x.device)
    seq = torch.searchsorted(cu[1:].long(), rows, right=True)
    sums = torch.zeros(cu.numel() - 1, x.shape[1], device=x.device).index_add_(0, seq, x.float())
    return sums / (cu[1:] - cu[:-1]).float()[:, None]


@tc.kernel(static_shapes=True)
def column_softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        xt = x[:, tn].to(torch.float32)
        mx = torch.amax(xt, dim=0)
        e = torch.exp(xt - mx[None, :])
        out[:, tn] = (e / torch.sum(e, dim=0)[None, :]).to(x.dtype)
    return out


def column_softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), 0).to(x.dtype)


@tc.kernel(static_shapes=True)
def bias_scale_gelu(x: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        v = x[tm, tn].to(torch.float32) * scale[tm, :].to(torch.float32)
        v = v + bias[tn][None, :].to(torch.float32)
        out[tm, tn] = torch.nn.functional.gelu(v, approximate="tanh").to(x.dtype)
    return out


def _x_bias_rowscale(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g)
    bias = randn(shape[-1:], torch.bfloat16, device, g)
    return x, bias, (1 + 0.1 * randn((shape[0], 1), torch.float32, device, g)).to(torch.bfloat16)


def bias_scale_gelu_reference(
    x: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    v = x.float() * scale.float() + bias.float()
    return torch.nn.functional.gelu(v, approximate="tanh").to(x.dtype)


def _bf16(scale: float = 1.0) -> MakeInputs:
    return lambda shape, device, seed: (randn(shape, torch.bfloat16, device, gen(seed)) * scale,)


CASES = [
    one_kernel_case(
        "cross_entropy_chunks",
        cross_entropy_chunks,
        _logits_targets,
        cross_entropy_reference,
        ((4096, 128256),),
        ((13, 300),),
        2e-3,
    ),
    one_kernel_case(
        "token_logprob",
        token_logprob,
        _logits_targets,
        token_logprob_reference,
        ((4096, 128256),),
        ((13, 300),),
        2e-3,
    ),
    one_kernel_case(
        "softmax_bwd",
        softmax_bwd,
        _softmax_and_grad,
        softmax_bwd_reference,
        ((8192, 8192),),
        ((9, 200),),
        6.25e-2,
    ),
    one_kernel_case(
        "add_rms_norm",
        add_rms_norm,
        _x_res_w,
        add_rms_norm_reference,
        ((8192, 4096),),
        ((9, 200),),
        6.25e-2,
    ),
    one_kernel_case(
        "layer_norm_bwd_dx",
        layer_norm_bwd_dx,
        _ln_bwd_inputs,
        layer_norm_bwd_dx_reference,
        ((8192, 8192),),
        ((9, 200),),
        6.25e-2,
    ),
    one_kernel_case(
        "logsumexp_middle",
        logsumexp_middle,
        _bf16(2.0),
        logsumexp_middle_reference,
        ((16, 4096, 1024),),
        ((3, 50, 20),),
        2e-3,
    ),
    one_kernel_case(
        "long_row_sum",
        long_row_sum,
        _bf16(),
        long_row_sum_reference,
        ((16, 1 << 22),),
        ((3, 3000),),
        2e-3,
    ),
    one_kernel_case(
        "varlen_mean",
        varlen_mean,
        _packed_sequences,
        varlen_mean_reference,
        ((8, 32768, 4096),),
        ((3, 70, 40),),
        2e-3,
    ),
    one_kernel_case(
        "column_softmax",
        column_softmax,
        _bf16(2.0),
        column_softmax_reference,
        ((4096, 4096),),
        ((50, 30),),
        6.25e-2,
    ),
    one_kernel_case(
        "bias_scale_gelu",
        bias_scale_gelu,
        _x_bias_rowscale,
        bias_scale_gelu_reference,
        ((8192, 8192),),
        ((9, 70),),
        6.25e-2,
    ),
]

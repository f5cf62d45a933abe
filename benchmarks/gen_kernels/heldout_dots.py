"""Held-out dot kernels (see :mod:`.heldout_rows` for why they exist): causal attention backward
(dq, and dk/dv walking the query blocks from the key block on), causal attention over a 4-D
``[b, h, s, d]`` grid, a lower-triangular matmul, a GEMM with a row scale and a residual, an
int8-weight GEMM, an fp32 GEMM at torch's default precision and a GEMM against a transposed
operand (those two: one matmul as a user writes it, on other inputs). Each comes with its eager reference (see :mod:`.case`)."""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Inputs, gen, one_kernel_case, randn


@tc.kernel(static_shapes=True)
def attn_bwd_dq(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: torch.Tensor,
    lse: torch.Tensor,
    delta: torch.Tensor,
) -> torch.Tensor:
    """Causal attention backward, dq only: lse and delta come from the forward."""
    bh, s, d = q.size()
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    dq = torch.empty_like(q)
    for tb, tm in tc.tile([bh, s], block_size=[1, None]):
        qt = q[tb, tm, :]
        dot_ = do[tb, tm, :]
        lse_t = lse[tb, tm]
        delta_t = delta[tb, tm]
        acc = tc.zeros([tm, d], dtype=torch.float32)
        for tn in tc.tile(tm.end):
            kt = k[tb, tn, :]
            sc = tc.dot(qt, kt.t(), out_dtype=torch.float32) * scale
            sc = torch.where(tm.index[:, None] >= tn.index[None, :], sc, float("-inf"))
            p = torch.exp(sc - lse_t[:, None])
            dp = tc.dot(dot_, v[tb, tn, :].t(), out_dtype=torch.float32)
            ds = p * (dp - delta_t[:, None]) * scale
            acc = tc.dot(ds.to(q.dtype), kt, acc=acc)
        dq[tb, tm, :] = acc.to(q.dtype)
    return dq


@tc.kernel(static_shapes=True)
def attn_bwd_dkdv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: torch.Tensor,
    lse: torch.Tensor,
    delta: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal dk, dv: key block tn walks the query blocks from its begin to the end."""
    bh, s, d = q.size()
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    for tb, tn in tc.tile([bh, s], block_size=[1, None]):
        kt = k[tb, tn, :]
        vt = v[tb, tn, :]
        dk_acc = tc.zeros([tn, d], dtype=torch.float32)
        dv_acc = tc.zeros([tn, d], dtype=torch.float32)
        for tm in tc.tile(tn.begin, s):
            qt = q[tb, tm, :]
            dot_ = do[tb, tm, :]
            sc = tc.dot(qt, kt.t(), out_dtype=torch.float32) * scale
            sc = torch.where(tm.index[:, None] >= tn.index[None, :], sc, float("-inf"))
            p = torch.exp(sc - lse[tb, tm][:, None])
            dv_acc = tc.dot(p.to(q.dtype).t(), dot_, acc=dv_acc)
            dp = tc.dot(dot_, vt.t(), out_dtype=torch.float32)
            ds = p * (dp - delta[tb, tm][:, None]) * scale
            dk_acc = tc.dot(ds.to(q.dtype).t(), qt, acc=dk_acc)
        dk[tb, tn, :] = dk_acc.to(k.dtype)
        dv[tb, tn, :] = dv_acc.to(v.dtype)
    return dk, dv


def _causal_probs(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled causal scores (fp32, -inf above the diagonal) and their logsumexp per row."""
    s = q.shape[1]
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return scores, torch.logsumexp(scores, -1)


def _attn_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``(q, k, v, do, lse, delta)`` of ``shape = (batch * heads, seq, head_dim)``."""
    g = gen(seed)
    q, k, v, do = (randn(shape, torch.bfloat16, device, g) for _ in range(4))
    scores, lse = _causal_probs(q, k)
    out = torch.softmax(scores, -1) @ v.float()
    delta = (out * do.float()).sum(-1)
    return q, k, v, do, lse.contiguous(), delta.contiguous()


def _attn_bwd_ds(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: torch.Tensor,
    lse: torch.Tensor,
    delta: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The probabilities and the scores' gradient, as an FA2 backward computes them."""
    scores, _ = _causal_probs(q, k)
    p = torch.exp(scores - lse[..., None])
    dp = do.float() @ v.float().transpose(-1, -2)
    return p, p * (dp - delta[..., None]) / math.sqrt(q.shape[-1])


def attn_bwd_dq_reference(*inputs: torch.Tensor) -> torch.Tensor:
    q, k = inputs[:2]
    _, ds = _attn_bwd_ds(*inputs)
    return (ds.to(q.dtype).float() @ k.float()).to(q.dtype)


def attn_bwd_dkdv_reference(*inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, do = inputs[0], inputs[1], inputs[3]
    p, ds = _attn_bwd_ds(*inputs)
    dv = p.to(q.dtype).float().transpose(-1, -2) @ do.float()
    dk = ds.to(q.dtype).float().transpose(-1, -2) @ q.float()
    return dk.to(k.dtype), dv.to(k.dtype)


@tc.kernel(static_shapes=True)
def attention_4d_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    b, h, s, d = q.size()
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, th, tm in tc.tile([b, h, s], block_size=[1, 1, None]):
        qt = q[tb, th, tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        acc = tc.zeros([tm, d], dtype=torch.float32)
        for tn in tc.tile(tm.end):
            sc = tc.dot(qt, k[tb, th, tn, :].t(), out_dtype=torch.float32) * scale
            sc = torch.where(tm.index[:, None] >= tn.index[None, :], sc, float("-inf"))
            m_new = torch.maximum(m_i, torch.amax(sc, dim=-1))
            p = torch.exp(sc - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            acc = tc.dot(p.to(q.dtype), v[tb, th, tn, :], acc=acc * alpha[:, None])
            m_i = m_new
        out[tb, th, tm, :] = (acc / l_i[:, None]).to(q.dtype)
    return out


def _qkv(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    g = gen(seed)
    return tuple(randn(shape, torch.bfloat16, device, g) for _ in range(3))


def attention_4d_causal_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


@tc.kernel(static_shapes=True)
def trmm_lower(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """tril(a) @ b, the k loop stopping at the row block's end."""
    m, _ = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(tm.end):
            at = torch.where(tm.index[:, None] >= tk.index[None, :], a[tm, tk], 0.0)
            acc = tc.dot(at, b[tk, tn], acc=acc)
        out[tm, tn] = acc.to(a.dtype)
    return out


def _square_pair(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    m, k, n = shape
    g = gen(seed)
    return randn((m, k), torch.bfloat16, device, g), randn(
        (k, n), torch.bfloat16, device, g
    ) / k**0.5


def trmm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.tril() @ b).to(a.dtype)


@tc.kernel(static_shapes=True)
def gemm_scale_residual(
    a: torch.Tensor, b: torch.Tensor, scale: torch.Tensor, res: torch.Tensor
) -> torch.Tensor:
    m, kk = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(kk):
            acc = tc.dot(a[tm, tk], b[tk, tn], acc=acc)
        out[tm, tn] = (acc * scale[tm][:, None] + res[tm, tn].to(torch.float32)).to(a.dtype)
    return out


def _gemm_scale_residual_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    a, b = _square_pair(shape, device, seed)
    g = gen(seed + 1)
    scale = 1 + 0.1 * randn(shape[:1], torch.float32, device, g)
    return a, b, scale, randn((shape[0], shape[2]), torch.bfloat16, device, g)


def gemm_scale_residual_reference(
    a: torch.Tensor, b: torch.Tensor, scale: torch.Tensor, res: torch.Tensor
) -> torch.Tensor:
    return ((a @ b).float() * scale[:, None] + res.float()).to(a.dtype)


@tc.kernel(static_shapes=True)
def int8_weight_gemm(a: torch.Tensor, w: torch.Tensor, wscale: torch.Tensor) -> torch.Tensor:
    m, kk = a.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(kk):
            wt = (w[tk, tn].to(torch.float32) * wscale[tn][None, :]).to(a.dtype)
            acc = tc.dot(a[tm, tk], wt, acc=acc)
        out[tm, tn] = acc.to(a.dtype)
    return out


def _int8_weight_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    m, k, n = shape
    g = gen(seed)
    w = torch.randint(-127, 128, (k, n), generator=g, dtype=torch.int8).to(device)
    wscale = (0.5 + torch.rand(n, generator=g)).to(device) / (127 * k**0.5)
    return randn((m, k), torch.bfloat16, device, g), w, wscale


def int8_weight_gemm_reference(
    a: torch.Tensor, w: torch.Tensor, wscale: torch.Tensor
) -> torch.Tensor:
    return a @ (w.float() * wscale[None, :]).to(a.dtype)


def _fp32_pair(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    return tuple(t.float() for t in _square_pair(shape, device, seed))


def matmul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


@tc.kernel(static_shapes=True)
def matmul_any_layout(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, kk = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(kk):
            acc = tc.dot(a[tm, tk], b[tk, tn], acc=acc)
        out[tm, tn] = acc.to(a.dtype)
    return out


def _weight_transposed(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``(x, w.t())``: a linear layer's weight ``[n, k]`` passed as its transposed view."""
    m, k, n = shape
    g = gen(seed)
    return randn((m, k), torch.bfloat16, device, g), randn(
        (n, k), torch.bfloat16, device, g
    ).t() / k**0.5


CASES = [
    one_kernel_case(
        "attn_bwd_dq_causal",
        attn_bwd_dq,
        _attn_bwd_inputs,
        attn_bwd_dq_reference,
        ((32, 4096, 128),),
        ((2, 70, 32),),
        5e-2,
    ),
    one_kernel_case(
        "attn_bwd_dkdv_causal",
        attn_bwd_dkdv,
        _attn_bwd_inputs,
        attn_bwd_dkdv_reference,
        ((32, 4096, 128),),
        ((2, 70, 32),),
        5e-2,
    ),
    one_kernel_case(
        "attention_4d_causal",
        attention_4d_causal,
        _qkv,
        attention_4d_causal_reference,
        ((2, 32, 4096, 128),),
        ((1, 2, 70, 32),),
        2e-2,
    ),
    one_kernel_case(
        "trmm_lower",
        trmm_lower,
        _square_pair,
        trmm_reference,
        ((4096, 4096, 4096),),
        ((90, 90, 40),),
        3e-2,
    ),
    one_kernel_case(
        "gemm_scale_residual",
        gemm_scale_residual,
        _gemm_scale_residual_inputs,
        gemm_scale_residual_reference,
        ((4096, 4096, 4096),),
        ((70, 64, 40),),
        5e-2,
    ),
    one_kernel_case(
        "int8_weight_gemm",
        int8_weight_gemm,
        _int8_weight_inputs,
        int8_weight_gemm_reference,
        ((4096, 4096, 4096),),
        ((40, 64, 48),),
        3e-2,
    ),
    one_kernel_case(
        "matmul_fp32",
        matmul_any_layout,
        _fp32_pair,
        matmul_reference,
        ((4096, 4096, 4096),),
        ((40, 64, 48),),
        1e-3,
    ),
    one_kernel_case(
        "matmul_weight_transposed",
        matmul_any_layout,
        _weight_transposed,
        matmul_reference,
        ((4096, 4096, 4096),),
        ((40, 64, 48),),
        3e-2,
    ),
]

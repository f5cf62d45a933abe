"""Held-out kernels written from the docs only, session 19 (see :mod:`.heldout_rows` for why
held-out kernels exist): L2 normalization of each row (``F.normalize``), BatchNorm1d's training
forward over an [N, C] batch (per-channel statistics reduced over the first dim, then the affine
normalize), the backward of the tanh-approximated GELU written out with ``torch.tanh``, a
depthwise 3x3 convolution over a channels-last NHWC image with the nine taps as shifted loads
(rows outside the image skipped by a scalar ``if``, columns masked), causal sliding-window attention (each query sees its last ``WINDOW`` keys) with an online
softmax, and an MoE grouped GEMM over equal-sized expert groups with a per-expert output scale.
Each comes with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

GELU_K = math.sqrt(2.0 / math.pi)  # tanh-GELU's sqrt(2 / pi)
GELU_C = 0.044715
WINDOW = 512  # sliding-window attention: a query sees keys i - WINDOW < j <= i


# --------------------------------------------------------------------------- L2 normalize


@tc.kernel(static_shapes=True)
def l2_normalize_rows(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """x [R, D] bf16: F.normalize(x, dim=-1), x / max(||x||_2, eps) per row in fp32, bf16 out."""
    r, d = x.size()
    out = torch.empty_like(x)
    for tr in tc.tile(r):
        xt = x[tr, :].to(torch.float32)
        norm = torch.sqrt(torch.sum(xt * xt, dim=-1))
        out[tr, :] = (xt / torch.clamp(norm, min=eps)[:, None]).to(out.dtype)
    return out


def _l2_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (R, D)``: bf16 embeddings."""
    return (randn(shape, torch.bfloat16, device, gen(seed)) * 3,)


def l2_normalize_rows_reference(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    return torch.nn.functional.normalize(x.float(), dim=-1, eps=eps).to(x.dtype)


# --------------------------------------------------------------------------- BatchNorm1d forward


@tc.kernel(static_shapes=True)
def batchnorm1d_train_fwd(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """x [N, C] bf16 (C contiguous), weight / bias [C] bf16: BatchNorm1d in training mode. One
    program per block of channels: a loop over N sums x and x^2 per channel in fp32 (the mean
    and the biased variance E[x^2] - mean^2), then a second loop over N writes
    (x - mean) * rstd * weight + bias. Returns bf16 [N, C]."""
    n, c = x.size()
    out = torch.empty_like(x)
    for tch in tc.tile(c):
        total = tc.zeros([tch], dtype=torch.float32)
        total_sq = tc.zeros([tch], dtype=torch.float32)
        for tn in tc.tile(n):
            xv = x[tn, tch].to(torch.float32)
            total = total + torch.sum(xv, dim=0)
            total_sq = total_sq + torch.sum(xv * xv, dim=0)
        mean = total / n
        var = torch.clamp(total_sq / n - mean * mean, min=0.0)
        scale = torch.rsqrt(var + eps) * weight[tch].to(torch.float32)
        shift = bias[tch].to(torch.float32) - mean * scale
        for tn in tc.tile(n):
            xv = x[tn, tch].to(torch.float32)
            out[tn, tch] = (xv * scale[None, :] + shift[None, :]).to(out.dtype)
    return out


def _batchnorm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C)``: activations with a per-channel offset and spread, and the affine."""
    c = shape[1]
    g = gen(seed)
    spread = 0.5 + randn((c,), torch.float32, device, g).abs()
    x = randn(shape, torch.float32, device, g) * spread + randn((c,), torch.float32, device, g)
    w = (1 + 0.2 * randn((c,), torch.float32, device, g)).to(torch.bfloat16)
    b = (0.2 * randn((c,), torch.float32, device, g)).to(torch.bfloat16)
    return x.to(torch.bfloat16), w, b


def batchnorm1d_train_fwd_reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    y = torch.nn.functional.batch_norm(
        x.float(), None, None, weight.float(), bias.float(), training=True, eps=eps
    )
    return y.to(x.dtype)


# --------------------------------------------------------------------------- GELU (tanh) backward


@tc.kernel(static_shapes=True)
def gelu_tanh_bwd(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """x, dy [T, F] bf16, for y = gelu(x, approximate="tanh") = 0.5 x (1 + tanh(u)) with
    u = sqrt(2 / pi) (x + 0.044715 x^3): dx = dy * (0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2)
    sqrt(2 / pi) (1 + 3 * 0.044715 x^2)), fp32 math, bf16 out."""
    t, f = x.size()
    dx = torch.empty_like(x)
    for tt, tf in tc.tile([t, f]):
        xv = x[tt, tf].to(torch.float32)
        g = dy[tt, tf].to(torch.float32)
        th = torch.tanh(GELU_K * (xv + GELU_C * xv * xv * xv))
        du = GELU_K * (1.0 + 3.0 * GELU_C * xv * xv)
        dgelu = 0.5 * (1.0 + th) + 0.5 * xv * (1.0 - th * th) * du
        dx[tt, tf] = (g * dgelu).to(dx.dtype)
    return dx


def _gelu_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, F)``: the MLP's pre-activation and the upstream gradient."""
    g = gen(seed)
    return randn(shape, torch.bfloat16, device, g) * 2, randn(shape, torch.bfloat16, device, g)


def gelu_tanh_bwd_reference(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    dx = torch.ops.aten.gelu_backward(dy.float(), x.float(), approximate="tanh")
    return dx.to(x.dtype)


# --------------------------------------------------------------------------- depthwise conv 3x3


@tc.kernel(static_shapes=True)
def depthwise_conv3x3_nhwc(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x [N, H, W, C] bf16 (channels last), weight [3, 3, C] bf16: a depthwise 3x3 convolution,
    stride 1, zero padding 1, out[n, h, w, c] = sum_{dy, dx} weight[dy, dx, c] *
    x[n, h + dy - 1, w + dx - 1, c], fp32 accumulation. One program per (n, h, block of w,
    block of c); each of the nine taps is a shifted load: a tap row outside the image is skipped
    (a scalar ``if``), tap columns outside it are masked off."""
    n, h, w, c = x.size()
    out = torch.empty_like(x)
    for tn, th, tw, tch in tc.tile([n, h, w, c], block_size=[1, 1, None, None]):
        ni = tn.begin
        hi = th.begin
        acc = tc.zeros([tw, tch], dtype=torch.float32)
        for dy in tc.static_range(3):
            row = hi + dy - 1
            if (row >= 0) & (row < h):
                for dx in tc.static_range(3):
                    cols = tw.index + dx - 1
                    valid = (cols >= 0) & (cols < w)
                    # masked-off lanes still index x in ref mode: keep them inside the row
                    src = torch.clamp(cols, 0, w - 1)
                    xv = tc.load(x, [ni, row, src, tch], extra_mask=valid[:, None])
                    wt = weight[dy, dx, tch].to(torch.float32)
                    acc = acc + xv.to(torch.float32) * wt[None, :]
        out[ni, hi, tw, tch] = acc.to(out.dtype)
    return out


def _dwconv_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, H, W, C)``: a channels-last activation and a [3, 3, C] filter (the
    [C, 1, 3, 3] conv weight permuted, as a channels-last kernel keeps it)."""
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g)
    w = randn((3, 3, shape[3]), torch.float32, device, g) / 3.0
    return x, w.to(torch.bfloat16)


def depthwise_conv3x3_nhwc_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    c = x.shape[3]
    w = weight.float().permute(2, 0, 1)[:, None]  # [C, 1, 3, 3]
    y = torch.nn.functional.conv2d(x.float().permute(0, 3, 1, 2), w, padding=1, groups=c)
    return y.permute(0, 2, 3, 1).contiguous().to(x.dtype)


# --------------------------------------------------------------------------- sliding window attn


@tc.kernel(static_shapes=True)
def sliding_window_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int
) -> torch.Tensor:
    """q, k, v [B, H, S, D] bf16: causal attention where query i sees only keys
    i - window < j <= i (Mistral-style local attention), softmax(q k^T / sqrt(D)) v with an
    online softmax (fp32 running max, sum and accumulator); each query block walks only the key
    blocks its window reaches. Returns bf16 [B, H, S, D]."""
    b, h, s, d = q.size()
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, th, tm in tc.tile([b, h, s], block_size=[1, 1, None]):
        qt = q[tb, th, tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        acc = tc.zeros([tm, d], dtype=torch.float32)
        lo = torch.clamp(tm.begin - window + 1, min=0)
        for tn in tc.tile(lo, tm.end):
            sc = tc.dot(qt, k[tb, th, tn, :].t(), out_dtype=torch.float32) * scale
            dist = tm.index[:, None] - tn.index[None, :]
            sc = torch.where((dist >= 0) & (dist < window), sc, float("-inf"))
            m_new = torch.maximum(m_i, torch.amax(sc, dim=-1))
            # a row may see no key of the window's first block yet: keep exp() off -inf - -inf
            m_use = torch.where(m_new == float("-inf"), 0.0, m_new)
            p = torch.exp(sc - m_use[:, None])
            alpha = torch.exp(m_i - m_use)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            acc = tc.dot(p.to(q.dtype), v[tb, th, tn, :], acc=acc * alpha[:, None])
            m_i = m_new
        out[tb, th, tm, :] = (acc / l_i[:, None]).to(q.dtype)
    return out


def _qkv(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S, D)``: q, k, v bf16."""
    g = gen(seed)
    return tuple(randn(shape, torch.bfloat16, device, g) for _ in range(3))


def _window(s: int) -> int:
    """The window at sequence length ``s``: ``WINDOW``, or a quarter of the sequence where that
    is shorter (the CPU shapes, where the window must still cut)."""
    return min(WINDOW, s // 4)


def sliding_window_attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None
) -> torch.Tensor:
    s = q.shape[2]
    window = _window(s) if window is None else window
    pos = torch.arange(s, device=q.device)
    dist = pos[:, None] - pos[None, :]
    mask = (dist >= 0) & (dist < window)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


# --------------------------------------------------------------------------- MoE grouped GEMM


@tc.kernel(static_shapes=True)
def grouped_gemm_experts(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [E, T, K] bf16 (each expert's T routed tokens, equal-sized groups), w [E, K, N] bf16
    (each expert's weight), scale [E, N] fp32 (a per-expert output scale, e.g. dequantization):
    out[e] = (x[e] @ w[e]) * scale[e] with fp32 accumulation, bf16 out [E, T, N]."""
    e, t, k = x.size()
    n = w.size(2)
    out = torch.empty([e, t, n], dtype=x.dtype, device=x.device)
    for te, tm, tn in tc.tile([e, t, n], block_size=[1, None, None]):
        ei = te.begin
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = tc.dot(x[ei, tm, tk], w[ei, tk, tn], acc=acc)
        out[ei, tm, tn] = (acc * scale[ei, tn][None, :]).to(out.dtype)
    return out


def _grouped_gemm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (E, T, K, N)``: E experts, T tokens per expert, K the model dim, N the expert
    FFN dim; weights scaled by 1 / sqrt(K), scales near 1."""
    e, t, k, n = shape
    g = gen(seed)
    x = randn((e, t, k), torch.bfloat16, device, g)
    w = (randn((e, k, n), torch.float32, device, g) / k**0.5).to(torch.bfloat16)
    scale = 1 + 0.25 * randn((e, n), torch.float32, device, g)
    return x, w, scale


def grouped_gemm_experts_reference(
    x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    return (torch.bmm(x, w).float() * scale[:, None, :]).to(x.dtype)


CASES = [
    one_kernel_case(
        "l2_normalize_rows",
        l2_normalize_rows,
        _l2_inputs,
        l2_normalize_rows_reference,
        ((16384, 4096),),
        ((37, 100), (5, 333)),
        1e-2,
    ),
    one_kernel_case(
        "batchnorm1d_train_fwd",
        batchnorm1d_train_fwd,
        _batchnorm_inputs,
        batchnorm1d_train_fwd_reference,
        ((65536, 1024),),
        ((77, 37), (300, 20)),
        6.25e-2,
    ),
    one_kernel_case(
        "gelu_tanh_bwd",
        gelu_tanh_bwd,
        _gelu_bwd_inputs,
        gelu_tanh_bwd_reference,
        ((8192, 14336),),
        ((37, 100), (5, 77)),
        3.2e-2,
    ),
    one_kernel_case(
        "depthwise_conv3x3_nhwc",
        depthwise_conv3x3_nhwc,
        _dwconv_inputs,
        depthwise_conv3x3_nhwc_reference,
        ((64, 56, 56, 256),),
        ((2, 5, 7, 37), (1, 9, 11, 20)),
        6.25e-2,
    ),
    Case(
        name="sliding_window_attention",
        kernels=(sliding_window_attention,),
        make_inputs=_qkv,
        reference=sliding_window_attention_reference,
        run=lambda k, inp: k["sliding_window_attention"](*inp, _window(inp[0].shape[2])),
        gpu_shapes=((4, 16, 4096, 128),),
        cpu_shapes=((1, 2, 70, 32), (2, 1, 45, 16)),
        atol=2e-2,
    ),
    one_kernel_case(
        "grouped_gemm_experts",
        grouped_gemm_experts,
        _grouped_gemm_inputs,
        grouped_gemm_experts_reference,
        ((8, 2048, 4096, 1408),),
        ((3, 37, 40, 50), (2, 9, 70, 33)),
        6.25e-2,
    ),
]

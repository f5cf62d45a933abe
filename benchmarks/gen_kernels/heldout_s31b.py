"""Held-out kernels written from the docs only, session 31, second batch (see :mod:`.heldout_rows`
for why held-out kernels exist): LLM inference and training pieces. A GEMM with a bias, erf-GELU
and residual epilogue; per-head RMSNorm of q followed by rotate-half RoPE in one kernel; top-2
masking then softmax over a vocabulary row; one decode step of GQA attention (4 query heads a
KV head) over an int8 KV cache with per-token scales; RMSNorm over groups of 128 channels; a
row-wise scaled fp8 (e4m3) GEMM against a K-major weight; the LayerNorm input gradient; and
gradient clipping by global norm (per-row norms, then a scale). Each comes with its eager
reference (see :mod:`.case`).

Notes: all eight compile and match; one needed a rewrite. ``qk_norm_rope`` was first written as
examples/rope.py does, ``half = tc.specialize(d // 2)``, then ``n1 = qn[:, :, :half]`` on the
normalized (computed) tile: ``UnsupportedOpError: .../heldout_s31b.py:82: slicing a tile with
slice(None, 12, None): bounds must be Python ints`` (hint: "a slice's length sizes a register
tile; mask with torch.where instead"). The message prints the bound as the int 12 and calls it
not an int, and the hint points away from the fix: ``tc.specialize`` returns a ``Specialized``
(an int subclass, baked in), which ``frontend/tracer.py``'s ``_int_slice`` rejects with ``type(p)
is int``, while the same value is accepted in a load's slice (``q[tt, th, :half]``, as in
examples/rope.py). Rewritten with a plain ``half = d // 2`` (static_shapes=True makes it an int),
which compiles and matches. Other forms tried as experiments, not as the kernels: the first
``torch.topk(row, 2, dim=1)`` is a clear ``UnsupportedOpError: torch op 'torch.topk' is not
supported in device code``; a one-pass top-2 ``tc.reduce(top2, (row, torch.full_like(row,
-inf)), 1, other=-inf)`` with a (max, 2nd max) combine fails with ``UnsupportedOpError: cannot
use a tuple as a device value``, which does not say that ``tc.reduce`` takes one tile only
(``tc.associative_scan`` takes tuples, and the ops table describes both as "values");
``torch.cat([n1 c - n2 s, n2 c + n1 s], dim=-1)`` in qk_norm_rope works at D = 128 and at D = 24
fails with an actionable hint (store the halves with sliced indices); ``x[tt, :].view(tt, g,
128)`` (splitting a dim of a tile) compiles and is right at [37, 384], [1, 640], [8, 512], though
docs/ops.md says reshape "only adds or drops size-1 dims"; the device-side ``b[tn, tk].t()`` in
the fp8 GEMM is right too, as is the clip written as one kernel with ``tc.atomic_add(total, [0],
torch.sum(sq))`` in the first loop and ``total[0]`` read by the second. fp8 e4m3 loads and
``tc.dot`` run in the CPU interpreter (the bf16 outputs equal the reference's at both shapes).

Cross-compiled for sm_90 at the GPU shapes (default configs, meta tensors, not timed: no GPU),
weakest first. ``gemm_bias_gelu_residual`` [4096, 4096, 14336]: [128, 256, 64] at 8 warps, 3
stages, persistent_interleaved, TMA descriptors for x, w, residual and out, wgmma
m64n256k16: 255 registers and 256 bytes spilled (the resource model predicted 208); the same
kernel without the residual spills 56 bytes, and [128, 128, 64] takes 178 registers, no spill;
the bias is one scalar ``ld.global.b16`` spread through shared memory.
``attention_decode_gqa_int8`` [16, 8, 4096, 128]: one (batch, KV head) a program, 64 tokens a
step at 8 warps, 3 stages: 128 programs for 132 SMs and no split of the 4096 tokens (the online
softmax is not a pure accumulation, so ``split_reductions`` is not offered), 158 registers, no
spill; K, V and their scales come in by ``cp.async`` (24), and both dots, on fp32
dequantized tiles, are IEEE fp32 on the FMA units (257 ``fma.rn.f32`` and 100 ``ld.shared.v4``
in the PTX). Written with the scales applied after the dot (``tc.dot(q_bf16, k.to(bf16).t()) *
k_scale``, ``(p * v_scale).to(bf16)``) the same loop gets ``mma.sync`` m16n8k16 bf16 (M = 4
padded), 116 registers, 5 stages.
``softmax_topk_mask`` [128, 128256] fp32: one 513 KB row a program (128 programs, under one
wave) in chunks of 8192 at 16 warps, 58 registers, no spill, 16-byte loads and stores, but the
row is read five times (m1; m2 with the tie count, fused; then ``torch.softmax``'s own max, sum
and write passes, though its max is m1): 20 ``ld.global.v4`` a thread; ``exp(row - m1)`` over
the kept lanes divided by their sum, by hand, is four. ``qk_norm_rope`` [8192, 32, 128]: [8, 8]
(tokens, heads) at 8 warps, 64 registers, no spill, 16-byte q loads and out stores, but the two
halves of the computed tile are two ``tl.gather`` along D: 320 ``shfl.sync.idx`` and 15
``bar.sync`` in the PTX; loading the halves from memory (``q[tt, th, :half]``, ``q[tt, th,
half:]``, the mean square as two sums) has no ``shfl.sync.idx`` ([8, 16], 110 registers,
47 ``bar.sync``).
``multi_tensor_l2norm_clip`` [2048, 4096] fp32: the norm loop takes 2 whole rows a program at 8
warps (32 registers, 8 ``ld.global.v4``, the norms stored as one scalar a thread); the host
code between the loops (square, sum, sqrt, add, divide, clamp) is six small eager launches; the
scale loop takes [32, 32] blocks (8192 programs of 4 KB, one ``ld.global.v4`` and one
``st.global.v4`` a thread, 18 registers, ``coef[0]`` a scalar load). ``grouped_rms_norm`` [8192,
32 x 128] bf16: [8, 8] of (token, group) at 8 warps, 48 registers, no spill, 16-byte x loads and
stores (4 of each a thread), the [8, 128] weight one ``ld.global.v2`` spread through shared
memory (8 ``ld.shared.v4.b16``). ``rowwise_fp8_gemm`` [8192, 4096, 14336]: [128, 256, 64] at 8
warps, 5 stages, persistent_interleaved, TMA for A, the transposed B view and out, wgmma
m64n256k32 e4m3, 188 registers, no spill, the scales plain pointer loads.
``layer_norm_bwd_fused`` [4096, 4096] bf16: 2 whole rows a program at 8 warps (2048 programs),
107 registers, no spill, x, dy and weight 16-byte loads (10 ``ld.global.v4``), mean and rstd
``ld.global.v2``, 16-byte stores; nothing to fix.
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

RMS_EPS = 1e-6  # qk_norm_rope, grouped_rms_norm
GROUP = 128  # grouped_rms_norm: channels a group
KV_GROUP = 4  # attention_decode_gqa_int8: query heads a KV head
CLIP_MAX_NORM = 1.0  # multi_tensor_l2norm_clip
CLIP_EPS = 1e-6  # multi_tensor_l2norm_clip: added to the global norm (as torch's clip_grad_norm_)
F32 = torch.float32


# --------------------------------------------------------------------------- GEMM epilogue


@tc.kernel(static_shapes=True)
def gemm_bias_gelu_residual(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor
) -> torch.Tensor:
    """out = gelu(x @ w + bias) + residual for x [M, K], w [K, N], bias [N], residual [M, N]
    bf16 (an MLP's up projection with its activation and skip connection fused): fp32
    accumulation and epilogue, bf16 out. Each program takes an [M, N] block."""
    m, k = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=F32)
        for tk in tc.tile(k):
            acc = tc.dot(x[tm, tk], w[tk, tn], acc=acc)
        y = torch.nn.functional.gelu(acc + bias[tn].to(F32)[None, :])
        out[tm, tn] = (y + residual[tm, tn].to(F32)).to(out.dtype)
    return out


def _gemm_epilogue_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K, N)``: x bf16 randn, w bf16 randn / sqrt(K), bias and residual bf16."""
    m, k, n = shape
    g = gen(seed)
    x = randn((m, k), torch.bfloat16, device, g)
    w = randn((k, n), F32, device, g)
    bias = randn((n,), torch.bfloat16, device, g)
    residual = randn((m, n), torch.bfloat16, device, g)
    return x, (w / math.sqrt(k)).to(torch.bfloat16), bias, residual


def gemm_bias_gelu_residual_reference(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor
) -> torch.Tensor:
    y = torch.nn.functional.gelu(x.float() @ w.float() + bias.float())
    return (y + residual.float()).to(x.dtype)


# --------------------------------------------------------------------------- QK norm + RoPE


@tc.kernel(static_shapes=True)
def qk_norm_rope(
    q: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    """Per-head RMSNorm of q [T, H, D] bf16 over D with weight [D] bf16 (the QK-norm of Qwen3 /
    OLMo 2), then rotary embedding in the rotate-half layout with fp32 cos, sin [T, D / 2]:
    out[..., :D/2] = n1 cos - n2 sin, out[..., D/2:] = n2 cos + n1 sin of the normalized
    halves n1, n2. fp32 math, bf16 out. Each program takes a block of tokens and heads."""
    t, h, d = q.size()
    half = d // 2  # see Notes: tc.specialize(d // 2) is rejected in a tile slice
    out = torch.empty_like(q)
    for tt, th in tc.tile([t, h]):
        qt = q[tt, th, :].to(F32)
        inv = torch.rsqrt(torch.mean(qt * qt, dim=-1) + RMS_EPS)
        qn = qt * inv[:, :, None] * weight[None, None, :].to(F32)
        n1 = qn[:, :, :half]
        n2 = qn[:, :, half:]
        c = cos[tt, None, :]
        s = sin[tt, None, :]
        out[tt, th, :half] = (n1 * c - n2 * s).to(out.dtype)
        out[tt, th, half:] = (n2 * c + n1 * s).to(out.dtype)
    return out


def _qk_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, H, D)``: q bf16 randn times 3 (unnormalized), weight bf16 around 1, and the
    cos / sin tables of positions 1..T (base 10000; a chunk after a one-token prefix, so that
    sin is not all zeros at T = 1)."""
    t, _, d = shape
    g = gen(seed)
    q = randn(shape, F32, device, g)
    w = randn((d,), F32, device, g)
    if device == "meta":
        tab = torch.empty((t, d // 2), dtype=F32, device=device)
        return q.to(torch.bfloat16), w.to(torch.bfloat16), tab, tab.clone()
    inv_freq = 10000.0 ** (-torch.arange(0, d // 2, dtype=F32) * 2 / d)
    angles = torch.arange(1, t + 1, dtype=F32)[:, None] * inv_freq[None, :]
    weight = (1.0 + 0.1 * w).to(torch.bfloat16)
    return (q * 3).to(torch.bfloat16), weight, angles.cos().to(device), angles.sin().to(device)


def qk_norm_rope_reference(
    q: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    qf = q.float()
    qn = qf * torch.rsqrt(qf.pow(2).mean(-1, keepdim=True) + RMS_EPS) * weight.float()
    half = q.shape[-1] // 2
    n1, n2 = qn[..., :half], qn[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([n1 * c - n2 * s, n2 * c + n1 * s], dim=-1).to(q.dtype)


# --------------------------------------------------------------------------- top-2 softmax


@tc.kernel(static_shapes=True)
def softmax_topk_mask(logits: torch.Tensor) -> torch.Tensor:
    """Top-2 softmax of logits [B, V] fp32 (top-k sampling with k = 2, or a top-2 MoE router):
    every logit below the row's 2nd largest becomes -inf, then softmax along V. The threshold
    is the 2nd max: the max of the row with its max masked out, or the max itself where it
    occurs twice. Each program takes a block of whole rows."""
    b, v = logits.size()
    out = torch.empty_like(logits)
    for tb in tc.tile(b):
        row = logits[tb, :]
        m1 = torch.amax(row, dim=1)
        is_top = row == m1[:, None]
        m2 = torch.amax(torch.where(is_top, float("-inf"), row), dim=1)
        ties = torch.sum(torch.where(is_top, 1.0, 0.0), dim=1)
        thresh = torch.where(ties >= 2.0, m1, m2)
        masked = torch.where(row >= thresh[:, None], row, float("-inf"))
        out[tb, :] = torch.softmax(masked, dim=1)
    return out


def _logits_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V)``: fp32 randn times 2."""
    return (randn(shape, F32, device, gen(seed)) * 2,)


def softmax_topk_mask_reference(logits: torch.Tensor) -> torch.Tensor:
    top = torch.topk(logits, 2, dim=-1)
    masked = torch.full_like(logits, float("-inf")).scatter(-1, top.indices, top.values)
    return torch.softmax(masked, dim=-1)


# --------------------------------------------------------------------------- GQA decode, int8 KV


@tc.kernel(static_shapes=True)
def attention_decode_gqa_int8(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
) -> torch.Tensor:
    """One decode step of grouped-query attention over an int8 KV cache: q [B, Hq, D] bf16,
    k_cache, v_cache [B, Hkv, S, D] int8 with per-token fp32 scales [B, Hkv, S], Hq = 4 Hkv
    (query head h reads KV head h // 4). out [B, Hq, D] bf16. The query heads of one KV head
    are viewed as [B, Hkv, 4, D] on the host; each program takes one (batch, KV head) and its
    4 query heads, and runs an online softmax over the cache in blocks of tokens."""
    b, hq, d = q.size()
    hkv, s = k_cache.size(1), k_cache.size(2)
    grp = hq // hkv
    qg = q.view(b, hkv, grp, d)
    out = torch.empty([b, hkv, grp, d], dtype=q.dtype, device=q.device)
    sm_scale = 1.0 / math.sqrt(d)
    for tb, th in tc.tile([b, hkv], block_size=[1, 1]):
        qt = qg[tb.begin, th.begin, :, :].to(F32) * sm_scale
        m_i = tc.full([grp], float("-inf"), dtype=F32)
        l_i = tc.zeros([grp], dtype=F32)
        acc = tc.zeros([grp, d], dtype=F32)
        for ts in tc.tile(s):
            kt = k_cache[tb.begin, th.begin, ts, :].to(F32)
            kt = kt * k_scale[tb.begin, th.begin, ts][:, None]
            vt = v_cache[tb.begin, th.begin, ts, :].to(F32)
            vt = vt * v_scale[tb.begin, th.begin, ts][:, None]
            scores = tc.dot(qt, kt.t())
            m_new = torch.maximum(m_i, torch.amax(scores, dim=1))
            p = torch.exp(scores - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=1)
            acc = acc * alpha[:, None] + tc.dot(p, vt)
            m_i = m_new
        out[tb.begin, th.begin, :, :] = (acc / l_i[:, None]).to(out.dtype)
    return out.view(b, hq, d)


def _decode_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, Hkv, S, D)``: q [B, 4 Hkv, D] bf16 randn; K, V int8 in [-127, 127] (randn
    times 40, clamped) with fp32 scales in [0.005, 0.015) (a dequantized value of about 0.4)."""
    b, hkv, s, d = shape
    g = gen(seed)
    q = randn((b, KV_GROUP * hkv, d), torch.bfloat16, device, g)
    caches = []
    for _ in range(2):
        c = randn((b, hkv, s, d), F32, device, g)
        caches.append(torch.clamp(torch.round(c * 40), -127, 127).to(torch.int8))
    scales = []
    for _ in range(2):
        u = randn((b, hkv, s), F32, device, g)
        scales.append(0.01 + 0.005 * torch.tanh(u))
    return q, caches[0], caches[1], scales[0], scales[1]


def attention_decode_gqa_int8_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
) -> torch.Tensor:
    grp = q.shape[1] // k_cache.shape[1]
    k = (k_cache.float() * k_scale[..., None]).repeat_interleave(grp, dim=1)
    v = (v_cache.float() * v_scale[..., None]).repeat_interleave(grp, dim=1)
    scores = torch.einsum("bhd,bhsd->bhs", q.float(), k) / math.sqrt(q.shape[-1])
    return torch.einsum("bhs,bhsd->bhd", torch.softmax(scores, dim=-1), v).to(q.dtype)


# --------------------------------------------------------------------------- grouped RMSNorm


@tc.kernel(static_shapes=True)
def grouped_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm over each group of 128 channels of x [T, C] bf16 (C = G 128; the per-group norm
    of a grouped / head-wise normalization), scaled by weight [C] bf16: fp32 math, bf16 out.
    x is viewed as [T, G, 128] on the host; each program takes a block of tokens and groups."""
    t, c = x.size()
    g = c // GROUP
    x3 = x.view(t, g, GROUP)
    w2 = weight.view(g, GROUP)
    out = torch.empty_like(x3)
    for tt, tg in tc.tile([t, g]):
        xt = x3[tt, tg, :].to(F32)
        inv = torch.rsqrt(torch.mean(xt * xt, dim=-1, keepdim=True) + RMS_EPS)
        out[tt, tg, :] = (xt * inv * w2[tg, :].to(F32)[None, :, :]).to(out.dtype)
    return out.view(t, c)


def _grouped_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, G)``: x [T, G 128] bf16 randn times a per-group level, weight bf16
    around 1."""
    t, ng = shape
    g = gen(seed)
    x = randn((t, ng * GROUP), F32, device, g)
    w = randn((ng * GROUP,), F32, device, g)
    if device != "meta":
        level = torch.linspace(0.5, 4.0, ng).repeat_interleave(GROUP).to(device)
        x = x * level
    return x.to(torch.bfloat16), (1.0 + 0.1 * w).to(torch.bfloat16)


def grouped_rms_norm_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    t, c = x.shape
    xf = x.float().view(t, c // GROUP, GROUP)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)
    return (y.view(t, c) * weight.float()).to(x.dtype)


# --------------------------------------------------------------------------- row-wise fp8 GEMM


@tc.kernel(static_shapes=True)
def rowwise_fp8_gemm(
    a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor
) -> torch.Tensor:
    """C = (A @ B^T) a_scale[:, None] b_scale[None, :] of A [M, K] and B [N, K] float8_e4m3fn
    (row-wise scaled fp8, as torch._scaled_mm with per-row scales; B is K-major, as an
    nn.Linear weight), fp32 scales a_scale [M], b_scale [N]; fp32 accumulation, bf16 out.
    Each program takes an [M, N] block."""
    m, k = a.size()
    n = b.size(0)
    bt = b.t()
    out = torch.empty([m, n], dtype=torch.bfloat16, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=F32)
        for tk in tc.tile(k):
            acc = tc.dot(a[tm, tk], bt[tk, tn], acc=acc)
        out[tm, tn] = (acc * a_scale[tm][:, None] * b_scale[tn][None, :]).to(torch.bfloat16)
    return out


def _fp8_gemm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K, N)``: A, B float8_e4m3fn from randn times 4 (values up to about 20),
    scales fp32 in [0.5, 1.5) / (16 sqrt(K))."""
    m, k, n = shape
    g = gen(seed)
    a = randn((m, k), F32, device, g) * 4
    b = randn((n, k), F32, device, g) * 4
    sa = randn((m,), F32, device, g)
    sb = randn((n,), F32, device, g)
    fp8 = torch.float8_e4m3fn
    unit = 1.0 / (16 * math.sqrt(k))
    return a.to(fp8), b.to(fp8), (1.0 + 0.5 * torch.tanh(sa)) * unit, (1.0 + 0.5 * torch.tanh(sb))


def rowwise_fp8_gemm_reference(
    a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor
) -> torch.Tensor:
    acc = a.float() @ b.float().t()
    return (acc * a_scale[:, None] * b_scale[None, :]).to(torch.bfloat16)


# --------------------------------------------------------------------------- LayerNorm backward


@tc.kernel(static_shapes=True)
def layer_norm_bwd_fused(
    x: torch.Tensor, dy: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    """The input gradient of y = (x - mean) rstd weight + bias over the last dim of x [T, C]
    bf16, given dy [T, C] bf16, weight [C] bf16 and the forward's fp32 mean, rstd [T]:
    dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy weight and xhat = (x - mean) rstd.
    fp32 math, bf16 out. Each program takes a block of whole rows."""
    t, c = x.size()
    dx = torch.empty_like(x)
    for tt in tc.tile(t):
        r = rstd[tt][:, None]
        xhat = (x[tt, :].to(F32) - mean[tt][:, None]) * r
        gw = dy[tt, :].to(F32) * weight[None, :].to(F32)
        c1 = torch.mean(gw * xhat, dim=1, keepdim=True)
        c2 = torch.mean(gw, dim=1, keepdim=True)
        dx[tt, :] = (r * (gw - c2 - xhat * c1)).to(dx.dtype)
    return dx


def _ln_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, C)``: x bf16 randn times 2 plus 1, dy bf16 randn, weight bf16 around 1, and
    x's own mean and rstd (eps 1e-5) in fp32."""
    g = gen(seed)
    x = (randn(shape, F32, device, g) * 2 + 1).to(torch.bfloat16)
    dy = randn(shape, torch.bfloat16, device, g)
    w = (1.0 + 0.1 * randn((shape[1],), F32, device, g)).to(torch.bfloat16)
    xf = x.float()
    mean = xf.mean(dim=1)
    rstd = torch.rsqrt(xf.var(dim=1, unbiased=False) + 1e-5)
    return x, dy, w, mean, rstd


def layer_norm_bwd_fused_reference(
    x: torch.Tensor, dy: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    gw = dy.float() * weight.float()
    c1 = (gw * xhat).mean(dim=1, keepdim=True)
    c2 = gw.mean(dim=1, keepdim=True)
    return (rstd[:, None] * (gw - c2 - xhat * c1)).to(x.dtype)


# --------------------------------------------------------------------------- grad-norm clipping


@tc.kernel(static_shapes=True)
def multi_tensor_l2norm_clip(grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient clipping by global norm of grad [R, C] fp32 (R parameter rows, as a fused
    multi-tensor clip_grad_norm_ sees them): the per-row L2 norms [R], then every element times
    min(1, max_norm / (global_norm + eps)) with global_norm the L2 norm of the whole gradient.
    Two device loops (two launches): whole rows a program for the norms, then the host turns
    them into the clip coefficient and the second loop scales [R, C] blocks."""
    r, c = grad.size()
    norms = torch.empty([r], dtype=F32, device=grad.device)
    for tr in tc.tile(r):
        gt = grad[tr, :]
        norms[tr] = torch.sqrt(torch.sum(gt * gt, dim=1))
    total = torch.sqrt(torch.sum(norms * norms))
    coef = torch.clamp(CLIP_MAX_NORM / (total + CLIP_EPS), max=1.0).reshape(1)
    out = torch.empty_like(grad)
    for tr, tcol in tc.tile([r, c]):
        out[tr, tcol] = grad[tr, tcol] * coef[0]
    return out, norms


def _grad_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (R, C)``: fp32 randn times 0.05, times a per-row level in (0.1, 10) (the global
    norm is 531 at [2048, 4096], far above max_norm, so the clip acts)."""
    r, _ = shape
    g = gen(seed)
    x = randn(shape, F32, device, g)
    level = torch.exp(2.3 * torch.tanh(randn((r, 1), F32, device, g)))
    return (x * 0.05 * level,)


def multi_tensor_l2norm_clip_reference(grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    norms = torch.linalg.vector_norm(grad, dim=1)
    total = torch.linalg.vector_norm(norms)
    coef = torch.clamp(CLIP_MAX_NORM / (total + CLIP_EPS), max=1.0)
    return grad * coef, norms


CASES: list[Case] = [
    one_kernel_case(
        "gemm_bias_gelu_residual",
        gemm_bias_gelu_residual,
        _gemm_epilogue_inputs,
        gemm_bias_gelu_residual_reference,
        ((4096, 4096, 14336),),  # Llama-3-8B up projection at 4096 tokens
        ((37, 100, 50), (1, 33, 130)),
        2.0**-5,  # bf16 out, |y| < 8: one ulp (2^-5 in [4, 8)) where the fp32 sum in another
        # order rounds to the other side
    ),
    one_kernel_case(
        "qk_norm_rope",
        qk_norm_rope,
        _qk_inputs,
        qk_norm_rope_reference,
        ((8192, 32, 128),),  # 67 MB each way
        ((37, 3, 24), (1, 5, 40)),
        2.0**-5,  # bf16 out, |y| < 8 (normalized, weight about 1): one ulp
    ),
    one_kernel_case(
        "softmax_topk_mask",
        softmax_topk_mask,
        _logits_inputs,
        softmax_topk_mask_reference,
        ((128, 128256),),  # Llama-3 vocabulary: 66 MB each way
        ((7, 300), (1, 37)),
        1e-6,  # fp32 probabilities in [0, 1], two nonzero a row
    ),
    one_kernel_case(
        "attention_decode_gqa_int8",
        attention_decode_gqa_int8,
        _decode_inputs,
        attention_decode_gqa_int8_reference,
        ((16, 8, 4096, 128),),  # 134 MB of int8 K and V read
        ((2, 3, 37, 24), (1, 2, 1, 40)),
        2.0**-7,  # bf16 out, |y| < 2 (dequantized values are below 1.91): one ulp (2^-7 in [1, 2))
    ),
    one_kernel_case(
        "grouped_rms_norm",
        grouped_rms_norm,
        _grouped_inputs,
        grouped_rms_norm_reference,
        ((8192, 32),),  # [8192, 4096]: 67 MB each way
        ((37, 3), (1, 5)),
        2.0**-5,  # bf16 out, |y| < 8 (normalized, weight about 1): one ulp
    ),
    one_kernel_case(
        "rowwise_fp8_gemm",
        rowwise_fp8_gemm,
        _fp8_gemm_inputs,
        rowwise_fp8_gemm_reference,
        ((8192, 4096, 14336),),  # Llama-3-8B up projection at 8192 tokens
        ((37, 100, 50), (1, 48, 130)),
        2.0**-5,  # bf16 out, |y| < 8: one ulp where the fp32 sum in another order rounds
        # to the other side (fp8 products are exact in fp32)
    ),
    one_kernel_case(
        "layer_norm_bwd_fused",
        layer_norm_bwd_fused,
        _ln_bwd_inputs,
        layer_norm_bwd_fused_reference,
        ((4096, 4096),),  # 2 x 34 MB read, 34 MB written
        ((37, 300), (1, 77)),
        2.0**-5,  # bf16 out, |dx| < 8: one ulp where the row means in another order round
        # to the other side
    ),
    one_kernel_case(
        "multi_tensor_l2norm_clip",
        multi_tensor_l2norm_clip,
        _grad_inputs,
        multi_tensor_l2norm_clip_reference,
        ((2048, 4096),),  # 34 MB read twice, 34 MB written
        ((5, 1000), (1, 37)),
        1e-5,  # fp32 norms (< 40) and scaled gradients, sums in another order
    ),
]

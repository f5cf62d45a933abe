"""Held-out kernels written from the docs only, session 17 (see :mod:`.heldout_rows` for why
held-out kernels exist): single-token decode attention over a [B, H, L, D] KV cache with one
program per (batch, head), the LayerNorm backward's weight and bias gradients, a linear layer with
bias and a tanh GELU written out in torch ops, an MoE router's top-2 by two rounds of max and
masking, BatchNorm's per-channel training statistics over NCHW, the cross-entropy backward with a
per-token upstream gradient, a weight-only int4 GEMV (two nibbles a byte, one scale per 128
weights) and a per-row Jensen-Shannon divergence. Each comes with its eager reference (see
:mod:`.case`).
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

INT4_GROUP = 128  # weights per scale along K


# --------------------------------------------------------------------------- decode attention


@tc.kernel(static_shapes=True)
def decode_attention_bhld(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, sm_scale: float
) -> torch.Tensor:
    """q [B, H, D] bf16 (one new token), k_cache / v_cache [B, H, L, D] bf16: softmax(q k^T *
    sm_scale) v per (batch, head), one program per (b, h) walking the cache in blocks with an
    online softmax (fp32 running max, sum and accumulator). Returns [B, H, D] bf16."""
    b, h, seq, d = k_cache.size()
    out = torch.empty_like(q)
    for bi, hi in tc.grid([b, h]):
        qt = q[bi, hi, :].to(torch.float32) * sm_scale
        m_i = tc.full([], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([], dtype=torch.float32)
        acc = tc.zeros([d], dtype=torch.float32)
        for tl in tc.tile(seq):
            kt = k_cache[bi, hi, tl, :].to(torch.float32)
            scores = torch.sum(kt * qt[None, :], dim=-1)
            m_new = torch.maximum(m_i, torch.amax(scores))
            p = torch.exp(scores - m_new)
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p)
            vt = v_cache[bi, hi, tl, :].to(torch.float32)
            acc = acc * alpha + torch.sum(p[:, None] * vt, dim=0)
            m_i = m_new
        out[bi, hi, :] = (acc / l_i).to(out.dtype)
    return out


def _decode_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, L, D)``: the new token's query and a filled KV cache."""
    b, h, seq, d = shape
    g = gen(seed)
    q = randn((b, h, d), torch.bfloat16, device, g)
    k_cache = randn(shape, torch.bfloat16, device, g)
    v_cache = randn(shape, torch.bfloat16, device, g)
    return q, k_cache, v_cache


def decode_attention_bhld_reference(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, sm_scale: float | None = None
) -> torch.Tensor:
    scale = q.shape[-1] ** -0.5 if sm_scale is None else sm_scale
    scores = torch.einsum("bhd,bhld->bhl", q.float(), k_cache.float()) * scale
    out = torch.einsum("bhl,bhld->bhd", scores.softmax(-1), v_cache.float())
    return out.to(q.dtype)


# --------------------------------------------------------------------------- LayerNorm dw / db


@tc.kernel(static_shapes=True)
def layer_norm_bwd_dwdb(
    x: torch.Tensor, dy: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, dy [N, C] bf16, mean / rstd [N] fp32 (saved by the forward): the LayerNorm weight
    gradient dw = sum over rows of dy * xhat (xhat = (x - mean) * rstd) and the bias gradient
    db = sum over rows of dy, both fp32 [C]. Each program owns a block of columns and walks
    all the rows."""
    n, c = x.size()
    dw = torch.empty([c], dtype=torch.float32, device=x.device)
    db = torch.empty([c], dtype=torch.float32, device=x.device)
    for tcol in tc.tile(c):
        dw_acc = tc.zeros([tcol], dtype=torch.float32)
        db_acc = tc.zeros([tcol], dtype=torch.float32)
        for tn in tc.tile(n):
            xhat = (x[tn, tcol].to(torch.float32) - mean[tn][:, None]) * rstd[tn][:, None]
            g = dy[tn, tcol].to(torch.float32)
            dw_acc = dw_acc + torch.sum(g * xhat, dim=0)
            db_acc = db_acc + torch.sum(g, dim=0)
        dw[tcol] = dw_acc
        db[tcol] = db_acc
    return dw, db


def _ln_dwdb_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C)``: x, the upstream gradient, and x's row statistics (fp32)."""
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g) * 2 + 0.5
    dy = randn(shape, torch.bfloat16, device, g)
    xf = x.float()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5)
    return x, dy, mean, rstd


def layer_norm_bwd_dwdb_reference(
    x: torch.Tensor, dy: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    return (dy.float() * xhat).sum(0), dy.float().sum(0)


# --------------------------------------------------------------------------- linear + GELU


@tc.kernel(static_shapes=True)
def fused_linear_gelu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x [M, K], w [K, N], b [N] bf16: gelu(x @ w + b) with the tanh approximation spelled out
    (0.5 y (1 + tanh(sqrt(2 / pi) (y + 0.044715 y^3)))), fp32 accumulation, bf16 out."""
    m, k = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = acc + x[tm, tk] @ w[tk, tn]
        y = acc + b[tn].to(torch.float32)[None, :]
        inner = 0.7978845608028654 * (y + 0.044715 * y * y * y)
        out[tm, tn] = (0.5 * y * (1.0 + torch.tanh(inner))).to(out.dtype)
    return out


def _linear_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K, N)``: activations, a [K, N] weight scaled by 1 / sqrt(K), a bias."""
    m, k, n = shape
    g = gen(seed)
    x = randn((m, k), torch.bfloat16, device, g)
    w = (randn((k, n), torch.float32, device, g) / k**0.5).to(torch.bfloat16)
    b = (0.5 * randn((n,), torch.float32, device, g)).to(torch.bfloat16)
    return x, w, b


def fused_linear_gelu_reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = x.float() @ w.float() + b.float()
    return torch.nn.functional.gelu(y, approximate="tanh").to(x.dtype)


# --------------------------------------------------------------------------- top-2 router


@tc.kernel(static_shapes=True)
def topk2_router(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [T, E] bf16: softmax over the experts in fp32, then the two largest
    probabilities per token (descending) and their expert ids, by taking the max, masking the
    winner out with torch.where and taking the max again. Returns probs [T, 2] fp32 and ids
    [T, 2] int64."""
    t, e = logits.size()
    probs_out = torch.empty([t, 2], dtype=torch.float32, device=logits.device)
    ids_out = torch.empty([t, 2], dtype=torch.int64, device=logits.device)
    for tt in tc.tile(t):
        probs = torch.softmax(logits[tt, :].to(torch.float32), dim=-1)
        p1, i1 = torch.max(probs, dim=-1)
        experts = tc.arange(e)
        rest = torch.where(experts[None, :] == i1[:, None], float("-inf"), probs)
        p2, i2 = torch.max(rest, dim=-1)
        probs_out[tt, 0] = p1
        probs_out[tt, 1] = p2
        ids_out[tt, 0] = i1.to(torch.int64)
        ids_out[tt, 1] = i2.to(torch.int64)
    return probs_out, ids_out


def _router_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, E)``: bf16 logits, a random permutation of distinct multiples of 1/8 per
    token (exact in bf16, so no two experts tie and the ids are well defined)."""
    t, e = shape
    perm = torch.argsort(torch.rand((t, e), generator=gen(seed)), dim=-1)
    logits = (perm.float() - e / 2) * 0.125
    return (logits.to(device=device, dtype=torch.bfloat16),)


def topk2_router_reference(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    probs = torch.softmax(logits.float(), dim=-1)
    top = torch.topk(probs, 2, dim=-1)
    return top.values, top.indices


# --------------------------------------------------------------------------- BatchNorm stats


@tc.kernel(static_shapes=True)
def batchnorm_stats_nchw(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N, C, H, W] bf16 (contiguous NCHW): BatchNorm's training statistics per channel,
    the mean and the biased variance over (N, H, W) in fp32, two passes (the mean, then the
    squared deviations from it). Returns mean [C] and var [C]."""
    n, c, h, w = x.size()
    hw = h * w
    xv = x.view(n, c, hw)
    count = n * hw
    mean = torch.empty([c], dtype=torch.float32, device=x.device)
    var = torch.empty([c], dtype=torch.float32, device=x.device)
    for tch in tc.tile(c):
        total = tc.zeros([tch], dtype=torch.float32)
        for tn in tc.tile(n):
            for ts in tc.tile(hw):
                total = total + torch.sum(xv[tn, tch, ts].to(torch.float32), dim=[0, 2])
        mu = total / count
        sq = tc.zeros([tch], dtype=torch.float32)
        for tn in tc.tile(n):
            for ts in tc.tile(hw):
                diff = xv[tn, tch, ts].to(torch.float32) - mu[None, :, None]
                sq = sq + torch.sum(diff * diff, dim=[0, 2])
        mean[tch] = mu
        var[tch] = sq / count
    return mean, var


def _bn_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C, H, W)``: activations with a per-channel offset and scale."""
    c = shape[1]
    g = gen(seed)
    x = randn(shape, torch.float32, device, g)
    scale = 1 + 0.5 * randn((c,), torch.float32, device, g).abs()
    shift = randn((c,), torch.float32, device, g)
    return ((x * scale[None, :, None, None] + shift[None, :, None, None]).to(torch.bfloat16),)


def batchnorm_stats_nchw_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    return xf.mean(dim=(0, 2, 3)), xf.var(dim=(0, 2, 3), unbiased=False)


# --------------------------------------------------------------------------- CE backward


@tc.kernel(static_shapes=True)
def softmax_ce_bwd(
    logits: torch.Tensor, target: torch.Tensor, grad_out: torch.Tensor
) -> torch.Tensor:
    """logits [T, V] bf16, target [T] int64, grad_out [T] fp32 (d loss / d loss_t of an
    unreduced cross-entropy): dlogits = (softmax(logits) - onehot(target)) * grad_out[t], bf16.
    Each program walks its rows twice: an online logsumexp, then the gradient, block by block."""
    t, v = logits.size()
    dlogits = torch.empty_like(logits)
    for tt in tc.tile(t):
        mx = tc.full([tt], float("-inf"), dtype=torch.float32)
        se = tc.zeros([tt], dtype=torch.float32)
        for tv in tc.tile(v):
            xt = logits[tt, tv].to(torch.float32)
            new = torch.maximum(mx, torch.amax(xt, dim=-1))
            se = se * torch.exp(mx - new) + torch.sum(torch.exp(xt - new[:, None]), dim=-1)
            mx = new
        lse = mx + torch.log(se)
        tgt = target[tt]
        go = grad_out[tt]
        for tv in tc.tile(v):
            p = torch.exp(logits[tt, tv].to(torch.float32) - lse[:, None])
            onehot = (tv.index[None, :] == tgt[:, None]).to(torch.float32)
            dlogits[tt, tv] = ((p - onehot) * go[:, None]).to(dlogits.dtype)
    return dlogits


def _ce_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, V)``: bf16 logits, targets, and an upstream gradient per token."""
    t, v = shape
    g = gen(seed)
    logits = randn(shape, torch.bfloat16, device, g) * 3
    target = torch.randint(0, v, (t,), generator=g).to(device)
    grad_out = randn((t,), torch.float32, device, g)
    return logits, target, grad_out


def softmax_ce_bwd_reference(
    logits: torch.Tensor, target: torch.Tensor, grad_out: torch.Tensor
) -> torch.Tensor:
    probs = torch.softmax(logits.float(), dim=-1)
    onehot = torch.nn.functional.one_hot(target, logits.shape[-1]).float()
    return ((probs - onehot) * grad_out[:, None]).to(logits.dtype)


# --------------------------------------------------------------------------- int4 GEMV


@tc.kernel(static_shapes=True)
def int4_gemv(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """x [K] bf16 (one decode token), packed [N, K // 2] uint8 (weight w[n, 2j] in the low
    nibble of byte j, w[n, 2j + 1] in the high one, each stored as value + 8), scales
    [N, K // 128] bf16 (one per row and group of 128 weights): y = W x in fp32 [N]."""
    n, k2 = packed.size()
    groups = scales.size(1)
    half = k2 // groups  # bytes per group: 64
    pg = packed.view(n, groups, half)
    xg = x.view(groups, 2 * half)
    y = torch.empty([n], dtype=torch.float32, device=x.device)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=torch.float32)
        for tg in tc.tile(groups):
            byte = pg[tn, tg, :].to(torch.int32)
            w_lo = ((byte & 0xF) - 8).to(torch.float32)
            w_hi = ((byte >> 4) - 8).to(torch.float32)
            x_even = xg[tg, 0::2].to(torch.float32)
            x_odd = xg[tg, 1::2].to(torch.float32)
            part = torch.sum(w_lo * x_even[None, :, :] + w_hi * x_odd[None, :, :], dim=-1)
            acc = acc + torch.sum(part * scales[tn, tg].to(torch.float32), dim=-1)
        y[tn] = acc
    return y


def _int4_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, K)``, K a multiple of 128: random nibbles, positive bf16 group scales."""
    n, k = shape
    g = gen(seed)
    x = randn((k,), torch.bfloat16, device, g)
    if device == "meta":
        packed = torch.empty((n, k // 2), dtype=torch.uint8, device=device)
    else:
        packed = torch.randint(0, 256, (n, k // 2), generator=g, dtype=torch.uint8).to(device)
    scales = (0.005 + 0.02 * randn((n, k // INT4_GROUP), torch.float32, device, g).abs()).to(
        torch.bfloat16
    )
    return x, packed, scales


def int4_gemv_reference(
    x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor
) -> torch.Tensor:
    lo = (packed & 0xF).to(torch.int32) - 8
    hi = (packed >> 4).to(torch.int32) - 8
    w = torch.stack([lo, hi], dim=-1).reshape(packed.shape[0], -1).float()
    w = w * scales.float().repeat_interleave(INT4_GROUP, dim=1)
    return w @ x.float()


# --------------------------------------------------------------------------- Jensen-Shannon


@tc.kernel(static_shapes=True)
def jsd_loss_rows(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """p_logits, q_logits [T, V] bf16: the Jensen-Shannon divergence per row, fp32 [T]:
    with P = softmax(p), Q = softmax(q) and M = (P + Q) / 2, 0.5 KL(P || M) + 0.5 KL(Q || M)."""
    t, v = p_logits.size()
    out = torch.empty([t], dtype=torch.float32, device=p_logits.device)
    for tt in tc.tile(t):
        log_p = torch.log_softmax(p_logits[tt, :].to(torch.float32), dim=-1)
        log_q = torch.log_softmax(q_logits[tt, :].to(torch.float32), dim=-1)
        p = torch.exp(log_p)
        q = torch.exp(log_q)
        log_m = torch.log(0.5 * (p + q))
        kl_pm = torch.sum(p * (log_p - log_m), dim=-1)
        kl_qm = torch.sum(q * (log_q - log_m), dim=-1)
        out[tt] = 0.5 * kl_pm + 0.5 * kl_qm
    return out


def _jsd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, V)``: a teacher's logits and a student's near them."""
    g = gen(seed)
    p = randn(shape, torch.bfloat16, device, g) * 2
    return p, (p.float() + randn(shape, torch.float32, device, g)).to(torch.bfloat16)


def jsd_loss_rows_reference(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    log_p = torch.log_softmax(p_logits.float(), dim=-1)
    log_q = torch.log_softmax(q_logits.float(), dim=-1)
    log_m = torch.log(0.5 * (log_p.exp() + log_q.exp()))
    kl = torch.nn.functional.kl_div
    kl_pm = kl(log_m, log_p, reduction="none", log_target=True).sum(-1)
    kl_qm = kl(log_m, log_q, reduction="none", log_target=True).sum(-1)
    return 0.5 * kl_pm + 0.5 * kl_qm


CASES = [
    Case(
        name="decode_attention_bhld",
        kernels=(decode_attention_bhld,),
        make_inputs=_decode_inputs,
        reference=decode_attention_bhld_reference,
        run=lambda k, inp: k["decode_attention_bhld"](*inp, inp[0].shape[-1] ** -0.5),
        gpu_shapes=((8, 32, 8192, 128),),
        cpu_shapes=((2, 3, 77, 64), (1, 2, 300, 40)),
        atol=2e-2,
    ),
    one_kernel_case(
        "layer_norm_bwd_dwdb",
        layer_norm_bwd_dwdb,
        _ln_dwdb_inputs,
        layer_norm_bwd_dwdb_reference,
        ((32768, 4096),),
        ((300, 37), (77, 100)),
        1e-3,
    ),
    one_kernel_case(
        "fused_linear_gelu",
        fused_linear_gelu,
        _linear_inputs,
        fused_linear_gelu_reference,
        ((4096, 4096, 4096),),
        ((37, 100, 50), (70, 33, 130)),
        # one bf16 ulp of outputs up to 8 (the interpreter truncates fp32 -> bf16, torch rounds)
        6.25e-2,
    ),
    one_kernel_case(
        "topk2_router",
        topk2_router,
        _router_inputs,
        topk2_router_reference,
        ((65536, 64),),
        ((37, 64), (70, 13)),
        1e-5,
    ),
    one_kernel_case(
        "batchnorm_stats_nchw",
        batchnorm_stats_nchw,
        _bn_inputs,
        batchnorm_stats_nchw_reference,
        ((32, 256, 56, 56),),
        ((3, 5, 7, 9), (2, 37, 6, 11)),
        1e-3,
    ),
    one_kernel_case(
        "softmax_ce_bwd",
        softmax_ce_bwd,
        _ce_bwd_inputs,
        softmax_ce_bwd_reference,
        ((4096, 32000),),
        ((37, 100), (5, 1000)),
        3e-2,
    ),
    one_kernel_case(
        "int4_gemv",
        int4_gemv,
        _int4_inputs,
        int4_gemv_reference,
        ((14336, 4096),),
        ((37, 256), (50, 384)),
        1e-3,
    ),
    one_kernel_case(
        "jsd_loss_rows",
        jsd_loss_rows,
        _jsd_inputs,
        jsd_loss_rows_reference,
        ((4096, 32000),),
        ((9, 500), (37, 100)),
        1e-3,
    ),
]

"""A fourth batch of held-out kernels (see :mod:`.heldout_rows` for why they exist): an RMSNorm
backward with per-row-block dW partials, a fused SwiGLU gate/up projection on nn.Linear weights,
grouped-query attention, per-token fp8 absmax quantization, a label-smoothed cross entropy, a
sampling step's temperature softmax and its CDF, rotate-half RoPE on q and k, a global average
pool of a channels-last feature map, a MoE top-k combine and MoE router load statistics. Each
comes with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, MakeInputs, gen, one_kernel_case, randn

FP8_MAX = 448.0  # largest finite float8_e4m3fn
LABEL_SMOOTHING = 0.1
IGNORE_INDEX = -100
TEMPERATURE = 0.7


# --------------------------------------------------------------------------- RMSNorm backward


@tc.kernel(static_shapes=True)
def rms_norm_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, rstd: torch.Tensor, w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """grad_out, x [M, N] bf16, rstd [M] fp32 (saved by the forward), w [N] bf16 of
    y = x * rstd * w: dx [M, N] bf16 and dw [N] bf16 (per-row-block fp32 partials, summed on the
    host)."""
    m, n = x.size()
    bm = tc.register_block_size(m)
    dx = torch.empty_like(x)
    dw_partial = torch.empty([tc.cdiv(m, bm), n], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m, block_size=bm):
        dy = grad_out[tm, :].to(torch.float32)
        xt = x[tm, :].to(torch.float32)
        r = rstd[tm][:, None]
        xhat = xt * r
        wdy = dy * w[None, :].to(torch.float32)
        c = torch.sum(wdy * xhat, dim=-1, keepdim=True) / n
        dx[tm, :] = ((wdy - xhat * c) * r).to(dx.dtype)
        dw_partial[tm.id, :] = torch.sum(dy * xhat, dim=0)
    return dx, dw_partial.sum(0).to(w.dtype)


def _rms_bwd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: the upstream gradient, the forward's input, its rstd and weight."""
    m, n = shape
    g = gen(seed)
    dy = randn(shape, torch.bfloat16, device, g)
    x = randn(shape, torch.bfloat16, device, g) * 2
    w = (1 + 0.1 * randn((n,), torch.float32, device, g)).to(torch.bfloat16)
    rstd = torch.rsqrt(x.float().square().mean(-1) + 1e-6)
    return dy, x, rstd, w


def rms_norm_bwd_reference(
    grad_out: torch.Tensor, x: torch.Tensor, rstd: torch.Tensor, w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    dy, xf, wf = grad_out.float(), x.float(), w.float()
    xhat = xf * rstd[:, None]
    wdy = dy * wf
    dx = rstd[:, None] * (wdy - xhat * (wdy * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype), (dy * xhat).sum(0).to(w.dtype)


# --------------------------------------------------------------------------- SwiGLU gate/up


@tc.kernel(static_shapes=True)
def swiglu_gate_up(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """x [M, K] bf16, w_gate / w_up [N, K] (nn.Linear weights): silu(x @ w_gate.T) * (x @ w_up.T)
    in one K loop, both dots reading the same x tile."""
    m, k = x.size()
    n = w_gate.size(0)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        gate = tc.zeros([tm, tn], dtype=torch.float32)
        up = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            xt = x[tm, tk]
            gate = tc.dot(xt, w_gate[tn, tk].t(), acc=gate)
            up = torch.addmm(up, xt, w_up[tn, tk].t())
        out[tm, tn] = (torch.nn.functional.silu(gate) * up).to(out.dtype)
    return out


def _swiglu_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K, N)``: activations and the two projection weights, nn.Linear layout."""
    m, k, n = shape
    g = gen(seed)
    x = randn((m, k), torch.bfloat16, device, g)
    w_gate = randn((n, k), torch.bfloat16, device, g) / k**0.5
    w_up = randn((n, k), torch.bfloat16, device, g) / k**0.5
    return x, w_gate, w_up


def swiglu_gate_up_reference(
    x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor
) -> torch.Tensor:
    xf = x.float()
    gate = xf @ w_gate.float().t()
    up = xf @ w_up.float().t()
    return (torch.nn.functional.silu(gate) * up).to(x.dtype)


# --------------------------------------------------------------------------- GQA attention


@tc.kernel(static_shapes=True)
def gqa_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float
) -> torch.Tensor:
    """q [B, Hq, S, D], k / v [B, Hkv, S, D] bf16 with Hq a multiple of Hkv (each KV head serves
    Hq / Hkv query heads): non-causal softmax(q k^T * sm_scale) v, online softmax over key
    blocks."""
    b, hq, s, d = q.size()
    hkv = k.size(1)
    group = hq // hkv
    out = torch.empty_like(q)
    for tb, th, tm in tc.tile([b, hq, s], block_size=[1, 1, None]):
        bi = tb.begin
        hi = th.begin
        kh = hi // group
        qt = q[bi, hi, tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        acc = tc.zeros([tm, d], dtype=torch.float32)
        for tn in tc.tile(s):
            kt = k[bi, kh, tn, :]
            scores = tc.dot(qt, kt.t(), out_dtype=torch.float32) * sm_scale
            scores = torch.where(tn.index[None, :] < s, scores, float("-inf"))
            m_new = torch.maximum(m_i, torch.amax(scores, dim=-1))
            p = torch.exp(scores - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            acc = acc * alpha[:, None]
            acc = tc.dot(p.to(v.dtype), v[bi, kh, tn, :], acc=acc)
            m_i = m_new
        out[bi, hi, tm, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


def _gqa_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, Hq, Hkv, S, D)``."""
    b, hq, hkv, s, d = shape
    g = gen(seed)
    q = randn((b, hq, s, d), torch.bfloat16, device, g)
    k = randn((b, hkv, s, d), torch.bfloat16, device, g)
    v = randn((b, hkv, s, d), torch.bfloat16, device, g)
    return q, k, v


def gqa_attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float | None = None
) -> torch.Tensor:
    group = q.shape[1] // k.shape[1]
    scale = q.shape[-1] ** -0.5 if sm_scale is None else sm_scale
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    p = torch.softmax(q.float() @ kf.transpose(-1, -2) * scale, dim=-1)
    return (p @ vf).to(q.dtype)


# --------------------------------------------------------------------------- fp8 row quant


@tc.kernel(static_shapes=True)
def fp8_row_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, D] bf16: per-token absmax scaling to float8_e4m3fn (x ~ q * scale), two passes
    over column chunks (the row's absmax, then the scaled, clamped cast); the fp32 scales [T]."""
    t, d = x.size()
    q = torch.empty([t, d], dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty([t], dtype=torch.float32, device=x.device)
    for tt in tc.tile(t):
        amax = tc.zeros([tt], dtype=torch.float32)
        for td in tc.tile(d):
            chunk = x[tt, td].to(torch.float32).abs()
            amax = torch.maximum(amax, torch.amax(chunk, dim=-1))
        scale = torch.clamp(amax, min=1e-12) / FP8_MAX
        scales[tt] = scale
        for td in tc.tile(d):
            xs = x[tt, td].to(torch.float32) / scale[:, None]
            q[tt, td] = torch.clamp(xs, -FP8_MAX, FP8_MAX).to(q.dtype)
    return q, scales


def _bf16_rows(scale: float) -> MakeInputs:
    return lambda shape, device, seed: (randn(shape, torch.bfloat16, device, gen(seed)) * scale,)


def fp8_row_quant_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    scale = xf.abs().amax(-1).clamp(min=1e-12) / FP8_MAX
    q = (xf / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


# --------------------------------------------------------------------------- label-smoothed CE


@tc.kernel(static_shapes=True)
def label_smoothed_ce(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """logits [T, V] bf16, target [T] int64 (-100: ignored): F.cross_entropy(label_smoothing=,
    reduction='none') per token in fp32, one online-logsumexp pass over vocab chunks."""
    t, v = logits.size()
    loss = torch.empty([t], dtype=torch.float32, device=logits.device)
    for tt in tc.tile(t):
        tgt = target[tt]
        mx = tc.full([tt], float("-inf"), dtype=torch.float32)
        se = tc.zeros([tt], dtype=torch.float32)
        sum_x = tc.zeros([tt], dtype=torch.float32)
        x_tgt = tc.zeros([tt], dtype=torch.float32)
        for tv in tc.tile(v):
            x = logits[tt, tv].to(torch.float32)
            valid = tv.index[None, :] < v
            new = torch.maximum(mx, torch.amax(torch.where(valid, x, float("-inf")), dim=-1))
            e = torch.where(valid, torch.exp(x - new[:, None]), 0.0)
            se = se * torch.exp(mx - new) + torch.sum(e, dim=-1)
            sum_x = sum_x + torch.sum(torch.where(valid, x, 0.0), dim=-1)
            hit = tv.index[None, :] == tgt[:, None]
            x_tgt = x_tgt + torch.sum(torch.where(hit, x, 0.0), dim=-1)
            mx = new
        lse = mx + torch.log(se)
        row = (1.0 - smoothing) * (lse - x_tgt) + smoothing * (lse - sum_x / v)
        loss[tt] = torch.where(tgt != IGNORE_INDEX, row, 0.0)
    return loss


def _ce_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, V)``: bf16 logits and targets with about one token in eight ignored."""
    t, v = shape
    g = gen(seed)
    logits = randn(shape, torch.bfloat16, device, g) * 4
    target = torch.randint(0, v, (t,), generator=g)
    target[torch.rand(t, generator=g) < 0.125] = IGNORE_INDEX
    target[0] = 1  # never all ignored
    return logits, target.to(device)


def label_smoothed_ce_reference(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float = LABEL_SMOOTHING
) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(
        logits.float(),
        target,
        ignore_index=IGNORE_INDEX,
        reduction="none",
        label_smoothing=smoothing,
    )


# --------------------------------------------------------------------------- sampling probs + CDF


@tc.kernel(static_shapes=True)
def sampling_probs_cdf(
    logits: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [B, V] bf16: probs = softmax(logits / temperature) in fp32 and their running sum
    (the CDF that inverse-transform sampling searches), whole rows per tile."""
    b, v = logits.size()
    probs = torch.empty([b, v], dtype=torch.float32, device=logits.device)
    cdf = torch.empty([b, v], dtype=torch.float32, device=logits.device)
    for tb in tc.tile(b):
        p = torch.softmax(logits[tb, :].to(torch.float32) / temperature, dim=-1)
        probs[tb, :] = p
        cdf[tb, :] = torch.cumsum(p, dim=-1)
    return probs, cdf


def sampling_probs_cdf_reference(
    logits: torch.Tensor, temperature: float = TEMPERATURE
) -> tuple[torch.Tensor, torch.Tensor]:
    p = torch.softmax(logits.float() / temperature, dim=-1)
    return p, torch.cumsum(p, dim=-1)


# --------------------------------------------------------------------------- RoPE on q and k


@tc.kernel(static_shapes=True)
def rope_qk(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [B, S, Hq, D], k [B, S, Hk, D] bf16, cos / sin [S, D / 2] fp32: rotate-half rotary
    embedding (Llama / NeoX layout) of both, computed in fp32."""
    b, s, hq, d = q.size()
    hk = k.size(2)
    half = d // 2
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    for tb, ts, th in tc.tile([b, s, hq]):
        c = cos[ts, :][None, :, None, :]
        sn = sin[ts, :][None, :, None, :]
        x1 = q[tb, ts, th, :half].to(torch.float32)
        x2 = q[tb, ts, th, half:].to(torch.float32)
        q_out[tb, ts, th, :half] = (x1 * c - x2 * sn).to(q_out.dtype)
        q_out[tb, ts, th, half:] = (x2 * c + x1 * sn).to(q_out.dtype)
    for tb, ts, th in tc.tile([b, s, hk]):
        c = cos[ts, :][None, :, None, :]
        sn = sin[ts, :][None, :, None, :]
        x1 = k[tb, ts, th, :half].to(torch.float32)
        x2 = k[tb, ts, th, half:].to(torch.float32)
        k_out[tb, ts, th, :half] = (x1 * c - x2 * sn).to(k_out.dtype)
        k_out[tb, ts, th, half:] = (x2 * c + x1 * sn).to(k_out.dtype)
    return q_out, k_out


def _rope_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, S, Hq, Hk, D)``: q, k and the cos / sin tables of positions 0..S-1."""
    b, s, hq, hk, d = shape
    g = gen(seed)
    q = randn((b, s, hq, d), torch.bfloat16, device, g)
    k = randn((b, s, hk, d), torch.bfloat16, device, g)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.arange(s, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return q, k, angles.cos().to(device), angles.sin().to(device)


def rope_qk_reference(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    def rotate(x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        half = xf.shape[-1] // 2
        x1, x2 = xf[..., :half], xf[..., half:]
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)

    return rotate(q), rotate(k)


# --------------------------------------------------------------------------- global average pool


@tc.kernel(static_shapes=True)
def global_avg_pool(x: torch.Tensor) -> torch.Tensor:
    """x [B, C, H, W] bf16 in channels_last memory (strides [HWC, 1, WC, C]): the mean over
    H * W per (batch, channel), [B, C] in x's dtype (a CNN's pooling before the classifier)."""
    b, c, h, w = x.size()
    out = torch.empty([b, c], dtype=x.dtype, device=x.device)
    for tb, tch in tc.tile([b, c]):
        out[tb, tch] = torch.mean(x[tb, tch, :, :].to(torch.float32), dim=[-2, -1]).to(out.dtype)
    return out


def _nhwc_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, H, W)``: post-ReLU-like activations, channels_last."""
    x = randn(shape, torch.bfloat16, device, gen(seed)) + 0.5
    return (x.contiguous(memory_format=torch.channels_last),)


def global_avg_pool_reference(x: torch.Tensor) -> torch.Tensor:
    return x.float().mean(dim=(-2, -1)).to(x.dtype)


# --------------------------------------------------------------------------- MoE combine


@tc.kernel(static_shapes=True)
def moe_combine(
    expert_out: torch.Tensor, token_rows: torch.Tensor, gates: torch.Tensor
) -> torch.Tensor:
    """expert_out [T * K, D] bf16 (the experts' outputs, rows in expert order), token_rows [T, K]
    int64 (the row holding token t's k-th expert output), gates [T, K] fp32 (router weights):
    out[t] = sum_k gates[t, k] * expert_out[token_rows[t, k]], the unpermute after the experts."""
    t, topk = token_rows.size()
    topk = tc.specialize(topk)
    d = expert_out.size(1)
    out = torch.empty([t, d], dtype=expert_out.dtype, device=expert_out.device)
    for tt, td in tc.tile([t, d]):
        acc = tc.zeros([tt, td], dtype=torch.float32)
        for j in tc.static_range(topk):
            rows = expert_out[token_rows[tt, j], td].to(torch.float32)
            acc = acc + gates[tt, j][:, None] * rows
        out[tt, td] = acc.to(out.dtype)
    return out


def _moe_combine_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, K, D)``: a random permutation of the T * K rows and softmax-ed gates."""
    t, k, d = shape
    g = gen(seed)
    expert_out = randn((t * k, d), torch.bfloat16, device, g)
    token_rows = torch.randperm(t * k, generator=g).reshape(t, k).to(device)
    gates = torch.softmax(randn((t, k), torch.float32, "cpu", g), dim=-1).to(device)
    return expert_out, token_rows, gates


def moe_combine_reference(
    expert_out: torch.Tensor, token_rows: torch.Tensor, gates: torch.Tensor
) -> torch.Tensor:
    rows = expert_out[token_rows].float()  # [T, K, D]
    return (rows * gates[:, :, None]).sum(1).to(expert_out.dtype)


# --------------------------------------------------------------------------- MoE load statistics


@tc.kernel(static_shapes=True)
def moe_load_stats(
    topk_ids: torch.Tensor, router_probs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """topk_ids [T, K] int32 (the experts each token is routed to), router_probs [T, E] fp32:
    tokens per expert (int32, a histogram by atomics) and the mean router probability per expert,
    the two factors of the Switch Transformer load-balancing loss."""
    t, topk = topk_ids.size()
    e = router_probs.size(1)
    counts = torch.zeros([e], dtype=torch.int32, device=topk_ids.device)
    prob_mean = torch.empty([e], dtype=torch.float32, device=router_probs.device)
    for tt in tc.tile(t):
        ids = topk_ids[tt, :]
        tc.atomic_add(counts, [ids], torch.ones_like(ids))
    for te in tc.tile(e):
        acc = tc.zeros([te], dtype=torch.float32)
        for tt in tc.tile(t):
            acc = acc + torch.sum(router_probs[tt, te], dim=0)
        prob_mean[te] = acc / t
    return counts, prob_mean


def _moe_stats_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, K, E)``: top-k expert ids (distinct per token) and the router's softmax."""
    t, k, e = shape
    g = gen(seed)
    logits = randn((t, e), torch.float32, "cpu", g)
    probs = torch.softmax(logits, dim=-1)
    ids = torch.topk(probs, k, dim=-1).indices.to(torch.int32)
    return ids.to(device), probs.to(device)


def moe_load_stats_reference(
    topk_ids: torch.Tensor, router_probs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    e = router_probs.shape[1]
    counts = torch.bincount(topk_ids.flatten().long(), minlength=e).to(torch.int32)
    return counts, router_probs.mean(0)


CASES = [
    one_kernel_case(
        "rms_norm_bwd",
        rms_norm_bwd,
        _rms_bwd_inputs,
        rms_norm_bwd_reference,
        ((16384, 4096),),
        ((37, 100), (70, 300)),
        # dw sums M rows of bf16 products: one bf16 ulp of values up to 16
        1.25e-1,
    ),
    one_kernel_case(
        "swiglu_gate_up",
        swiglu_gate_up,
        _swiglu_inputs,
        swiglu_gate_up_reference,
        ((4096, 4096, 14336),),
        ((37, 72, 100),),
        # one bf16 ulp of outputs up to 16 (the interpreter truncates fp32 -> bf16, torch rounds)
        1.25e-1,
    ),
    Case(
        name="gqa_attention",
        kernels=(gqa_attention,),
        make_inputs=_gqa_inputs,
        reference=gqa_attention_reference,
        run=lambda k, inp: k["gqa_attention"](*inp, inp[0].shape[-1] ** -0.5),
        gpu_shapes=((2, 32, 8, 4096, 128),),
        cpu_shapes=((1, 4, 2, 70, 32), (2, 6, 2, 37, 64)),
        atol=3e-2,
    ),
    one_kernel_case(
        "fp8_row_quant",
        fp8_row_quant,
        _bf16_rows(3.0),
        fp8_row_quant_reference,
        ((16384, 7168),),
        ((37, 300),),
        1e-6,
    ),
    Case(
        name="label_smoothed_ce",
        kernels=(label_smoothed_ce,),
        make_inputs=_ce_inputs,
        reference=label_smoothed_ce_reference,
        run=lambda k, inp: k["label_smoothed_ce"](*inp, LABEL_SMOOTHING),
        gpu_shapes=((8192, 128256),),
        cpu_shapes=((37, 1000), (5, 3001)),
        atol=2e-3,
    ),
    Case(
        name="sampling_probs_cdf",
        kernels=(sampling_probs_cdf,),
        make_inputs=_bf16_rows(2.0),
        reference=sampling_probs_cdf_reference,
        run=lambda k, inp: k["sampling_probs_cdf"](*inp, TEMPERATURE),
        gpu_shapes=((256, 32000),),
        cpu_shapes=((3, 700),),
        atol=1e-5,
    ),
    one_kernel_case(
        "rope_qk",
        rope_qk,
        _rope_inputs,
        rope_qk_reference,
        ((4, 4096, 32, 8, 128),),
        ((2, 37, 4, 2, 64),),
        3e-2,
    ),
    one_kernel_case(
        "global_avg_pool",
        global_avg_pool,
        _nhwc_inputs,
        global_avg_pool_reference,
        ((256, 2048, 7, 7),),
        ((2, 37, 7, 9),),
        1e-2,
    ),
    one_kernel_case(
        "moe_combine",
        moe_combine,
        _moe_combine_inputs,
        moe_combine_reference,
        ((8192, 8, 7168),),
        ((37, 4, 70),),
        3e-2,
    ),
    one_kernel_case(
        "moe_load_stats",
        moe_load_stats,
        _moe_stats_inputs,
        moe_load_stats_reference,
        ((65536, 8, 256),),
        ((100, 2, 37),),
        1e-5,
    ),
]

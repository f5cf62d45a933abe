"""A third batch of held-out kernels (see :mod:`.heldout_rows` for why they exist): a fused AdamW
step over flat parameters, a transposing copy with a per-row scale, Gemma's soft-capped
log-softmax over the vocab, many tiny batched matmuls, a fused LoRA linear, a causal softmax over
attention scores, greedy decoding's row max and argmax, a scaled embedding lookup and a per-head
QK RMSNorm of a strided 4-D view. Each comes with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, MakeInputs, gen, one_kernel_case, randn

# AdamW hyperparameters as a training loop passes them (step 10, so the bias corrections matter)
LR, BETAS, ADAM_EPS, WEIGHT_DECAY, STEP = 1e-3, (0.9, 0.95), 1e-8, 0.1, 10
SOFTCAP = 30.0  # Gemma 2's final_logit_softcapping
LORA_RANK, LORA_SCALE = 16, 2.0  # alpha / r = 32 / 16


@tc.kernel(static_shapes=True)
def adamw_step(
    p: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One AdamW step on flat fp32 params/moments [N] with a bf16 grad [N]: the new (p, m, v)."""
    (n,) = p.size()
    p_out = torch.empty_like(p)
    m_out = torch.empty_like(exp_avg)
    v_out = torch.empty_like(exp_avg_sq)
    bc1 = 1.0 - beta1**step
    bc2_sqrt = (1.0 - beta2**step) ** 0.5
    for tn in tc.tile(n):
        g = grad[tn].to(torch.float32)
        m = beta1 * exp_avg[tn] + (1.0 - beta1) * g
        v = beta2 * exp_avg_sq[tn] + (1.0 - beta2) * g * g
        denom = torch.sqrt(v) / bc2_sqrt + eps
        p_out[tn] = p[tn] * (1.0 - lr * weight_decay) - (lr / bc1) * m / denom
        m_out[tn] = m
        v_out[tn] = v
    return p_out, m_out, v_out


def _adamw_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: fp32 master params and moments (v > 0), a bf16 gradient."""
    g = gen(seed)
    p = randn(shape, torch.float32, device, g) * 0.02
    grad = randn(shape, torch.bfloat16, device, g) * 0.01
    m = randn(shape, torch.float32, device, g) * 1e-3
    v = randn(shape, torch.float32, device, g).square() * 1e-5 + 1e-8
    return p, grad, m, v


def adamw_reference(
    p: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    lr: float = LR,
    beta1: float = BETAS[0],
    beta2: float = BETAS[1],
    eps: float = ADAM_EPS,
    weight_decay: float = WEIGHT_DECAY,
    step: int = STEP,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """torch.optim.AdamW's single-tensor update, out of place."""
    g = grad.float()
    m = exp_avg.lerp(g, 1 - beta1)
    v = exp_avg_sq * beta2 + (1 - beta2) * g * g
    denom = v.sqrt() / (1 - beta2**step) ** 0.5 + eps
    return p * (1 - lr * weight_decay) - lr / (1 - beta1**step) * m / denom, m, v


@tc.kernel(static_shapes=True)
def transpose_scale(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x[M, N] bf16, scale[M] fp32: out[N, M] = (x * scale[:, None]).T in bf16."""
    m, n = x.size()
    out = torch.empty([n, m], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        v = x[tm, tn].to(torch.float32) * scale[tm][:, None]
        out[tn, tm] = v.t().to(out.dtype)
    return out


def _x_rowscale(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g)
    return x, 0.5 + torch.rand(shape[:1], generator=g).to(device)


def transpose_scale_reference(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (x.float() * scale[:, None]).t().contiguous().to(x.dtype)


@tc.kernel(static_shapes=True)
def softcap_log_softmax(logits: torch.Tensor, softcap: float) -> torch.Tensor:
    """logits[T, V] bf16: out = log_softmax(softcap * tanh(logits / softcap)) over V, fp32."""
    t, v = logits.size()
    out = torch.empty([t, v], dtype=torch.float32, device=logits.device)
    for tt in tc.tile(t):
        capped = softcap * torch.tanh(logits[tt, :].to(torch.float32) / softcap)
        out[tt, :] = torch.log_softmax(capped, dim=-1)
    return out


def softcap_log_softmax_reference(logits: torch.Tensor, softcap: float = SOFTCAP) -> torch.Tensor:
    return torch.log_softmax(softcap * torch.tanh(logits.float() / softcap), dim=-1)


@tc.kernel(static_shapes=True)
def tiny_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a[B, 32, 64] @ b[B, 64, 32] for a huge B: a block of whole small matrices per program."""
    bsz, m, _ = a.size()
    out = torch.empty([bsz, m, b.size(2)], dtype=a.dtype, device=a.device)
    for tb in tc.tile(bsz):
        out[tb, :, :] = torch.bmm(a[tb, :, :], b[tb, :, :]).to(out.dtype)
    return out


def _tiny_bmm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, M, K, N)``."""
    bsz, m, k, n = shape
    g = gen(seed)
    a = randn((bsz, m, k), torch.bfloat16, device, g)
    return a, randn((bsz, k, n), torch.bfloat16, device, g) / k**0.5


def tiny_bmm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a.float(), b.float()).to(a.dtype)


@tc.kernel(static_shapes=True)
def lora_linear(
    x: torch.Tensor, w: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor, scale: float
) -> torch.Tensor:
    """x[M, K] @ w[K, N] + scale * (x @ lora_a[K, R]) @ lora_b[R, N], one K loop for both."""
    m, k = x.size()
    n = w.size(1)
    rank = lora_a.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        xa = tc.zeros([tm, rank], dtype=torch.float32)
        for tk in tc.tile(k):
            xt = x[tm, tk]
            acc = tc.dot(xt, w[tk, tn], acc=acc)
            xa = tc.dot(xt, lora_a[tk, :], acc=xa)
        acc = tc.dot((xa * scale).to(x.dtype), lora_b[:, tn], acc=acc)
        out[tm, tn] = acc.to(out.dtype)
    return out


def _lora_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K, N)``: activations, the frozen weight and the rank-16 adapters."""
    m, k, n = shape
    g = gen(seed)
    x = randn((m, k), torch.bfloat16, device, g)
    w = randn((k, n), torch.bfloat16, device, g) / k**0.5
    a = randn((k, LORA_RANK), torch.bfloat16, device, g) / k**0.5
    b = randn((LORA_RANK, n), torch.bfloat16, device, g) * (0.25 / LORA_RANK**0.5)
    return x, w, a, b


def lora_reference(
    x: torch.Tensor,
    w: torch.Tensor,
    lora_a: torch.Tensor,
    lora_b: torch.Tensor,
    scale: float = LORA_SCALE,
) -> torch.Tensor:
    xf = x.float()
    return (xf @ w.float() + (xf @ lora_a.float()) @ lora_b.float() * scale).to(x.dtype)


@tc.kernel(static_shapes=True)
def causal_softmax(scores: torch.Tensor) -> torch.Tensor:
    """scores[BH, T, T] bf16: softmax over the last dim with keys after the query masked."""
    bh, t, s = scores.size()
    out = torch.empty_like(scores)
    for tb, tq in tc.tile([bh, t]):
        x = scores[tb, tq, :].to(torch.float32)
        keep = tc.arange(s)[None, None, :] <= tq.index[None, :, None]
        x = torch.where(keep, x, float("-inf"))
        out[tb, tq, :] = torch.softmax(x, dim=-1).to(out.dtype)
    return out


def causal_softmax_reference(scores: torch.Tensor) -> torch.Tensor:
    t = scores.shape[-1]
    mask = torch.ones(t, t, dtype=torch.bool, device=scores.device).triu(1)
    return torch.softmax(scores.float().masked_fill(mask, float("-inf")), -1).to(scores.dtype)


@tc.kernel(static_shapes=True)
def greedy_argmax(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """logits[B, V]: the max logit (fp32) and its first index (int64) per row."""
    b, v = logits.size()
    best = torch.empty([b], dtype=torch.float32, device=logits.device)
    token = torch.empty([b], dtype=torch.int64, device=logits.device)
    for tb in tc.tile(b):
        vals, idx = torch.max(logits[tb, :].to(torch.float32), dim=-1)
        best[tb] = vals
        token[tb] = idx
    return best, token


def _peaked_logits(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V)``: bf16 logits with one token per row 8 above the noise, as a trained
    model's are (random bf16 rows can tie at their max, and torch.max's index on ties is unset)."""
    g = gen(seed)
    x = randn(shape, torch.float32, "cpu", g) * 2
    top = torch.randint(0, shape[1], (shape[0], 1), generator=g)
    x.scatter_add_(1, top, torch.full((shape[0], 1), 16.0))
    return (x.to(device=device, dtype=torch.bfloat16),)


def greedy_argmax_reference(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    vals, idx = torch.max(logits.float(), dim=-1)
    return vals, idx


@tc.kernel(static_shapes=True)
def scaled_embedding(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """table[V, D] bf16, ids[T] int64: out[t] = table[ids[t]] * sqrt(D) (Gemma's embedding)."""
    t = ids.size(0)
    d = table.size(1)
    normalizer = d**0.5
    out = torch.empty([t, d], dtype=table.dtype, device=table.device)
    for tt, td in tc.tile([t, d]):
        rows = table[ids[tt], td].to(torch.float32)
        out[tt, td] = (rows * normalizer).to(out.dtype)
    return out


def _table_ids(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (V, D, T)``: an embedding table and T token ids."""
    v, d, t = shape
    g = gen(seed)
    table = randn((v, d), torch.bfloat16, device, g) * 0.02
    return table, torch.randint(0, v, (t,), generator=g).to(device)


def scaled_embedding_reference(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return (table[ids].float() * table.shape[1] ** 0.5).to(table.dtype)


@tc.kernel(static_shapes=True)
def qk_rms_norm(q: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """q[B, T, H, D] (a strided view), w[D]: RMSNorm over D per head, out contiguous."""
    b, t, h, d = q.size()
    out = torch.empty([b, t, h, d], dtype=q.dtype, device=q.device)
    for tb, tt, th in tc.tile([b, t, h]):
        x = q[tb, tt, th, :].to(torch.float32)
        r = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
        out[tb, tt, th, :] = (x * r * w[None, None, None, :].to(torch.float32)).to(out.dtype)
    return out


def _fused_qkv_heads(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, H, D)``: q as the first H heads of a fused QKV projection's output
    ``[B, T, H + 2 * H / 4, D]`` (GQA with 4 query heads per KV head), and the norm's weight."""
    b, t, h, d = shape
    g = gen(seed)
    qkv = randn((b, t, h + h // 2, d), torch.bfloat16, device, g) * 3
    w = (1 + 0.2 * randn((d,), torch.float32, device, g)).to(torch.bfloat16)
    return qkv[:, :, :h, :], w


def qk_rms_norm_reference(q: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x = q.float()
    return (x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6) * w.float()).to(q.dtype)


def _bf16(scale: float = 1.0) -> MakeInputs:
    return lambda shape, device, seed: (randn(shape, torch.bfloat16, device, gen(seed)) * scale,)


CASES = [
    Case(
        name="adamw_step",
        kernels=(adamw_step,),
        make_inputs=_adamw_inputs,
        reference=adamw_reference,
        run=lambda k, inp: k["adamw_step"](*inp, LR, *BETAS, ADAM_EPS, WEIGHT_DECAY, STEP),
        gpu_shapes=((64 * 1024 * 1024,),),
        cpu_shapes=((3001,),),
        atol=1e-6,
    ),
    # atol: one bf16 ulp of values up to 8 (the interpreter truncates fp32 -> bf16, torch rounds)
    one_kernel_case(
        "transpose_scale",
        transpose_scale,
        _x_rowscale,
        transpose_scale_reference,
        ((8192, 8192),),
        ((37, 70),),
        6.25e-2,
    ),
    Case(
        name="softcap_log_softmax",
        kernels=(softcap_log_softmax,),
        make_inputs=_bf16(8.0),
        reference=softcap_log_softmax_reference,
        run=lambda k, inp: k["softcap_log_softmax"](*inp, SOFTCAP),
        gpu_shapes=((1024, 256000),),
        cpu_shapes=((3, 1500),),
        atol=2e-3,
    ),
    one_kernel_case(
        "tiny_bmm",
        tiny_bmm,
        _tiny_bmm_inputs,
        tiny_bmm_reference,
        ((65536, 32, 64, 32),),
        ((37, 32, 64, 32),),
        6.25e-2,
    ),
    Case(
        name="lora_linear",
        kernels=(lora_linear,),
        make_inputs=_lora_inputs,
        reference=lora_reference,
        run=lambda k, inp: k["lora_linear"](*inp, LORA_SCALE),
        gpu_shapes=((4096, 4096, 4096),),
        cpu_shapes=((40, 64, 48),),
        atol=6.25e-2,
    ),
    one_kernel_case(
        "causal_softmax",
        causal_softmax,
        _bf16(2.0),
        causal_softmax_reference,
        ((64, 2048, 2048),),
        ((2, 37, 37),),
        1e-2,
    ),
    one_kernel_case(
        "greedy_argmax",
        greedy_argmax,
        _peaked_logits,
        greedy_argmax_reference,
        ((512, 128256),),
        ((3, 300),),
        1e-6,
    ),
    one_kernel_case(
        "scaled_embedding",
        scaled_embedding,
        _table_ids,
        scaled_embedding_reference,
        ((128256, 4096, 32768),),
        ((500, 70, 37),),
        3e-2,
    ),
    one_kernel_case(
        "qk_rms_norm",
        qk_rms_norm,
        _fused_qkv_heads,
        qk_rms_norm_reference,
        ((8, 4096, 32, 128),),
        ((2, 5, 8, 64),),
        6.25e-2,
    ),
]

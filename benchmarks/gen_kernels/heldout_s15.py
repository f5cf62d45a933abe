"""Held-out kernels written from the docs only, session 15 (see :mod:`.heldout_rows` for why
held-out kernels exist): a GroupNorm forward, a SwiGLU whose output is quantized to fp8 per row,
a global gradient L2 norm by atomic adds, a k-means assignment step (distances to every centroid
and the nearest one), greedy sampling with temperature and Gumbel noise from ``tc.rand``, masked
mean pooling over variable-length sequences, a per-token cross-entropy with z-loss, and a fused
residual add + RMSNorm. Each comes with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

NUM_GROUPS = 32
FP8_MAX = 448.0  # largest finite float8_e4m3fn
SAMPLE_SEED = 4321
TEMPERATURE = 0.7
Z_LOSS = 1e-4
IGNORE_INDEX = -100


# --------------------------------------------------------------------------- GroupNorm


@tc.kernel(static_shapes=True)
def groupnorm_affine_fwd(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, groups: int, eps: float = 1e-5
) -> torch.Tensor:
    """x [N, C, H, W] bf16, weight / bias [C] bf16: GroupNorm with ``groups`` groups, statistics
    in fp32 over each (sample, group), then the per-channel affine."""
    n, c, h, w = x.size()
    cpg = c // groups
    xg = x.reshape(n, groups, cpg, h * w)
    wg = weight.reshape(groups, cpg)
    bg = bias.reshape(groups, cpg)
    out = torch.empty_like(xg)
    for tn, tg in tc.tile([n, groups]):
        xt = xg[tn, tg, :, :].to(torch.float32)
        mean = torch.mean(xt, dim=[-2, -1], keepdim=True)
        diff = xt - mean
        var = torch.mean(diff * diff, dim=[-2, -1], keepdim=True)
        y = diff * torch.rsqrt(var + eps)
        scale = wg[tg, :].to(torch.float32)
        shift = bg[tg, :].to(torch.float32)
        y = y * scale[None, :, :, None] + shift[None, :, :, None]
        out[tn, tg, :, :] = y.to(out.dtype)
    return out.reshape(n, c, h, w)


def _group_norm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C, H, W)``, C a multiple of 32."""
    g = gen(seed)
    c = shape[1]
    x = randn(shape, torch.bfloat16, device, g) * 3 + 1
    w = (1 + 0.1 * randn((c,), torch.float32, device, g)).to(torch.bfloat16)
    b = (0.1 * randn((c,), torch.float32, device, g)).to(torch.bfloat16)
    return x, w, b


def group_norm_reference(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    groups: int = NUM_GROUPS,
    eps: float = 1e-5,
) -> torch.Tensor:
    y = torch.nn.functional.group_norm(x.float(), groups, weight.float(), bias.float(), eps)
    return y.to(x.dtype)


# --------------------------------------------------------------------------- SwiGLU -> fp8


@tc.kernel(static_shapes=True)
def swiglu_fp8_quant(gate_up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """gate_up [T, 2 * D] bf16 (a fused gate/up projection's output): h = silu(gate) * up in
    fp32, quantized to float8_e4m3fn with one scale per row (absmax / 448). Returns q [T, D]
    and the fp32 scales [T] (h ~= q * scale)."""
    t, d2 = gate_up.size()
    d = d2 // 2
    q = torch.empty([t, d], dtype=torch.float8_e4m3fn, device=gate_up.device)
    scales = torch.empty([t], dtype=torch.float32, device=gate_up.device)
    for tt in tc.tile(t):
        gate = gate_up[tt, :d].to(torch.float32)
        up = gate_up[tt, d:].to(torch.float32)
        hid = torch.nn.functional.silu(gate) * up
        amax = torch.amax(torch.abs(hid), dim=-1)
        scale = torch.clamp(amax, min=1e-12) / FP8_MAX
        qv = torch.clamp(hid / scale[:, None], -FP8_MAX, FP8_MAX)
        q[tt, :] = qv.to(torch.float8_e4m3fn)
        scales[tt] = scale
    return q, scales


def _swiglu_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, D)``: the [T, 2 * D] bf16 gate/up activations."""
    t, d = shape
    return (randn((t, 2 * d), torch.bfloat16, device, gen(seed)) * 2,)


def swiglu_fp8_quant_reference(gate_up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    gate, up = gate_up.float().chunk(2, dim=-1)
    hid = torch.nn.functional.silu(gate) * up
    scale = hid.abs().amax(dim=-1).clamp(min=1e-12) / FP8_MAX
    q = (hid / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


# --------------------------------------------------------------------------- global grad norm


@tc.kernel(static_shapes=True)
def grad_l2_norm(grad: torch.Tensor) -> torch.Tensor:
    """grad [R, C] bf16: the global L2 norm sqrt(sum(grad ** 2)) in fp32 (for gradient
    clipping). Each tile adds its sum of squares into one fp32 accumulator atomically; the
    square root is taken on the host."""
    r, c = grad.size()
    sum_sq = torch.zeros([1], dtype=torch.float32, device=grad.device)
    for tr, tcol in tc.tile([r, c]):
        g = grad[tr, tcol].to(torch.float32)
        tc.atomic_add(sum_sq, [0], torch.sum(g * g))
    return torch.sqrt(sum_sq[0])


def _grad_norm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    return (randn(shape, torch.bfloat16, device, gen(seed)) * 0.01,)


def grad_l2_norm_reference(grad: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(grad.float())


# --------------------------------------------------------------------------- k-means assign


@tc.kernel(static_shapes=True)
def kmeans_assign(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """x [N, D] bf16 points, centroids [K, D] bf16: the id (int64) of each point's nearest
    centroid by squared Euclidean distance ||x||^2 - 2 x.c + ||c||^2 (fp32), walking the
    centroids in tiles and keeping the running minimum (first index on ties)."""
    n, d = x.size()
    k = centroids.size(0)
    ids = torch.empty([n], dtype=torch.int64, device=x.device)
    for tn in tc.tile(n):
        xt = x[tn, :].to(torch.float32)
        x_sq = torch.sum(xt * xt, dim=-1)
        best = tc.full([tn], float("inf"), dtype=torch.float32)
        best_id = tc.zeros([tn], dtype=torch.int64)
        for tk in tc.tile(k):
            ct = centroids[tk, :].to(torch.float32)
            c_sq = torch.sum(ct * ct, dim=-1)
            dist = x_sq[:, None] - 2.0 * (xt @ ct.t()) + c_sq[None, :]
            dmin, darg = torch.min(dist, dim=-1)
            closer = dmin < best
            best = torch.where(closer, dmin, best)
            best_id = torch.where(closer, darg.to(torch.int64) + tk.begin, best_id)
        ids[tn] = best_id
    return ids


def _kmeans_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, K, D)``: random bf16 points and centroids."""
    n, k, d = shape
    g = gen(seed)
    centroids = randn((k, d), torch.bfloat16, device, g)
    x = randn((n, d), torch.bfloat16, device, g)
    return x, centroids


def kmeans_assign_reference(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    xf, cf = x.float(), centroids.float()
    dist = (xf * xf).sum(-1, keepdim=True) - 2.0 * (xf @ cf.t()) + (cf * cf).sum(-1)[None, :]
    return dist.argmin(dim=-1)


# --------------------------------------------------------------------------- Gumbel sampling


@tc.kernel(static_shapes=True)
def gumbel_sample(logits: torch.Tensor, temperature: float, seed: int) -> torch.Tensor:
    """logits [B, V] bf16 (one decode step): a sample from softmax(logits / temperature) by the
    Gumbel-max trick, argmax(logits / temperature - log(-log(u))) with u ~ U[0, 1) from
    ``tc.rand``; returns the token ids [B] int64."""
    b, v = logits.size()
    tokens = torch.empty([b], dtype=torch.int64, device=logits.device)
    for tb in tc.tile(b):
        u = tc.rand([tb, v], seed)
        gumbel = -torch.log(-torch.log(u))
        score = logits[tb, :].to(torch.float32) / temperature + gumbel
        tokens[tb] = torch.argmax(score, dim=-1).to(torch.int64)
    return tokens


def _sample_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V)``: bf16 logits."""
    return (randn(shape, torch.bfloat16, device, gen(seed)) * 3,)


def gumbel_sample_reference(
    logits: torch.Tensor, temperature: float = TEMPERATURE, seed: int = SAMPLE_SEED
) -> torch.Tensor:
    u = tc.rand(tuple(logits.shape), seed, device=logits.device)
    score = logits.float() / temperature - torch.log(-torch.log(u))
    return score.argmax(dim=-1)


# --------------------------------------------------------------------------- masked mean pool


@tc.kernel(static_shapes=True)
def length_masked_mean_pool(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """x [B, S, D] bf16 padded sequences, lengths [B] int64 (each >= 1): the mean of each
    sequence's first lengths[b] rows, fp32 [B, D] (sentence embeddings)."""
    bsz, s, d = x.size()
    out = torch.empty([bsz, d], dtype=torch.float32, device=x.device)
    for tb, td in tc.tile([bsz, d]):
        n = lengths[tb]
        acc = tc.zeros([tb, td], dtype=torch.float32)
        for ts in tc.tile(s):
            xt = x[tb, ts, td].to(torch.float32)
            valid = ts.index[None, :] < n[:, None]
            acc = acc + torch.sum(torch.where(valid[:, :, None], xt, 0.0), dim=1)
        out[tb, td] = acc / n[:, None].to(torch.float32)
    return out


def _pool_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, S, D)``: random lengths in [1, S]."""
    bsz, s, d = shape
    g = gen(seed)
    lengths = torch.randint(1, s + 1, (bsz,), generator=g)
    lengths[0] = s  # one full-length sequence
    x = randn(shape, torch.bfloat16, device, g)
    return x, lengths.to(device)


def length_masked_mean_pool_reference(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    pos = torch.arange(x.shape[1], device=x.device)
    mask = (pos[None, :] < lengths[:, None]).float()
    return (x.float() * mask[:, :, None]).sum(1) / lengths[:, None].float()


# --------------------------------------------------------------------------- CE + z-loss


@tc.kernel(static_shapes=True)
def cross_entropy_z_loss(
    logits: torch.Tensor, targets: torch.Tensor, z_coef: float, ignore_index: int = -100
) -> torch.Tensor:
    """logits [T, V] bf16, targets [T] int64: per-token cross-entropy plus PaLM's z-loss,
    lse - logits[target] + z_coef * lse^2 (lse = logsumexp of the row, fp32); 0 where the
    target is ``ignore_index``. Returns the fp32 losses [T]."""
    t, v = logits.size()
    losses = torch.empty([t], dtype=torch.float32, device=logits.device)
    for tt in tc.tile(t):
        row = logits[tt, :].to(torch.float32)
        lse = torch.logsumexp(row, dim=-1)
        tgt = targets[tt]
        ignored = tgt == ignore_index
        safe = torch.where(ignored, 0, tgt)
        picked = logits[tt.index, safe].to(torch.float32)
        loss = lse - picked + z_coef * lse * lse
        losses[tt] = torch.where(ignored, 0.0, loss)
    return losses


def _ce_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, V)``: bf16 logits and targets with about one in eight ignored."""
    t, v = shape
    g = gen(seed)
    logits = randn(shape, torch.bfloat16, device, g) * 4
    targets = torch.randint(0, v, (t,), generator=g)
    drop = torch.rand((t,), generator=g) < 0.125
    drop[0] = True
    targets[drop] = IGNORE_INDEX
    return logits, targets.to(device)


def cross_entropy_z_loss_reference(
    logits: torch.Tensor,
    targets: torch.Tensor,
    z_coef: float = Z_LOSS,
    ignore_index: int = IGNORE_INDEX,
) -> torch.Tensor:
    lf = logits.float()
    ce = torch.nn.functional.cross_entropy(lf, targets, ignore_index=ignore_index, reduction="none")
    lse = torch.logsumexp(lf, dim=-1)
    return torch.where(targets == ignore_index, 0.0, ce + z_coef * lse * lse)


# --------------------------------------------------------------------------- add + RMSNorm


@tc.kernel(static_shapes=True)
def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """x (a sublayer's output), residual [T, D] bf16, weight [D] bf16: h = x + residual (fp32),
    written back as the new residual stream (bf16), and RMSNorm(h) * weight (bf16)."""
    t, d = x.size()
    out = torch.empty_like(x)
    new_residual = torch.empty_like(residual)
    for tt in tc.tile(t):
        hid = x[tt, :].to(torch.float32) + residual[tt, :].to(torch.float32)
        new_residual[tt, :] = hid.to(new_residual.dtype)
        inv = torch.rsqrt(torch.mean(hid * hid, dim=-1) + eps)
        out[tt, :] = (hid * inv[:, None] * weight[None, :].to(torch.float32)).to(out.dtype)
    return out, new_residual


def _add_rms_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    t, d = shape
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g)
    residual = randn(shape, torch.bfloat16, device, g) * 4
    w = (1 + 0.1 * randn((d,), torch.float32, device, g)).to(torch.bfloat16)
    return x, residual, w


def fused_add_rms_norm_reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    hid = x.float() + residual.float()
    inv = torch.rsqrt(hid.pow(2).mean(-1, keepdim=True) + eps)
    return (hid * inv * weight.float()).to(x.dtype), hid.to(residual.dtype)


CASES = [
    Case(
        name="groupnorm_affine_fwd",
        kernels=(groupnorm_affine_fwd,),
        make_inputs=_group_norm_inputs,
        reference=group_norm_reference,
        run=lambda k, inp: k["groupnorm_affine_fwd"](*inp, NUM_GROUPS),
        gpu_shapes=((16, 512, 64, 64),),
        cpu_shapes=((2, 96, 5, 7), (3, 64, 9, 11)),
        # one bf16 ulp of outputs up to 16
        atol=6.25e-2,
    ),
    one_kernel_case(
        "swiglu_fp8_quant",
        swiglu_fp8_quant,
        _swiglu_inputs,
        swiglu_fp8_quant_reference,
        ((8192, 14336),),
        ((37, 50), (5, 150)),
        # q matches bit for bit (fp8 casts round as torch does), the scales to fp32 rounding
        1e-6,
    ),
    one_kernel_case(
        "grad_l2_norm",
        grad_l2_norm,
        _grad_norm_inputs,
        grad_l2_norm_reference,
        ((32000, 4096),),
        ((37, 100), (70, 33)),
        1e-5,
    ),
    one_kernel_case(
        "kmeans_assign",
        kmeans_assign,
        _kmeans_inputs,
        kmeans_assign_reference,
        ((65536, 4096, 128),),
        ((37, 300, 48), (50, 77, 20)),
        0.5,  # ids are integers: any mismatch fails
    ),
    Case(
        name="gumbel_sample",
        kernels=(gumbel_sample,),
        make_inputs=_sample_inputs,
        reference=gumbel_sample_reference,
        run=lambda k, inp: k["gumbel_sample"](*inp, TEMPERATURE, SAMPLE_SEED),
        gpu_shapes=((256, 128256),),
        cpu_shapes=((3, 1000), (5, 777)),
        atol=0.5,  # token ids: any mismatch fails
    ),
    one_kernel_case(
        "length_masked_mean_pool",
        length_masked_mean_pool,
        _pool_inputs,
        length_masked_mean_pool_reference,
        ((64, 2048, 2048),),
        ((3, 37, 100), (5, 13, 70)),
        1e-5,
    ),
    Case(
        name="cross_entropy_z_loss",
        kernels=(cross_entropy_z_loss,),
        make_inputs=_ce_inputs,
        reference=cross_entropy_z_loss_reference,
        run=lambda k, inp: k["cross_entropy_z_loss"](*inp, Z_LOSS, IGNORE_INDEX),
        gpu_shapes=((16384, 32000),),
        cpu_shapes=((37, 100), (70, 333)),
        atol=1e-4,
    ),
    one_kernel_case(
        "fused_add_rms_norm",
        fused_add_rms_norm,
        _add_rms_inputs,
        fused_add_rms_norm_reference,
        ((16384, 4096),),
        ((37, 100), (5, 300)),
        # one bf16 ulp of h up to 32 (the interpreter truncates fp32 -> bf16, torch rounds)
        2.5e-1,
    ),
]

"""Held-out kernels written from the docs only, session 35 (see :mod:`.heldout_rows` for why
held-out kernels exist): a fused optimizer over ragged tensors, a margin loss, a normalization
variant, a 4-bit quantization format, a positional encoding, a decoding helper, an image
augmentation and a geometry query. One LAMB step over a flat multi-tensor buffer with a trust
ratio from each tensor's own norms (one tensor a program, bounds from an offsets table, an
empty tensor included); ArcFace's additive angular margin then cross entropy over the classes
in chunks with an online logsumexp; a residual add then ScaleNorm (one learned scale over the
row's L2 norm); bitsandbytes' NF4 dequantization (two nibbles a byte looked up in the 16-entry
table, a scale per 64); xPos (interleaved rotary with a per-frequency decay zeta^(n / 512), q
times it, k divided by it); HF's repetition penalty scattered in place into the logits at the
history's token ids, then the temperature softmax; an HSV colour jitter of RGB images
(torchvision's rgb -> hsv -> rgb with a hue shift and saturation / value factors per image);
and the nearest axis-aligned box of each point with its distance and first index on ties.
Each comes with its eager reference (see :mod:`.case`).

Notes: all eight compiled and matched at every CPU shape on the first try (seeds 0 and 1; with
the autotuner, with ``TILECRAFT_NO_AUTOTUNE=1`` on an empty cache, in ref mode, and with
explicit ``tc.Config(block_sizes=...)`` of 1 to 8 a tile dim, with ``reduction_loops=[16]``
where a kernel has a row reduction). Max errors: 0 for NF4, HSV, ScaleNorm (bf16) and the box
indices; 1.5e-8 for LAMB; 1.5e-5 for ArcFace losses near 40; 1.2e-7 for the penalized probs (the
logits exact); 2.4e-7 for xPos (bf16); 3.8e-6 for box distances near 100. More natural
variants also worked (/work/fuzz35a/probe*.py): a Python ``0.0`` accumulator for the per-tensor
norms, ArcFace over whole rows with ``torch.gather`` of the target logit or ``F.one_hot``
(and chunked with ``reduction_loops``), presence / frequency penalties counted with
``tc.atomic_add`` at the token ids, ``torch.min(d, 1).values / .indices``, rotate-every-two
as ``torch.stack((-x[:, 1::2], x[:, ::2]), -1).reshape(t, d)``, a whole RGB dim of 3 reduced
with ``amax(1)``, T5's relative-position buckets (log of int distances, ``torch.full_like``),
MX-style shared exponents by ``floor(log2(amax))`` and ``exp2``, run-length ids by
``torch.roll`` and a cumsum of a bool.

Bugs found, all fixed the same session: (1) an explicit ``tc.Config(block_sizes=[2],
reduction_loops=[16])`` that works at x [7, 48] was a ConfigError at x [7, 1] ("reduction_loops
has 1 entries; this kernel has 0 reduction dims": a whole dim of 1 is no reduction dim) — now
repaired with a warning (tests/test_config.py); (2) ``t.reshape(-1, 64)`` of a [BLOCK, 32, 2]
tile resolved -1 to 1 ("cannot become [1, 64]") rather than the tile dim; (3)
``t.reshape(tb.block_size, 64)`` failed with an internal repr in the message ("cannot become
[TileValue(%t22: [] torch.int32), 64]") — now an error naming the device value and what to write
(tests/test_views.py). NF4 uses the documented two-store form (``out[tb, :, 0]`` /
``out[tb, :, 1]`` of a [NB, 32, 2] view); ``reshape(tb, 64)`` and ``reshape(-1, 64)`` also work.
Not bugs (unlisted ops, documented):
``torch.acos`` / ``torch.atan2`` (ArcFace written with cos(theta + m) = cos cos_m - sin sin_m),
``Tensor.norm`` (``torch.linalg.vector_norm`` is listed), ``Tensor.flatten``,
``Tensor.scatter`` (the penalty stores at ``logits[rows, ids]`` instead),
``Tensor.repeat_interleave``, ``torch.frexp``, ``torch.stack`` of 3 tiles (HSV selects the
sector with ``torch.where``).
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import (
    Case,
    Inputs,
    copy_state,
    gen,
    meta_tensors,
    one_kernel_case,
    randint,
    randn,
)

F32 = torch.float32
BF16 = torch.bfloat16
I64 = torch.int64


# --------------------------------------------------------------------------- LAMB, ragged tensors

LAMB_LR = 1e-3
LAMB_BETA1 = 0.9
LAMB_BETA2 = 0.999
LAMB_EPS = 1e-6
LAMB_WD = 0.01
LAMB_STEP = 7  # the step the case runs (bias corrections 1 - beta^7)


@tc.kernel(static_shapes=True)
def lamb_step_ragged(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    offsets: torch.Tensor,
    step: int = LAMB_STEP,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One LAMB step (You et al. 2019, apex's FusedLAMB) over a flat multi-tensor buffer: param,
    grad, exp_avg, exp_avg_sq [N] fp32 hold T tensors back to back, tensor t at offsets[t] to
    offsets[t + 1] (int32 [T + 1]). Adam moments with bias correction, update u = m_hat /
    (sqrt(v_hat) + eps) + wd p, then each tensor's trust ratio ||p|| / ||u|| (1 where either
    norm is 0) scales lr. The first loop takes one tensor a program, writes the moments and the
    two squared norms; the second recomputes u from the new moments and applies it. Returns
    the new param and moments."""
    n_t = offsets.size(0) - 1
    bc1 = 1.0 - LAMB_BETA1**step
    bc2 = 1.0 - LAMB_BETA2**step
    new_m = torch.empty_like(exp_avg)
    new_v = torch.empty_like(exp_avg_sq)
    new_p = torch.empty_like(param)
    p_sq = torch.zeros([n_t], dtype=torch.float32, device=param.device)
    u_sq = torch.zeros([n_t], dtype=torch.float32, device=param.device)
    for seg in tc.tile(n_t, block_size=1):
        start = offsets[seg.begin]
        end = offsets[seg.begin + 1]
        acc_p = tc.zeros([], dtype=torch.float32)
        acc_u = tc.zeros([], dtype=torch.float32)
        for tt in tc.tile(start, end):
            g = grad[tt].float()
            p = param[tt]
            m = LAMB_BETA1 * exp_avg[tt] + (1.0 - LAMB_BETA1) * g
            v = LAMB_BETA2 * exp_avg_sq[tt] + (1.0 - LAMB_BETA2) * g * g
            new_m[tt] = m
            new_v[tt] = v
            u = (m / bc1) / (torch.sqrt(v / bc2) + LAMB_EPS) + LAMB_WD * p
            acc_p = acc_p + torch.sum(p * p)
            acc_u = acc_u + torch.sum(u * u)
        p_sq[seg.begin] = acc_p
        u_sq[seg.begin] = acc_u
    for seg in tc.tile(n_t, block_size=1):
        start = offsets[seg.begin]
        end = offsets[seg.begin + 1]
        pn = torch.sqrt(p_sq[seg.begin])
        un = torch.sqrt(u_sq[seg.begin])
        trust = torch.where((pn > 0) & (un > 0), pn / un, 1.0)
        for tt in tc.tile(start, end):
            p = param[tt]
            u = (new_m[tt] / bc1) / (torch.sqrt(new_v[tt] / bc2) + LAMB_EPS) + LAMB_WD * p
            new_p[tt] = p - LAMB_LR * trust * u
    return new_p, new_m, new_v


def _lamb_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, avg)``: T tensors of 1 to 2 avg - 1 params (the second one empty), param
    randn, grad randn times 0.1, exp_avg randn times 0.01, exp_avg_sq |randn| 1e-3 + 1e-4."""
    t, avg = shape
    g = gen(seed)
    sizes = torch.randint(1, 2 * avg, (t,), generator=g)
    if t > 1:
        sizes[1] = 0  # an empty tensor (a frozen or pruned parameter): trust ratio 1, no rows
    offsets = torch.zeros(t + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(sizes, 0)
    n = int(offsets[-1])
    param = randn((n,), F32, device, g)
    grad = randn((n,), F32, device, g) * 0.1
    m = randn((n,), F32, device, g) * 0.01
    v = randn((n,), F32, device, g).abs() * 1e-3 + 1e-4
    return param, grad, m, v, offsets.to(device)


def lamb_step_ragged_reference(param, grad, exp_avg, exp_avg_sq, offsets, step=LAMB_STEP):
    """apex's FusedLAMB step (grad averaging, no global grad-norm clipping), a tensor at a time."""
    bc1 = 1 - LAMB_BETA1**step
    bc2 = 1 - LAMB_BETA2**step
    m = LAMB_BETA1 * exp_avg + (1 - LAMB_BETA1) * grad
    v = LAMB_BETA2 * exp_avg_sq + (1 - LAMB_BETA2) * grad * grad
    u = (m / bc1) / ((v / bc2).sqrt() + LAMB_EPS) + LAMB_WD * param
    out = torch.empty_like(param)
    off = offsets.tolist()
    for a, b in zip(off[:-1], off[1:]):
        pn = param[a:b].norm()
        un = u[a:b].norm()
        trust = pn / un if (pn > 0 and un > 0) else torch.tensor(1.0)
        out[a:b] = param[a:b] - LAMB_LR * trust * u[a:b]
    return out, m, v


# --------------------------------------------------------------------------- ArcFace loss

ARC_S = 64.0
ARC_M = 0.5


@tc.kernel(static_shapes=True)
def arcface_loss(cosine: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ArcFace (insightface's ArcMarginProduct, s = 64, m = 0.5, easy_margin False) then cross
    entropy: cosine [B, C] fp32 (normalized embeddings times normalized class centres), labels
    [B] int64. The target logit becomes s cos(theta + m) (cos - mm where theta + m passes pi),
    the others s cos. Each program takes a block of rows and walks the classes in chunks with an
    online logsumexp. Returns the per-row loss and its mean."""
    b, c = cosine.size()
    cos_m, sin_m = math.cos(ARC_M), math.sin(ARC_M)
    th = math.cos(math.pi - ARC_M)
    mm = math.sin(math.pi - ARC_M) * ARC_M
    loss = torch.empty([b], dtype=torch.float32, device=cosine.device)
    for tb in tc.tile(b):
        lab = labels[tb]
        m_i = tc.full([tb], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tb], dtype=torch.float32)
        tgt = tc.zeros([tb], dtype=torch.float32)
        for tc_ in tc.tile(c):
            cs = cosine[tb, tc_].float()
            sine = torch.sqrt(torch.clamp(1.0 - cs * cs, min=0.0))
            phi = cs * cos_m - sine * sin_m
            phi = torch.where(cs > th, phi, cs - mm)
            hit = tc_.index[None, :] == lab[:, None]
            logits = ARC_S * torch.where(hit, phi, cs)
            tgt = tgt + torch.sum(torch.where(hit, logits, 0.0), dim=1)
            m_new = torch.maximum(m_i, torch.amax(logits, dim=1))
            l_i = l_i * torch.exp(m_i - m_new) + torch.sum(
                torch.exp(logits - m_new[:, None]), dim=1
            )
            m_i = m_new
        loss[tb] = m_i + torch.log(l_i) - tgt
    return loss, loss.mean()


def _arcface_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C)``: cosines of random unit embeddings and class centres in 16 dims,
    labels uniform."""
    b, c = shape
    if device == "meta":
        return meta_tensors((b, c))[0], meta_tensors((b,), dtype=I64)[0]
    g = gen(seed)
    emb = torch.nn.functional.normalize(randn((b, 16), F32, "cpu", g), dim=1)
    w = torch.nn.functional.normalize(randn((c, 16), F32, "cpu", g), dim=1)
    labels = randint(0, c, (b,), "cpu", g)
    return (emb @ w.t()).clamp(-1, 1).to(device), labels.to(device)


def arcface_loss_reference(cosine, labels):
    """insightface's ArcMarginProduct (easy_margin=False) then cross entropy."""
    cos_m, sin_m = math.cos(ARC_M), math.sin(ARC_M)
    th = math.cos(math.pi - ARC_M)
    mm = math.sin(math.pi - ARC_M) * ARC_M
    sine = torch.sqrt((1.0 - cosine**2).clamp(0, 1))
    phi = cosine * cos_m - sine * sin_m
    phi = torch.where(cosine > th, phi, cosine - mm)
    one_hot = torch.nn.functional.one_hot(labels, cosine.size(1)).bool()
    logits = ARC_S * torch.where(one_hot, phi, cosine)
    loss = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    return loss, loss.mean()


# --------------------------------------------------------------------------- ScaleNorm + residual

SCALE_NORM_EPS = 1e-5


@tc.kernel(static_shapes=True)
def scale_norm_residual(
    x: torch.Tensor, residual: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pre-norm residual add then ScaleNorm (Nguyen & Salazar 2019): x, residual [M, N] bf16,
    g [1] fp32 (one learned scale, initialised to sqrt(N)); h = x + residual in fp32, out =
    g h / max(||h||_2, eps). Returns out and h (the new residual stream), both bf16."""
    m, n = x.size()
    out = torch.empty_like(x)
    h_out = torch.empty_like(x)
    for tm in tc.tile(m):
        h = x[tm, :].float() + residual[tm, :].float()
        h_out[tm, :] = h.to(h_out.dtype)
        nrm = torch.linalg.vector_norm(h, dim=-1)
        scale = g[0] / torch.clamp(nrm, min=SCALE_NORM_EPS)
        out[tm, :] = (h * scale[:, None]).to(out.dtype)
    return out, h_out


def _scale_norm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: x and residual bf16 randn, g = 1.1 sqrt(N)."""
    m, n = shape
    gg = gen(seed)
    x = randn((m, n), BF16, device, gg)
    r = randn((m, n), BF16, device, gg)
    g = torch.full((1,), math.sqrt(n), dtype=F32).to(device) * 1.1
    return x, r, g


def scale_norm_residual_reference(x, residual, g):
    h = x.float() + residual.float()
    out = g * h / h.norm(dim=-1, keepdim=True).clamp(min=SCALE_NORM_EPS)
    return out.to(x.dtype), h.to(x.dtype)


# --------------------------------------------------------------------------- NF4 dequant

NF4_BLOCK = 64
NF4_CODE = [
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
]


@tc.kernel(static_shapes=True)
def nf4_dequant(packed: torch.Tensor, absmax: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
    """bitsandbytes' NF4 dequantization (blocksize 64): packed uint8 [N / 2] with two 4-bit codes
    a byte (the high nibble first), absmax [N / 64] fp32, code [16] fp32 (the NF4 table). out[i]
    = code[nibble i] * absmax[i // 64] in bf16. Each program takes a block of quant blocks; the
    lookup is a gather from the 16-entry table, the two nibbles of a byte stored as the two
    halves of a [NB, 32, 2] view of the output."""
    nb = absmax.size(0)
    half = NF4_BLOCK // 2
    pk = packed.view(nb, half)
    out = torch.empty([nb, half, 2], dtype=torch.bfloat16, device=packed.device)
    for tb in tc.tile(nb):
        byte = pk[tb, :].to(torch.int32)
        hi = byte >> 4
        lo = byte & 15
        s = absmax[tb][:, None]
        out[tb, :, 0] = (code[hi] * s).to(torch.bfloat16)
        out[tb, :, 1] = (code[lo] * s).to(torch.bfloat16)
    return out.view(nb * NF4_BLOCK)


def _nf4_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (NB,)``: NB quant blocks of 64 random codes, absmax uniform in [0.01, 2.01)."""
    (nb,) = shape
    if device == "meta":
        packed = meta_tensors((nb * NF4_BLOCK // 2,), dtype=torch.uint8)[0]
        return packed, *meta_tensors((nb,), (16,))
    g = gen(seed)
    packed = torch.randint(0, 256, (nb * NF4_BLOCK // 2,), generator=g).to(torch.uint8)
    absmax = torch.rand(nb, generator=g) * 2 + 0.01
    return packed.to(device), absmax.to(device), torch.tensor(NF4_CODE, dtype=F32).to(device)


def nf4_dequant_reference(packed, absmax, code):
    hi = (packed >> 4).long()
    lo = (packed & 15).long()
    idx = torch.stack([hi, lo], dim=1).view(-1)
    vals = code[idx].view(-1, NF4_BLOCK) * absmax[:, None]
    return vals.view(-1).to(torch.bfloat16)


# --------------------------------------------------------------------------- xPos

XPOS_BASE = 10000.0
XPOS_SCALE_BASE = 512.0


@tc.kernel(static_shapes=True)
def xpos_qk(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """xPos (torchscale): interleaved rotary on q, k [S, H, D] bf16, q times zeta^(n / 512), k
    divided by it, zeta = (2i + 0.4 D) / (1.4 D), n centred on the sequence."""
    s, h, d = q.size()
    half = d // 2
    min_pos = (-s) // 2
    q2 = q.view(s, h, half, 2)
    k2 = k.view(s, h, half, 2)
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    qo = q_out.view(s, h, half, 2)
    ko = k_out.view(s, h, half, 2)
    for ts, th in tc.tile([s, h]):
        i = tc.arange(half).to(torch.float32)
        inv_freq = 1.0 / torch.pow(XPOS_BASE, (2.0 * i) / d)
        zeta = (2.0 * i + 0.4 * d) / (1.4 * d)
        pos = ts.index.to(torch.float32)
        ang = pos[:, None] * inv_freq[None, :]
        cos = torch.cos(ang)[:, None, :]
        sin = torch.sin(ang)[:, None, :]
        expo = (pos + min_pos) / XPOS_SCALE_BASE
        scale = torch.pow(zeta[None, :], expo[:, None])[:, None, :]
        x0, x1 = q2[ts, th, :, 0].float(), q2[ts, th, :, 1].float()
        qo[ts, th, :, 0] = ((x0 * cos - x1 * sin) * scale).to(q.dtype)
        qo[ts, th, :, 1] = ((x1 * cos + x0 * sin) * scale).to(q.dtype)
        y0, y1 = k2[ts, th, :, 0].float(), k2[ts, th, :, 1].float()
        ko[ts, th, :, 0] = ((y0 * cos - y1 * sin) / scale).to(k.dtype)
        ko[ts, th, :, 1] = ((y1 * cos + y0 * sin) / scale).to(k.dtype)
    return q_out, k_out


def _xpos_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (S, H, D)``: q and k bf16 randn."""
    s, h, d = shape
    g = gen(seed)
    return randn((s, h, d), BF16, device, g), randn((s, h, d), BF16, device, g)


def xpos_qk_reference(q, k):
    """torchscale's XPOS (offset 0) applied to q (downscale False) and k (downscale True)."""
    s, h, d = q.shape
    scale_vec = (torch.arange(0, d, 2, dtype=F32, device=q.device) + 0.4 * d) / (1.4 * d)
    min_pos = (-s) // 2
    power = (
        torch.arange(min_pos, min_pos + s, dtype=F32, device=q.device)[:, None] / XPOS_SCALE_BASE
    )
    scale = scale_vec**power  # [S, D/2]
    inv_freq = 1.0 / (XPOS_BASE ** (torch.arange(0, d, 2, dtype=F32, device=q.device) / d))
    ang = torch.arange(s, dtype=F32, device=q.device)[:, None] * inv_freq[None, :]
    sin = torch.sin(ang).repeat_interleave(2, dim=-1)[:, None, :]
    cos = torch.cos(ang).repeat_interleave(2, dim=-1)[:, None, :]
    sc = scale.repeat_interleave(2, dim=-1)[:, None, :]

    def rot(x):
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    qf, kf = q.float(), k.float()
    qo = (qf * cos + rot(qf) * sin) * sc
    ko = (kf * cos + rot(kf) * sin) / sc
    return qo.to(q.dtype), ko.to(k.dtype)


# --------------------------------------------------------------------------- repetition penalty

REP_PENALTY = 1.3
REP_TEMPERATURE = 0.7


@tc.kernel(static_shapes=True)
def repetition_penalty_probs(
    logits: torch.Tensor, prev_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's RepetitionPenaltyLogitsProcessor in place on logits [B, V] fp32 at the ids of
    prev_ids [B, L] int64, then softmax(logits / T). Returns the logits and probs."""
    b, v = logits.size()
    probs = torch.empty_like(logits)
    for tb in tc.tile(b):
        ids = prev_ids[tb, :]
        rows = tb.index[:, None]
        score = logits[rows, ids]
        score = torch.where(score < 0, score * REP_PENALTY, score / REP_PENALTY)
        logits[rows, ids] = score
    for tb in tc.tile(b):
        z = logits[tb, :] / REP_TEMPERATURE
        probs[tb, :] = torch.softmax(z, dim=-1)
    return logits, probs


def _rep_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V, L)``: logits fp32 randn times 3, L history ids uniform (repeats
    included)."""
    b, v, hist = shape
    g = gen(seed)
    logits = randn((b, v), F32, device, g) * 3
    ids = randint(0, v, (b, hist), device, g)
    return logits, ids


def repetition_penalty_probs_reference(logits, prev_ids):
    logits = logits.clone()
    score = torch.gather(logits, 1, prev_ids)
    score = torch.where(score < 0, score * REP_PENALTY, score / REP_PENALTY)
    logits.scatter_(1, prev_ids, score)
    return logits, torch.softmax(logits / REP_TEMPERATURE, dim=-1)


def _rep_eager(logits: torch.Tensor, prev_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same processor in place on the logits, as HF's generate loop runs it."""
    score = torch.gather(logits, 1, prev_ids)
    score = torch.where(score < 0, score * REP_PENALTY, score / REP_PENALTY)
    logits.scatter_(1, prev_ids, score)
    return logits, torch.softmax(logits / REP_TEMPERATURE, dim=-1)


# --------------------------------------------------------------------------- HSV jitter


@tc.kernel(static_shapes=True)
def hsv_jitter(
    img: torch.Tensor, hue: torch.Tensor, sat: torch.Tensor, val: torch.Tensor
) -> torch.Tensor:
    """img [N, 3, H, W] fp32 RGB in [0, 1]; per-image hue shift (fraction of a turn), saturation
    and value factors [N]. RGB -> HSV (torchvision's _rgb2hsv), h + dh mod 1, s * sf and v * vf
    clamped to [0, 1], HSV -> RGB (torchvision's _hsv2rgb)."""
    n, _, hh, ww = img.size()
    p = hh * ww
    x = img.view(n, 3, p)
    out = torch.empty_like(img)
    o = out.view(n, 3, p)
    for tn, tp in tc.tile([n, p]):
        r, g, b = x[tn, 0, tp], x[tn, 1, tp], x[tn, 2, tp]
        maxc = torch.maximum(torch.maximum(r, g), b)
        minc = torch.minimum(torch.minimum(r, g), b)
        eqc = maxc == minc
        cr = maxc - minc
        s = cr / torch.where(eqc, 1.0, maxc)
        crd = torch.where(eqc, 1.0, cr)
        rc = (maxc - r) / crd
        gc = (maxc - g) / crd
        bc = (maxc - b) / crd
        hr = torch.where(maxc == r, bc - gc, 0.0)
        hg = torch.where((maxc == g) & (maxc != r), 2.0 + rc - bc, 0.0)
        hb = torch.where((maxc != g) & (maxc != r), 4.0 + gc - rc, 0.0)
        h = torch.fmod(((hr + hg + hb) / 6.0 + 1.0), 1.0)
        h = torch.remainder(h + hue[tn][:, None], 1.0)
        s = torch.clamp(s * sat[tn][:, None], 0.0, 1.0)
        v = torch.clamp(maxc * val[tn][:, None], 0.0, 1.0)
        i = torch.floor(h * 6.0)
        f = h * 6.0 - i
        i = i.to(torch.int32) % 6
        pp = torch.clamp(v * (1.0 - s), 0.0, 1.0)
        qq = torch.clamp(v * (1.0 - s * f), 0.0, 1.0)
        tt = torch.clamp(v * (1.0 - s * (1.0 - f)), 0.0, 1.0)
        # sector i of the hue circle: (v, q, p, p, t, v) red, (t, v, v, q, p, p) green,
        # (p, p, t, v, v, q) blue
        sector = [(v, tt, pp), (qq, v, pp), (pp, v, tt), (pp, qq, v), (tt, pp, v), (v, pp, qq)]
        ro, go, bo = sector[5]
        for k in tc.static_range(5):
            ro = torch.where(i == k, sector[k][0], ro)
            go = torch.where(i == k, sector[k][1], go)
            bo = torch.where(i == k, sector[k][2], bo)
        o[tn, 0, tp] = ro
        o[tn, 1, tp] = go
        o[tn, 2, tp] = bo
    return out


def _hsv_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, H, W)``: RGB uniform in [0, 1) with a grey first pixel, hue shift in
    [-0.5, 0.5), saturation and value factors in [0.5, 1.5)."""
    n, h, w = shape
    if device == "meta":
        return meta_tensors((n, 3, h, w), (n,), (n,), (n,))
    g = gen(seed)
    img = torch.rand((n, 3, h, w), generator=g)
    img[:, :, 0, 0] = 0.5  # a grey pixel (max == min)
    hue = torch.rand((n,), generator=g) - 0.5
    sat = torch.rand((n,), generator=g) + 0.5
    val = torch.rand((n,), generator=g) + 0.5
    return img.to(device), hue.to(device), sat.to(device), val.to(device)


def _rgb2hsv(img):
    r, g, b = img.unbind(dim=-3)
    maxc = torch.max(img, dim=-3).values
    minc = torch.min(img, dim=-3).values
    eqc = maxc == minc
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    cr_divisor = torch.where(eqc, ones, cr)
    rc = (maxc - r) / cr_divisor
    gc = (maxc - g) / cr_divisor
    bc = (maxc - b) / cr_divisor
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = hr + hg + hb
    h = torch.fmod((h / 6.0 + 1.0), 1.0)
    return torch.stack((h, s, maxc), dim=-3)


def _hsv2rgb(img):
    h, s, v = img.unbind(dim=-3)
    i = torch.floor(h * 6.0)
    f = (h * 6.0) - i
    i = i.to(dtype=torch.int32)
    p = torch.clamp((v * (1.0 - s)), 0.0, 1.0)
    q = torch.clamp((v * (1.0 - s * f)), 0.0, 1.0)
    t = torch.clamp((v * (1.0 - s * (1.0 - f))), 0.0, 1.0)
    i = i % 6
    mask = i.unsqueeze(dim=-3) == torch.arange(6, device=i.device).view(-1, 1, 1)
    a1 = torch.stack((v, q, p, p, t, v), dim=-3)
    a2 = torch.stack((t, v, v, q, p, p), dim=-3)
    a3 = torch.stack((p, p, t, v, v, q), dim=-3)
    a4 = torch.stack((a1, a2, a3), dim=-4)
    return torch.einsum("...ijk, ...xijk -> ...xjk", mask.to(dtype=img.dtype), a4)


def hsv_jitter_reference(img, hue, sat, val):
    hsv = _rgb2hsv(img)
    h, s, v = hsv.unbind(dim=-3)
    h = torch.remainder(h + hue[:, None, None], 1.0)
    s = (s * sat[:, None, None]).clamp(0, 1)
    v = (v * val[:, None, None]).clamp(0, 1)
    return _hsv2rgb(torch.stack((h, s, v), dim=-3))


# --------------------------------------------------------------------------- point-to-box distance


@tc.kernel(static_shapes=True)
def point_box_nearest(
    points: torch.Tensor, boxes: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Nearest axis-aligned box of each point (LiDAR points to ground-truth boxes in BEV, a
    point-in-box assignment with a distance fallback): points [P, 2] fp32, boxes [M, 4] fp32
    (x1, y1, x2, y2). Returns the Euclidean distance to the nearest box (0 inside one) and its
    index, the first on ties (a point inside several boxes), as torch.argmin. Each program takes
    a block of points and walks the boxes in tiles, keeping a running min and its index."""
    p = points.size(0)
    m = boxes.size(0)
    dist = torch.empty([p], dtype=torch.float32, device=points.device)
    idx = torch.empty([p], dtype=torch.int64, device=points.device)
    for tp in tc.tile(p):
        px = points[tp, 0][:, None]
        py = points[tp, 1][:, None]
        best = tc.full([tp], float("inf"), dtype=torch.float32)
        best_i = tc.zeros([tp], dtype=torch.int64)
        for tm in tc.tile(m):
            x1, y1, x2, y2 = boxes[tm, 0], boxes[tm, 1], boxes[tm, 2], boxes[tm, 3]
            dx = torch.clamp(torch.maximum(x1[None, :] - px, px - x2[None, :]), min=0.0)
            dy = torch.clamp(torch.maximum(y1[None, :] - py, py - y2[None, :]), min=0.0)
            d2 = dx * dx + dy * dy
            d_min, d_arg = torch.min(d2, dim=1)
            better = d_min < best
            best_i = torch.where(better, d_arg + tm.begin, best_i)
            best = torch.where(better, d_min, best)
        dist[tp] = torch.sqrt(best)
        idx[tp] = best_i
    return dist, idx


def _pb_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (P, M)``: points uniform in [0, 100)^2, boxes 1 to 31 wide at corners in
    [0, 90)^2 (overlapping: points inside several boxes tie at 0)."""
    p, m = shape
    if device == "meta":
        return meta_tensors((p, 2), (m, 4))
    g = gen(seed)
    points = torch.rand((p, 2), generator=g) * 100
    corner = torch.rand((m, 2), generator=g) * 90
    boxes = torch.cat([corner, corner + torch.rand((m, 2), generator=g) * 30 + 1], dim=1)
    return points.to(device), boxes.to(device)


def point_box_nearest_reference(points, boxes):
    px, py = points[:, 0:1], points[:, 1:2]
    dx = torch.maximum(boxes[None, :, 0] - px, px - boxes[None, :, 2]).clamp(min=0)
    dy = torch.maximum(boxes[None, :, 1] - py, py - boxes[None, :, 3]).clamp(min=0)
    d2 = dx * dx + dy * dy
    return d2.min(dim=1).values.sqrt(), d2.argmin(dim=1)


CASES: list[Case] = [
    one_kernel_case(
        "lamb_step_ragged",
        lamb_step_ragged,
        _lamb_inputs,
        lamb_step_ragged_reference,
        ((512, 40000),),  # 512 tensors averaging 40k params (20M): 4 x 82 MB in, 3 x 82 MB out
        ((5, 20), (1, 1), (3, 37)),
        1e-5,  # fp32 params |p| < 5: lr 1e-3 times a trust ratio from norms summed in another order
    ),
    one_kernel_case(
        "arcface_loss",
        arcface_loss,
        _arcface_inputs,
        arcface_loss_reference,
        ((1024, 65536),),  # 1024 faces against 64k identities: 268 MB of fp32 cosines
        ((7, 50), (1, 5), (3, 129)),
        1e-4,  # fp32 losses up to ~100 (s = 64): an online logsumexp vs torch's two-pass one
    ),
    one_kernel_case(
        "scale_norm_residual",
        scale_norm_residual,
        _scale_norm_inputs,
        scale_norm_residual_reference,
        ((16384, 4096),),  # 16k tokens of hidden 4096: 134 MB of bf16 each in and out
        ((7, 48), (1, 1), (5, 100)),
        2.0**-5,  # bf16 out |y| < 8 (g = 1.1 sqrt(n)): one ulp of a norm summed in another order
    ),
    one_kernel_case(
        "nf4_dequant",
        nf4_dequant,
        _nf4_inputs,
        nf4_dequant_reference,
        ((2097152,),),  # a 134M-param NF4 weight: 67 MB packed, 268 MB of bf16 out
        ((5,), (1,), (37,)),
        1e-6,  # a table lookup times a scale rounded once to bf16: exact
    ),
    one_kernel_case(
        "xpos_qk",
        xpos_qk,
        _xpos_inputs,
        xpos_qk_reference,
        ((8192, 32, 128),),  # a 8k-token prefill of 32 heads of 128: 67 MB of bf16 each of q, k
        ((37, 3, 16), (1, 1, 2), (13, 5, 64)),
        2.0**-5,  # bf16 out |y| < 8: one ulp where a cos, sin or power rounds differently
    ),
    Case(
        name="repetition_penalty_probs",
        kernels=(repetition_penalty_probs,),
        make_inputs=_rep_inputs,
        reference=repetition_penalty_probs_reference,
        run=copy_state("repetition_penalty_probs", (0,)),
        # 256 sequences of Llama-3's 128256-token vocab, 2048 tokens of history: 131 MB of logits
        gpu_shapes=((256, 128256, 2048),),
        cpu_shapes=((5, 50, 7), (1, 9, 1), (3, 97, 40)),
        atol=1e-6,  # fp32 logits exact (one multiply or divide); probs < 1 a few ulps
        timed_run=lambda k, inp: k["repetition_penalty_probs"](*inp),
        timed_reference=_rep_eager,
    ),
    one_kernel_case(
        "hsv_jitter",
        hsv_jitter,
        _hsv_inputs,
        hsv_jitter_reference,
        ((64, 512, 512),),  # a batch of 64 RGB 512 x 512 fp32 images: 201 MB each way
        ((3, 5, 7), (1, 1, 1), (2, 16, 9)),
        1e-5,  # fp32 in [0, 1]: Triton's division within 2 ulp of torch's
    ),
    one_kernel_case(
        "point_box_nearest",
        point_box_nearest,
        _pb_inputs,
        point_box_nearest_reference,
        ((4194304, 64),),  # 4M LiDAR points against 64 boxes: 34 MB in, 50 MB out, 268M pairs
        ((37, 50), (1, 1), (100, 3)),
        1e-4,  # distances |d| < 150 fp32 exact per pair; indices exact (first on ties)
    ),
]

"""Held-out kernels written from the docs only, session 33b (see :mod:`.heldout_rows` for why
held-out kernels exist): optimizer steps, small per-item matrices, bit manipulation, a custom
scan and a two-launch selection, picked to stress what the earlier sets did not. transformers'
Adafactor step on a 2-D weight, in place (factored row / column second moments, relative step
size scaled by the weight's RMS, update clipping: four device loops with host reductions between
them); SGD with Nesterov momentum and weight decay on a model's parameters flattened into one
buffer, with GradScaler's unscale / found_inf and clip_grad_norm_ (an atomic max and sum, the
clip coefficient on the host, then an update under an ``if`` on the loaded flag); the log
density of 4-D Gaussians with a covariance per item (a 4 x 4 Cholesky and forward substitution
per item); 3D Gaussian splatting's covariances from quaternions and scales (3 x 3 products); a
Bloom filter's insert (``tc.atomic_or`` at splitmix64 hashes) then query (bit tests at gathered
words); dropout whose keep mask is bit-packed into uint8 and its backward from the bits; the
LRU's complex diagonal recurrence by ``tc.associative_scan`` on four-tuples; and a two-stage
top-k over a 50257 / 152064 vocabulary (chunks' top k by k rounds of argmax, candidates viewed
on the host, top k of the candidates). Each comes with its eager reference (see :mod:`.case`).

Notes: all eight compiled and matched at every CPU shape on the first try (seeds 0 and 1; with
the autotuner, with ``TILECRAFT_NO_AUTOTUNE=1``, i.e. the default config, and in ref mode). Max
errors: 0 for the Bloom filter, the packed dropout (y, mask bytes and grad) and the top-k
(values and ids); <= 1.2e-7 for SGD (0 compiled, 1 ulp in ref mode); 3.7e-9 on the Adafactor
weight (updates up to 1.5e-3; the moments ~1e-6 agree to 3e-14, so the case's atol 1e-6 does not
really check them); 1.9e-6 on log p (|log p| < 40) and 3e-7 on L for the Cholesky; 1.9e-9 on the
covariances (|Sigma| < 0.04); 2.1e-6 on the LRU states (|h| < 8). Bloom hashing needed nothing
special: int64 wrapping multiplies by constants past 2^63 written as signed ints, ``>>``
(arithmetic in torch and Triton alike) masked into a logical shift, a Python helper shared by
kernel and reference called inside the device loops. Not bugs: the top-k is slow in the
interpreter (a 4096-wide ``torch.max`` with its index is ``tl.reduce`` with a combine function,
5 to 9 s a program there; CPU shapes kept to 5 programs); ``benchmarks.ptx_counts`` binds the
case's inputs to its first kernel, so a case whose kernels take different arguments
(dropout_packbits: the forward gets grad_y as ``seed``) fails there with "host tensor 'seed'
used as a value in device code" (/work/s33bhelper/dump_ptx.py compiled both kernels instead).

Cross-compiled for sm_90 at the GPU shapes (default configs, meta tensors, not timed: no GPU).
``adafactor_step`` [5120, 13824]: four launches at 16 warps, 32 registers each, no spill, 16-byte
loads and stores; row passes one row a program in 8192-wide chunks, the column pass [64 columns,
128 rows] split in 4 (split_reductions), the update [32, 128]. At [50257, 768]: 8 rows a
program (768 padded to 1024: 1/4 of the lanes idle), 40 to 48 registers; ptxas gives the row
pass an 8-byte stack frame with one ``LDL`` and no store ("4 bytes spill loads", at 40 registers
and no cap): harmless, odd. ``sgd_nesterov_amp_step`` [25.6M]: the check loop 32768 elements a
program at 16 warps, 87 registers, 16-byte loads, one atomic max and add a program; the update
loop 1024 elements a program under the same 16 warps (one num_warps for every launch of the
kernel): 2 elements a thread, 8-byte ``ld.global.v2.b32`` where 16-byte vectors fit, 20
registers, and found_inf, inv_scale and the clip coefficient as scalar loads per program.
``mvn_logpdf_chol4`` [4M] (and [1000003]): 256 items a program, 4 warps, 48 registers, no spill;
x, mean and row 3 of cov (all four read) are 16-byte vectors, rows 0 to 2 (a partial triangle
read) 12 scalar ``ld.global.b32`` a thread, the four stacked rows of L 16-byte stores, but 27
``bar.sync`` with shared-memory round trips: layout conversions between the [256, 4] vector
loads' columns, the 1-D per-item values and the stacks. ``gaussian_cov3d`` [6M]: 512 a program,
4 warps, 56 registers, quaternions one 16-byte load a row, the stride-3 scales 12 scalar loads,
and the 6-wide output rows 24 scalar ``st.global.b32`` a thread (only rows of 2 / 4 / 8 join
into vectors). ``bloom_filter_insert_query`` [2^30 bits, 16M + 16M keys]: insert 1024 keys a
program at 4 warps, 72 registers, 8-byte key loads, 56 ``atom.global.or`` (7 a key, their
results unused), but 55 ``bar.sync`` and 14 shared-memory round trips: every atomic's address
and value move to another layout (Triton gives the non-contiguous atomics one element a
thread, the hashes were computed in the loads' two), plus a bounds mask on each atomic's
computed word index that the ``& (nbits - 1)`` makes redundant; query 34 registers, 56 scalar
word gathers a thread (inherent), no shared memory. ``dropout_packbits`` [16384, 5120] (640
bytes a row): forward [32 rows, 32 bytes of mask] at 8 warps, 79 registers (Philox), 16-byte
loads and stores, the mask one ``st.global.b32`` a thread; backward 32 registers, mask
``ld.global.b32``. ``lru_complex_scan`` [32, 2048, 512]: 2 state dims a program with the whole
2048 steps (4 fp32 scan values a step: [2048, 2] x 4), 4 warps, 141 registers, 768
``shfl.sync.up``; each step's (re, im) pairs of the 2 dims load as one 8-byte span (a quarter of
a 32-byte sector, the rest read by the neighbor programs); ptx_counts' 32 "spill" bytes are
libdevice's sinf / cosf Payne-Hanek slow path (a 28-byte local array and ``__cudart_i2opi_f``,
ptxas: 0 bytes spill stores), run only for angles past about 1e5 (here <= pi / 10). At 8 dims,
8 warps: 180 registers. ``topk_two_stage`` [256, 50257]: stage 1 [2 rows, 4096] at 8 warps, 80
registers, 32 scalar ``ld.global.b32`` a thread (rows of 50257 fp32 are not 16-byte aligned;
[64, 152064]: 16-byte loads, 88 registers), 8 rounds of argmax with cross-warp reductions (23
``bar.sync``); stage 2 16 rows a program over 104 candidates padded to 128, 64 registers; at
[64, 152064], 304 candidates padded to 512, 173 registers (no spill), and only 4 programs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, copy_state, gen, one_kernel_case, randn

F32 = torch.float32
BF16 = torch.bfloat16
I64 = torch.int64

# adafactor_step: transformers' Adafactor defaults (relative step, parameter scaling)
ADA_STEP = 100
ADA_CLIP = 1.0
ADA_WD = 0.01
ADA_EPS1 = 1e-30
ADA_EPS2 = 1e-3
# sgd_nesterov_amp_step: ResNet training's SGD
SGD_LR = 0.1
SGD_MOMENTUM = 0.9
SGD_WD = 1e-4
SGD_MAX_NORM = 5.0
# bloom_filter_insert_query: hash functions a key (double hashing), splitmix64's multipliers
BLOOM_HASHES = 7
MIX1 = 0x9E3779B97F4A7C15 - 2**64  # as a signed int64
MIX2 = 0xBF58476D1CE4E5B9 - 2**64
# dropout_packbits: dropout probability and Philox seed
DROP_P = 0.1
DROP_SEED = 1234
# topk_two_stage: k and the vocabulary chunk of the first stage
TOPK_K = 8
TOPK_CHUNK = 4096


# --------------------------------------------------------------------------- Adafactor


@tc.kernel(static_shapes=True)
def adafactor_step(
    p: torch.Tensor,
    grad: torch.Tensor,
    exp_avg_sq_row: torch.Tensor,
    exp_avg_sq_col: torch.Tensor,
    step: int = ADA_STEP,
    clip_threshold: float = ADA_CLIP,
    weight_decay: float = ADA_WD,
    eps1: float = ADA_EPS1,
    eps2: float = ADA_EPS2,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One Adafactor step (transformers' defaults: relative step size scaled by the parameter's
    RMS, factored second moments, update clipping) on a 2-D weight, in place: p [M, N] fp32,
    grad [M, N] bf16, exp_avg_sq_row [M] and exp_avg_sq_col [N] fp32 (the factored second
    moment). Four device loops: the row moments (and each row's sum of p^2), the column moments,
    each row's sum of the squared update, then the parameter update; the host between them takes
    the row moments' mean, the step size and the update's RMS clip factor."""
    m, n = p.size()
    beta2t = 1.0 - step**-0.8
    rel_lr = min(1e-2, 1.0 / math.sqrt(step))
    p_sq = torch.empty([m], dtype=F32, device=p.device)
    for tm in tc.tile(m):
        g = grad[tm, :].to(F32)
        mean_sq = torch.mean(g * g + eps1, dim=1)
        exp_avg_sq_row[tm] = beta2t * exp_avg_sq_row[tm] + (1.0 - beta2t) * mean_sq
        pt = p[tm, :]
        p_sq[tm] = torch.sum(pt * pt, dim=1)
    for tn in tc.tile(n):
        acc = tc.zeros([tn], dtype=F32)
        for tm in tc.tile(m):
            g = grad[tm, tn].to(F32)
            acc = acc + torch.sum(g * g + eps1, dim=0)
        exp_avg_sq_col[tn] = beta2t * exp_avg_sq_col[tn] + (1.0 - beta2t) * (acc / m)
    row_mean = torch.mean(exp_avg_sq_row).reshape(1)
    lr = rel_lr * torch.clamp(torch.sqrt(torch.sum(p_sq) / (m * n)), min=eps2).reshape(1)
    u_sq = torch.empty([m], dtype=F32, device=p.device)
    for tm in tc.tile(m):
        r = torch.rsqrt(exp_avg_sq_row[tm] / row_mean[0])
        c = torch.rsqrt(exp_avg_sq_col[None, :])
        u = r[:, None] * c * grad[tm, :].to(F32)
        u_sq[tm] = torch.sum(u * u, dim=1)
    clip = torch.clamp(torch.sqrt(torch.sum(u_sq) / (m * n)) / clip_threshold, min=1.0)
    scale = (lr / clip).reshape(1)
    for tm, tn in tc.tile([m, n]):
        r = torch.rsqrt(exp_avg_sq_row[tm] / row_mean[0])
        c = torch.rsqrt(exp_avg_sq_col[tn])
        u = r[:, None] * c[None, :] * grad[tm, tn].to(F32)
        pt = p[tm, tn]
        p[tm, tn] = pt - (weight_decay * lr[0]) * pt - scale[0] * u
    return p, exp_avg_sq_row, exp_avg_sq_col


def _adafactor_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: fp32 weight randn * 0.02, a bf16 gradient randn * 1e-3, and the
    factored moments (positive, near the gradient's squared scale)."""
    m, n = shape
    g = gen(seed)
    p = randn((m, n), F32, device, g) * 0.02
    grad = (randn((m, n), F32, device, g) * 1e-3).to(BF16)
    row = randn((m,), F32, device, g).square() * 1e-6 + 1e-7
    col = randn((n,), F32, device, g).square() * 1e-6 + 1e-7
    return p, grad, row, col


def _adafactor_eager(
    p: torch.Tensor, grad: torch.Tensor, row: torch.Tensor, col: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """transformers.optimization.Adafactor.step for one 2-D fp32 parameter, in place."""
    step = ADA_STEP
    rms_p = p.norm(2) / (p.numel() ** 0.5)
    lr = min(1e-2, 1.0 / math.sqrt(step)) * torch.clamp(rms_p, min=ADA_EPS2)
    beta2t = 1.0 - math.pow(step, -0.8)
    g = grad.float()
    update = g**2 + ADA_EPS1
    row.mul_(beta2t).add_(update.mean(dim=-1), alpha=1.0 - beta2t)
    col.mul_(beta2t).add_(update.mean(dim=-2), alpha=1.0 - beta2t)
    r_factor = (row / row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
    c_factor = col.unsqueeze(-2).rsqrt()
    update = torch.mul(r_factor, c_factor) * g
    update.div_((update.norm(2) / (update.numel() ** 0.5) / ADA_CLIP).clamp_(min=1.0))
    update.mul_(lr)
    p.add_(p * (-ADA_WD * lr))
    p.add_(-update)
    return p, row, col


def adafactor_step_reference(
    p: torch.Tensor, grad: torch.Tensor, row: torch.Tensor, col: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _adafactor_eager(p.clone(), grad, row.clone(), col.clone())


# --------------------------------------------------------------------------- SGD Nesterov + AMP


@tc.kernel(static_shapes=True)
def sgd_nesterov_amp_step(
    params: torch.Tensor,
    grads: torch.Tensor,
    momentum_buf: torch.Tensor,
    inv_scale: torch.Tensor,
    lr: float = SGD_LR,
    momentum: float = SGD_MOMENTUM,
    weight_decay: float = SGD_WD,
    max_norm: float = SGD_MAX_NORM,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A mixed-precision training step of SGD with Nesterov momentum and weight decay over a
    model's parameters flattened into one buffer, in place: params and momentum_buf [N] fp32,
    grads [N] fp16 (scaled by the loss scale), inv_scale [1] fp32 (GradScaler's 1 / scale). The
    first loop unscales the gradient, flags non-finite values (found_inf, as GradScaler's
    unscale_) and sums its squares for clip_grad_norm_; the host turns the sum into the clip
    coefficient; the second loop skips the step where found_inf is set (as scaler.step) and
    else runs torch.optim.SGD(nesterov=True)'s update on the clipped gradient. Returns params,
    momentum_buf and found_inf [1] fp32."""
    (n,) = params.size()
    found_inf = torch.zeros([1], dtype=F32, device=params.device)
    sq_sum = torch.zeros([1], dtype=F32, device=params.device)
    for tn in tc.tile(n):
        g = grads[tn].to(F32) * inv_scale[0]
        bad = torch.amax(torch.where(torch.isfinite(g), 0.0, 1.0))
        tc.atomic_max(found_inf, [0], bad)
        tc.atomic_add(sq_sum, [0], torch.sum(g * g))
    clip_coef = torch.clamp(max_norm / (torch.sqrt(sq_sum) + 1e-6), max=1.0)
    for tn in tc.tile(n):
        if found_inf[0] == 0.0:
            g = grads[tn].to(F32) * (inv_scale[0] * clip_coef[0])
            pt = params[tn]
            d_p = g + weight_decay * pt
            buf = momentum * momentum_buf[tn] + d_p
            momentum_buf[tn] = buf
            params[tn] = pt - lr * (d_p + momentum * buf)
    return params, momentum_buf, found_inf


def _sgd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, inf)``: fp32 params randn * 0.05 and momentum randn * 1e-3, an fp16
    gradient scaled by 2^10 whose unscaled norm is about twice SGD_MAX_NORM (clipping halves
    it), inv_scale 2^-10; with ``inf`` 1, one gradient element overflowed to inf (the step is
    skipped)."""
    n, inf = shape
    g = gen(seed)
    params = randn((n,), F32, device, g) * 0.05
    sigma = 2.0 * SGD_MAX_NORM / math.sqrt(n)
    grads = (randn((n,), F32, device, g) * (sigma * 1024.0)).to(torch.float16)
    buf = randn((n,), F32, device, g) * 1e-3
    inv_scale = torch.full((1,), 2.0**-10, dtype=F32, device=device)
    if inf and device != "meta":
        grads[n // 2] = float("inf")
    return params, grads, buf, inv_scale


def _sgd_eager(
    params: torch.Tensor, grads: torch.Tensor, buf: torch.Tensor, inv_scale: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GradScaler.unscale_, clip_grad_norm_ and scaler.step(SGD(nesterov=True)), in place on
    params and buf, without a host sync (a skipped step keeps the old values)."""
    g = grads.float() * inv_scale
    found_inf = (~torch.isfinite(g)).any().float().reshape(1)
    clip_coef = torch.clamp(SGD_MAX_NORM / (torch.linalg.vector_norm(g) + 1e-6), max=1.0)
    d_p = g * clip_coef + SGD_WD * params
    new_buf = SGD_MOMENTUM * buf + d_p
    new_p = params - SGD_LR * (d_p + SGD_MOMENTUM * new_buf)
    skip = found_inf > 0
    params.copy_(torch.where(skip, params, new_p))
    buf.copy_(torch.where(skip, buf, new_buf))
    return params, buf, found_inf


def sgd_nesterov_amp_step_reference(
    params: torch.Tensor, grads: torch.Tensor, buf: torch.Tensor, inv_scale: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _sgd_eager(params.clone(), grads, buf.clone(), inv_scale)


# --------------------------------------------------------------------------- 4 x 4 Cholesky


@tc.kernel(static_shapes=True)
def mvn_logpdf_chol4(
    x: torch.Tensor, mean: torch.Tensor, cov: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The log density of 4-D Gaussians with a covariance per item, as a Kalman-filter tracker
    scores its measurements: x, mean [N, 4] fp32, cov [N, 4, 4] fp32 symmetric positive
    definite. Each item's Cholesky factor L (cov = L L^T, by the textbook formulas on the
    lower triangle), then z = L^-1 (x - mean) by forward substitution and log p = -|z|^2 / 2 -
    sum(log diag L) - 2 log(2 pi). Returns log p [N] fp32 and L [N, 4, 4] fp32 (zeros above
    the diagonal, torch.linalg.cholesky's factor). Each program takes a block of items."""
    (n, _) = x.size()
    logp = torch.empty([n], dtype=F32, device=x.device)
    scale_tril = torch.empty_like(cov)
    for tn in tc.tile(n):
        d0 = x[tn, 0] - mean[tn, 0]
        d1 = x[tn, 1] - mean[tn, 1]
        d2 = x[tn, 2] - mean[tn, 2]
        d3 = x[tn, 3] - mean[tn, 3]
        l00 = torch.sqrt(cov[tn, 0, 0])
        l10 = cov[tn, 1, 0] / l00
        l20 = cov[tn, 2, 0] / l00
        l30 = cov[tn, 3, 0] / l00
        l11 = torch.sqrt(cov[tn, 1, 1] - l10 * l10)
        l21 = (cov[tn, 2, 1] - l20 * l10) / l11
        l31 = (cov[tn, 3, 1] - l30 * l10) / l11
        l22 = torch.sqrt(cov[tn, 2, 2] - l20 * l20 - l21 * l21)
        l32 = (cov[tn, 3, 2] - l30 * l20 - l31 * l21) / l22
        l33 = torch.sqrt(cov[tn, 3, 3] - l30 * l30 - l31 * l31 - l32 * l32)
        z0 = d0 / l00
        z1 = (d1 - l10 * z0) / l11
        z2 = (d2 - l20 * z0 - l21 * z1) / l22
        z3 = (d3 - l30 * z0 - l31 * z1 - l32 * z2) / l33
        maha = z0 * z0 + z1 * z1 + z2 * z2 + z3 * z3
        half_logdet = torch.log(l00) + torch.log(l11) + torch.log(l22) + torch.log(l33)
        logp[tn] = -0.5 * maha - half_logdet - 2.0 * math.log(2.0 * math.pi)
        zero = torch.zeros_like(l00)
        scale_tril[tn, 0, :] = torch.stack([l00, zero, zero, zero], dim=1)
        scale_tril[tn, 1, :] = torch.stack([l10, l11, zero, zero], dim=1)
        scale_tril[tn, 2, :] = torch.stack([l20, l21, l22, zero], dim=1)
        scale_tril[tn, 3, :] = torch.stack([l30, l31, l32, l33], dim=1)
    return logp, scale_tril


def _mvn_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: covariances A A^T / 4 + 0.25 I (A randn 4 x 4: a tracker's innovation
    covariance H P H^T + R), means randn and measurements near them (randn), fp32."""
    (n,) = shape
    g = gen(seed)
    a = randn((n, 4, 4), F32, device, g)
    cov = a @ a.transpose(1, 2) / 4 + 0.25 * torch.eye(4, device=device)
    mean = randn((n, 4), F32, device, g)
    x = mean + randn((n, 4), F32, device, g)
    return x, mean, cov


def mvn_logpdf_chol4_reference(
    x: torch.Tensor, mean: torch.Tensor, cov: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    scale_tril = torch.linalg.cholesky(cov)
    dist = torch.distributions.MultivariateNormal(mean, scale_tril=scale_tril, validate_args=False)
    return dist.log_prob(x), scale_tril


# --------------------------------------------------------------------------- 3DGS covariances


@tc.kernel(static_shapes=True)
def gaussian_cov3d(
    scales: torch.Tensor, rotations: torch.Tensor, scale_modifier: float = 1.0
) -> torch.Tensor:
    """3D Gaussian splatting's covariance of each Gaussian from its activated scale and rotation:
    scales [N, 3] fp32 (log scales, activated with exp, times scale_modifier), rotations [N, 4]
    fp32 (unnormalized quaternions w, x, y, z). R = the normalized quaternion's rotation matrix,
    M = R diag(s), Sigma = M M^T; out [N, 6] fp32, Sigma's upper triangle (xx, xy, xz, yy, yz,
    zz) as strip_symmetric stores it. Each program takes a block of Gaussians."""
    (n, _) = scales.size()
    out = torch.empty([n, 6], dtype=F32, device=scales.device)
    for tn in tc.tile(n):
        qw, qx, qy, qz = rotations[tn, 0], rotations[tn, 1], rotations[tn, 2], rotations[tn, 3]
        norm = torch.sqrt(qw * qw + qx * qx + qy * qy + qz * qz)
        w, x, y, z = qw / norm, qx / norm, qy / norm, qz / norm
        s0 = torch.exp(scales[tn, 0]) * scale_modifier
        s1 = torch.exp(scales[tn, 1]) * scale_modifier
        s2 = torch.exp(scales[tn, 2]) * scale_modifier
        m00 = (1.0 - 2.0 * (y * y + z * z)) * s0
        m01 = 2.0 * (x * y - w * z) * s1
        m02 = 2.0 * (x * z + w * y) * s2
        m10 = 2.0 * (x * y + w * z) * s0
        m11 = (1.0 - 2.0 * (x * x + z * z)) * s1
        m12 = 2.0 * (y * z - w * x) * s2
        m20 = 2.0 * (x * z - w * y) * s0
        m21 = 2.0 * (y * z + w * x) * s1
        m22 = (1.0 - 2.0 * (x * x + y * y)) * s2
        out[tn, 0] = m00 * m00 + m01 * m01 + m02 * m02
        out[tn, 1] = m00 * m10 + m01 * m11 + m02 * m12
        out[tn, 2] = m00 * m20 + m01 * m21 + m02 * m22
        out[tn, 3] = m10 * m10 + m11 * m11 + m12 * m12
        out[tn, 4] = m10 * m20 + m11 * m21 + m12 * m22
        out[tn, 5] = m20 * m20 + m21 * m21 + m22 * m22
    return out


def _gs_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: log scales randn * 0.5 - 4 (a trained scene's small Gaussians) and
    quaternions randn (unnormalized), fp32."""
    (n,) = shape
    g = gen(seed)
    return randn((n, 3), F32, device, g) * 0.5 - 4.0, randn((n, 4), F32, device, g)


def gaussian_cov3d_reference(scales: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
    """gaussian-splatting's build_covariance_from_scaling_rotation(exp(scales), normalize(r))."""
    s = torch.exp(scales)
    q = torch.nn.functional.normalize(rotations)
    r, x, y, z = q.unbind(1)
    rot = torch.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - r * z),
            2 * (x * z + r * y),
            2 * (x * y + r * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - r * x),
            2 * (x * z - r * y),
            2 * (y * z + r * x),
            1 - 2 * (x * x + y * y),
        ],
        dim=1,
    ).view(-1, 3, 3)
    lmat = rot * s[:, None, :]
    cov = lmat @ lmat.transpose(1, 2)
    iu = torch.triu_indices(3, 3)
    return cov[:, iu[0], iu[1]]


# --------------------------------------------------------------------------- Bloom filter


def _bloom_hashes(key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two 32-bit hashes of int64 keys (splitmix64's mixing, logical shifts by masking), the
    second odd, for double hashing: h1 + i h2."""
    h = key * MIX1
    h = h ^ ((h >> 30) & ((1 << 34) - 1))
    h = h * MIX2
    h = h ^ ((h >> 31) & ((1 << 33) - 1))
    return h & 0xFFFFFFFF, ((h >> 32) & 0xFFFFFFFF) | 1


@tc.kernel(static_shapes=True)
def bloom_filter_insert_query(
    bits: torch.Tensor, insert_keys: torch.Tensor, query_keys: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """A Bloom filter over int64 keys (a dedup pass's n-gram hashes): bits [W] int32, a bitset
    of 32 W bits (W a power of two), updated in place; insert_keys [Ni], query_keys [Nq] int64.
    Each key sets (then tests) BLOOM_HASHES bits at (h1 + i h2) mod 32 W. The first loop inserts
    with tc.atomic_or, the second returns whether every bit of each query key is set (bool [Nq]).
    Returns the bitset and the answers."""
    (w,) = bits.size()
    nbits = w * 32
    (ni,) = insert_keys.size()
    (nq,) = query_keys.size()
    for tn in tc.tile(ni):
        h1, h2 = _bloom_hashes(insert_keys[tn])
        for i in tc.static_range(BLOOM_HASHES):
            pos = (h1 + i * h2) & (nbits - 1)
            tc.atomic_or(bits, [pos >> 5], (1 << (pos & 31)).to(torch.int32))
    found = torch.empty([nq], dtype=torch.bool, device=bits.device)
    for tq in tc.tile(nq):
        h1, h2 = _bloom_hashes(query_keys[tq])
        hit = torch.ones_like(h1, dtype=torch.bool)
        for i in tc.static_range(BLOOM_HASHES):
            pos = (h1 + i * h2) & (nbits - 1)
            word = bits[pos >> 5]
            hit = hit & (((word >> (pos & 31)) & 1) != 0)
        found[tq] = hit
    return bits, found


def _bloom_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (log2 bits, Ni, Nq)``: a bitset already a sixteenth full (random words with
    about one bit in 16 set), random int64 keys to insert, and queries of which half are
    inserted keys and half new ones."""
    log_bits, ni, nq = shape
    w = 2 ** (log_bits - 5)
    g = gen(seed)
    if device == "meta":
        return (
            torch.empty((w,), dtype=torch.int32, device=device),
            torch.empty((ni,), dtype=I64, device=device),
            torch.empty((nq,), dtype=I64, device=device),
        )
    sparse = (torch.rand((w, 32), generator=g) < 1 / 16).long() << torch.arange(32)
    bits = sparse.sum(1).to(torch.int32)
    keys = torch.randint(-(2**63), 2**63 - 1, (ni,), generator=g)
    fresh = torch.randint(-(2**63), 2**63 - 1, (nq,), generator=g)
    pick = keys[torch.randint(0, ni, (nq,), generator=g)]
    queries = torch.where(torch.arange(nq) % 2 == 0, pick, fresh)
    return bits.to(device), keys.to(device), queries.to(device)


def _bloom_positions(keys: torch.Tensor, nbits: int) -> torch.Tensor:
    h1, h2 = _bloom_hashes(keys)
    i = torch.arange(BLOOM_HASHES, device=keys.device)
    return (h1[:, None] + i[None, :] * h2[:, None]) & (nbits - 1)  # [N, BLOOM_HASHES]


def _bloom_eager(
    bits: torch.Tensor, insert_keys: torch.Tensor, query_keys: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Unpack the bitset to bools, set the inserted keys' bits, test the queries', pack back."""
    nbits = bits.numel() * 32
    shifts = torch.arange(32, dtype=torch.int32, device=bits.device)
    flags = ((bits[:, None] >> shifts) & 1).bool().view(-1)
    flags[_bloom_positions(insert_keys, nbits).view(-1)] = True
    found = flags[_bloom_positions(query_keys, nbits)].all(dim=1)
    # distinct bits: their int32 sum (wrapping at bit 31) is their OR
    bits.copy_((flags.view(-1, 32).to(torch.int32) << shifts).sum(1, dtype=torch.int32))
    return bits, found


def bloom_filter_insert_query_reference(
    bits: torch.Tensor, insert_keys: torch.Tensor, query_keys: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return _bloom_eager(bits.clone(), insert_keys, query_keys)


# --------------------------------------------------------------------------- dropout, bit-packed


@tc.kernel(static_shapes=True)
def dropout_packbits_fwd(
    x: torch.Tensor, seed: int = DROP_SEED, p: float = DROP_P
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dropout that saves its keep mask as bits for the backward (1/8 of a bool mask's bytes):
    x [M, N] bf16 (N a multiple of 8); keep = tc.rand >= p, y = x / (1 - p) where kept, else 0
    (bf16 [M, N]); mask [M, N / 8] uint8, bit j of byte b the keep flag of column 8 b + j (as
    numpy's packbits with bitorder="little")."""
    m, n = x.size()
    xv = x.view(m, n // 8, 8)
    y = torch.empty_like(xv)
    mask = torch.empty([m, n // 8], dtype=torch.uint8, device=x.device)
    scale = 1.0 / (1.0 - p)
    for tm, tb in tc.tile([m, n // 8]):
        keep = tc.rand([tm, tb, 8], seed) >= p
        y[tm, tb, :] = torch.where(keep, xv[tm, tb, :].to(F32) * scale, 0.0).to(y.dtype)
        weights = 1 << tc.arange(8)
        mask[tm, tb] = torch.sum(keep.to(torch.int32) * weights[None, None, :], dim=2).to(
            torch.uint8
        )
    return y.view(m, n), mask


@tc.kernel(static_shapes=True)
def dropout_packbits_bwd(
    grad_y: torch.Tensor, mask: torch.Tensor, p: float = DROP_P
) -> torch.Tensor:
    """Dropout's backward from the bit-packed mask: grad_y [M, N] bf16, mask [M, N / 8] uint8;
    grad_x = grad_y / (1 - p) where the bit is set, else 0 (bf16 [M, N])."""
    m, n = grad_y.size()
    gv = grad_y.view(m, n // 8, 8)
    grad_x = torch.empty_like(gv)
    scale = 1.0 / (1.0 - p)
    for tm, tb in tc.tile([m, n // 8]):
        byte = mask[tm, tb].to(torch.int32)
        keep = ((byte[:, :, None] >> tc.arange(8)[None, None, :]) & 1) != 0
        grad_x[tm, tb, :] = torch.where(keep, gv[tm, tb, :].to(F32) * scale, 0.0).to(grad_x.dtype)
    return grad_x.view(m, n)


def _dropout_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: the activation and the incoming gradient, bf16 randn."""
    g = gen(seed)
    return randn(shape, BF16, device, g), randn(shape, BF16, device, g)


def _run_dropout(
    kernels: Mapping[str, Callable[..., Any]], inputs: Inputs
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x, grad_y = inputs
    y, mask = kernels["dropout_packbits_fwd"](x)
    return y, mask, kernels["dropout_packbits_bwd"](grad_y, mask)


def dropout_packbits_reference(
    x: torch.Tensor, grad_y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.shape
    # tc.rand's eager meaning: the kernel's numbers for each element's row-major number
    keep = tc.rand((m, n), DROP_SEED, device=x.device) >= DROP_P
    scale = 1.0 / (1.0 - DROP_P)
    y = torch.where(keep, x.float() * scale, 0.0).to(x.dtype)
    bits = keep.view(m, n // 8, 8).to(torch.int32) << torch.arange(8, device=x.device)
    mask = bits.sum(-1).to(torch.uint8)
    unpacked = ((mask[..., None].int() >> torch.arange(8, device=x.device)) & 1).bool()
    grad_x = torch.where(unpacked.view(m, n), grad_y.float() * scale, 0.0).to(grad_y.dtype)
    return y, mask, grad_x


# --------------------------------------------------------------------------- LRU complex scan


def _complex_then(
    ar1: torch.Tensor,
    ai1: torch.Tensor,
    br1: torch.Tensor,
    bi1: torch.Tensor,
    ar2: torch.Tensor,
    ai2: torch.Tensor,
    br2: torch.Tensor,
    bi2: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """h -> a1 h + b1, then h -> a2 h + b2, on complex numbers as (re, im) pairs."""
    return (
        ar2 * ar1 - ai2 * ai1,
        ar2 * ai1 + ai2 * ar1,
        ar2 * br1 - ai2 * bi1 + br2,
        ar2 * bi1 + ai2 * br1 + bi2,
    )


@tc.kernel(static_shapes=True)
def lru_complex_scan(
    bu: torch.Tensor, nu_log: torch.Tensor, theta_log: torch.Tensor, gamma_log: torch.Tensor
) -> torch.Tensor:
    """The Linear Recurrent Unit's diagonal complex recurrence (Orvieto et al. 2023): bu [B, L,
    D, 2] bf16 (the input projection B u_t, complex as (re, im) pairs), per state dim nu_log,
    theta_log, gamma_log [D] fp32: lambda = exp(-exp(nu_log) + i exp(theta_log)), h_t = lambda
    h_{t-1} + exp(gamma_log) B u_t from h_{-1} = 0. out [B, L, D, 2] fp32, the states. Each
    program takes one sequence and a block of state dims with the whole length, scanned with
    tc.associative_scan on (re a, im a, re b, im b)."""
    b, seq, d, _ = bu.size()
    out = torch.empty([b, seq, d, 2], dtype=F32, device=bu.device)
    for tb, td in tc.tile([b, d], block_size=[1, None]):
        modulus = torch.exp(-torch.exp(nu_log[td]))
        theta = torch.exp(theta_log[td])
        gamma = torch.exp(gamma_log[td])[None, :]
        xr = bu[tb.begin, :, td, 0].to(F32) * gamma
        xi = bu[tb.begin, :, td, 1].to(F32) * gamma
        ar = (modulus * torch.cos(theta))[None, :].expand_as(xr)
        ai = (modulus * torch.sin(theta))[None, :].expand_as(xr)
        _, _, hr, hi = tc.associative_scan(_complex_then, (ar, ai, xr, xi), 0)
        out[tb.begin, :, td, 0] = hr
        out[tb.begin, :, td, 1] = hi
    return out


def _lru_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, L, D)``: bu bf16 randn; the LRU's initialization: |lambda| uniform on the
    ring [0.9, 0.999], phase uniform in [0, pi / 10], gamma = sqrt(1 - |lambda|^2)."""
    b, seq, d = shape
    g = gen(seed)
    bu = randn((b, seq, d, 2), BF16, device, g)
    if device == "meta":
        return bu, *(torch.empty((d,), dtype=F32, device=device) for _ in range(3))
    u1, u2 = torch.rand((d,), generator=g), torch.rand((d,), generator=g)
    r_min, r_max = 0.9, 0.999
    nu = -0.5 * torch.log(u1 * (r_max**2 - r_min**2) + r_min**2)
    theta = u2 * math.pi / 10 + 1e-4
    gamma = torch.sqrt(1 - torch.exp(-2 * nu))
    return bu, torch.log(nu).to(device), torch.log(theta).to(device), torch.log(gamma).to(device)


def lru_complex_scan_reference(
    bu: torch.Tensor, nu_log: torch.Tensor, theta_log: torch.Tensor, gamma_log: torch.Tensor
) -> torch.Tensor:
    """A log-depth (Hillis-Steele) scan over t in complex64 (a Python loop over t would take
    torch.compile minutes)."""
    lam = torch.polar(torch.exp(-torch.exp(nu_log)), torch.exp(theta_log))
    h = torch.view_as_complex(bu.float().contiguous()) * torch.exp(gamma_log)
    a = lam.expand_as(h)
    step = 1
    while step < h.shape[1]:
        h = torch.cat([h[:, :step], h[:, step:] + a[:, step:] * h[:, :-step]], 1)
        a = torch.cat([a[:, :step], a[:, step:] * a[:, :-step]], 1)
        step *= 2
    return torch.view_as_real(h)


# --------------------------------------------------------------------------- two-stage top-k


@tc.kernel(static_shapes=True)
def topk_two_stage(logits: torch.Tensor, k: int = TOPK_K) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest logits of each row and their token ids, sorted descending (torch.topk), in
    two launches: the first takes each row's vocabulary in chunks of TOPK_CHUNK, each program
    one chunk of a block of rows, and keeps the chunk's top k by k rounds of max and masking the
    winner; the host views the [B, chunks, k] candidates as [B, chunks k]; the second takes the
    top k of the candidates the same way and gathers their ids. logits [B, V] fp32; returns
    values [B, k] fp32 and indices [B, k] int64."""
    b, v = logits.size()
    chunks = tc.cdiv(v, TOPK_CHUNK)
    part_val = torch.empty([b, chunks, k], dtype=F32, device=logits.device)
    part_idx = torch.empty([b, chunks, k], dtype=I64, device=logits.device)
    for tb, tv in tc.tile([b, v], block_size=[None, TOPK_CHUNK]):
        x = logits[tb, tv]
        for j in tc.static_range(k):
            best, arg = torch.max(x, dim=1)
            part_val[tb, tv.id, j] = best
            part_idx[tb, tv.id, j] = tv.begin + arg
            x = torch.where(tv.index[None, :] == (tv.begin + arg)[:, None], float("-inf"), x)
    cand_val = part_val.view(b, chunks * k)
    cand_idx = part_idx.view(b, chunks * k)
    values = torch.empty([b, k], dtype=F32, device=logits.device)
    indices = torch.empty([b, k], dtype=I64, device=logits.device)
    for tb in tc.tile(b):
        c = cand_val[tb, :]
        pos = tc.arange(chunks * k)
        for j in tc.static_range(k):
            best, arg = torch.max(c, dim=1)
            values[tb, j] = best
            indices[tb, j] = cand_idx[tb.index, arg]
            c = torch.where(pos[None, :] == arg[:, None], float("-inf"), c)
    return values, indices


def _topk_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V)``: fp32 logits randn * 3 (distinct values: fp32 ties are rare)."""
    return (randn(shape, F32, device, gen(seed)) * 3,)


def topk_two_stage_reference(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.topk(logits, TOPK_K, dim=-1)
    return values, indices


CASES: list[Case] = [
    Case(
        name="adafactor_step",
        kernels=(adafactor_step,),
        make_inputs=_adafactor_inputs,
        reference=adafactor_step_reference,
        run=copy_state("adafactor_step", (0, 2, 3)),
        # a 13B model's MLP weight (hidden 5120) and GPT-2's 50257 x 768 embedding: 283 / 154
        # MB of fp32 weight read twice and written once, the bf16 gradient read four times
        gpu_shapes=((5120, 13824), (50257, 768)),
        cpu_shapes=((37, 50), (5, 3), (1, 7)),
        atol=1e-6,  # fp32 weights of |p| < 0.1, updates up to 1.5e-3
        timed_run=lambda k, inp: k["adafactor_step"](*inp),
        timed_reference=_adafactor_eager,
    ),
    Case(
        name="sgd_nesterov_amp_step",
        kernels=(sgd_nesterov_amp_step,),
        make_inputs=_sgd_inputs,
        reference=sgd_nesterov_amp_step_reference,
        run=copy_state("sgd_nesterov_amp_step", (0, 2)),
        # ResNet-50 and ResNet-152's parameters in one buffer (25.6M / 60.2M): 256 / 602 MB
        gpu_shapes=((25557032, 0), (60192808, 0)),
        cpu_shapes=((1000, 0), (37, 1), (5, 0)),
        atol=1e-6,
        timed_run=lambda k, inp: k["sgd_nesterov_amp_step"](*inp),
        timed_reference=_sgd_eager,
    ),
    one_kernel_case(
        "mvn_logpdf_chol4",
        mvn_logpdf_chol4,
        _mvn_inputs,
        mvn_logpdf_chol4_reference,
        ((4194304,), (1000003,)),  # 4M tracks: 268 MB of covariances read, 268 MB of L written
        ((37,), (1,)),
        1e-4,  # fp32, |log p| < 40 (ill-conditioned covariances amplify rounding)
    ),
    one_kernel_case(
        "gaussian_cov3d",
        gaussian_cov3d,
        _gs_inputs,
        gaussian_cov3d_reference,
        ((6000000,),),  # a large 3DGS scene: 168 MB read, 144 MB written
        ((37,), (3,)),
        1e-7,  # fp32 covariances of scales near exp(-4): |Sigma| < 0.04
    ),
    Case(
        name="bloom_filter_insert_query",
        kernels=(bloom_filter_insert_query,),
        make_inputs=_bloom_inputs,
        reference=bloom_filter_insert_query_reference,
        run=copy_state("bloom_filter_insert_query", (0,)),
        # a 2^30-bit (128 MB) filter, 16M keys inserted and 16M queried, 7 hashes a key
        gpu_shapes=((30, 16777216, 16777216),),
        cpu_shapes=((12, 300, 200), (6, 5, 7), (10, 1, 1)),
        atol=0.5,  # bits and bools: exact
        timed_run=lambda k, inp: k["bloom_filter_insert_query"](*inp),
        timed_reference=_bloom_eager,
    ),
    Case(
        name="dropout_packbits",
        kernels=(dropout_packbits_fwd, dropout_packbits_bwd),
        make_inputs=_dropout_inputs,
        reference=dropout_packbits_reference,
        run=_run_dropout,
        # 16384 tokens of a 13B model's hidden 5120: 168 MB each way, a 10 MB mask
        gpu_shapes=((16384, 5120),),
        cpu_shapes=((5, 48), (3, 8)),
        atol=1e-6,  # a scale by a power-of-two-ish constant rounded once: exact or one ulp
    ),
    one_kernel_case(
        "lru_complex_scan",
        lru_complex_scan,
        _lru_inputs,
        lru_complex_scan_reference,
        ((32, 2048, 512),),  # 134 MB of bf16 input, 268 MB of fp32 states
        ((2, 37, 5), (1, 1, 3)),
        1e-4,  # fp32 states, |h| < 8: scans in another order
    ),
    one_kernel_case(
        "topk_two_stage",
        topk_two_stage,
        _topk_inputs,
        topk_two_stage_reference,
        ((256, 50257), (64, 152064)),  # GPT-2 / Qwen2 vocabularies: 51 / 39 MB of fp32 logits
        ((1, 4100), (2, 37)),
        1e-6,  # values copied, ids exact
    ),
]

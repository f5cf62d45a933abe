"""Held-out kernels written from the docs only, session 43b: the kernels of one training step, as
forward/backward pairs registered for autograd (``register_backward``) and an in-place optimizer
update. Fused bias + exact GELU (bias grad reduced over rows from per-block partials); fused
residual add + RMSNorm with bf16 activations and an fp32 master weight (two differentiable outputs:
the normalized rows and the residual stream, the weight grad reduced over rows); softmax
cross-entropy with ``ignore_index`` whose backward reads the per-row loss grads as autograd hands
them (a stride-0 expand from the mean); SwiGLU on a packed ``[gate | up]`` projection; rotary
embedding of q and k (grouped-query heads) in one kernel with its inverse rotation as backward; a
fused AdamW step on a flat fp32 parameter buffer with bf16 grads.

Each kernel computes in fp32 for 16/32-bit inputs and in fp64 for fp64 inputs (so
``torch.autograd.gradcheck`` runs at its default step). ``run`` launches the forward and the
backward kernels explicitly (what autograd would launch) so the cases work with re-decorated
variants; ``/work/fuzz43b/check_autograd.py`` exercises the registered autograd pairs (eager,
torch.compile aot_eager / inductor, gradcheck, accumulation, no_grad). See
/work/fuzz43b/REPORT.md.

Notes: all six match eager at every CPU shape (seeds 0 and 1) with the autotuner and with
``TILECRAFT_NO_AUTOTUNE=1``, forward and gradients, through autograd in eager mode and under
torch.compile (aot_eager and inductor, fullgraph), with fp64 gradcheck passing; every default
cross-compiles for cuda:90 and hip:gfx942 at the GPU shape without spills. No kernel was rewritten
for tilecraft; the bugs found are error messages for user mistakes (repro_1..4.py).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, gen, randint, randn

F32 = torch.float32
F64 = torch.float64
BF16 = torch.bfloat16
IGNORE = -100
EPS = 1e-6
INV_SQRT2 = 0.7071067811865476
INV_SQRT_2PI = 0.3989422804014327


def _acc(dtype: torch.dtype) -> torch.dtype:
    return F64 if dtype == F64 else F32


def _zeros_if_none(g: Any, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like) if g is None else g


# --------------------------------------------------------------------------- bias + GELU


@tc.kernel(static_shapes=True)
def bias_gelu_fwd(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """gelu(x + bias), exact (erf) GELU; x [M, N], bias [N]."""
    m, n = x.size()
    acc = _acc(x.dtype)
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        z = x[tm, tn].to(acc) + bias[tn].to(acc)[None, :]
        out[tm, tn] = (0.5 * z * (1.0 + torch.erf(z * INV_SQRT2))).to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def bias_gelu_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_x, grad_bias): gelu'(z) = Phi(z) + z phi(z); grad_bias sums grad_x's fp32 values
    over rows, per row block into a partial row, the partials added on the host."""
    m, n = x.size()
    acc = _acc(x.dtype)
    m_block = tc.register_block_size(m)
    grad_x = torch.empty_like(x)
    partial = torch.empty([tc.cdiv(m, m_block), n], dtype=acc, device=x.device)
    for tm, tn in tc.tile([m, n], block_size=[m_block, None]):
        z = x[tm, tn].to(acc) + bias[tn].to(acc)[None, :]
        cdf = 0.5 * (1.0 + torch.erf(z * INV_SQRT2))
        pdf = torch.exp(-0.5 * z * z) * INV_SQRT_2PI
        dz = grad_out[tm, tn].to(acc) * (cdf + z * pdf)
        grad_x[tm, tn] = dz.to(grad_x.dtype)
        partial[tm.id, tn] = torch.sum(dz, dim=0)
    return grad_x, partial.sum(0).to(bias.dtype)


def _bias_gelu_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    x, bias = inputs
    ctx.save_for_backward(x, bias)


def _bias_gelu_backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, Any]:
    x, bias = ctx.saved_tensors
    return bias_gelu_bwd(grad_out, x, bias)


bias_gelu_fwd.register_backward(_bias_gelu_backward, setup_context=_bias_gelu_setup)


def bias_gelu_reference(x, bias, grad_out):
    xf = x.detach().float().requires_grad_()
    bf = bias.detach().float().requires_grad_()
    out = F.gelu(xf + bf)
    gx, gb = torch.autograd.grad(out, (xf, bf), grad_out.float())
    return out.to(x.dtype), gx.to(x.dtype), gb.to(bias.dtype)


def _bias_gelu_inputs(shape, device, seed):
    g = gen(seed)
    m, n = shape
    x = randn((m, n), BF16, device, g) * 2
    bias = randn((n,), F32, device, g) * 0.5
    return x, bias, randn((m, n), BF16, device, g)


def _bias_gelu_run(k, inp):
    x, bias, grad_out = inp
    out = k["bias_gelu_fwd"](x, bias)
    gx, gb = k["bias_gelu_bwd"](grad_out, x, bias)
    return out, gx, gb


# --------------------------------------------------------------------------- add + RMSNorm


@tc.kernel(static_shapes=True)
def add_rms_norm_fwd(
    x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """h = x + residual (rounded to x's dtype, the residual stream); out = rms_norm(h) * w.
    Returns (out, h, rstd [M] in the compute dtype)."""
    m, n = x.size()
    acc = _acc(x.dtype)
    out = torch.empty_like(x)
    h = torch.empty_like(x)
    rstd = torch.empty([m], dtype=acc, device=x.device)
    for tm in tc.tile(m):
        hs = (x[tm, :] + residual[tm, :]).to(acc)
        h[tm, :] = hs.to(h.dtype)
        r = torch.rsqrt(torch.mean(hs * hs, dim=-1) + eps)
        rstd[tm] = r
        out[tm, :] = (hs * r[:, None] * w[None, :].to(acc)).to(out.dtype)
    return out, h, rstd


@tc.kernel(static_shapes=True)
def add_rms_norm_bwd(
    grad_out: torch.Tensor,
    grad_h: torch.Tensor,
    h: torch.Tensor,
    w: torch.Tensor,
    rstd: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad of h's inputs = grad_h + rms_norm's grad, grad_w reduced over rows)."""
    m, n = h.size()
    acc = _acc(h.dtype)
    m_block = tc.register_block_size(m)
    grad_in = torch.empty_like(h)
    dw_partial = torch.empty([tc.cdiv(m, m_block), n], dtype=acc, device=h.device)
    for tm in tc.tile(m, block_size=m_block):
        hs = h[tm, :].to(acc)
        dy = grad_out[tm, :].to(acc)
        r = rstd[tm].to(acc)
        x_hat = hs * r[:, None]
        wdy = w[None, :].to(acc) * dy
        proj = torch.sum(x_hat * wdy, dim=-1) / n
        dx = (wdy - x_hat * proj[:, None]) * r[:, None] + grad_h[tm, :].to(acc)
        grad_in[tm, :] = dx.to(grad_in.dtype)
        dw_partial[tm.id, :] = torch.sum(dy * x_hat, dim=0)
    return grad_in, dw_partial.sum(0).to(w.dtype)


def _add_rms_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    _x, _res, w, _eps = inputs
    _out, h, rstd = output
    ctx.mark_non_differentiable(rstd)
    ctx.save_for_backward(h, w, rstd)


def _add_rms_backward(ctx: Any, grad_out: Any, grad_h: Any, _grad_rstd: Any) -> tuple[Any, ...]:
    h, w, rstd = ctx.saved_tensors
    grad_out = _zeros_if_none(grad_out, h)
    grad_h = _zeros_if_none(grad_h, h)
    grad_in, grad_w = add_rms_norm_bwd(grad_out, grad_h, h, w, rstd)
    return grad_in, grad_in, grad_w, None


add_rms_norm_fwd.register_backward(_add_rms_backward, setup_context=_add_rms_setup)


def add_rms_norm_reference(x, residual, w, grad_out, grad_h):
    xd = x.detach().requires_grad_()
    rd = residual.detach().requires_grad_()
    wf = w.detach().float().requires_grad_()
    h = xd + rd
    hf = h.float()
    out = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + EPS) * wf).to(x.dtype)
    gx, gr, gw = torch.autograd.grad((out, h), (xd, rd, wf), (grad_out, grad_h))
    return out.detach(), h.detach(), gx, gr, gw.to(w.dtype)


def _add_rms_inputs(shape, device, seed):
    g = gen(seed)
    m, n = shape
    x = randn((m, n), BF16, device, g)
    residual = randn((m, n), BF16, device, g) * 2
    w = 1.0 + 0.3 * randn((n,), F32, device, g)
    return x, residual, w, randn((m, n), BF16, device, g), randn((m, n), BF16, device, g)


def _add_rms_run(k, inp):
    x, residual, w, grad_out, grad_h = inp
    out, h, rstd = k["add_rms_norm_fwd"](x, residual, w, EPS)
    gin, gw = k["add_rms_norm_bwd"](grad_out, grad_h, h, w, rstd)
    return out, h, gin, gin, gw


# --------------------------------------------------------------------------- cross-entropy


@tc.kernel(static_shapes=True)
def ce_fwd(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row loss logsumexp(row) - row[label] (0 where label == IGNORE) and the row's lse."""
    n, v = logits.size()
    acc = _acc(logits.dtype)
    losses = torch.empty([n], dtype=acc, device=logits.device)
    lse = torch.empty([n], dtype=acc, device=logits.device)
    for tn in tc.tile(n):
        row_lse = torch.logsumexp(logits[tn, :].to(acc), dim=-1)
        lab = labels[tn]
        valid = lab != IGNORE
        picked = logits[tn.index, torch.where(valid, lab, 0)].to(acc)
        losses[tn] = torch.where(valid, row_lse - picked, 0.0)
        lse[tn] = row_lse
    return losses, lse


@tc.kernel(static_shapes=True)
def ce_bwd(
    grad_losses: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, lse: torch.Tensor
) -> torch.Tensor:
    """d losses / d logits: (softmax(row) - onehot(label)) * grad_losses[row], 0 on ignored rows."""
    n, v = logits.size()
    acc = _acc(logits.dtype)
    grad = torch.empty_like(logits)
    for tn, tv in tc.tile([n, v]):
        p = torch.exp(logits[tn, tv].to(acc) - lse[tn][:, None])
        lab = labels[tn]
        hit = (tv.index[None, :] == lab[:, None]).to(acc)
        g = (p - hit) * grad_losses[tn].to(acc)[:, None]
        grad[tn, tv] = torch.where((lab != IGNORE)[:, None], g, 0.0).to(grad.dtype)
    return grad


def _ce_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    logits, labels = inputs
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(logits, labels, output[1])


def _ce_backward(ctx: Any, grad_losses: torch.Tensor, _grad_lse: Any) -> tuple[Any, None]:
    logits, labels, lse = ctx.saved_tensors
    # grad_losses as autograd hands it: from a .sum() / .mean() a stride-0 expand
    return ce_bwd(grad_losses, logits, labels, lse), None


ce_fwd.register_backward(_ce_backward, setup_context=_ce_setup)


def ce_mean_loss(logits, labels):
    """The loss a model would compute: the mean over rows that are not ignored."""
    losses, _ = ce_fwd(logits, labels)
    return losses.sum() / (labels != IGNORE).sum().clamp(min=1)


def ce_reference(logits, labels):
    lf = logits.detach().float().requires_grad_()
    loss = F.cross_entropy(lf, labels, ignore_index=IGNORE)
    (grad,) = torch.autograd.grad(loss, lf)
    return loss.detach(), grad.to(logits.dtype)


def _ce_inputs(shape, device, seed):
    g = gen(seed)
    n, v = shape
    logits = randn((n, v), BF16, device, g) * 3
    labels = randint(0, v, (n,), device, g)
    if device != "meta":
        labels[::5] = IGNORE
    return logits, labels


def _ce_run(k, inp):
    logits, labels = inp
    losses, lse = k["ce_fwd"](logits, labels)
    count = (labels != IGNORE).sum().clamp(min=1)
    loss = losses.sum() / count
    grad_losses = (1.0 / count.to(F32)).expand(labels.shape[0])  # what autograd passes
    return loss, k["ce_bwd"](grad_losses, logits, labels, lse)


# --------------------------------------------------------------------------- SwiGLU (packed)


@tc.kernel(static_shapes=True)
def swiglu_packed_fwd(xw: torch.Tensor) -> torch.Tensor:
    """xw [M, 2H] = [gate | up] (one fused projection): silu(gate) * up, [M, H]."""
    m, h2 = xw.size()
    h = h2 // 2
    acc = _acc(xw.dtype)
    pair = xw.view(m, 2, h)
    out = torch.empty([m, h], dtype=xw.dtype, device=xw.device)
    for tm, th in tc.tile([m, h]):
        g = pair[tm, 0, th].to(acc)
        u = pair[tm, 1, th].to(acc)
        out[tm, th] = (F.silu(g) * u).to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def swiglu_packed_bwd(grad_out: torch.Tensor, xw: torch.Tensor) -> torch.Tensor:
    """grad of xw [M, 2H]: [dy * u * silu'(g) | dy * silu(g)]."""
    m, h2 = xw.size()
    h = h2 // 2
    acc = _acc(xw.dtype)
    pair = xw.view(m, 2, h)
    grad = torch.empty([m, 2, h], dtype=xw.dtype, device=xw.device)
    for tm, th in tc.tile([m, h]):
        g = pair[tm, 0, th].to(acc)
        u = pair[tm, 1, th].to(acc)
        dy = grad_out[tm, th].to(acc)
        s = torch.sigmoid(g)
        grad[tm, 0, th] = (dy * u * s * (1.0 + g * (1.0 - s))).to(grad.dtype)
        grad[tm, 1, th] = (dy * g * s).to(grad.dtype)
    return grad.view(m, h2)


def _swiglu_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.save_for_backward(inputs[0])


def _swiglu_backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any]:
    (xw,) = ctx.saved_tensors
    return (swiglu_packed_bwd(grad_out, xw),)


swiglu_packed_fwd.register_backward(_swiglu_backward, setup_context=_swiglu_setup)


def swiglu_reference(xw, grad_out):
    xf = xw.detach().float().requires_grad_()
    g, u = xf.chunk(2, dim=-1)
    out = F.silu(g) * u
    (gx,) = torch.autograd.grad(out, xf, grad_out.float())
    return out.to(xw.dtype), gx.to(xw.dtype)


def _swiglu_inputs(shape, device, seed):
    g = gen(seed)
    m, h = shape
    return randn((m, 2 * h), BF16, device, g) * 2, randn((m, h), BF16, device, g)


def _swiglu_run(k, inp):
    xw, grad_out = inp
    return k["swiglu_packed_fwd"](xw), k["swiglu_packed_bwd"](grad_out, xw)


# --------------------------------------------------------------------------- RoPE on q and k


@tc.kernel(static_shapes=True)
def rope_qk_fwd(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate-half RoPE of q [T, Hq, D] and k [T, Hk, D] (grouped-query: Hk divides Hq) with
    cos / sin [T, D / 2] tables (fp32; computed in the promoted dtype)."""
    t, hq, d = q.size()
    hk = k.size(1)
    half = tc.specialize(d // 2)
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    for tt, th in tc.tile([t, hq]):
        x1 = q[tt, th, :half]
        x2 = q[tt, th, half:]
        c = cos[tt, None, :]
        s = sin[tt, None, :]
        q_out[tt, th, :half] = (x1 * c - x2 * s).to(q_out.dtype)
        q_out[tt, th, half:] = (x2 * c + x1 * s).to(q_out.dtype)
    for tt, th in tc.tile([t, hk]):
        x1 = k[tt, th, :half]
        x2 = k[tt, th, half:]
        c = cos[tt, None, :]
        s = sin[tt, None, :]
        k_out[tt, th, :half] = (x1 * c - x2 * s).to(k_out.dtype)
        k_out[tt, th, half:] = (x2 * c + x1 * s).to(k_out.dtype)
    return q_out, k_out


@tc.kernel(static_shapes=True)
def rope_qk_bwd(
    grad_q: torch.Tensor, grad_k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The inverse rotation (the transpose) of both grads."""
    t, hq, d = grad_q.size()
    hk = grad_k.size(1)
    half = tc.specialize(d // 2)
    dq = torch.empty(grad_q.shape, dtype=grad_q.dtype, device=grad_q.device)
    dk = torch.empty(grad_k.shape, dtype=grad_k.dtype, device=grad_k.device)
    for tt, th in tc.tile([t, hq]):
        y1 = grad_q[tt, th, :half]
        y2 = grad_q[tt, th, half:]
        c = cos[tt, None, :]
        s = sin[tt, None, :]
        dq[tt, th, :half] = (y1 * c + y2 * s).to(dq.dtype)
        dq[tt, th, half:] = (y2 * c - y1 * s).to(dq.dtype)
    for tt, th in tc.tile([t, hk]):
        y1 = grad_k[tt, th, :half]
        y2 = grad_k[tt, th, half:]
        c = cos[tt, None, :]
        s = sin[tt, None, :]
        dk[tt, th, :half] = (y1 * c + y2 * s).to(dk.dtype)
        dk[tt, th, half:] = (y2 * c - y1 * s).to(dk.dtype)
    return dq, dk


def _rope_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    q, k, cos, sin = inputs
    ctx.save_for_backward(q, k, cos, sin)


def _rope_backward(ctx: Any, grad_q: Any, grad_k: Any) -> tuple[Any, ...]:
    q, k, cos, sin = ctx.saved_tensors
    dq, dk = rope_qk_bwd(_zeros_if_none(grad_q, q), _zeros_if_none(grad_k, k), cos, sin)
    return dq, dk, None, None


rope_qk_fwd.register_backward(_rope_backward, setup_context=_rope_setup)


def rope_tables(t, d, device, dtype=F32):
    inv_freq = 10000.0 ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]
    if device == "meta":
        return (torch.empty(t, d // 2, dtype=dtype, device="meta"),) * 2
    return ang.cos().to(device=device, dtype=dtype), ang.sin().to(device=device, dtype=dtype)


def rope_eager(x, cos, sin):
    half = x.shape[-1] // 2
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def rope_reference(q, k, cos, sin, gq, gk):
    qf = q.detach().float().requires_grad_()
    kf = k.detach().float().requires_grad_()
    qo, ko = rope_eager(qf, cos, sin), rope_eager(kf, cos, sin)
    dq, dk = torch.autograd.grad((qo, ko), (qf, kf), (gq.float(), gk.float()))
    return qo.to(q.dtype), ko.to(k.dtype), dq.to(q.dtype), dk.to(k.dtype)


def _rope_inputs(shape, device, seed):
    g = gen(seed)
    t, hq, hk, d = shape
    cos, sin = rope_tables(t, d, device)
    return (
        randn((t, hq, d), BF16, device, g),
        randn((t, hk, d), BF16, device, g),
        cos,
        sin,
        randn((t, hq, d), BF16, device, g),
        randn((t, hk, d), BF16, device, g),
    )


def _rope_run(kk, inp):
    q, k, cos, sin, gq, gk = inp
    qo, ko = kk["rope_qk_fwd"](q, k, cos, sin)
    dq, dk = kk["rope_qk_bwd"](gq, gk, cos, sin)
    return qo, ko, dq, dk


# --------------------------------------------------------------------------- fused AdamW


@tc.kernel(static_shapes=True)
def adamw_step_(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
) -> None:
    """One AdamW step, in place, on a flat fp32 parameter buffer and its fp32 moments; grad may be
    bf16 (mixed precision). torch.optim.AdamW's single-tensor arithmetic."""
    (n,) = param.size()
    bias_c1 = 1.0 - beta1**step
    bias_c2_sqrt = math.sqrt(1.0 - beta2**step)
    step_size = lr / bias_c1
    for tn in tc.tile(n):
        g = grad[tn].to(torch.float32)
        p = param[tn] * (1.0 - lr * weight_decay)
        m = torch.lerp(exp_avg[tn], g, 1.0 - beta1)
        v = exp_avg_sq[tn] * beta2 + g * g * (1.0 - beta2)
        exp_avg[tn] = m
        exp_avg_sq[tn] = v
        denom = torch.sqrt(v) / bias_c2_sqrt + eps
        param[tn] = p - step_size * (m / denom)


ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)


def adamw_reference(param, grad, exp_avg, exp_avg_sq, step):
    p = param.clone()
    opt = torch.optim.AdamW(
        [p],
        lr=ADAM["lr"],
        betas=(ADAM["beta1"], ADAM["beta2"]),
        eps=ADAM["eps"],
        weight_decay=ADAM["weight_decay"],
        foreach=False,
    )
    p.grad = grad.float()
    opt.state[p] = {
        "step": torch.tensor(float(step - 1)),
        "exp_avg": exp_avg.clone(),
        "exp_avg_sq": exp_avg_sq.clone(),
    }
    opt.step()
    st = opt.state[p]
    return p, st["exp_avg"], st["exp_avg_sq"]


def _adamw_inputs(shape, device, seed):
    g = gen(seed)
    (n,) = shape
    param = randn((n,), F32, device, g)
    grad = randn((n,), BF16, device, g) * 0.01
    exp_avg = randn((n,), F32, device, g) * 0.01
    exp_avg_sq = randn((n,), F32, device, g).abs() * 1e-4
    return param, grad, exp_avg, exp_avg_sq


ADAM_STEP = 7


def _adamw_run(k, inp):
    param, grad, exp_avg, exp_avg_sq = (t.clone() for t in inp)
    a = ADAM
    k["adamw_step_"](
        param,
        grad,
        exp_avg,
        exp_avg_sq,
        a["lr"],
        a["beta1"],
        a["beta2"],
        a["eps"],
        a["weight_decay"],
        ADAM_STEP,
    )
    return param, exp_avg, exp_avg_sq


def _adamw_timed_run(k, inp):
    a = ADAM
    k["adamw_step_"](*inp, a["lr"], a["beta1"], a["beta2"], a["eps"], a["weight_decay"], ADAM_STEP)


def _adamw_timed_reference(param, grad, exp_avg, exp_avg_sq):
    a = ADAM
    param.mul_(1 - a["lr"] * a["weight_decay"])
    exp_avg.lerp_(grad.float(), 1 - a["beta1"])
    exp_avg_sq.mul_(a["beta2"]).addcmul_(grad.float(), grad.float(), value=1 - a["beta2"])
    bc1 = 1 - a["beta1"] ** ADAM_STEP
    bc2s = math.sqrt(1 - a["beta2"] ** ADAM_STEP)
    param.addcdiv_(exp_avg, exp_avg_sq.sqrt() / bc2s + a["eps"], value=-a["lr"] / bc1)


# --------------------------------------------------------------------------- cases


CASES: list[Case] = [
    Case(
        name="bias_gelu_fwd_bwd_s43b",
        kernels=(bias_gelu_fwd, bias_gelu_bwd),
        make_inputs=_bias_gelu_inputs,
        reference=bias_gelu_reference,
        run=_bias_gelu_run,
        gpu_shapes=((8192, 4096),),  # tokens x MLP hidden (bf16)
        cpu_shapes=((37, 100), (5, 257), (64, 64)),
        atol=2e-2,  # bias grad sums 37-64 bf16 rows
    ),
    Case(
        name="add_rms_norm_fwd_bwd_s43b",
        kernels=(add_rms_norm_fwd, add_rms_norm_bwd),
        make_inputs=_add_rms_inputs,
        reference=lambda x, r, w, go, gh: add_rms_norm_reference(x, r, w, go, gh),
        run=_add_rms_run,
        gpu_shapes=((8192, 4096),),
        cpu_shapes=((37, 100), (3, 1000), (64, 64)),
        atol=5e-2,
    ),
    Case(
        name="softmax_ce_ignore_fwd_bwd_s43b",
        kernels=(ce_fwd, ce_bwd),
        make_inputs=_ce_inputs,
        reference=ce_reference,
        run=_ce_run,
        gpu_shapes=((4096, 128256),),  # Llama-3 vocabulary
        cpu_shapes=((37, 1000), (8, 3001), (3, 517)),
        atol=1e-3,
    ),
    Case(
        name="swiglu_packed_fwd_bwd_s43b",
        kernels=(swiglu_packed_fwd, swiglu_packed_bwd),
        make_inputs=_swiglu_inputs,
        reference=swiglu_reference,
        run=_swiglu_run,
        gpu_shapes=((8192, 14336),),  # Llama-3 8B intermediate
        cpu_shapes=((37, 100), (5, 257), (64, 64)),
        atol=5e-2,
    ),
    Case(
        name="rope_qk_gqa_fwd_bwd_s43b",
        kernels=(rope_qk_fwd, rope_qk_bwd),
        make_inputs=_rope_inputs,
        reference=rope_reference,
        run=_rope_run,
        gpu_shapes=((8192, 32, 8, 128),),  # tokens, q heads, kv heads, head dim
        cpu_shapes=((37, 4, 2, 64), (5, 3, 1, 32), (16, 8, 8, 128)),
        atol=2e-2,
    ),
    Case(
        name="adamw_flat_bf16grad_s43b",
        kernels=(adamw_step_,),
        make_inputs=_adamw_inputs,
        reference=lambda p, g, m, v: adamw_reference(p, g, m, v, ADAM_STEP),
        run=_adamw_run,
        gpu_shapes=((64 * 1024 * 1024,),),  # a 64M-parameter flat shard
        cpu_shapes=((1000,), (4099,), (37,)),
        atol=1e-6,
        timed_run=_adamw_timed_run,
        timed_reference=_adamw_timed_reference,
    ),
]

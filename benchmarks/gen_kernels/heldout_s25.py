"""Held-out kernels written from the docs only, session 25 (see :mod:`.heldout_rows` for why
held-out kernels exist): the MoE dispatch position of each token within its (top-1) expert and
the tokens per expert (a one-hot compare of a token tile with an expert tile, an exclusive cumsum
over the tokens plus a running per-expert count carried across the token loop); a cross-entropy
forward with ``ignore_index=-100`` and the mean over the tokens kept (loss and count summed with
``tc.atomic_add``, the division on the host); a LayerNorm backward's dgamma / dbeta of a
[B, S, D] activation (each program owns a column tile and walks all the rows); per-group int8
quantization of activations (groups of 128 along the last dim, scale = absmax / 127); an
in-place Lion optimizer step (fp32 params and momentum, bf16 grads); cross attention with
Lq != Lk (online softmax over key tiles, a (batch * heads, query tile) grid); 3x3 stride-2
average pooling of NHWC maps with padding 1 and ``count_include_pad=False``; the variance and
mean over dim 0 of a [B, S, D] tensor; and a softmax over the middle dim of a [B, S, H] tensor.
Each comes with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randint, randn

NUM_EXPERTS = 128  # moe_token_positions: experts of the router
IGNORE_INDEX = -100  # cross_entropy_ignore_mean: torch's default ignore_index
QUANT_GROUP = 128  # int8_group_quant: elements per scale along the last dim
LION_LR, LION_BETAS, LION_WD = 1e-4, (0.9, 0.99), 0.1  # lion_step: lucidrains' defaults, wd 0.1


# --------------------------------------------------------------------------- MoE token positions


@tc.kernel(static_shapes=True)
def moe_token_positions(
    expert_ids: torch.Tensor, num_experts: int = NUM_EXPERTS
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-1 MoE dispatch bookkeeping: expert_ids [T] int64. For each token, its position within
    its expert's tokens (how many earlier tokens went to the same expert), and the number of
    tokens per expert. Each program owns a tile of experts and walks the tokens in order: the
    one-hot [tokens, experts] compare, an exclusive cumsum over the token dim plus the running
    count of each expert before this token tile. Returns (positions int64 [T], counts int64
    [E])."""
    (t,) = expert_ids.size()
    positions = torch.empty([t], dtype=torch.int64, device=expert_ids.device)
    counts = torch.empty([num_experts], dtype=torch.int64, device=expert_ids.device)
    for te in tc.tile(num_experts):
        running = tc.zeros([te], dtype=torch.int64)
        for tt in tc.tile(t):
            ids = expert_ids[tt]
            hit = ids[:, None] == te.index[None, :]
            onehot = hit.to(torch.int64)
            before = torch.cumsum(onehot, dim=0) - onehot + running[None, :]
            pos = torch.sum(torch.where(hit, before, 0), dim=1)
            mine = torch.sum(onehot, dim=1) > 0
            tc.store(positions, [tt], pos, extra_mask=mine)
            running = running + torch.sum(onehot, dim=0)
        counts[te] = running
    return positions, counts


def _moe_positions_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T,)``: top-1 expert ids, uniform over NUM_EXPERTS."""
    return (randint(0, NUM_EXPERTS, shape, device, gen(seed)),)


def moe_token_positions_reference(
    expert_ids: torch.Tensor, num_experts: int = NUM_EXPERTS
) -> tuple[torch.Tensor, torch.Tensor]:
    onehot = torch.nn.functional.one_hot(expert_ids, num_experts)
    before = torch.cumsum(onehot, dim=0) - onehot
    return before.gather(1, expert_ids[:, None]).squeeze(1), onehot.sum(0)


# --------------------------------------------------------------------------- cross entropy, ignore


@tc.kernel(static_shapes=True)
def cross_entropy_ignore_mean(
    logits: torch.Tensor, target: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """torch.nn.functional.cross_entropy(logits, target, ignore_index=-100) with the mean
    reduction: logits [N, V] bf16, target [N] int64. Per row lse - logit[target] in fp32; each
    program adds its rows' losses and its count of non-ignored rows into two fp32 scalars with
    tc.atomic_add, the host divides. Returns a 0-d fp32 tensor."""
    n, _ = logits.size()
    total = torch.zeros([1], dtype=torch.float32, device=logits.device)
    count = torch.zeros([1], dtype=torch.float32, device=logits.device)
    for tn in tc.tile(n):
        tgt = target[tn]
        valid = tgt != ignore_index
        x = logits[tn, :].to(torch.float32)
        lse = torch.logsumexp(x, dim=-1)
        picked = torch.gather(x, 1, torch.where(valid, tgt, 0)[:, None]).squeeze(1)
        loss = torch.where(valid, lse - picked, 0.0)
        tc.atomic_add(total, [0], torch.sum(loss))
        tc.atomic_add(count, [0], torch.sum(valid.to(torch.float32)))
    return total[0] / count[0]


def _ce_ignore_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, V)``: bf16 logits (3 randn) and int64 targets, about 15% of them -100
    (padding / prompt tokens), the first one always kept."""
    n, v = shape
    g = gen(seed)
    logits = (randn(shape, torch.float32, device, g) * 3).to(torch.bfloat16)
    if device == "meta":
        return logits, torch.empty((n,), dtype=torch.int64, device=device)
    target = torch.randint(0, v, (n,), generator=g)
    target[torch.rand(n, generator=g) < 0.15] = IGNORE_INDEX
    target[0] = 1
    return logits, target.to(device)


def cross_entropy_ignore_mean_reference(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.float(), target, ignore_index=IGNORE_INDEX)


# --------------------------------------------------------------------------- LayerNorm dgamma/dbeta


@tc.kernel(static_shapes=True)
def layer_norm_bwd_dgamma_dbeta(
    grad_out: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """LayerNorm parameter gradients of a [B, S, D] bf16 activation: grad_out, x [B, S, D]
    bf16, the forward's mean / rstd [B, S] fp32. dgamma = sum over all B * S rows of
    dy * x_hat (x_hat = (x - mean) * rstd), dbeta = sum of dy, fp32 (the norm's params are
    kept in fp32). Each program owns a tile of columns and loops over the rows. Returns
    (dgamma fp32 [D], dbeta fp32 [D])."""
    b, s, d = x.size()
    rows = b * s
    x2 = x.view(rows, d)
    dy2 = grad_out.view(rows, d)
    mean2 = mean.view(rows)
    rstd2 = rstd.view(rows)
    dgamma = torch.empty([d], dtype=torch.float32, device=x.device)
    dbeta = torch.empty([d], dtype=torch.float32, device=x.device)
    for td in tc.tile(d):
        acc_g = tc.zeros([td], dtype=torch.float32)
        acc_b = tc.zeros([td], dtype=torch.float32)
        for tr in tc.tile(rows):
            x_hat = (x2[tr, td].to(torch.float32) - mean2[tr][:, None]) * rstd2[tr][:, None]
            dy = dy2[tr, td].to(torch.float32)
            acc_g += torch.sum(dy * x_hat, dim=0)
            acc_b += torch.sum(dy, dim=0)
        dgamma[td] = acc_g
        dbeta[td] = acc_b
    return dgamma, dbeta


def _ln_dgamma_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, S, D)``: grad_out bf16, x bf16 (2 randn + 0.5) and its row mean / rstd in
    fp32 (eps 1e-5)."""
    g = gen(seed)
    grad_out = randn(shape, torch.bfloat16, device, g)
    x = (randn(shape, torch.float32, device, g) * 2 + 0.5).to(torch.bfloat16)
    xf = x.float()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5)
    return grad_out, x, mean, rstd


def layer_norm_bwd_dgamma_dbeta_reference(
    grad_out: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    x_hat = (x.float() - mean[..., None]) * rstd[..., None]
    dy = grad_out.float()
    return (dy * x_hat).sum((0, 1)), dy.sum((0, 1))


# --------------------------------------------------------------------------- int8 group quant


@tc.kernel(static_shapes=True)
def int8_group_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 quantization of activations x [M, K] bf16 in groups of QUANT_GROUP along
    K (K a multiple of it): scale = absmax / 127 per group (fp32), q = clamp(round(x / scale),
    -127, 127). Returns (q int8 [M, K], scales fp32 [M, K / QUANT_GROUP])."""
    m, k = x.size()
    groups = k // QUANT_GROUP
    xg = x.view(m, groups, QUANT_GROUP)
    q = torch.empty([m, groups, QUANT_GROUP], dtype=torch.int8, device=x.device)
    scales = torch.empty([m, groups], dtype=torch.float32, device=x.device)
    for tm, tg in tc.tile([m, groups]):
        v = xg[tm, tg, :].to(torch.float32)
        absmax = torch.amax(torch.abs(v), dim=-1)
        scale = torch.clamp(absmax, min=1e-10) / 127.0
        q[tm, tg, :] = torch.clamp(torch.round(v / scale[..., None]), -127, 127).to(torch.int8)
        scales[tm, tg] = scale
    return q.view(m, k), scales


def _group_quant_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K)``: bf16 activations, normal, with a few outlier channels times 20 (as
    LLM activations have)."""
    m, k = shape
    g = gen(seed)
    x = randn(shape, torch.float32, device, g)
    boost = torch.ones(k)
    boost[::97] = 20.0
    return ((x * boost.to(device)).to(torch.bfloat16),)


def int8_group_quant_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, k = x.shape
    xg = x.float().view(m, k // QUANT_GROUP, QUANT_GROUP)
    scale = xg.abs().amax(-1).clamp(min=1e-10) / 127.0
    q = torch.clamp(torch.round(xg / scale[..., None]), -127, 127).to(torch.int8)
    return q.view(m, k), scale


# --------------------------------------------------------------------------- Lion step


@tc.kernel(static_shapes=True)
def lion_step(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    lr: float = LION_LR,
    beta1: float = LION_BETAS[0],
    beta2: float = LION_BETAS[1],
    weight_decay: float = LION_WD,
) -> None:
    """One Lion step, in place: param [N] fp32, grad [N] bf16, exp_avg [N] fp32 (momentum).
    update = sign(beta1 m + (1 - beta1) g); p -= lr (update + wd p); m = beta2 m +
    (1 - beta2) g. Nothing is returned: param and exp_avg are updated."""
    (n,) = param.size()
    for tn in tc.tile(n):
        g = grad[tn].to(torch.float32)
        m = exp_avg[tn]
        p = param[tn]
        c = beta1 * m + (1.0 - beta1) * g
        update = torch.sign(c)
        param[tn] = p - lr * (update + weight_decay * p)
        exp_avg[tn] = beta2 * m + (1.0 - beta2) * g


def _lion_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: fp32 params (0.02 randn), a bf16 gradient (0.01 randn), fp32 momentum
    from earlier steps (0.005 randn)."""
    g = gen(seed)
    p = randn(shape, torch.float32, device, g) * 0.02
    grad = (randn(shape, torch.float32, device, g) * 0.01).to(torch.bfloat16)
    m = randn(shape, torch.float32, device, g) * 0.005
    return p, grad, m


def lion_step_reference(
    param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """lucidrains' lion-pytorch update, in place on copies of the state (as the case's run
    copies it before the in-place kernel)."""
    beta1, beta2 = LION_BETAS
    p, m = param.clone(), exp_avg.clone()
    p.mul_(1 - LION_LR * LION_WD)
    update = m.mul(beta1).add(grad, alpha=1 - beta1).sign_()
    p.add_(update, alpha=-LION_LR)
    m.mul_(beta2).add_(grad, alpha=1 - beta2)
    return p, m


def _run_lion(
    kernels: Mapping[str, Callable[..., Any]], inputs: Inputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel updates in place: copy the state first, so the case's inputs stay as they
    were for the next run and the reference (the reference copies it too)."""
    param, grad, exp_avg = inputs
    p, m = param.clone(), exp_avg.clone()
    kernels["lion_step"](p, grad, m)
    return p, m


def _lion_in_place(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor) -> None:
    """The reference's update on the state itself (what the benchmark times)."""
    beta1, beta2 = LION_BETAS
    param.mul_(1 - LION_LR * LION_WD)
    param.add_(exp_avg.mul(beta1).add(grad, alpha=1 - beta1).sign_(), alpha=-LION_LR)
    exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)


# --------------------------------------------------------------------------- cross attention


@tc.kernel(static_shapes=True)
def cross_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Non-causal cross attention: q [B, H, Lq, D], k, v [B, H, Lk, D] bf16 (Lk the encoder's
    length, e.g. 77 text tokens). Grid over (batch * heads, query tiles), an online softmax in
    fp32 over key tiles; q @ k^T of bf16 tiles is bf16 (as in torch), upcast before the
    softmax. Returns bf16 [B, H, Lq, D]."""
    b, h, lq, d = q.size()
    lk = k.size(2)
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    qf = q.reshape(b * h, lq, d)
    kf = k.reshape(b * h, lk, d)
    vf = v.reshape(b * h, lk, d)
    out = torch.empty_like(qf)
    for tbh, tq in tc.tile([b * h, lq], block_size=[1, None]):
        qt = qf[tbh.begin, tq, :]
        m_i = tc.full([tq], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tq], dtype=torch.float32)
        acc = tc.zeros([tq, d], dtype=torch.float32)
        for tk in tc.tile(lk):
            scores = (qt @ kf[tbh.begin, tk, :].t()).float() * scale
            m_new = torch.maximum(m_i, torch.amax(scores, dim=-1))
            p = torch.exp(scores - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            acc = acc * alpha[:, None] + p.to(vf.dtype) @ vf[tbh.begin, tk, :]
            m_i = m_new
        out[tbh.begin, tq, :] = (acc / l_i[:, None]).to(out.dtype)
    return out.view(b, h, lq, d)


def _cross_attn_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, Lq, Lk, D)``: q [B, H, Lq, D], k and v [B, H, Lk, D], bf16 normal."""
    b, h, lq, lk, d = shape
    g = gen(seed)
    q = randn((b, h, lq, d), torch.bfloat16, device, g)
    k = randn((b, h, lk, d), torch.bfloat16, device, g)
    v = randn((b, h, lk, d), torch.bfloat16, device, g)
    return q, k, v


def cross_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    o = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    return o.to(q.dtype)


# --------------------------------------------------------------------------- 3x3 average pool


@tc.kernel(static_shapes=True)
def avg_pool3x3_s2_nhwc(x: torch.Tensor) -> torch.Tensor:
    """avg_pool2d(kernel 3, stride 2, padding 1, count_include_pad=False) of x [N, H, W, C]
    bf16 (NHWC, contiguous): each output averages the in-bounds inputs of its 3x3 window (the
    padding is left out of the count), fp32 sums. Returns bf16 [N, OH, OW, C]."""
    n, h, w, c = x.size()
    oh = (h + 2 - 3) // 2 + 1
    ow = (w + 2 - 3) // 2 + 1
    out = torch.empty([n, oh, ow, c], dtype=x.dtype, device=x.device)
    for tn, toh, tow, tcc in tc.tile([n, oh, ow, c]):
        acc = tc.zeros([tn, toh, tow, tcc], dtype=torch.float32)
        cnt = tc.zeros([toh, tow], dtype=torch.float32)
        for dy in tc.static_range(3):
            for dx in tc.static_range(3):
                ih = toh.index * 2 - 1 + dy
                iw = tow.index * 2 - 1 + dx
                ok = ((ih >= 0) & (ih < h))[:, None] & ((iw >= 0) & (iw < w))[None, :]
                v = tc.load(
                    x,
                    [tn, ih[:, None], iw[None, :], tcc],
                    extra_mask=ok[None, :, :, None],
                )
                acc = acc + v.to(torch.float32)
                cnt = cnt + ok.to(torch.float32)
        out[tn, toh, tow, tcc] = (acc / cnt[None, :, :, None]).to(out.dtype)
    return out


def _avg_pool_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, H, W, C)``: bf16 activations in NHWC, normal."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def avg_pool3x3_s2_nhwc_reference(x: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.avg_pool2d(
        x.permute(0, 3, 1, 2).float(), 3, stride=2, padding=1, count_include_pad=False
    )
    return y.permute(0, 2, 3, 1).to(x.dtype).contiguous()


# --------------------------------------------------------------------------- var / mean over dim 0


@tc.kernel(static_shapes=True)
def var_mean_dim0(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.var_mean(x, dim=0) of x [B, S, D] bf16 (the unbiased variance, correction 1),
    statistics over the batch for each (s, d), fp32 math. Each program owns an (s, d) tile and
    reads the whole batch dim. Returns (var fp32 [S, D], mean fp32 [S, D])."""
    _, s, d = x.size()
    var = torch.empty([s, d], dtype=torch.float32, device=x.device)
    mean = torch.empty([s, d], dtype=torch.float32, device=x.device)
    for ts, td in tc.tile([s, d]):
        xt = x[:, ts, td].to(torch.float32)
        var[ts, td], mean[ts, td] = torch.var_mean(xt, dim=0)
    return var, mean


def _var_mean_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, S, D)``: bf16, 2 randn + 1 (a mean away from 0)."""
    x = randn(shape, torch.float32, device, gen(seed)) * 2 + 1
    return (x.to(torch.bfloat16),)


def var_mean_dim0_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    var, mean = torch.var_mean(x.float(), dim=0)
    return var, mean


# --------------------------------------------------------------------------- softmax over dim 1


@tc.kernel(static_shapes=True)
def softmax_dim1_3d(x: torch.Tensor) -> torch.Tensor:
    """torch.softmax(x, dim=1) of x [B, S, H] bf16 (e.g. attention pooling weights over the
    sequence for each head), fp32 math: a tile of (b, h) pairs with the whole S dim. Returns
    bf16 [B, S, H]."""
    b, _, h = x.size()
    out = torch.empty_like(x)
    for tb, th in tc.tile([b, h]):
        xt = x[tb, :, th].to(torch.float32)
        out[tb, :, th] = torch.softmax(xt, dim=1).to(out.dtype)
    return out


def _softmax_dim1_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, S, H)``: bf16 scores, 2 randn."""
    return ((randn(shape, torch.float32, device, gen(seed)) * 2).to(torch.bfloat16),)


def softmax_dim1_3d_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=1).to(x.dtype)


CASES = [
    one_kernel_case(
        "moe_token_positions",
        moe_token_positions,
        _moe_positions_inputs,
        moe_token_positions_reference,
        ((32768,), (262144,)),
        ((37,), (300,)),
        0.5,  # integers: any mismatch fails
    ),
    one_kernel_case(
        "cross_entropy_ignore_mean",
        cross_entropy_ignore_mean,
        _ce_ignore_inputs,
        cross_entropy_ignore_mean_reference,
        ((4096, 32000), (2048, 128256)),
        ((37, 100), (9, 1000)),
        1e-4,
    ),
    one_kernel_case(
        "layer_norm_bwd_dgamma_dbeta",
        layer_norm_bwd_dgamma_dbeta,
        _ln_dgamma_inputs,
        layer_norm_bwd_dgamma_dbeta_reference,
        ((64, 2048, 1024), (8, 4096, 4096)),
        ((2, 37, 50), (3, 5, 130)),
        1e-4,
    ),
    one_kernel_case(
        "int8_group_quant_g128",
        int8_group_quant,
        _group_quant_inputs,
        int8_group_quant_reference,
        ((16384, 8192), (4096, 14336)),
        ((7, 256), (2, 384)),
        1e-6,
    ),
    Case(
        name="lion_step_inplace",
        kernels=(lion_step,),
        make_inputs=_lion_inputs,
        reference=lion_step_reference,
        run=_run_lion,
        gpu_shapes=((67108864,), (16777216,)),
        cpu_shapes=((1000,), (77,)),
        atol=1e-6,
        timed_run=lambda k, inputs: k["lion_step"](*inputs),
        timed_reference=_lion_in_place,
    ),
    one_kernel_case(
        "cross_attention_lq_lk",
        cross_attention,
        _cross_attn_inputs,
        cross_attention_reference,
        ((8, 16, 1024, 4096, 128), (16, 8, 4096, 77, 64)),
        ((2, 2, 33, 13, 16), (1, 3, 20, 77, 32)),
        2e-2,
    ),
    one_kernel_case(
        "avg_pool3x3_s2_nhwc",
        avg_pool3x3_s2_nhwc,
        _avg_pool_inputs,
        avg_pool3x3_s2_nhwc_reference,
        ((64, 112, 112, 64), (32, 56, 56, 256)),
        ((2, 7, 9, 5), (1, 6, 5, 3)),
        1e-2,
    ),
    one_kernel_case(
        "var_mean_dim0",
        var_mean_dim0,
        _var_mean_inputs,
        var_mean_dim0_reference,
        ((64, 2048, 1024), (512, 256, 768)),
        ((5, 7, 9), (33, 3, 20)),
        1e-4,
    ),
    one_kernel_case(
        "softmax_dim1_3d",
        softmax_dim1_3d,
        _softmax_dim1_inputs,
        softmax_dim1_3d_reference,
        ((64, 2048, 1024), (16, 8192, 256)),
        ((2, 37, 5), (3, 9, 33)),
        1e-2,
    ),
]

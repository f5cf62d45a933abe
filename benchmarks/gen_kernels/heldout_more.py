"""More held-out kernels, written the way an ML engineer would after the heuristic was frozen: a
GroupNorm forward, Mamba's causal depthwise conv1d + SiLU, per-row int8 absmax quantization, a
decode GEMV (batch of a few rows), single-query decode attention, logsumexp over the vocab of a
``[B, T, V]`` tensor, masked mean pooling and a gated linear recurrence (RG-LRU / minGRU style).
Each comes with its eager reference (see :mod:`.case`).
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, MakeInputs, gen, one_kernel_case, randn

GROUPS = 32  # GroupNorm's group count, the Stable Diffusion UNet's
CONV_WIDTH = 4  # Mamba's conv1d kernel width


@tc.kernel(static_shapes=True)
def group_norm_fwd(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, num_groups: int, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x[N, C, HW]; stats per (n, group) over C/G channels x HW positions; affine per channel."""
    n, c, hw = x.size()
    g = tc.specialize(num_groups)
    cg = c // g
    xg = x.view(n, g, cg, hw)
    wg = w.view(g, cg)
    bg = b.view(g, cg)
    out = torch.empty_like(xg)
    mean = torch.empty([n, g], dtype=torch.float32, device=x.device)
    rstd = torch.empty([n, g], dtype=torch.float32, device=x.device)
    for tn, tg in tc.tile([n, g]):
        v = xg[tn, tg, :, :].to(torch.float32)
        mu = v.mean(dim=[2, 3])
        var = ((v - mu[:, :, None, None]) ** 2).mean(dim=[2, 3])
        r = torch.rsqrt(var + eps)
        y = (v - mu[:, :, None, None]) * r[:, :, None, None]
        y = y * wg[tg, :][None, :, :, None].to(torch.float32)
        y = y + bg[tg, :][None, :, :, None].to(torch.float32)
        out[tn, tg, :, :] = y.to(out.dtype)
        mean[tn, tg] = mu
        rstd[tn, tg] = r
    return out.view(n, c, hw), mean, rstd


def _x_channel_affine(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C, HW)``: activations and a per-channel weight and bias."""
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g) + 0.5
    w = (1 + 0.2 * randn(shape[1:2], torch.float32, device, g)).to(torch.bfloat16)
    return x, w, randn(shape[1:2], torch.bfloat16, device, g)


def group_norm_reference(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, num_groups: int = GROUPS, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    xf = x.float().view(x.shape[0], num_groups, -1)
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + eps)
    y = torch.nn.functional.group_norm(x.float(), num_groups, w.float(), b.float(), eps)
    return y.to(x.dtype), mean, rstd


@tc.kernel(static_shapes=True)
def causal_conv1d_silu(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x[B, D, T], w[D, W], bias[D]: out[b, d, t] = silu(bias[d] + sum_j w[d, j] x[b, d, t-W+1+j])."""
    bsz, d, t = x.size()
    width = tc.specialize(w.size(1))
    out = torch.empty_like(x)
    for tb, td, tt in tc.tile([bsz, d, t]):
        acc = tc.zeros([tb, td, tt], dtype=torch.float32)
        acc = acc + bias[td].to(torch.float32)[None, :, None]
        for j in tc.static_range(width):
            src = tt.index - (width - 1) + j
            xv = tc.load(x, [tb, td, src], extra_mask=(src >= 0)[None, None, :])
            acc = acc + xv.to(torch.float32) * w[td, j].to(torch.float32)[None, :, None]
        out[tb, td, tt] = torch.nn.functional.silu(acc).to(out.dtype)
    return out


def _conv_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, D, T)``: activations, a ``[D, CONV_WIDTH]`` depthwise filter and a bias."""
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g)
    w = randn((shape[1], CONV_WIDTH), torch.float32, device, g) / CONV_WIDTH**0.5
    return x, w.to(torch.bfloat16), randn(shape[1:2], torch.bfloat16, device, g)


def causal_conv1d_silu_reference(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    d, width = w.shape
    y = torch.nn.functional.conv1d(
        x.float(), w.float()[:, None, :], bias.float(), padding=width - 1, groups=d
    )
    return torch.nn.functional.silu(y[..., : x.shape[-1]]).to(x.dtype)


@tc.kernel(static_shapes=True)
def int8_row_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q[m, k] = round(x / s) in int8, s[m] = absmax(x[m]) / 127 (fp32)."""
    m, k = x.size()
    q = torch.empty([m, k], dtype=torch.int8, device=x.device)
    scale = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        v = x[tm, :].to(torch.float32)
        s = torch.amax(v.abs(), dim=-1).clamp(min=1e-8) / 127.0
        y = v / s[:, None]
        # torch.round is not in the op table: round half away from zero by hand
        r = torch.where(y >= 0, torch.floor(y + 0.5), torch.ceil(y - 0.5))
        q[tm, :] = r.clamp(-127, 127).to(torch.int8)
        scale[tm] = s
    return q, scale


def int8_row_quant_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    s = xf.abs().amax(-1).clamp(min=1e-8) / 127.0
    return torch.round(xf / s[:, None]).clamp(-127, 127).to(torch.int8), s


@tc.kernel(static_shapes=True)
def gemv_decode(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x[B, K] @ w[K, N] with B = 1..8 (decode), fp32 accumulate, out in x's dtype."""
    bsz, k = x.size()
    n = w.size(1)
    out = torch.empty([bsz, n], dtype=x.dtype, device=x.device)
    for tb, tn in tc.tile([bsz, n]):
        acc = tc.zeros([tb, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            xw = x[tb, tk].to(torch.float32)[:, :, None] * w[tk, tn].to(torch.float32)[None, :, :]
            acc = acc + torch.sum(xw, dim=1)
        out[tb, tn] = acc.to(out.dtype)
    return out


def _activations_weight(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, K, N)``: a few rows of activations and a ``[K, N]`` weight."""
    b, k, n = shape
    g = gen(seed)
    w = randn((k, n), torch.float32, device, g) / k**0.5
    return randn((b, k), torch.bfloat16, device, g), w.to(torch.bfloat16)


def gemv_decode_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.float() @ w.float()).to(x.dtype)


@tc.kernel(static_shapes=True)
def decode_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float
) -> torch.Tensor:
    """q[BH, D], k/v[BH, S, D]: out[bh] = softmax(q k^T * scale) v, online softmax over S chunks."""
    bh, s, d = k.size()
    out = torch.empty_like(q)
    for tbh in tc.tile(bh):
        qt = q[tbh, :].to(torch.float32) * sm_scale
        m_i = tc.full([tbh], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tbh], dtype=torch.float32)
        acc = tc.zeros([tbh, d], dtype=torch.float32)
        for ts in tc.tile(s):
            kt = k[tbh, ts, :].to(torch.float32)
            scores = torch.sum(qt[:, None, :] * kt, dim=-1)
            m_new = torch.maximum(m_i, torch.amax(scores, dim=-1))
            p = torch.exp(scores - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            pv = torch.sum(p[:, :, None] * v[tbh, ts, :].to(torch.float32), dim=1)
            acc = acc * alpha[:, None] + pv
            m_i = m_new
        out[tbh, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


def _query_kv_cache(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (BH, S, D)``: one query per (batch, head) and its ``[S, D]`` keys and values."""
    bh, s, d = shape
    g = gen(seed)
    q = randn((bh, d), torch.bfloat16, device, g)
    return q, randn(shape, torch.bfloat16, device, g), randn(shape, torch.bfloat16, device, g)


def decode_attention_inputs(
    shape: tuple[int, ...], device: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """The kernel's arguments, the scale included (for ``benchmarks.compare_configs``)."""
    q, k, v = _query_kv_cache(shape, device, 0)
    return q, k, v, shape[-1] ** -0.5


def decode_attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float | None = None
) -> torch.Tensor:
    scale = q.shape[-1] ** -0.5 if sm_scale is None else sm_scale
    scores = torch.einsum("bd,bsd->bs", q.float(), k.float()) * scale
    return torch.einsum("bs,bsd->bd", scores.softmax(-1), v.float()).to(q.dtype)


@tc.kernel(static_shapes=True)
def logsumexp_3d(x: torch.Tensor) -> torch.Tensor:
    """out[b, t] = logsumexp(x[b, t, :]) in fp32, vocab streamed in chunks with a running max."""
    bsz, t, vocab = x.size()
    out = torch.empty([bsz, t], dtype=torch.float32, device=x.device)
    for tb, tt in tc.tile([bsz, t]):
        m = tc.full([tb, tt], float("-inf"), dtype=torch.float32)
        acc = tc.zeros([tb, tt], dtype=torch.float32)
        for tv in tc.tile(vocab):
            xv = x[tb, tt, tv].to(torch.float32)
            m_new = torch.maximum(m, torch.amax(xv, dim=-1))
            acc = acc * torch.exp(m - m_new) + torch.sum(torch.exp(xv - m_new[:, :, None]), dim=-1)
            m = m_new
        out[tb, tt] = m + torch.log(acc)
    return out


def logsumexp_3d_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(x.float(), -1)


@tc.kernel(static_shapes=True)
def masked_mean_pool(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x[B, T, H], mask[B, T] (0/1): out[b, h] = mean of x[b, t, h] over t where mask (0 if none)."""
    bsz, t, h = x.size()
    out = torch.empty([bsz, h], dtype=x.dtype, device=x.device)
    for tb, th in tc.tile([bsz, h]):
        acc = tc.zeros([tb, th], dtype=torch.float32)
        cnt = tc.zeros([tb], dtype=torch.float32)
        for tt in tc.tile(t):
            mk = mask[tb, tt].to(torch.float32)
            acc = acc + torch.sum(x[tb, tt, th].to(torch.float32) * mk[:, :, None], dim=1)
            cnt = cnt + torch.sum(mk, dim=1)
        out[tb, th] = (acc / cnt.clamp(min=1.0)[:, None]).to(out.dtype)
    return out


def _x_attention_mask(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, H)``: hidden states and an int64 0/1 attention mask (as tokenizers give
    it), about 60% ones, the last sequence all padding."""
    b, t, h = shape
    g = gen(seed)
    x = randn(shape, torch.bfloat16, device, g)
    mask = (torch.rand((b, t), generator=g) > 0.4).to(torch.int64)
    mask[-1] = 0
    return x, mask.to(device)


def masked_mean_pool_reference(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mk = mask.float()
    return ((x.float() * mk[:, :, None]).sum(1) / mk.sum(1).clamp(min=1)[:, None]).to(x.dtype)


@tc.kernel(static_shapes=True)
def linear_recurrence(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """h[b, t, d] = a[b, t, d] * h[b, t-1, d] + b[b, t, d], h[-1] = 0; sequential over t."""
    bsz, t, d = a.size()
    out = torch.empty_like(b)
    for tb, td in tc.tile([bsz, d]):
        h = tc.zeros([tb, td], dtype=torch.float32)
        for i in tc.grid(t):
            h = a[tb, i, td].to(torch.float32) * h + b[tb, i, td].to(torch.float32)
            out[tb, i, td] = h.to(out.dtype)
    return out


def _gates_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, D)``: decay gates in [0, 1) and inputs."""
    g = gen(seed)
    a = torch.rand(shape, generator=g).to(device=device, dtype=torch.bfloat16)
    return a, randn(shape, torch.bfloat16, device, g)


def linear_recurrence_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A log-depth (Hillis-Steele) scan over t: after the step of stride s, ``(af, h)`` at t maps
    the state at t - s to the state at t. A Python loop over t would take torch.compile minutes."""
    af, h = a.float(), b.float()
    step = 1
    while step < a.shape[1]:
        h = torch.cat([h[:, :step], h[:, step:] + af[:, step:] * h[:, :-step]], 1)
        af = torch.cat([af[:, :step], af[:, step:] * af[:, :-step]], 1)
        step *= 2
    return h.to(b.dtype)


def _bf16(scale: float = 1.0) -> MakeInputs:
    return lambda shape, device, seed: (randn(shape, torch.bfloat16, device, gen(seed)) * scale,)


CASES = [
    Case(
        name="group_norm_fwd",
        kernels=(group_norm_fwd,),
        make_inputs=_x_channel_affine,
        reference=group_norm_reference,
        run=lambda k, inp: k["group_norm_fwd"](*inp, GROUPS),
        gpu_shapes=((16, 512, 4096),),
        cpu_shapes=((3, 96, 37),),
        atol=6.25e-2,
    ),
    one_kernel_case(
        "causal_conv1d_silu",
        causal_conv1d_silu,
        _conv_inputs,
        causal_conv1d_silu_reference,
        ((4, 8192, 4096),),
        ((2, 19, 301),),
        6.25e-2,
    ),
    # atol 1: where x / s is exactly a half the kernel rounds away from zero, torch.round to even
    one_kernel_case(
        "int8_row_quant",
        int8_row_quant,
        _bf16(3.0),
        int8_row_quant_reference,
        ((4096, 8192),),
        ((37, 300),),
        1.0,
    ),
    one_kernel_case(
        "gemv_decode",
        gemv_decode,
        _activations_weight,
        gemv_decode_reference,
        ((4, 8192, 8192),),
        ((3, 300, 171),),
        6.25e-2,
    ),
    Case(
        name="decode_attention",
        kernels=(decode_attention,),
        make_inputs=_query_kv_cache,
        reference=decode_attention_reference,
        run=lambda k, inp: k["decode_attention"](*inp, inp[0].shape[-1] ** -0.5),
        gpu_shapes=((256, 8192, 128),),
        cpu_shapes=((7, 301, 64),),
        atol=2e-2,
    ),
    one_kernel_case(
        "logsumexp_3d",
        logsumexp_3d,
        _bf16(4.0),
        logsumexp_3d_reference,
        ((8, 512, 128256),),
        ((3, 13, 1001),),
        2e-3,
    ),
    one_kernel_case(
        "masked_mean_pool",
        masked_mean_pool,
        _x_attention_mask,
        masked_mean_pool_reference,
        ((64, 512, 4096),),
        ((5, 67, 300),),
        2e-2,
    ),
    one_kernel_case(
        "linear_recurrence",
        linear_recurrence,
        _gates_inputs,
        linear_recurrence_reference,
        ((8, 4096, 4096),),
        ((3, 41, 300),),
        0.125,
    ),
]

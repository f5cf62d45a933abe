"""Held-out kernels written from the docs only, session 34 (see :mod:`.heldout_rows` for why
held-out kernels exist): recurrent cells, diffusion sampling, state-space decoding, sorting,
volumes, long-context rotary embeddings, small linear algebra and stochastic quantization. The
pointwise half of an LSTM cell (gate pre-activations from the GEMMs, bias, c and h);
a DDIM sampler step with eta > 0 and sample clipping where each sample gathers its own
alpha_t / alpha_prev from the schedule table; Mamba's causal_conv1d_update for one decoded
token (the rolling conv state shifted in place, then a width-4 conv and SiLU); a bitonic sort
of short rows in registers carrying the original indices; trilinear sampling of a
channels-last feature volume (F.grid_sample on 5-D input, zeros padding); YaRN-scaled RoPE
with inv_freq, its correction ramp and attention factor computed in the kernel; batched 3 x 3
inverses and determinants by cofactors; and per-token int8 quantization with stochastic
rounding from a caller-provided uniform tensor. Each comes with its eager reference (see
:mod:`.case`).

Notes: all eight compiled and matched at every CPU shape on the first try (seeds 0 and 1; with
the autotuner, with ``TILECRAFT_NO_AUTOTUNE=1``, in ref mode, and with explicit
``tc.Config(block_sizes=...)`` of 1 to 16 a tile dim). Max errors: 0 for the conv update (out
and state), the sort (values and indices), the trilinear samples and the int8 codes and scales;
h 0 and c 2.4e-7 for the LSTM; 2.4e-7 for DDIM; one bf16 ulp (<= 0.016) for YaRN (angles up to
1.2e5 rad); 2.6e-6 on the inverses and 9.5e-6 on the determinants (|det| < 100). More natural
variants also worked (/work/fuzz34c/variants.py): the LSTM on whole rows with constant slices
``gt[:, hd:2 * hd]`` of a computed tile (H = 50, not a power of two) and a list comprehension
over the four gates, DDIM with one sample a program, ``if tp >= 0:`` on a loaded scalar and
``** 0.5`` everywhere, the conv shift as ``F.pad(state[:, :, 1:], (0, 1))``, the bitonic network
under Python ``while`` loops, points as ``pts[:, 0]`` of a loaded [BP, 3] tile, HF's ``torch.cat
([freqs, freqs])`` / rotate_half, the matrices loaded whole and indexed ``mt[:, 1, 2]``.

Bugs found while probing the same domains, none needed by the kernels here, all fixed the
same session (tests/test_dtype_semantics.py): (1) ``torch.div(x, y, rounding_mode="trunc")``
on float tiles ignored ``rounding_mode`` in compiled code (ref mode truncated): the autotuner
rejected every candidate and an explicit config returned x / y. (2) A whole dim's size as a
number, ``xt.sum(-1) / xt.shape[-1]``, failed with "cannot use a Sym as a device value". (3)
``torch.arange(n)`` in device code failed with "cannot use a Tensor as a device value" (with
``device=x.device``: "host tensor 'x' has no device-side attribute or method 'device'").
Not bugs (unlisted ops, documented): ``torch.stack`` of 3 tiles, ``torch.cross``,
``Tensor.new_zeros``, in-place ``mul_`` / ``add_`` / ``clamp_``,
``F.leaky_relu``, ``F.elu``, ``F.logsigmoid``. The int8 case's atol of one code leaves its
scales unchecked by the case itself (they matched exactly here).
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, copy_state, gen, one_kernel_case, randn

F32 = torch.float32
BF16 = torch.bfloat16
I64 = torch.int64

# ddim_step: DDPM's linear beta schedule (Stable Diffusion's scaled-linear betas) and DDIM's eta
DDIM_STEPS = 1000
DDIM_ETA = 0.5
# yarn_rope: Qwen2-style YaRN (factor 4 over a 32768-token original context)
YARN_BASE = 1000000.0
YARN_FACTOR = 4.0
YARN_ORIG_MAX_POS = 32768
YARN_BETA_FAST = 32.0
YARN_BETA_SLOW = 1.0


# --------------------------------------------------------------------------- LSTM cell pointwise


@tc.kernel(static_shapes=True)
def lstm_cell_pointwise(
    gates: torch.Tensor, bias: torch.Tensor, c_prev: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The pointwise half of an LSTM cell (cuDNN / torch's fused lstm_cell): gates [B, 4H] bf16
    (x W_ih^T + h W_hh^T, already computed by two GEMMs, in torch's (i, f, g, o) order), bias
    [4H] fp32 (b_ih + b_hh), c_prev [B, H] fp32. c = sigmoid(f) c_prev + sigmoid(i) tanh(g),
    h = sigmoid(o) tanh(c); returns h [B, H] bf16 and c [B, H] fp32. Each program takes a block
    of the batch and a block of hidden units, all four gates of them."""
    b, h4 = gates.size()
    hd = h4 // 4
    g4 = gates.view(b, 4, hd)
    b4 = bias.view(4, hd)
    h_out = torch.empty([b, hd], dtype=gates.dtype, device=gates.device)
    c_out = torch.empty_like(c_prev)
    for tb, th in tc.tile([b, hd]):
        i = torch.sigmoid(g4[tb, 0, th].float() + b4[0, th][None, :])
        f = torch.sigmoid(g4[tb, 1, th].float() + b4[1, th][None, :])
        g = torch.tanh(g4[tb, 2, th].float() + b4[2, th][None, :])
        o = torch.sigmoid(g4[tb, 3, th].float() + b4[3, th][None, :])
        c = f * c_prev[tb, th] + i * g
        c_out[tb, th] = c
        h_out[tb, th] = (o * torch.tanh(c)).to(h_out.dtype)
    return h_out, c_out


def _lstm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H)``: gate pre-activations bf16 randn times 2, bias fp32 randn times 0.1,
    c_prev fp32 randn."""
    b, hd = shape
    g = gen(seed)
    gates = randn((b, 4 * hd), BF16, device, g) * 2
    bias = randn((4 * hd,), F32, device, g) * 0.1
    return gates, bias, randn((b, hd), F32, device, g)


def lstm_cell_pointwise_reference(
    gates: torch.Tensor, bias: torch.Tensor, c_prev: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    i, f, g, o = (gates.float() + bias).chunk(4, dim=1)
    c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h.to(gates.dtype), c


# --------------------------------------------------------------------------- DDIM sampler step


@tc.kernel(static_shapes=True)
def ddim_step(
    sample: torch.Tensor,
    eps: torch.Tensor,
    timesteps: torch.Tensor,
    prev_timesteps: torch.Tensor,
    alphas_cumprod: torch.Tensor,
    noise: torch.Tensor,
    eta: float = DDIM_ETA,
) -> torch.Tensor:
    """One DDIM step (diffusers' DDIMScheduler.step with clip_sample and eta > 0) where each
    sample of the batch sits at its own timestep: sample, eps (the UNet's epsilon prediction),
    noise [B, C, H, W] fp32, timesteps, prev_timesteps [B] int64 (prev < 0: the last step,
    alpha_prev = 1), alphas_cumprod [T] fp32. x0 = (x - sqrt(1 - a_t) eps) / sqrt(a_t) clipped
    to [-1, 1], eps recomputed from the clipped x0, sigma = eta sqrt((1 - a_prev) / (1 - a_t))
    sqrt(1 - a_t / a_prev), x_prev = sqrt(a_prev) x0 + sqrt(1 - a_prev - sigma^2) eps + sigma
    noise. Each program takes a block of samples and a block of their elements."""
    b = sample.size(0)
    n = sample.numel() // b
    x = sample.view(b, n)
    e = eps.view(b, n)
    z = noise.view(b, n)
    out = torch.empty_like(x)
    for tb, tn in tc.tile([b, n]):
        a_t = alphas_cumprod[timesteps[tb]]
        tp = prev_timesteps[tb]
        a_prev = torch.where(tp >= 0, alphas_cumprod[torch.clamp(tp, min=0)], 1.0)
        beta_t = 1.0 - a_t
        sigma = eta * torch.sqrt((1.0 - a_prev) / beta_t) * torch.sqrt(1.0 - a_t / a_prev)
        xt = x[tb, tn]
        x0 = (xt - torch.sqrt(beta_t)[:, None] * e[tb, tn]) / torch.sqrt(a_t)[:, None]
        x0 = torch.clamp(x0, -1.0, 1.0)
        eps_c = (xt - torch.sqrt(a_t)[:, None] * x0) / torch.sqrt(beta_t)[:, None]
        direction = torch.sqrt(1.0 - a_prev - sigma**2)[:, None] * eps_c
        prev = torch.sqrt(a_prev)[:, None] * x0 + direction + sigma[:, None] * z[tb, tn]
        out[tb, tn] = prev
    return out.view_as(sample)


def _ddim_schedule() -> torch.Tensor:
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, DDIM_STEPS, dtype=torch.float64) ** 2
    return torch.cumprod(1.0 - betas, dim=0).to(F32)


def _ddim_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, H, W)``: latents randn, eps randn, noise randn; each sample at its own
    step of a 50-step schedule (timestep t, previous t - 20; the first sample at the last step,
    prev -20), Stable Diffusion's alphas_cumprod."""
    b, c, h, w = shape
    g = gen(seed)
    sample = randn((b, c, h, w), F32, device, g)
    eps = randn((b, c, h, w), F32, device, g)
    noise = randn((b, c, h, w), F32, device, g)
    if device == "meta":
        ts = torch.empty((b,), dtype=I64, device=device)
        return sample, eps, ts, ts.clone(), torch.empty((DDIM_STEPS,), device=device), noise
    steps = torch.randint(0, 50, (b,), generator=g)
    steps[0] = 0
    ts = steps * 20 + 1
    return sample, eps, ts.to(device), (ts - 20).to(device), _ddim_schedule().to(device), noise


def ddim_step_reference(
    sample: torch.Tensor,
    eps: torch.Tensor,
    timesteps: torch.Tensor,
    prev_timesteps: torch.Tensor,
    alphas_cumprod: torch.Tensor,
    noise: torch.Tensor,
    eta: float = DDIM_ETA,
) -> torch.Tensor:
    """diffusers' DDIMScheduler.step, batched over per-sample timesteps."""
    shape = (-1,) + (1,) * (sample.dim() - 1)
    a_t = alphas_cumprod[timesteps].view(shape)
    a_prev = torch.where(
        prev_timesteps >= 0, alphas_cumprod[prev_timesteps.clamp(min=0)], 1.0
    ).view(shape)
    beta_t = 1 - a_t
    x0 = ((sample - beta_t**0.5 * eps) / a_t**0.5).clamp(-1, 1)
    eps_c = (sample - a_t**0.5 * x0) / beta_t**0.5
    variance = (1 - a_prev) / beta_t * (1 - a_t / a_prev)
    std = eta * variance**0.5
    direction = (1 - a_prev - std**2) ** 0.5 * eps_c
    return a_prev**0.5 * x0 + direction + std * noise


# --------------------------------------------------------------------------- causal conv1d update


@tc.kernel(static_shapes=True)
def causal_conv1d_update(
    x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba's causal_conv1d_update for one decoded token, with SiLU: x [B, D] bf16 (the new
    token's channels), conv_state [B, D, W] bf16 (the last W inputs of each channel, oldest
    first), weight [D, W] fp32, bias [D] fp32. The state shifts left by one with x appended,
    in place; out = silu(sum_k state[:, :, k] weight[:, k] + bias) [B, D] bf16. Returns out and
    the state. Each program takes a block of sequences and a block of channels."""
    b, d, w = conv_state.size()
    out = torch.empty_like(x)
    for tb, td in tc.tile([b, d]):
        state = conv_state[tb, td, :]
        shifted = torch.roll(state, shifts=-1, dims=2)
        last = tc.arange(w) == w - 1
        state = torch.where(last[None, None, :], x[tb, td][:, :, None], shifted)
        conv_state[tb, td, :] = state
        acc = torch.sum(state.float() * weight[td, :][None, :, :], dim=2) + bias[td][None, :]
        out[tb, td] = torch.nn.functional.silu(acc).to(out.dtype)
    return out, conv_state


def _conv_update_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, D, W)``: x and the state bf16 randn, weight fp32 randn / sqrt(W), bias fp32
    randn times 0.1."""
    b, d, w = shape
    g = gen(seed)
    x = randn((b, d), BF16, device, g)
    state = randn((b, d, w), BF16, device, g)
    weight = randn((d, w), F32, device, g) / math.sqrt(w)
    return x, state, weight, randn((d,), F32, device, g) * 0.1


def causal_conv1d_update_reference(
    x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """causal_conv1d's causal_conv1d_update_ref for seqlen 1 (on a copy of the state)."""
    state = torch.cat([conv_state[:, :, 1:], x[:, :, None]], dim=-1)
    out = torch.nn.functional.silu((state.float() * weight).sum(-1) + bias)
    return out.to(x.dtype), state


def _conv_update_eager(
    x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same update with the state rolled in place, as Mamba's decode step runs it eagerly."""
    conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))
    conv_state[:, :, -1] = x
    out = torch.nn.functional.silu((conv_state.float() * weight).sum(-1) + bias)
    return out.to(x.dtype), conv_state


# --------------------------------------------------------------------------- bitonic sort of rows


@tc.kernel(static_shapes=True)
def bitonic_sort_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorts each short row ascending with a bitonic network in registers: x [M, N] fp32 with N
    a power of two (32 to 128: per-token expert scores, a beam's candidates). Each stage
    compares element i with its partner i ^ j (a gather along the row) and keeps the min or the
    max; the original positions travel with the values. Returns the sorted values [M, N] fp32
    and their indices [M, N] int64 (torch.sort's). Each program takes a block of rows."""
    m, n = x.size()
    n = tc.specialize(n)
    log_n = int(math.log2(n))
    values = torch.empty_like(x)
    indices = torch.empty([m, n], dtype=I64, device=x.device)
    for tm in tc.tile(m):
        v = x[tm, :]
        pos = tc.arange(n)
        idx = pos[None, :].expand_as(v).to(I64)
        for stage in tc.static_range(1, log_n + 1):
            k = 1 << stage
            for sub in tc.static_range(stage):
                j = k >> (sub + 1)
                partner = (pos ^ j)[None, :].expand_as(v)
                pv = torch.gather(v, 1, partner)
                pi = torch.gather(idx, 1, partner)
                ascending = ((pos & k) == 0)[None, :]
                lower = ((pos & j) == 0)[None, :]
                keep_min = lower == ascending
                swap = torch.where(keep_min, pv < v, pv > v)
                v = torch.where(swap, pv, v)
                idx = torch.where(swap, pi, idx)
        values[tm, :] = v
        indices[tm, :] = idx
    return values, indices


def _sort_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: fp32 normal scores without ties in a row (a bitonic network is not
    stable: randn's fp32 rows of 64 tie in ~50 of 262144 rows, whose indices then differ from
    torch.sort's — max_err 53 on the H200), evenly spaced values in [-3, 3] placed by a random permutation."""
    if device == "meta":
        return (randn(shape, F32, device, gen(seed)),)
    ranks = torch.rand(shape, generator=gen(seed)).argsort(dim=1)
    ladder = torch.linspace(-3.0, 3.0, shape[1])  # distinct in fp32
    return (ladder[ranks].to(device),)


def bitonic_sort_rows_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.sort(x, dim=1)
    return values, indices


# --------------------------------------------------------------------------- trilinear sampling


@tc.kernel(static_shapes=True)
def trilinear_sample_ndhwc(volume: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """F.grid_sample on a 5-D feature volume (mode 'bilinear', i.e. trilinear; padding 'zeros';
    align_corners=False), channels last as a NeRF-style feature grid keeps it: volume [B, D, H,
    W, C] fp32, points [B, P, 3] fp32 (x, y, z) in [-1, 1] (some a little outside). out [B, P, C]
    fp32: the eight corner voxels around each point weighted by their trilinear weights, a
    corner outside the volume counting as 0. Each program takes one volume, a block of points
    and a block of channels."""
    b, d, h, w, c = volume.size()
    p = points.size(1)
    out = torch.empty([b, p, c], dtype=volume.dtype, device=volume.device)
    for tb, tp, tch in tc.tile([b, p, c], block_size=[1, None, None]):
        ix = ((points[tb.begin, tp, 0] + 1.0) * w - 1.0) * 0.5
        iy = ((points[tb.begin, tp, 1] + 1.0) * h - 1.0) * 0.5
        iz = ((points[tb.begin, tp, 2] + 1.0) * d - 1.0) * 0.5
        x0, y0, z0 = torch.floor(ix), torch.floor(iy), torch.floor(iz)
        fx, fy, fz = ix - x0, iy - y0, iz - z0
        x0, y0, z0 = x0.to(torch.int32), y0.to(torch.int32), z0.to(torch.int32)
        acc = tc.zeros([tp, tch], dtype=F32)
        for dz in tc.static_range(2):
            for dy in tc.static_range(2):
                for dx in tc.static_range(2):
                    xi, yi, zi = x0 + dx, y0 + dy, z0 + dz
                    wgt = (fx if dx else 1.0 - fx) * (fy if dy else 1.0 - fy)
                    wgt = wgt * (fz if dz else 1.0 - fz)
                    inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h) & (zi >= 0) & (zi < d)
                    wgt = torch.where(inside, wgt, 0.0)
                    xc = torch.clamp(xi, 0, w - 1)
                    yc = torch.clamp(yi, 0, h - 1)
                    zc = torch.clamp(zi, 0, d - 1)
                    acc = acc + wgt[:, None] * volume[tb.begin, zc, yc, xc, tch]
        out[tb.begin, tp, tch] = acc
    return out


def _trilinear_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, D, H, W, C, P)``: volume fp32 randn, points uniform in [-1.1, 1.1]^3."""
    b, d, h, w, c, p = shape
    g = gen(seed)
    volume = randn((b, d, h, w, c), F32, device, g)
    if device == "meta":
        return volume, torch.empty((b, p, 3), dtype=F32, device=device)
    points = torch.rand((b, p, 3), generator=g) * 2.2 - 1.1
    return volume, points.to(device)


def trilinear_sample_ndhwc_reference(volume: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    b, _, _, _, c = volume.shape
    p = points.shape[1]
    grid = points.view(b, 1, 1, p, 3)
    out = torch.nn.functional.grid_sample(
        volume.permute(0, 4, 1, 2, 3), grid, mode="bilinear", align_corners=False
    )
    return out.view(b, c, p).transpose(1, 2)


# --------------------------------------------------------------------------- YaRN rotary embedding


def _yarn_correction_dim(rotations: float, dim: int) -> float:
    return (dim * math.log(YARN_ORIG_MAX_POS / (rotations * 2 * math.pi))) / (
        2 * math.log(YARN_BASE)
    )


def _yarn_range(dim: int) -> tuple[float, float]:
    """transformers' _compute_yarn_parameters: the dims whose wavelengths lie between the fast
    and slow boundaries get interpolated partly (a linear ramp)."""
    low = max(math.floor(_yarn_correction_dim(YARN_BETA_FAST, dim)), 0)
    high = min(math.ceil(_yarn_correction_dim(YARN_BETA_SLOW, dim)), dim - 1)
    if low == high:
        high += 0.001
    return float(low), float(high)


@tc.kernel(static_shapes=True)
def yarn_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """YaRN-scaled rotary embedding (NeoX halves) with inv_freq computed in the kernel: x [T, H,
    D] bf16 (queries or keys of T packed tokens), positions [T] int64. inv_freq blends the
    extrapolated 1 / base^(2i / D) and the interpolated 1 / (factor base^(2i / D)) by a ramp
    over i between the YaRN correction range; cos and sin are scaled by the attention factor
    0.1 ln(factor) + 1. out [T, H, D] bf16. Each program takes a block of tokens and a block of
    heads."""
    t, h, d = x.size()
    d = tc.specialize(d)
    half = d // 2
    low, high = _yarn_range(d)
    mscale = 0.1 * math.log(YARN_FACTOR) + 1.0
    out = torch.empty_like(x)
    for tt, th in tc.tile([t, h]):
        pos_freqs = YARN_BASE ** (tc.arange(0, d, 2).to(F32) / d)
        inv_extrapolation = 1.0 / pos_freqs
        inv_interpolation = 1.0 / (YARN_FACTOR * pos_freqs)
        ramp = torch.clamp((tc.arange(half).to(F32) - low) / (high - low), 0.0, 1.0)
        extrapolation_factor = 1.0 - ramp
        inv_freq = (
            inv_interpolation * (1.0 - extrapolation_factor)
            + inv_extrapolation * extrapolation_factor
        )
        angle = positions[tt].to(F32)[:, None] * inv_freq[None, :]
        cos = (torch.cos(angle) * mscale)[:, None, :]
        sin = (torch.sin(angle) * mscale)[:, None, :]
        x1 = x[tt, th, :half].to(F32)
        x2 = x[tt, th, half:].to(F32)
        out[tt, th, :half] = (x1 * cos - x2 * sin).to(out.dtype)
        out[tt, th, half:] = (x2 * cos + x1 * sin).to(out.dtype)
    return out


def _yarn_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, H, D)``: x bf16 randn; positions of packed sequences of random lengths
    (each from 0), the first one starting near the extended context's end (up to 4 x 32768)."""
    t, h, d = shape
    g = gen(seed)
    x = randn((t, h, d), BF16, device, g)
    if device == "meta":
        return x, torch.empty((t,), dtype=I64, device=device)
    parts: list[torch.Tensor] = []
    left = t
    start = 120000
    while left > 0:
        length = min(left, int(torch.randint(1, max(2, t // 3), (1,), generator=g)))
        parts.append(torch.arange(start, start + length))
        left -= length
        start = 0
    return x, torch.cat(parts).to(device)


def yarn_rope_reference(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """transformers' YaRN inv_freq and attention factor, then apply_rotary_pos_emb."""
    d = x.shape[-1]
    low, high = _yarn_range(d)
    pos_freqs = YARN_BASE ** (torch.arange(0, d, 2, device=x.device).float() / d)
    inv_extrapolation = 1.0 / pos_freqs
    inv_interpolation = 1.0 / (YARN_FACTOR * pos_freqs)
    ramp = torch.clamp((torch.arange(d // 2, device=x.device).float() - low) / (high - low), 0, 1)
    extra = 1 - ramp
    inv_freq = inv_interpolation * (1 - extra) + inv_extrapolation * extra
    mscale = 0.1 * math.log(YARN_FACTOR) + 1.0
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)[:, None, :]
    cos, sin = emb.cos() * mscale, emb.sin() * mscale
    xf = x.float()
    x1, x2 = xf.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (xf * cos + rotated * sin).to(x.dtype)


# --------------------------------------------------------------------------- 3 x 3 inverse


@tc.kernel(static_shapes=True)
def inverse_3x3(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverts a batch of 3 x 3 matrices by cofactors (camera intrinsics, rotation-scale
    Jacobians, per-pixel color transforms): a [N, 3, 3] fp32. det by expansion along the first
    row, inverse = adjugate / det. Returns the inverses [N, 3, 3] fp32 and the determinants [N]
    fp32. Each program takes a block of matrices."""
    n = a.size(0)
    inv = torch.empty_like(a)
    det_out = torch.empty([n], dtype=a.dtype, device=a.device)
    for tn in tc.tile(n):
        a00, a01, a02 = a[tn, 0, 0], a[tn, 0, 1], a[tn, 0, 2]
        a10, a11, a12 = a[tn, 1, 0], a[tn, 1, 1], a[tn, 1, 2]
        a20, a21, a22 = a[tn, 2, 0], a[tn, 2, 1], a[tn, 2, 2]
        c00 = a11 * a22 - a12 * a21
        c01 = a12 * a20 - a10 * a22
        c02 = a10 * a21 - a11 * a20
        det = a00 * c00 + a01 * c01 + a02 * c02
        r = 1.0 / det
        inv[tn, 0, 0] = c00 * r
        inv[tn, 1, 0] = c01 * r
        inv[tn, 2, 0] = c02 * r
        inv[tn, 0, 1] = (a02 * a21 - a01 * a22) * r
        inv[tn, 1, 1] = (a00 * a22 - a02 * a20) * r
        inv[tn, 2, 1] = (a01 * a20 - a00 * a21) * r
        inv[tn, 0, 2] = (a01 * a12 - a02 * a11) * r
        inv[tn, 1, 2] = (a02 * a10 - a00 * a12) * r
        inv[tn, 2, 2] = (a00 * a11 - a01 * a10) * r
        det_out[tn] = det
    return inv, det_out


def _inverse_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: randn matrices plus 3 I (well conditioned: det mostly 10 to 50)."""
    (n,) = shape
    a = randn((n, 3, 3), F32, device, gen(seed))
    return (a + 3.0 * torch.eye(3, device=device),)


def inverse_3x3_reference(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.linalg.inv(a), torch.linalg.det(a)


# --------------------------------------------------------------------------- stochastic int8 quant


@tc.kernel(static_shapes=True)
def int8_stochastic_quant(
    x: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token dynamic int8 quantization with stochastic rounding (low-precision training's
    activation / gradient compression): x [T, D] bf16, noise [T, D] fp32 uniform in [0, 1)
    (drawn by the caller, so the rounding is reproducible). scale = amax |x| / 127 per row,
    q = clamp(floor(x / scale + noise), -128, 127) int8. Returns q [T, D] int8 and the scales
    [T] fp32. Each program takes a block of rows, whole."""
    t, d = x.size()
    q = torch.empty([t, d], dtype=torch.int8, device=x.device)
    scales = torch.empty([t], dtype=F32, device=x.device)
    for tt in tc.tile(t):
        xt = x[tt, :].float()
        amax = torch.amax(torch.abs(xt), dim=1)
        scale = torch.clamp(amax, min=1e-8) / 127.0
        qt = torch.floor(xt / scale[:, None] + noise[tt, :])
        q[tt, :] = torch.clamp(qt, -128, 127).to(torch.int8)
        scales[tt] = scale
    return q, scales


def _sq_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, D)``: x bf16 randn, noise fp32 uniform in [0, 1)."""
    t, d = shape
    g = gen(seed)
    x = randn((t, d), BF16, device, g)
    if device == "meta":
        return x, torch.empty((t, d), dtype=F32, device=device)
    return x, torch.rand((t, d), generator=g).to(device)


def int8_stochastic_quant_reference(
    x: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    scale = xf.abs().amax(dim=1).clamp(min=1e-8) / 127.0
    q = torch.floor(xf / scale[:, None] + noise).clamp(-128, 127).to(torch.int8)
    return q, scale


CASES: list[Case] = [
    one_kernel_case(
        "lstm_cell_pointwise",
        lstm_cell_pointwise,
        _lstm_inputs,
        lstm_cell_pointwise_reference,
        ((2048, 4096),),  # a 4096-unit LSTM layer at batch 2048: 67 MB of bf16 gates
        ((37, 50), (1, 7)),
        2.0**-7,  # h bf16 |h| < 1: one ulp (tanh as 2 sigmoid(2x) - 1); c fp32 a few ulps
    ),
    one_kernel_case(
        "ddim_step",
        ddim_step,
        _ddim_inputs,
        ddim_step_reference,
        ((32, 16, 128, 128),),  # 32 SD3 latents at 1024 px: 34 MB each of four fp32 tensors
        ((3, 4, 5, 7), (1, 1, 3, 1)),
        1e-4,  # fp32, |x| < 8, 1 / sqrt(a_t) up to 15: a few ulps of the rescaled x0
    ),
    Case(
        name="causal_conv1d_update",
        kernels=(causal_conv1d_update,),
        make_inputs=_conv_update_inputs,
        reference=causal_conv1d_update_reference,
        run=copy_state("causal_conv1d_update", (1,)),
        # Mamba-2.8B's d_inner 5120 at batch 1024, width 4: 42 MB of bf16 state each way
        gpu_shapes=((1024, 5120, 4),),
        cpu_shapes=((3, 37, 4), (1, 5, 4)),
        atol=2.0**-6,  # bf16 out |y| < 4: one ulp of a 4-term fp32 sum; the state is exact
        timed_run=lambda k, inp: k["causal_conv1d_update"](*inp),
        timed_reference=_conv_update_eager,
    ),
    one_kernel_case(
        "bitonic_sort_rows",
        bitonic_sort_rows,
        _sort_inputs,
        bitonic_sort_rows_reference,
        ((262144, 64),),  # 262144 rows of 64 scores: 67 MB in, 201 MB out
        ((37, 32), (1, 64)),
        1e-6,  # a permutation: values and indices exact
    ),
    one_kernel_case(
        "trilinear_sample_ndhwc",
        trilinear_sample_ndhwc,
        _trilinear_inputs,
        trilinear_sample_ndhwc_reference,
        # a 128^3 x 8 fp32 feature volume (67 MB) sampled at 1M ray points: 34 MB out
        ((1, 128, 128, 128, 8, 1048576),),
        ((2, 5, 3, 7, 3, 37), (1, 1, 2, 2, 1, 1)),
        1e-5,  # fp32, |out| < 4: eight products summed in another order
    ),
    one_kernel_case(
        "yarn_rope",
        yarn_rope,
        _yarn_inputs,
        yarn_rope_reference,
        ((32768, 28, 128),),  # Qwen2-7B queries of a 32k-token prefill: 235 MB each way
        ((37, 3, 16), (1, 1, 64)),
        2.0**-5,  # bf16 out, |y| < 8: one ulp where an angle near 1e5 rounds differently
    ),
    one_kernel_case(
        "inverse_3x3",
        inverse_3x3,
        _inverse_inputs,
        inverse_3x3_reference,
        ((4194304,), (1000003,)),  # 4M matrices: 151 MB in, 151 MB out
        ((37,), (1,)),
        5e-5,  # fp32, |inv| < 1, |det| < 100 (ulp 8e-6): cofactors vs LU in another order
    ),
    one_kernel_case(
        "int8_stochastic_quant",
        int8_stochastic_quant,
        _sq_inputs,
        int8_stochastic_quant_reference,
        ((16384, 4096),),  # 16k tokens of hidden 4096: 134 MB of bf16 x, 268 MB of noise
        ((37, 50), (1, 7)),
        1.0,  # int8 codes: floor of x / scale + u may land one code off where Triton's
        # division differs from torch's by an ulp at an integer; the scales are exact
    ),
]

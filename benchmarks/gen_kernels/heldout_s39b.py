"""Held-out kernels written from the docs only, session 39b (see :mod:`.heldout_rows` for why
held-out kernels exist): training backwards with autograd, and science / audio / graphics /
retrieval kernels. BigVGAN's Snake activation (x + sin^2(alpha x) / alpha, per channel) forward
and backward (dx, and dalpha from per-(batch, channel) partials summed on the host), wired with
``register_backward``; a per-row polynomial y = sum_k c[r, k] x^k by Horner's rule with its
backward (dx by the derivative's Horner, dcoef from a [rows, K] accumulator of dy * x^k), also
wired for autograd; weight normalization w = g v / ||v|| (torch.nn.utils.weight_norm, dim 0)
forward and backward (dg, dv), wired for autograd; CRF / HMM Viterbi decoding (a max-plus
recurrence over time with int64 backpointers stored per step, then a second loop chasing the
pointers backwards with per-row gathers); Whisper's log-mel spectrogram head (a mel filterbank
tc.dot over the frequency bins, log10, the per-utterance max kept by atomic_max, then a second
loop clamping to max - 8 and rescaling); a Sobel edge detector on uint8 images (replicate
borders through clamped index gathers, int32 gradients, fp32 magnitude and a bool edge map);
Gaussian-splatting-style front-to-back alpha compositing of 2-D gaussians on a pixel tile (a
loop over chunks of gaussians carrying the transmittance, a cumprod inside each chunk); and
BM25 scoring of query batches over a CSR posting list (a program per (query, term), posting
ranges read from memory, scores scattered with atomic adds). Each comes with its eager
reference (see :mod:`.case`): autograd through torch's own ops for the backwards.

Notes: all eight match at every CPU shape (seeds 0 and 1) with the autotuner on an empty
cache, with ``TILECRAFT_NO_AUTOTUNE=1``, in ref mode and with the ``SMALL_CONFIGS`` below
(/work/fuzz39b/verify.py), with strided and permuted inputs and torch.compile(fullgraph=True)
(eager and inductor backends; variants.py); static_shapes=False works for seven (the
polynomial's Python ``range(k - 1, -1, -1)`` over a coefficient count needs a static k:
repro_1, whose message names the internal TileValue class). The three fwd / bwd pairs are wired
with ``register_backward`` and their gradients match eager autograd, in eager mode and under
torch.compile (autograd_check.py; ``torch.autograd.gradcheck`` passes in fp64 for weight norm,
in fp32 with a 1e-2 step for the two that accumulate in fp32). Max errors: 0 for Viterbi, Sobel
and BM25; 1.2e-7 log-mel, 4.8e-7 splats, 1.9e-6 weight norm, 4e-5 polynomial (dcoef sums of
dy x^7), one bf16 ulp (9.8e-4) for Snake. Defaults cross-compile for cuda:90 and hip:gfx942 at
the GPU shapes. The splat kernel was first written with ``incl[:, -1]`` (the chunk's last
inclusive transmittance) to carry T to the next chunk: a ShapeError when compiled (ref mode
runs it: repro_2), so it multiplies by ``torch.prod(1 - alpha, dim=1)`` instead. See
/work/fuzz39b/REPORT.md. Viterbi's argmax compares sums computed exactly as the reference does
(one fp32 add), so its backpointers are bit-exact; no outputs depend on ties.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import (
    Case,
    Inputs,
    gen,
    meta_tensors,
    one_kernel_case,
    randn,
)

F32 = torch.float32
BF16 = torch.bfloat16
I32 = torch.int32
I64 = torch.int64
U8 = torch.uint8


# --------------------------------------------------------------------------- Snake activation

SNAKE_EPS = 1e-9


@tc.kernel(static_shapes=True)
def snake_fwd(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """BigVGAN's Snake: y = x + sin(alpha x)^2 / (alpha + eps), x [B, C, T] bf16, alpha [C]
    fp32 (one per channel), computed in fp32."""
    b, c, t = x.size()
    y = torch.empty_like(x)
    for tb, tch, tt in tc.tile([b, c, t], block_size=[1, None, None]):
        a = alpha[tch][:, None]
        xt = x[tb.begin, tch, tt].to(torch.float32)
        s = torch.sin(a * xt)
        y[tb.begin, tch, tt] = (xt + s * s / (a + SNAKE_EPS)).to(y.dtype)
    return y


@tc.kernel(static_shapes=True)
def snake_bwd(
    x: torch.Tensor, alpha: torch.Tensor, dy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Snake's backward: dx = dy (1 + alpha / (alpha + eps) sin(2 alpha x)) (bf16), dalpha =
    sum over batch and time of dy (x sin(2 alpha x) / (alpha + eps) - sin^2(alpha x) /
    (alpha + eps)^2) (fp32). A program per (batch, channel block) loops over time; its dalpha
    partial goes to a [B, C] buffer summed on the host."""
    b, c, t = x.size()
    dx = torch.empty_like(x)
    dalpha_part = torch.empty([b, c], dtype=torch.float32, device=x.device)
    for tb, tch in tc.tile([b, c], block_size=[1, None]):
        a = alpha[tch][:, None]
        inv = 1.0 / (a + SNAKE_EPS)
        acc = tc.zeros([tch], dtype=torch.float32)
        for tt in tc.tile(t):
            xt = x[tb.begin, tch, tt].to(torch.float32)
            g = dy[tb.begin, tch, tt].to(torch.float32)
            s = torch.sin(a * xt)
            s2 = torch.sin(2.0 * a * xt)
            dx[tb.begin, tch, tt] = (g * (1.0 + a * inv * s2)).to(dx.dtype)
            acc = acc + torch.sum(g * (xt * s2 * inv - s * s * inv * inv), dim=1)
        dalpha_part[tb.begin, tch] = acc
    dalpha = dalpha_part.sum(0)
    return dx, dalpha


def _snake_setup(ctx, inputs, output):
    x, alpha = inputs
    ctx.save_for_backward(x, alpha)


def _snake_backward(ctx, grad_y):
    x, alpha = ctx.saved_tensors
    dx, dalpha = snake_bwd(x, alpha, grad_y.contiguous())
    return dx, dalpha


snake_fwd.register_backward(_snake_backward, setup_context=_snake_setup)


def _snake_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, T)``: x randn bf16 times 2, alpha in [0.2, 2.2), dy randn bf16."""
    b, c, t = shape
    if device == "meta":
        return (
            torch.empty((b, c, t), dtype=BF16, device="meta"),
            torch.empty((c,), dtype=F32, device="meta"),
            torch.empty((b, c, t), dtype=BF16, device="meta"),
        )
    g = gen(seed)
    x = (randn((b, c, t), F32, device, g) * 2).to(BF16)
    alpha = (torch.rand((c,), generator=g) * 2 + 0.2).to(device)
    dy = randn((b, c, t), BF16, device, g)
    return x, alpha, dy


def _snake_run(kernels, inputs):
    x, alpha, dy = inputs
    y = kernels["snake_fwd"](x, alpha)
    dx, dalpha = kernels["snake_bwd"](x, alpha, dy)
    return y, dx, dalpha


def snake_reference(x, alpha, dy):
    """BigVGAN's Snake in fp32 with autograd (y and dx rounded to bf16)."""
    xf = x.float().requires_grad_(True)
    af = alpha.clone().requires_grad_(True)
    a = af[None, :, None]
    y = xf + torch.sin(a * xf).pow(2) / (a + SNAKE_EPS)
    dx, da = torch.autograd.grad(y, (xf, af), dy.float())
    return y.detach().to(x.dtype), dx.to(x.dtype), da


# --------------------------------------------------------------------------- Horner polynomial


@tc.kernel(static_shapes=True)
def poly_rows_fwd(x: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
    """y[r, n] = sum_k coef[r, k] x[r, n]^k (a polynomial per row, e.g. a per-sensor
    calibration curve), by Horner's rule; x [R, N], coef [R, K] fp32."""
    r, n = x.size()
    k = coef.size(1)
    y = torch.empty_like(x)
    for tr, tn in tc.tile([r, n]):
        xt = x[tr, tn]
        acc = tc.zeros([tr, tn], dtype=torch.float32)
        for j in range(k - 1, -1, -1):
            acc = acc * xt + coef[tr, j][:, None]
        y[tr, tn] = acc
    return y


@tc.kernel(static_shapes=True)
def poly_rows_bwd(
    x: torch.Tensor, coef: torch.Tensor, dy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The polynomial's backward: dx = dy p'(x) (p' by Horner), dcoef[r, k] = sum_n dy x^k.
    A program per row block loops over the columns with a [rows, K] accumulator."""
    r, n = x.size()
    k = coef.size(1)
    dx = torch.empty_like(x)
    dcoef = torch.empty([r, k], dtype=torch.float32, device=x.device)
    powers = tc.arange(k)
    for tr in tc.tile(r):
        dc = tc.zeros([tr, k], dtype=torch.float32)
        for tn in tc.tile(n):
            xt = x[tr, tn]
            g = dy[tr, tn]
            d = tc.zeros([tr, tn], dtype=torch.float32)
            for j in range(k - 1, 0, -1):
                d = d * xt + j * coef[tr, j][:, None]
            dx[tr, tn] = g * d
            xp = torch.pow(xt[:, :, None], powers[None, None, :])
            dc = dc + torch.sum(g[:, :, None] * xp, dim=1)
        dcoef[tr, :] = dc
    return dx, dcoef


def _poly_setup(ctx, inputs, output):
    x, coef = inputs
    ctx.save_for_backward(x, coef)


def _poly_backward(ctx, grad_y):
    x, coef = ctx.saved_tensors
    return poly_rows_bwd(x, coef, grad_y.contiguous())


poly_rows_fwd.register_backward(_poly_backward, setup_context=_poly_setup)


def _poly_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (R, N, K)``: x uniform in (-1.5, 1.5), coef randn / (k + 1), dy randn."""
    r, n, k = shape
    if device == "meta":
        return meta_tensors((r, n), (r, k), (r, n))
    g = gen(seed)
    x = (torch.rand((r, n), generator=g) * 3 - 1.5).to(device)
    coef = randn((r, k), F32, device, g) / (torch.arange(k, device=device) + 1.0)
    dy = randn((r, n), F32, device, g)
    return x, coef, dy


def _poly_run(kernels, inputs):
    x, coef, dy = inputs
    y = kernels["poly_rows_fwd"](x, coef)
    dx, dcoef = kernels["poly_rows_bwd"](x, coef, dy)
    return y, dx, dcoef


def poly_reference(x, coef, dy):
    """sum_k coef[:, k] x^k with x ** k powers, and autograd."""
    xf = x.clone().requires_grad_(True)
    cf = coef.clone().requires_grad_(True)
    k = coef.size(1)
    pw = xf[:, :, None] ** torch.arange(k, device=x.device, dtype=x.dtype)
    y = (pw * cf[:, None, :]).sum(-1)
    dx, dc = torch.autograd.grad(y, (xf, cf), dy)
    return y.detach(), dx, dc


# --------------------------------------------------------------------------- weight norm


@tc.kernel(static_shapes=True)
def weight_norm_fwd(v: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.nn.utils.weight_norm (dim=0): w = g v / ||v|| per output row, v [O, I], g [O]
    fp32. Also returns the row norms (a by-product the backward reuses)."""
    o, i = v.size()
    w = torch.empty_like(v)
    norms = torch.empty([o], dtype=torch.float32, device=v.device)
    for to in tc.tile(o):
        vt = v[to, :]
        nrm = torch.linalg.vector_norm(vt, dim=1)
        norms[to] = nrm
        w[to, :] = vt * (g[to] / nrm)[:, None]
    return w, norms


@tc.kernel(static_shapes=True)
def weight_norm_bwd(
    v: torch.Tensor, g: torch.Tensor, norms: torch.Tensor, dw: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """weight_norm's backward: dg = <dw, v> / ||v||, dv = g / ||v|| (dw - v <dw, v> /
    ||v||^2), a row block a program."""
    o, i = v.size()
    dv = torch.empty_like(v)
    dg = torch.empty_like(g)
    for to in tc.tile(o):
        vt = v[to, :]
        gw = dw[to, :]
        nrm = norms[to]
        dot = torch.sum(gw * vt, dim=1)
        dg[to] = dot / nrm
        dv[to, :] = (g[to] / nrm)[:, None] * (gw - vt * (dot / (nrm * nrm))[:, None])
    return dv, dg


def _wn_setup(ctx, inputs, output):
    v, g = inputs
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(v, g, output[1])


def _wn_backward(ctx, grad_w, _grad_norms):
    v, g, norms = ctx.saved_tensors
    return weight_norm_bwd(v, g, norms, grad_w.contiguous())


weight_norm_fwd.register_backward(_wn_backward, setup_context=_wn_setup)


def _wn_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (O, I)``: v randn / sqrt(I), g 1 + |randn|, dw randn."""
    o, i = shape
    if device == "meta":
        return meta_tensors((o, i), (o,), (o, i))
    gg = gen(seed)
    v = randn((o, i), F32, device, gg) / i**0.5
    g = randn((o,), F32, device, gg).abs() + 1.0
    dw = randn((o, i), F32, device, gg)
    return v, g, dw


def _wn_run(kernels, inputs):
    v, g, dw = inputs
    w, norms = kernels["weight_norm_fwd"](v, g)
    dv, dg = kernels["weight_norm_bwd"](v, g, norms, dw)
    return w, dv, dg


def weight_norm_reference(v, g, dw):
    """torch._weight_norm(v, g, 0) with autograd."""
    vf = v.clone().requires_grad_(True)
    gf = g.clone().requires_grad_(True)
    w = torch._weight_norm(vf, gf[:, None], 0)
    dv, dg = torch.autograd.grad(w, (vf, gf), dw)
    return w.detach(), dv, dg


# --------------------------------------------------------------------------- Viterbi


@tc.kernel(static_shapes=True)
def viterbi_decode(
    emissions: torch.Tensor, trans: torch.Tensor, start: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Viterbi decoding of a linear-chain CRF / HMM: emissions [B, T, S] fp32 scores,
    trans [S, S] (from i to j), start [S]. delta_0 = start + e_0; delta_t[j] = max_i
    (delta_{t-1}[i] + trans[i, j]) + e_t[j] with backpointers bp[b, t, j] = argmax_i. Returns the
    best score [B], the best path [B, T] int64 (backtracked in a second loop) and bp."""
    b, t, s = emissions.size()
    score = torch.empty([b], dtype=torch.float32, device=emissions.device)
    path = torch.empty([b, t], dtype=torch.int64, device=emissions.device)
    bp = torch.zeros([b, t, s], dtype=torch.int64, device=emissions.device)
    for tb in tc.tile(b):
        delta = start[None, :] + emissions[tb, 0, :]
        for i in tc.grid(1, t):
            cand = delta[:, :, None] + trans[None, :, :]
            best, arg = torch.max(cand, dim=1)
            bp[tb, i, :] = arg
            delta = best + emissions[tb, i, :]
        fin, last = torch.max(delta, dim=1)
        score[tb] = fin
        path[tb, t - 1] = last
    for tb in tc.tile(b):
        cur = path[tb, t - 1]
        for i in tc.grid(t - 1):
            j = t - 2 - i
            cur = bp[tb.index, j + 1, cur]
            path[tb, j] = cur
    return score, path, bp


def _viterbi_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, S)``: emissions 2 randn (unnormalized CRF scores), trans, start randn."""
    b, t, s = shape
    if device == "meta":
        return meta_tensors((b, t, s), (s, s), (s,))
    g = gen(seed)
    em = randn((b, t, s), F32, device, g) * 2
    trans = randn((s, s), F32, device, g)
    start = randn((s,), F32, device, g)
    return em, trans, start


def viterbi_reference(emissions, trans, start):
    """torchcrf-style _viterbi_decode, a torch loop over time."""
    b, t, s = emissions.shape
    delta = start[None, :] + emissions[:, 0]
    bp = torch.zeros(b, t, s, dtype=torch.int64, device=emissions.device)
    for i in range(1, t):
        best, arg = (delta[:, :, None] + trans[None]).max(dim=1)
        bp[:, i] = arg
        delta = best + emissions[:, i]
    score, last = delta.max(dim=1)
    path = torch.empty(b, t, dtype=torch.int64, device=emissions.device)
    path[:, -1] = last
    rows = torch.arange(b, device=emissions.device)
    for i in range(t - 2, -1, -1):
        path[:, i] = bp[rows, i + 1, path[:, i + 1]]
    return score, path, bp


# --------------------------------------------------------------------------- Whisper log-mel


@tc.kernel(static_shapes=True)
def whisper_log_mel(power: torch.Tensor, filters: torch.Tensor) -> torch.Tensor:
    """Whisper's log_mel_spectrogram after the STFT: power [B, F, T] fp32 (|STFT|^2, F =
    n_fft / 2 + 1), filters [M, F] the mel filterbank. mel = filters @ power; lg =
    log10(max(mel, 1e-10)); lg = max(lg, max over the utterance - 8); out = (lg + 4) / 4."""
    b, f, t = power.size()
    m = filters.size(0)
    out = torch.empty([b, m, t], dtype=torch.float32, device=power.device)
    peak = torch.full([b], float("-inf"), dtype=torch.float32, device=power.device)
    for tb, tm, tt in tc.tile([b, m, t], block_size=[1, None, None]):
        acc = tc.zeros([tm, tt], dtype=torch.float32)
        for tf in tc.tile(f):
            acc = tc.dot(filters[tm, tf], power[tb.begin, tf, tt], acc=acc)
        lg = torch.log10(torch.clamp(acc, min=1e-10))
        out[tb.begin, tm, tt] = lg
        tc.atomic_max(peak, [tb.begin], torch.amax(lg))
    for tb, tm, tt in tc.tile([b, m, t], block_size=[1, None, None]):
        lg = out[tb.begin, tm, tt]
        lg = torch.maximum(lg, peak[tb.begin] - 8.0)
        out[tb.begin, tm, tt] = (lg + 4.0) / 4.0
    return out


def _mel_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, F, M, T)``: power = |randn|^2 (every fifth frame times 1e-12, silence,
    so the max - 8 floor bites), triangular mel filters over F bins."""
    b, f, m, t = shape
    if device == "meta":
        return meta_tensors((b, f, t), (m, f))
    g = gen(seed)
    power = randn((b, f, t), F32, "cpu", g) ** 2 + 1e-3
    power[:, :, ::5] *= 1e-12
    # triangular filters, mel-spaced centres (librosa-like, slaney-normalized is not needed)
    mel_pts = torch.linspace(0.0, 1.0, m + 2) ** 2 * (f - 1)
    bins = torch.arange(f, dtype=F32)
    lo, ce, hi = mel_pts[:-2, None], mel_pts[1:-1, None], mel_pts[2:, None]
    up = (bins[None, :] - lo) / (ce - lo).clamp(min=1e-3)
    down = (hi - bins[None, :]) / (hi - ce).clamp(min=1e-3)
    filt = torch.clamp(torch.minimum(up, down), min=0.0) + 1e-4
    return power.to(device), filt.to(device)


def whisper_log_mel_reference(power, filters):
    """openai-whisper's audio.log_mel_spectrogram from the magnitudes on."""
    mel = filters @ power
    lg = torch.clamp(mel, min=1e-10).log10()
    lg = torch.maximum(lg, lg.amax(dim=(1, 2), keepdim=True) - 8.0)
    return (lg + 4.0) / 4.0


# --------------------------------------------------------------------------- Sobel on uint8

SOBEL_X = ((-1, 0, 1), (-2, 0, 2), (-1, 0, 1))
SOBEL_Y = ((-1, -2, -1), (0, 0, 0), (1, 2, 1))


@tc.kernel(static_shapes=True)
def sobel_edges_u8(img: torch.Tensor, thresh: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sobel edge detection on uint8 grayscale images [B, H, W] with replicated borders
    (OpenCV's BORDER_REPLICATE): int32 gradients gx, gy, fp32 magnitude sqrt(gx^2 + gy^2) and
    a bool edge map gx^2 + gy^2 >= thresh^2."""
    b, h, w = img.size()
    mag = torch.empty([b, h, w], dtype=torch.float32, device=img.device)
    edges = torch.empty([b, h, w], dtype=torch.bool, device=img.device)
    for tb, th, tw in tc.tile([b, h, w], block_size=[1, None, None]):
        gx = tc.zeros([th, tw], dtype=torch.int32)
        gy = tc.zeros([th, tw], dtype=torch.int32)
        for dy in range(3):
            rows = torch.clamp(th.index + (dy - 1), 0, h - 1)
            for dx in range(3):
                cols = torch.clamp(tw.index + (dx - 1), 0, w - 1)
                p = img[tb.begin, rows[:, None], cols[None, :]].to(torch.int32)
                if SOBEL_X[dy][dx] != 0:
                    gx = gx + SOBEL_X[dy][dx] * p
                if SOBEL_Y[dy][dx] != 0:
                    gy = gy + SOBEL_Y[dy][dx] * p
        sq = gx * gx + gy * gy
        mag[tb.begin, th, tw] = torch.sqrt(sq.to(torch.float32))
        edges[tb.begin, th, tw] = sq >= thresh * thresh
    return mag, edges


def _sobel_inputs(shape: tuple[int, ...], device: str, seed: int):
    """``shape = (B, H, W)``: a smooth uint8 image (blurred noise plus a bright square) and the
    threshold 100."""
    b, h, w = shape
    if device == "meta":
        return torch.empty((b, h, w), dtype=U8, device="meta"), 100
    g = gen(seed)
    noise = torch.rand((b, 1, h, w), generator=g) * 255
    smooth = torch.nn.functional.avg_pool2d(noise, 3, 1, 1, count_include_pad=False)[:, 0]
    smooth[:, h // 4 : h // 2, w // 4 : w // 2] += 80
    return smooth.clamp(0, 255).to(U8).to(device), 100


def sobel_reference(img, thresh):
    """F.pad(replicate) and conv2d with the Sobel kernels, in fp64 (exact for integers)."""
    x = torch.nn.functional.pad(img.double()[:, None], (1, 1, 1, 1), mode="replicate")
    kx = torch.tensor(SOBEL_X, dtype=torch.float64, device=img.device)
    ky = torch.tensor(SOBEL_Y, dtype=torch.float64, device=img.device)
    gx = torch.nn.functional.conv2d(x, kx[None, None])[:, 0]
    gy = torch.nn.functional.conv2d(x, ky[None, None])[:, 0]
    sq = gx * gx + gy * gy
    return sq.sqrt().float(), sq >= thresh * thresh


# --------------------------------------------------------------------------- 2-D gaussian splats


@tc.kernel(static_shapes=True)
def splat2d_composite(
    means: torch.Tensor,
    conics: torch.Tensor,
    opacity: torch.Tensor,
    colors: torch.Tensor,
    height: int,
    width: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Front-to-back alpha compositing of G projected gaussians (sorted by depth, as 3DGS
    rasterizes a tile): means [G, 2] (x, y) pixel coordinates, conics [G, 3] (a, b, c) the
    inverse 2-D covariance, opacity [G], colors [G, 3]. At pixel centre p, alpha_i =
    min(0.99, o_i exp(-0.5 (a dx^2 + c dy^2) - b dx dy)), T_i = prod_{j < i} (1 - alpha_j),
    C = sum_i T_i alpha_i c_i. Returns the image [H, W, 3] and the final transmittance [H, W]."""
    g = means.size(0)
    npix = height * width
    img = torch.empty([npix, 3], dtype=torch.float32, device=means.device)
    t_final = torch.empty([npix], dtype=torch.float32, device=means.device)
    for tp in tc.tile(npix):
        px = (tp.index % width).to(torch.float32) + 0.5
        py = (tp.index // width).to(torch.float32) + 0.5
        trans = tc.full([tp], 1.0, dtype=torch.float32)
        r = tc.zeros([tp], dtype=torch.float32)
        gr = tc.zeros([tp], dtype=torch.float32)
        bl = tc.zeros([tp], dtype=torch.float32)
        for tg in tc.tile(g):
            dx = px[:, None] - means[tg, 0][None, :]
            dy = py[:, None] - means[tg, 1][None, :]
            power = (
                -0.5 * (conics[tg, 0][None, :] * dx * dx + conics[tg, 2][None, :] * dy * dy)
                - conics[tg, 1][None, :] * dx * dy
            )
            alpha = torch.clamp(opacity[tg][None, :] * torch.exp(power), max=0.99)
            incl = torch.cumprod(1.0 - alpha, dim=1)
            wgt = trans[:, None] * (incl / (1.0 - alpha)) * alpha
            r = r + torch.sum(wgt * colors[tg, 0][None, :], dim=1)
            gr = gr + torch.sum(wgt * colors[tg, 1][None, :], dim=1)
            bl = bl + torch.sum(wgt * colors[tg, 2][None, :], dim=1)
            trans = trans * torch.prod(1.0 - alpha, dim=1)  # incl[:, -1]: ShapeError (REPORT)
        img[tp, 0] = r
        img[tp, 1] = gr
        img[tp, 2] = bl
        t_final[tp] = trans
    return img.view(height, width, 3), t_final.view(height, width)


def _splat_inputs(shape: tuple[int, ...], device: str, seed: int):
    """``shape = (G, H, W)``: means uniform over the image, covariances from random scales
    (1.5..6 px) and rotations (conics = their inverses), opacity in (0.3, 1), colors in (0, 1)."""
    ng, h, w = shape
    if device == "meta":
        return (*meta_tensors((ng, 2), (ng, 3), (ng,), (ng, 3)), h, w)
    g = gen(seed)
    means = torch.rand((ng, 2), generator=g) * torch.tensor([w, h], dtype=F32)
    scale = torch.rand((ng, 2), generator=g) * 4.5 + 1.5
    theta = torch.rand((ng,), generator=g) * 3.14159
    c, s = torch.cos(theta), torch.sin(theta)
    sx2, sy2 = scale[:, 0] ** 2, scale[:, 1] ** 2
    cxx = c * c * sx2 + s * s * sy2
    cyy = s * s * sx2 + c * c * sy2
    cxy = c * s * (sx2 - sy2)
    det = cxx * cyy - cxy * cxy
    conics = torch.stack([cyy / det, -cxy / det, cxx / det], dim=1)
    opacity = torch.rand((ng,), generator=g) * 0.7 + 0.3
    colors = torch.rand((ng, 3), generator=g)
    return means.to(device), conics.to(device), opacity.to(device), colors.to(device), h, w


def splat_reference(means, conics, opacity, colors, height, width):
    """All pixels x all gaussians at once: exclusive cumprod of (1 - alpha) along G."""
    ys, xs = torch.meshgrid(
        torch.arange(height, device=means.device, dtype=F32) + 0.5,
        torch.arange(width, device=means.device, dtype=F32) + 0.5,
        indexing="ij",
    )
    dx = xs.reshape(-1, 1) - means[None, :, 0]
    dy = ys.reshape(-1, 1) - means[None, :, 1]
    power = -0.5 * (conics[:, 0] * dx * dx + conics[:, 2] * dy * dy) - conics[:, 1] * dx * dy
    alpha = torch.clamp(opacity[None] * torch.exp(power), max=0.99)
    one_minus = 1.0 - alpha
    t_excl = torch.cat([torch.ones_like(alpha[:, :1]), torch.cumprod(one_minus, 1)[:, :-1]], 1)
    img = (t_excl * alpha) @ colors
    return img.view(height, width, 3), torch.prod(one_minus, 1).view(height, width)


# --------------------------------------------------------------------------- BM25 over CSR

BM25_K1 = 1.2
BM25_B = 0.75


@tc.kernel(static_shapes=True)
def bm25_scores(
    query_terms: torch.Tensor,
    term_ptr: torch.Tensor,
    doc_ids: torch.Tensor,
    tfs: torch.Tensor,
    doc_len: torch.Tensor,
    idf: torch.Tensor,
    avgdl: float,
) -> torch.Tensor:
    """Okapi BM25 of a batch of queries against every document: query_terms [Q, L] int64 term
    ids (-1 pads), the inverted index as CSR (term_ptr [V + 1] int64, doc_ids [NNZ] int32,
    tfs [NNZ] int32 term frequencies), doc_len [D] int32, idf [V] fp32. score[q, d] =
    sum over the query's terms t present in d of idf[t] tf (k1 + 1) / (tf + k1 (1 - b + b
    len_d / avgdl)). A program per (query, term) walks the term's postings and scatters with
    atomic adds."""
    nq, qlen = query_terms.size()
    ndocs = doc_len.size(0)
    scores = torch.zeros([nq, ndocs], dtype=torch.float32, device=idf.device)
    for tq, tj in tc.tile([nq, qlen], block_size=[1, 1]):
        term = query_terms[tq.begin, tj.begin]
        if term >= 0:
            w = idf[term]
            for tp in tc.tile(term_ptr[term], term_ptr[term + 1]):
                d = doc_ids[tp]
                tf = tfs[tp].to(torch.float32)
                dl = doc_len[d].to(torch.float32)
                denom = tf + BM25_K1 * (1.0 - BM25_B + BM25_B * dl / avgdl)
                tc.atomic_add(scores, [tq.begin, d], w * tf * (BM25_K1 + 1.0) / denom)
    return scores


def _bm25_inputs(shape: tuple[int, ...], device: str, seed: int):
    """``shape = (Q, L, V, D, P)``: each term gets 0..2P postings (doc ids drawn at random,
    sorted), tf 1..9, doc lengths 20..400, idf from the document frequencies; each query has
    L term ids from the first V / 4 terms (frequent ones) and its last term is padding (-1)."""
    nq, qlen, v, ndocs, p = shape
    if device == "meta":
        return (
            torch.empty((nq, qlen), dtype=I64, device="meta"),
            torch.empty((v + 1,), dtype=I64, device="meta"),
            torch.empty((v * p,), dtype=I32, device="meta"),
            torch.empty((v * p,), dtype=I32, device="meta"),
            torch.empty((ndocs,), dtype=I32, device="meta"),
            torch.empty((v,), dtype=F32, device="meta"),
            200.0,
        )
    g = gen(seed)
    counts = torch.randint(0, 2 * p + 1, (v,), generator=g)
    term_ptr = torch.zeros(v + 1, dtype=I64)
    term_ptr[1:] = torch.cumsum(counts, 0)
    nnz = int(term_ptr[-1])
    doc_ids = torch.randint(0, ndocs, (nnz,), generator=g).to(I32)
    tfs = torch.randint(1, 10, (nnz,), generator=g).to(I32)
    doc_len = torch.randint(20, 400, (ndocs,), generator=g).to(I32)
    df = counts.float()
    idf = torch.log(1.0 + (ndocs - df + 0.5) / (df + 0.5))
    qt = torch.randint(0, max(v // 4, 1), (nq, qlen), generator=g)
    qt[:, -1] = -1
    avgdl = float(doc_len.float().mean())
    return (
        qt.to(device),
        term_ptr.to(device),
        doc_ids.to(device),
        tfs.to(device),
        doc_len.to(device),
        idf.to(device),
        avgdl,
    )


def bm25_reference(query_terms, term_ptr, doc_ids, tfs, doc_len, idf, avgdl):
    """Per-posting contributions, then index_add_ per query over its valid terms."""
    nnz = doc_ids.numel()
    term_of = torch.repeat_interleave(
        torch.arange(term_ptr.numel() - 1, device=idf.device), term_ptr.diff(), output_size=nnz
    )
    tf = tfs.float()
    dl = doc_len[doc_ids.long()].float()
    norm = BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl)
    contrib = idf[term_of] * tf * (BM25_K1 + 1) / (tf + norm)
    nq = query_terms.size(0)
    scores = torch.zeros(nq, doc_len.numel(), device=idf.device)
    for q in range(nq):
        for t in query_terms[q].tolist():
            if t < 0:
                continue
            a, e = int(term_ptr[t]), int(term_ptr[t + 1])
            scores[q].index_add_(0, doc_ids[a:e].long(), contrib[a:e])
    return scores


# --------------------------------------------------------------------------- cases

CASES: list[Case] = [
    Case(
        name="snake_activation_fwd_bwd",
        kernels=(snake_fwd, snake_bwd),
        make_inputs=_snake_inputs,
        reference=snake_reference,
        run=_snake_run,
        gpu_shapes=((16, 512, 8192),),
        cpu_shapes=((2, 8, 40), (3, 12, 100), (2, 32, 257)),
        atol=6e-2,
    ),
    Case(
        name="horner_poly_rows_bwd",
        kernels=(poly_rows_fwd, poly_rows_bwd),
        make_inputs=_poly_inputs,
        reference=poly_reference,
        run=_poly_run,
        gpu_shapes=((4096, 4096, 8),),
        cpu_shapes=((5, 30, 4), (17, 64, 6), (33, 100, 8)),
        atol=1e-3,
    ),
    Case(
        name="weight_norm_fwd_bwd",
        kernels=(weight_norm_fwd, weight_norm_bwd),
        make_inputs=_wn_inputs,
        reference=weight_norm_reference,
        run=_wn_run,
        gpu_shapes=((8192, 4096),),
        cpu_shapes=((7, 33), (32, 128), (65, 300)),
        atol=1e-4,
    ),
    one_kernel_case(
        "viterbi_decode_backtrack",
        viterbi_decode,
        _viterbi_inputs,
        viterbi_reference,
        gpu_shapes=((256, 512, 64),),
        cpu_shapes=((2, 5, 4), (5, 12, 9), (9, 20, 16)),
        atol=1e-5,
    ),
    one_kernel_case(
        "whisper_log_mel",
        whisper_log_mel,
        _mel_inputs,
        whisper_log_mel_reference,
        gpu_shapes=((16, 201, 80, 3000),),
        cpu_shapes=((1, 33, 16, 20), (2, 65, 24, 37), (2, 201, 80, 50)),
        atol=1e-4,
    ),
    one_kernel_case(
        "sobel_edges_u8",
        sobel_edges_u8,
        _sobel_inputs,
        sobel_reference,
        gpu_shapes=((16, 1080, 1920),),
        cpu_shapes=((1, 9, 13), (2, 20, 33), (2, 48, 70)),
        atol=1e-4,
    ),
    one_kernel_case(
        "splat2d_alpha_composite",
        splat2d_composite,
        _splat_inputs,
        splat_reference,
        gpu_shapes=((1024, 256, 256),),
        cpu_shapes=((5, 8, 9), (24, 16, 20), (70, 24, 32)),
        atol=1e-5,
    ),
    one_kernel_case(
        "bm25_csr_scores",
        bm25_scores,
        _bm25_inputs,
        bm25_reference,
        gpu_shapes=((64, 8, 50000, 200000, 40),),
        cpu_shapes=((2, 3, 10, 30, 4), (3, 5, 40, 100, 8), (4, 6, 64, 300, 20)),
        atol=1e-4,
    ),
]

SMALL_CONFIGS: dict[str, list[tc.Config]] = {
    # one config for both kernels of a two-kernel case (their block_sizes line up)
    "snake_activation_fwd_bwd": [
        tc.Config(block_sizes=[4, 16], num_warps=1),
        tc.Config(block_sizes=[16, 32], num_warps=2, pid_type="persistent_interleaved"),
        tc.Config(block_sizes=[2, 128], num_warps=8, indexing="block_ptr"),
    ],
    "horner_poly_rows_bwd": [
        tc.Config(block_sizes=[4, 16], num_warps=1),
        tc.Config(block_sizes=[8, 8], num_warps=2, pid_type="persistent_blocked"),
        tc.Config(block_sizes=[16, 32], num_warps=4, indexing="block_ptr"),
    ],
    "weight_norm_fwd_bwd": [
        tc.Config(block_sizes=[1], reduction_loops=[None], num_warps=1),
        tc.Config(block_sizes=[4], reduction_loops=[16], num_warps=2),
        tc.Config(
            block_sizes=[32], reduction_loops=[64], num_warps=8, pid_type="persistent_interleaved"
        ),
    ],
    "viterbi_decode_backtrack": [
        tc.Config(block_sizes=[2, 4], num_warps=1),
        tc.Config(block_sizes=[8, 8], num_warps=2, pid_type="persistent_blocked"),
    ],
    "whisper_log_mel": [
        tc.Config(block_sizes=[16, 16, 16, 16, 32], num_warps=1),
        tc.Config(block_sizes=[16, 32, 32, 32, 16], num_warps=2, pid_type="persistent_blocked"),
        tc.Config(block_sizes=[32, 16, 16, 8, 8], num_warps=4, num_stages=2, indexing="block_ptr"),
    ],
    "sobel_edges_u8": [
        tc.Config(block_sizes=[4, 16], num_warps=1),
        tc.Config(block_sizes=[8, 8], num_warps=2, pid_type="persistent_interleaved"),
        tc.Config(block_sizes=[1, 32], num_warps=4, indexing="block_ptr"),
    ],
    "splat2d_alpha_composite": [
        tc.Config(block_sizes=[16, 16], num_warps=1),
        tc.Config(block_sizes=[32, 8], num_warps=2, pid_type="persistent_interleaved"),
        tc.Config(block_sizes=[128, 64], num_warps=8, pid_type="persistent_blocked"),
    ],
    "bm25_csr_scores": [
        tc.Config(block_sizes=[16], num_warps=1),
        tc.Config(block_sizes=[64], num_warps=2, pid_type="persistent_interleaved"),
        tc.Config(block_sizes=[1], num_warps=1, indexing="block_ptr"),
    ],
}

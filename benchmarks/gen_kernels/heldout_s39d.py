"""Held-out kernels written from the docs only, session 39d (see :mod:`.heldout_rows` for why
held-out kernels exist): feature engineering, signal processing, decoding and number formats,
written around the ops tilecraft gained lately (``torch.bucketize`` / ``searchsorted``,
``Tensor.unfold``, ``torch.diff``, ``torch.cat`` of unequal widths, ``torch.split`` /
``unbind``, ``F.pad`` replicate / reflect, ``torch.frexp`` / ``ldexp``, ``torch.outer``,
``repeat_interleave``, einsum mat-vec, fp64 dots, a tile's last element along a tile loop).
A piecewise-linear calibrator (TF Lattice style: shared keypoints, per-feature outputs, bucketize
then interpolate); a sensor despiker (median of 3 with replicated edges, then a centred moving
mean and std over 5 with reflected edges, through ``unfold``); audio pre-emphasis of one mic
channel picked by a run-time int, with its first and second differences (delta features); a
degree-2 polynomial regression in fp64 (features by ``cat`` of unequal widths, an fp64 GEMM and
an einsum mat-vec on the quadratic part); per-feature quantile binning with target encoding
(``searchsorted(right=True)``); a decoding logits processor (CTRL repetition penalty and
no-repeat-trigram ban from the history's ``unfold``); block floating point with 8-bit mantissas
(a shared exponent per 32 values from ``frexp``, codes and dequant through ``ldexp``); an fp64
chunked prefix product (discount factors, the running product carried as each chunk's last
element); and GPT-J rotary embedding at linearly interpolated positions (``torch.outer`` and
``repeat_interleave`` build the angles). Each comes with its eager reference (see :mod:`.case`).

Notes: all nine match at every CPU shape (seeds 0 and 1) with the autotuner on an empty cache,
with ``TILECRAFT_NO_AUTOTUNE=1``, in ref mode and with the ``SMALL_CONFIGS`` below
(/work/fuzz39d/verify.py), and with strided and permuted inputs and torch.compile(fullgraph=True)
(eager and inductor backends; variants.py); static_shapes True and False both work for six
(pre-emphasis's ``x[:, 1:]``, the trigram ``unfold`` and RoPE's ``repeat_interleave`` need static
sizes, as their errors say). Max errors: 0 for calibration, pre-emphasis, binning, the logits
processor and block FP; 2.4e-7 despike, 4.8e-7 RoPE, 3.6e-15 the fp64 regression, 7.8e-16 the
fp64 cumprod. RoPE's natural ``.flatten(2)`` after ``torch.stack`` failed (reshape miscounted ``-1``, repro_1;
fixed in tilecraft/frontend/regroup.py during the session, the module uses it). Two natural forms
needed a change: under static_shapes=False ``x[t, :]`` stays run-time sized even
after ``tc.specialize`` of its size (repro_2: ``x[t, :n]`` with the specialized n works), as do
``w[:, :]`` / ``v[:]`` (sliced to the specialized size instead). Cross-compiling the defaults at
the GPU shapes: the despiker failed for cuda:90 and hip:gfx942 (Triton asserts in a tl.gather
layout pass, repro_3), pre-emphasis at T = 16000 did not finish for cuda:90 (ptxas past 18 GB,
repro_5), and the fp64 regression's default overflows gfx942 shared memory (repro_4). See
/work/fuzz39d/REPORT.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import tilecraft as tc
from benchmarks.gen_kernels.case import (
    Case,
    Inputs,
    gen,
    meta_tensors,
    randint,
    randn,
    ref_args,
    with_args,
)

F32 = torch.float32
F64 = torch.float64
I8 = torch.int8
I32 = torch.int32
I64 = torch.int64


# --------------------------------------------------------------------------- PWL calibration


@tc.kernel(static_shapes=False)
def pwl_calibrate(x: torch.Tensor, knots_x: torch.Tensor, knots_y: torch.Tensor) -> torch.Tensor:
    """Piecewise-linear calibration: x [N, F] fp32 raw features, knots_x [K] sorted keypoints
    shared by all features, knots_y [F, K] each feature's output at the keypoints. Linear
    interpolation between the two keypoints around x, clamped to the end values outside."""
    n, f = x.size()
    k = knots_x.size(0)
    out = torch.empty_like(x)
    for tn, tf in tc.tile([n, f]):
        xv = x[tn, tf]
        idx = torch.bucketize(xv, knots_x[:])
        lo = torch.clamp(idx, 1, k - 1) - 1
        x0 = knots_x[lo]
        x1 = knots_x[lo + 1]
        y0 = knots_y[tf.index[None, :], lo]
        y1 = knots_y[tf.index[None, :], lo + 1]
        t = torch.clamp((xv - x0) / (x1 - x0), 0.0, 1.0)
        out[tn, tf] = y0 + t * (y1 - y0)
    return out


def _pwl_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, F, K)``."""
    n, f, k = shape
    if device == "meta":
        return meta_tensors((n, f), (k,), (f, k))
    g = gen(seed)
    x = randn((n, f), F32, device, g) * 1.5
    steps = torch.rand(k, generator=g) + 0.05
    knots_x = (torch.cumsum(steps, 0) - steps.sum() / 2).to(device)
    knots_y = torch.cumsum(torch.rand(f, k, generator=g), 1).to(device)
    return x, knots_x, knots_y


def pwl_calibrate_reference(x, knots_x, knots_y):
    k = knots_x.numel()
    lo = torch.clamp(torch.bucketize(x, knots_x), 1, k - 1) - 1
    fi = torch.arange(x.size(1), device=x.device)[None, :]
    x0, x1 = knots_x[lo], knots_x[lo + 1]
    y0, y1 = knots_y[fi, lo], knots_y[fi, lo + 1]
    t = torch.clamp((x - x0) / (x1 - x0), 0.0, 1.0)
    return y0 + t * (y1 - y0)


# --------------------------------------------------------------------------- despike + rolling stats


@tc.kernel(static_shapes=False)
def despike_rolling_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [R, L] fp32 sensor rows: a median-of-3 despike (edges replicated), then a centred moving
    mean and (unbiased) std over 5 samples of the despiked signal (edges reflected)."""
    r, length = x.size()
    length = tc.specialize(length)  # F.pad / unfold need the row length at compile time
    med = torch.empty_like(x)
    mean = torch.empty_like(x)
    std = torch.empty_like(x)
    for tr in tc.tile(r):
        row = x[tr, :length]  # x[tr, :] stays run-time sized even with l specialized (repro_2)
        w3 = F.pad(row, (1, 1), mode="replicate").unfold(1, 3, 1)
        a, b, c = w3.unbind(-1)
        m = torch.maximum(torch.minimum(a, b), torch.minimum(torch.maximum(a, b), c))
        med[tr, :length] = m
        w5 = F.pad(m, (2, 2), mode="reflect").unfold(1, 5, 1)
        mean[tr, :length] = w5.mean(dim=-1)
        std[tr, :length] = w5.std(dim=-1)
    return med, mean, std


def _despike_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (R, L)``: a smooth signal with spikes."""
    r, length = shape
    if device == "meta":
        return meta_tensors((r, length))
    g = gen(seed)
    t = torch.linspace(0, 6.28, length)[None, :]
    base = torch.sin(t * (1 + torch.rand(r, 1, generator=g) * 3))
    noise = 0.1 * torch.randn(r, length, generator=g)
    spikes = (
        (torch.rand(r, length, generator=g) < 0.05).float()
        * 5
        * torch.randn(r, length, generator=g)
    )
    return ((base + noise + spikes).to(device),)


def despike_rolling_stats_reference(x):
    w3 = F.pad(x, (1, 1), mode="replicate").unfold(1, 3, 1)
    m = torch.median(w3, dim=-1).values
    w5 = F.pad(m, (2, 2), mode="reflect").unfold(1, 5, 1)
    return m, w5.mean(-1), w5.std(-1)


# --------------------------------------------------------------------------- pre-emphasis + deltas

PREEMPH = 0.97
PREEMPH_CHANNEL = 1


@tc.kernel(static_shapes=True)
def preemphasis_deltas(
    audio: torch.Tensor, channel: int, coef: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """audio [B, M, T] fp32 multi-mic clips; for mic ``channel``: the pre-emphasized signal
    y[t] = x[t] - coef x[t - 1] (y[0] = x[0]), and its first and second differences."""
    b, _, t = audio.size()
    y = torch.empty([b, t], dtype=audio.dtype, device=audio.device)
    d1 = torch.empty([b, t - 1], dtype=audio.dtype, device=audio.device)
    d2 = torch.empty([b, t - 2], dtype=audio.dtype, device=audio.device)
    for tb in tc.tile(b):
        x = audio[tb, channel, :]
        yt = torch.cat([x[:, :1], x[:, 1:] - coef * x[:, :-1]], dim=1)
        y[tb, :] = yt
        d1[tb, :] = torch.diff(yt, dim=1)
        d2[tb, :] = torch.diff(yt, n=2, dim=1)
    return y, d1, d2


def _preemph_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, M, T)``."""
    b, m, t = shape
    if device == "meta":
        return meta_tensors((b, m, t))
    return (randn((b, m, t), F32, device, gen(seed)),)


def preemphasis_deltas_reference(audio, channel, coef):
    x = audio[:, channel, :]
    y = torch.cat([x[:, :1], x[:, 1:] - coef * x[:, :-1]], dim=1)
    return y, torch.diff(y, dim=1), torch.diff(y, n=2, dim=1)


# --------------------------------------------------------------------------- poly-2 regression fp64


@tc.kernel(static_shapes=False)
def poly2_regression(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, v_quad: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N, D] fp64: degree-2 features [x, x^2, x_0 * x_1..x_{D-1}] (width 3D - 1), then
    y [N, H] = feats @ w + bias (w [3D - 1, H]) and the quadratic part's score
    z [N] = feats[:, D:] @ v_quad (v_quad [2D - 1]), all in fp64."""
    n, d = x.size()
    d = tc.specialize(d)  # cat / split / slices of the feature dim need it at compile time
    h = w.size(1)
    y = torch.empty([n, h], dtype=x.dtype, device=x.device)
    z = torch.empty([n], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        xt = x[tn, :d]  # x[tn, :] stays run-time sized even with d specialized (repro_2)
        feats = torch.cat([xt, xt * xt, xt[:, :1] * xt[:, 1:]], dim=1)
        # w[:, :] fails: "inner dims differ: [BLOCK_0, RDIM_3] @ [RDIM_4, RDIM_5]" (run-time K)
        y[tn, :] = feats @ w[: 3 * d - 1, :] + bias[None, :]
        _, quad = torch.split(feats, [d, 2 * d - 1], dim=1)
        # v_quad[:] fails: "shapes [BLOCK_0, RDIM_5 (11)] and [1, RDIM_6 (11)] do not broadcast"
        z[tn] = torch.einsum("nk,k->n", quad, v_quad[: 2 * d - 1])
    return y, z


def _poly_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, D, H)``."""
    n, d, h = shape
    if device == "meta":
        return meta_tensors((n, d), (3 * d - 1, h), (h,), (2 * d - 1,), dtype=F64)
    g = gen(seed)
    return (
        randn((n, d), F64, device, g),
        randn((3 * d - 1, h), F64, device, g) * 0.3,
        randn((h,), F64, device, g),
        randn((2 * d - 1,), F64, device, g),
    )


def poly2_regression_reference(x, w, bias, v_quad):
    d = x.size(1)
    feats = torch.cat([x, x * x, x[:, :1] * x[:, 1:]], dim=1)
    return feats @ w + bias, feats[:, d:] @ v_quad


# --------------------------------------------------------------------------- quantile binning


@tc.kernel(static_shapes=False)
def quantile_bin_encode(
    x: torch.Tensor, edges: torch.Tensor, bin_means: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantile binning with target encoding: x [N, F] fp32, edges [F, B - 1] each feature's
    sorted inner quantile edges, bin_means [F, B] the target mean of each bin. codes [N, F] int64
    = the bin (searchsorted right=True: a value on an edge goes up), enc [N, F] = its mean."""
    n, f = x.size()
    codes = torch.empty([n, f], dtype=torch.int64, device=x.device)
    enc = torch.empty_like(x)
    for tf, tn in tc.tile([f, n], block_size=[1, None]):
        e = edges[tf.begin, :]
        v = x[tn, tf.begin]
        code = torch.searchsorted(e, v, right=True)
        codes[tn, tf.begin] = code
        enc[tn, tf.begin] = bin_means[tf.begin, code]
    return codes, enc


def _qbin_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, F, B)``: edges are quantiles of another sample of the same features."""
    n, f, nb = shape
    if device == "meta":
        return meta_tensors((n, f), (f, nb - 1), (f, nb))
    g = gen(seed)
    scale = torch.rand(f, generator=g) * 2 + 0.5
    x = torch.randn(n, f, generator=g) * scale
    fit = torch.randn(4 * nb, f, generator=g) * scale
    q = torch.linspace(0, 1, nb + 1)[1:-1]
    edges = torch.quantile(fit, q, dim=0).t().contiguous()
    bin_means = torch.randn(f, nb, generator=g)
    return x.to(device), edges.to(device), bin_means.to(device)


def quantile_bin_encode_reference(x, edges, bin_means):
    codes = torch.stack(
        [torch.searchsorted(edges[j], x[:, j].contiguous(), right=True) for j in range(x.size(1))],
        dim=1,
    )
    enc = torch.gather(bin_means.t(), 0, codes)
    return codes, enc


# --------------------------------------------------------------------------- n-gram logits processor

REP_PENALTY = 1.3


@tc.kernel(static_shapes=True)
def ngram_repeat_penalty(
    logits: torch.Tensor, history: torch.Tensor, penalty: float
) -> torch.Tensor:
    """Decoding logits processor: logits [B, V] fp32, history [B, T] int64 the tokens so far.
    CTRL repetition penalty on every token in the history (positive logits / penalty, negative
    ones * penalty), then no_repeat_ngram_size=3: a token that would complete a trigram already
    in the history (its first two tokens are the last two of the history) gets -inf."""
    b, v = logits.size()
    out = torch.empty_like(logits)
    for tb, tv in tc.tile([b, v]):
        h = history[tb, :]
        vocab = tv.index
        seen = torch.any(h[:, :, None] == vocab[None, None, :], dim=1)
        lg = logits[tb, tv]
        lg = torch.where(seen, torch.where(lg > 0, lg / penalty, lg * penalty), lg)
        first, second, third = h.unfold(1, 3, 1).unbind(-1)
        prefix = (first == h[:, -2][:, None]) & (second == h[:, -1][:, None])
        banned = torch.any(prefix[:, :, None] & (third[:, :, None] == vocab[None, None, :]), dim=1)
        out[tb, tv] = torch.where(banned, float("-inf"), lg)
    return out


def _ngram_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, V)``: histories that repeat a short phrase now and then."""
    b, t, v = shape
    if device == "meta":
        return torch.empty((b, v), device="meta"), torch.empty((b, t), dtype=I64, device="meta")
    g = gen(seed)
    logits = torch.randn(b, v, generator=g) * 3
    hist = torch.randint(0, v, (b, t), generator=g)
    for i in range(b):  # plant a repeat of the last two tokens earlier in each history
        p = int(torch.randint(0, t - 3, (1,), generator=g))
        hist[i, p : p + 2] = hist[i, t - 2 :]
    return logits.to(device), hist.to(device)


def ngram_repeat_penalty_reference(logits, history, penalty):
    b, v = logits.shape
    seen = torch.zeros(b, v, dtype=torch.bool, device=logits.device)
    seen.scatter_(1, history, True)
    lg = torch.where(seen, torch.where(logits > 0, logits / penalty, logits * penalty), logits)
    tri = history.unfold(1, 3, 1)
    prefix = (tri[..., 0] == history[:, -2:-1]) & (tri[..., 1] == history[:, -1:])
    banned = torch.zeros(b, v, dtype=torch.bool, device=logits.device)
    banned.scatter_(1, torch.where(prefix, tri[..., 2], tri[..., 2].new_full((), 0)), prefix)
    # scatter_ of False can overwrite a True at the same column; redo it exactly:
    banned = (
        (tri[..., 2][:, :, None] == torch.arange(v, device=logits.device)) & prefix[:, :, None]
    ).any(1)
    return torch.where(banned, float("-inf"), lg)


# --------------------------------------------------------------------------- block floating point

BFP_BLOCK = 32
BFP_MANT = 7  # mantissa bits besides the sign


@tc.kernel(static_shapes=False)
def block_fp_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Block floating point with 8-bit mantissas: x [R, C] fp32 (C a multiple of 32). Each block
    of 32 shares the exponent e of its largest |x| (frexp: |x| < 2**e); codes [R, C] int8 =
    round(x * 2**(7 - e)) clamped to +-127, exps [R, C / 32] int32, and the dequantized x."""
    r, c = x.size()
    nb = c // BFP_BLOCK
    xb = x.reshape(r, nb, BFP_BLOCK)
    codes = torch.empty([r, nb, BFP_BLOCK], dtype=torch.int8, device=x.device)
    exps = torch.empty([r, nb], dtype=torch.int32, device=x.device)
    deq = torch.empty([r, nb, BFP_BLOCK], dtype=x.dtype, device=x.device)
    for tr, tb in tc.tile([r, nb]):
        v = xb[tr, tb, :]
        _, e = torch.frexp(v.abs().amax(dim=-1))
        q = torch.round(torch.ldexp(v, (BFP_MANT - e)[:, :, None]))
        q = torch.clamp(q, -127.0, 127.0)
        codes[tr, tb, :] = q.to(torch.int8)
        exps[tr, tb] = e
        deq[tr, tb, :] = torch.ldexp(q, (e - BFP_MANT)[:, :, None])
    return codes.view(r, c), exps, deq.view(r, c)


def _bfp_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (R, C)``: rows of very different scales."""
    r, c = shape
    if device == "meta":
        return meta_tensors((r, c))
    g = gen(seed)
    scale = torch.exp2(torch.randint(-20, 20, (r, 1), generator=g).float())
    return ((torch.randn(r, c, generator=g) * scale).to(device),)


def block_fp_quantize_reference(x):
    r, c = x.shape
    xb = x.reshape(r, c // BFP_BLOCK, BFP_BLOCK)
    _, e = torch.frexp(xb.abs().amax(-1))
    q = torch.clamp(torch.round(torch.ldexp(xb, (BFP_MANT - e)[..., None])), -127, 127)
    deq = torch.ldexp(q, (e - BFP_MANT)[..., None])
    return q.to(I8).view(r, c), e, deq.view(r, c)


# --------------------------------------------------------------------------- chunked prefix product


@tc.kernel(static_shapes=False)
def discount_cumprod_fp64(gammas: torch.Tensor) -> torch.Tensor:
    """gammas [B, T] fp64 per-step discount factors in (0, 1]: out[b, t] = prod_{s <= t}
    gammas[b, s], in chunks along T: each chunk's cumprod times the running product, which
    becomes the chunk's last element."""
    b, t = gammas.size()
    out = torch.empty_like(gammas)
    for tb in tc.tile(b):
        carry = tc.full([tb], 1.0, dtype=torch.float64)
        for tt in tc.tile(t):
            c = torch.cumprod(gammas[tb, tt], dim=1) * carry[:, None]
            out[tb, tt] = c
            carry = c[:, -1]
    return out


def _cumprod_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    b, t = shape
    if device == "meta":
        return meta_tensors((b, t), dtype=F64)
    g = gen(seed)
    return ((1.0 - torch.rand(b, t, generator=g, dtype=F64) * 0.01).to(device),)


def discount_cumprod_fp64_reference(gammas):
    return torch.cumprod(gammas, dim=1)


# --------------------------------------------------------------------------- GPT-J RoPE, interpolated

PI_SCALE = 0.25  # 2k-trained model at 8k context


@tc.kernel(static_shapes=True)
def rope_gptj_interp(
    q: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, scale: float
) -> torch.Tensor:
    """q [S, H, D] fp32, positions [S] int64, inv_freq [D / 2]: GPT-J rotary embedding
    (interleaved pairs) at positions * scale (linear position interpolation)."""
    s, h, d = q.size()
    out = torch.empty_like(q)
    for ts in tc.tile(s):
        freqs = torch.outer(positions[ts].to(torch.float32) * scale, inv_freq[:])
        ang = torch.repeat_interleave(freqs, 2, dim=1)
        cos = torch.cos(ang)[:, None, :]
        sin = torch.sin(ang)[:, None, :]
        x = q[ts, :, :]
        x_even, x_odd = x[:, :, 0::2], x[:, :, 1::2]
        rot = torch.stack([-x_odd, x_even], dim=-1).flatten(
            2
        )  # failed before regroup.py's fix (repro_1)
        out[ts, :, :] = x * cos + rot * sin
    return out


def _rope_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (S, H, D)``."""
    s, h, d = shape
    if device == "meta":
        return (
            torch.empty((s, h, d), device="meta"),
            torch.empty((s,), dtype=I64, device="meta"),
            torch.empty((d // 2,), device="meta"),
        )
    g = gen(seed)
    q = randn((s, h, d), F32, device, g)
    pos = randint(0, 8192, (s,), device, g)
    inv_freq = (1.0 / (10000 ** (torch.arange(0, d, 2, dtype=F32) / d))).to(device)
    return q, pos, inv_freq


def rope_gptj_interp_reference(q, positions, inv_freq, scale):
    freqs = torch.outer(positions.float() * scale, inv_freq)
    ang = torch.repeat_interleave(freqs, 2, dim=1)
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    rot = torch.stack([-q[..., 1::2], q[..., 0::2]], dim=-1).flatten(-2)
    return q * cos + rot * sin


# --------------------------------------------------------------------------- cases

SMALL_CONFIGS: dict[str, list[tc.Config]] = {
    "pwl_calibration_bucketize": [
        tc.Config(block_sizes=[1, 1], num_warps=1),
        tc.Config(block_sizes=[4, 8], num_warps=2, reduction_loops=[4]),
        tc.Config(block_sizes=[16, 2], num_warps=4, indexing="block_ptr"),
    ],
    "despike_median3_rolling_stats": [
        tc.Config(block_sizes=[1], num_warps=1),
        tc.Config(block_sizes=[4], num_warps=2, reduction_loops=[None, None, 2, None, 2]),
        tc.Config(block_sizes=[8], num_warps=4, indexing="block_ptr"),
    ],
    "audio_preemphasis_deltas": [
        tc.Config(block_sizes=[1], num_warps=1),
        tc.Config(block_sizes=[2], num_warps=2),
        tc.Config(block_sizes=[4], num_warps=4, indexing="block_ptr"),
    ],
    "poly2_features_fp64_regression": [
        tc.Config(block_sizes=[16], num_warps=1),
        tc.Config(block_sizes=[32], num_warps=2),
        tc.Config(block_sizes=[64], num_warps=4, indexing="block_ptr"),
    ],
    "quantile_bin_target_encode": [
        tc.Config(block_sizes=[1], num_warps=1),
        tc.Config(block_sizes=[8], num_warps=2, reduction_loops=[4]),
        tc.Config(block_sizes=[32], num_warps=4, indexing="block_ptr"),
    ],
    "no_repeat_trigram_penalty": [
        tc.Config(block_sizes=[1, 16], num_warps=1),
        tc.Config(block_sizes=[2, 8], num_warps=2, reduction_loops=[None, None, 2]),
        tc.Config(block_sizes=[4, 64], num_warps=4, indexing="block_ptr"),
    ],
    "block_fp8_mantissa_frexp": [
        tc.Config(block_sizes=[1, 1], num_warps=1),
        tc.Config(block_sizes=[2, 4], num_warps=2, reduction_loops=[8]),
        tc.Config(block_sizes=[8, 2], num_warps=4, indexing="block_ptr"),
    ],
    "chunked_discount_cumprod_fp64": [
        tc.Config(block_sizes=[1, 16], num_warps=1),
        tc.Config(block_sizes=[2, 32], num_warps=2),
        tc.Config(block_sizes=[4, 64], num_warps=4, indexing="block_ptr"),
    ],
    "rope_gptj_position_interp": [
        tc.Config(block_sizes=[1], num_warps=1),
        tc.Config(block_sizes=[4], num_warps=2),
        tc.Config(block_sizes=[8], num_warps=4, indexing="block_ptr"),
    ],
}


CASES: list[Case] = [
    Case(
        name="pwl_calibration_bucketize",
        kernels=(pwl_calibrate,),
        make_inputs=_pwl_inputs,
        reference=pwl_calibrate_reference,
        run=with_args("pwl_calibrate"),
        gpu_shapes=((1 << 20, 64, 32),),  # a CTR model's 64 dense features, 1M rows
        cpu_shapes=((37, 5, 9), (64, 3, 16), (19, 7, 33)),
        atol=1e-5,
    ),
    Case(
        name="despike_median3_rolling_stats",
        kernels=(despike_rolling_stats,),
        make_inputs=_despike_inputs,
        reference=despike_rolling_stats_reference,
        run=with_args("despike_rolling_stats"),
        gpu_shapes=((8192, 2048),),
        cpu_shapes=((5, 40), (8, 64), (3, 97)),
        atol=1e-5,
    ),
    Case(
        name="audio_preemphasis_deltas",
        kernels=(preemphasis_deltas,),
        make_inputs=_preemph_inputs,
        reference=ref_args(preemphasis_deltas_reference, PREEMPH_CHANNEL, PREEMPH),
        run=with_args("preemphasis_deltas", PREEMPH_CHANNEL, PREEMPH),
        gpu_shapes=((256, 4, 16000),),  # 1 s at 16 kHz, 4 mics
        cpu_shapes=((3, 2, 50), (4, 3, 64), (2, 4, 33)),
        atol=1e-5,
    ),
    Case(
        name="poly2_features_fp64_regression",
        kernels=(poly2_regression,),
        make_inputs=_poly_inputs,
        reference=poly2_regression_reference,
        run=with_args("poly2_regression"),
        gpu_shapes=((262144, 16, 64),),
        cpu_shapes=((20, 6, 16), (33, 8, 24), (16, 11, 32)),
        atol=1e-10,
    ),
    Case(
        name="quantile_bin_target_encode",
        kernels=(quantile_bin_encode,),
        make_inputs=_qbin_inputs,
        reference=quantile_bin_encode_reference,
        run=with_args("quantile_bin_encode"),
        gpu_shapes=((1 << 20, 128, 64),),
        cpu_shapes=((50, 4, 8), (33, 6, 5), (64, 3, 16)),
        atol=1e-6,
    ),
    Case(
        name="no_repeat_trigram_penalty",
        kernels=(ngram_repeat_penalty,),
        make_inputs=_ngram_inputs,
        reference=ref_args(ngram_repeat_penalty_reference, REP_PENALTY),
        run=with_args("ngram_repeat_penalty", REP_PENALTY),
        gpu_shapes=((64, 512, 32000),),
        cpu_shapes=((3, 12, 40), (4, 16, 64), (2, 9, 50)),
        atol=1e-5,
    ),
    Case(
        name="block_fp8_mantissa_frexp",
        kernels=(block_fp_quantize,),
        make_inputs=_bfp_inputs,
        reference=block_fp_quantize_reference,
        run=with_args("block_fp_quantize"),
        gpu_shapes=((8192, 8192),),
        cpu_shapes=((5, 64), (8, 96), (3, 160)),
        atol=1e-30,
    ),
    Case(
        name="chunked_discount_cumprod_fp64",
        kernels=(discount_cumprod_fp64,),
        make_inputs=_cumprod_inputs,
        reference=discount_cumprod_fp64_reference,
        run=with_args("discount_cumprod_fp64"),
        gpu_shapes=((4096, 4096),),
        cpu_shapes=((5, 70), (8, 128), (3, 200)),
        atol=1e-12,
    ),
    Case(
        name="rope_gptj_position_interp",
        kernels=(rope_gptj_interp,),
        make_inputs=_rope_inputs,
        reference=ref_args(rope_gptj_interp_reference, PI_SCALE),
        run=with_args("rope_gptj_interp", PI_SCALE),
        gpu_shapes=((8192, 32, 128),),
        cpu_shapes=((9, 2, 16), (16, 3, 32), (7, 4, 64)),
        atol=1e-5,
    ),
]

# One default does not cross-compile at its GPU shape yet (/work/fuzz39d/REPORT.md, bug 4: the
# fp64 regression's summed products exceed gfx942's LDS); it stays in this module as written and
# out of the registry, whose default sweep compiles every case. (The despiker's reflect pad +
# unfold of a computed 2048-row and the pre-emphasis deltas of a 16000-sample computed row,
# bugs 3 and 5, compile since session 40: frontend/recompute.py.)
_NOT_COMPILING = {"poly2_features_fp64_regression"}
CASES = [case for case in CASES if case.name not in _NOT_COMPILING]

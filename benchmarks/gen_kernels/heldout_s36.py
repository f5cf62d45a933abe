"""Held-out kernels written from the docs only, session 36 (see :mod:`.heldout_rows` for why
held-out kernels exist): reinforcement learning, recommendation, speculative decoding,
detection, physics, recurrent cells, structured prediction and low-precision GEMM inputs.
Generalized advantage estimation as CleanRL's PPO computes it (time-major [T, E], the next
step's value and done read through a clamped ``t + 1`` row index, the recurrence as a reverse
``tc.associative_scan`` over the whole time dim; advantages and returns); DLRM's dot
interaction (the dense vector's dots with every embedding, a ``torch.bmm`` of a block of
samples' embeddings with themselves, the strictly lower triangle scattered into the output
row after the dense features by ``tc.store`` at computed columns with a triangle
``extra_mask``); speculative decoding's rejection sampling (the draft tokens' probabilities
gathered from the draft and target distributions, the accepted prefix by a cumprod of the
accept flags, then a chunked walk over the vocabulary of the residual max(p - q, 0) at the
first rejected position, a row index computed per row, sampled by an exponential race
against pre-drawn noise, argmax first on ties); torchvision's RoIAlign (aligned, 7 x 7 bins of
2 x 2 bilinear samples with its edge rules, a program per (roi, channel tile), the batch
index and box read as scalars, four corner gathers a sample); all-pairs n-body
accelerations and potentials with Plummer softening over [N, 4] (x, y, z, m) bodies; a
fused nn.GRUCell (six dot accumulators over two K loops, bf16 in, fp32 math, bf16 out);
pytorch-crf's log likelihood (gold path score by gathers, the forward algorithm over time in
a ``tc.grid`` loop with a logsumexp over the previous tag of a [B, C, C] tile, a prefix
mask); and DeepSeek / DeepGEMM 1 x 128 fp8 (e4m3) activation quantization with UE8M0
(power-of-two) scales stored transposed, [K / 128, M]. Each comes with its eager reference
(see :mod:`.case`): CleanRL's loop, DLRM's interact_features, a row-at-a-time rejection
sampler, torchvision's bilinear rules vectorized, dense pairwise differences, torch's own
``_VF.gru_cell``, pytorch-crf's _compute_score / _compute_normalizer and sglang's
per_token_group_quant_fp8 math.

Notes: all eight compiled and matched at every CPU shape on the first try (seeds 0 and 1;
with the autotuner on an empty cache, with ``TILECRAFT_NO_AUTOTUNE=1`` on an empty cache, in
ref mode, and with explicit small configs, two or three a kernel: pid types, ``num_warps``,
``deferred_sums=False``; /work/fuzz36a/verify.py). Max errors: 0 for GAE, DLRM (bf16), the
speculative decoding counts and tokens, the GRU (bf16), and fp8 codes and scales; 2.4e-7
for RoIAlign; 2.3e-5 for n-body accelerations and potentials up to ~70; 1.9e-6 for CRF log
likelihoods up to ~33 (1.9e-6 for GAE in ref mode). Also matched (/work/fuzz36a/probes):
``static_shapes=False`` for six of the eight (DLRM's ``out[tb, :d]`` and ``torch.arange(k + 1)``
need static sizes; the first says so), strided / transposed / every-other-element inputs,
``reduction_loops`` chunks, ``split_reductions`` on the n-body and GRU loops, torch.compile
for six, a standalone export of RoIAlign, and natural variants: batch-major GAE through
``values[te, 1:]`` / ``values[te, :t]`` slices and ``~dones``, ``torch.roll(v, -1, 0)`` of a
loaded tile, CleanRL's sequential loop as ``tc.grid(t)`` with ``step = t - 1 - i``, the first
rejection as ``argmax(~accept)`` with ``accept.all(dim=1)``, a sequential ``while`` / ``if``
acceptance loop on loaded scalars, ``.max(dim, keepdim=True).values / .indices``, n-body
vectorized over a whole dim of 3 (``bodies[t, :3]``, ``r2 ** -1.5``), RoIAlign's 4-D gather
``feat[b, c_tile, y, x]``, the full DLRM Gram matrix with ``e @ e.transpose(-1, -2)`` and a
batched matvec, the UE8M0 exponent stored as uint8 through ``.T``, and Viterbi decoding
(backpointers stored and read back in the same program, a backtrack over loaded tags).

Bugs found (repro_N.py in /work/fuzz36a, REPORT.md there): (1) ``torch.all`` / ``torch.any``
over a padded dim compile to an int32 value (``tl.min(tl.where(rmask, v, 1), 1)``), so a
``torch.where`` on it emits ``tl.where`` with an int32 condition, which Triton 3.6 warns "will
error out in a future triton release" (values right today); (2) a host tensor of a dtype
device code lacks (``torch.float8_e8m0fnu`` scales) is found only per candidate config: a
NoWorkingConfigError table of identical compile errors whose hint says to report a tilecraft
bug, not one early error at the line; (3) with ``static_shapes=False``, ``torch.arange(k + 1)``
fails with "tc.arange needs int bounds; use tile.index for a tile's indices", wrong advice for
a run-time size (``torch.arange(k)`` works); (4) under ``torch.compile(fullgraph=True)`` the
GRU cell (``w_ih.view(3, h, i)``) and the fp8 quantization (``x.view(m, k // 128, 128)``) fail
on their first call ("shape '[720, 5, 128]' is invalid for input of size 518400"): the op's
output layout is read by running the host code on stand-in arguments whose every dim is 16,
48, 240 or 720. (5) ``torch.tril_indices`` in device code (DLRM's pair order) runs eagerly and fails as "index
of type Tensor on 'z'", naming neither the op nor a fix. The kernels here are written in their natural form (no workaround needed
outside torch.compile). ``spec_decode_accept`` divides by the noise in every lane of a vocabulary tile, the
padded lanes past V included (they load 0, so the interpreter warns of an invalid divide,
0 / 0); the argmax leaves them out. Not bugs (documented, or clear errors): a vector accumulator
started as a Python ``0.0`` ("loop-carried 'pot' changes shape"), a whole-K ``@`` with K = 1,
``split_reductions`` on a loop that also carries an argmax index. Unlisted ops wanted:
``torch.triu_indices`` / ``tril_indices`` (DLRM's pair order, computed by hand), ``torch.topk``
/ ``torch.multinomial`` (not needed here), ``torch.float8_e8m0fnu`` stores, ``Tensor.mT``,
``torch.einsum``, ``torch.stack`` / ``torch.cat`` of 3 tiles (xyz), ``torch.frexp`` (the
UE8M0 exponent), ``torch.nn.functional.linear``.
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
I64 = torch.int64


# --------------------------------------------------------------------------- GAE

GAE_GAMMA = 0.99
GAE_LAMBDA = 0.95


def _gae_then(a1, b1, a2, b2):
    """The later step's map x -> a1 x + b1 composed with the earlier's x -> a2 x + b2."""
    return a1 * a2, a2 * b1 + b2


@tc.kernel(static_shapes=True)
def gae_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    next_done: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation as CleanRL's PPO computes it, time-major: rewards,
    values [T, E] fp32, dones [T, E] bool (True where the observation at t began a new
    episode), next_value [E] fp32 and next_done [E] bool for the step after the rollout.
    delta_t = r_t + gamma V_{t+1} (1 - d_{t+1}) - V_t and A_t = delta_t + gamma lambda
    (1 - d_{t+1}) A_{t+1}: a linear recurrence run backwards over T, one scan a column tile
    of environments. Returns the advantages and the returns (A + V)."""
    t, e = rewards.size()
    adv = torch.empty_like(rewards)
    ret = torch.empty_like(rewards)
    for te in tc.tile(e):
        steps = torch.arange(t)
        nxt = torch.clamp(steps + 1, max=t - 1)
        last = (steps == t - 1)[:, None]
        v = values[:, te]
        v_next = torch.where(last, next_value[te][None, :], values[nxt, te])
        d_next = torch.where(last, next_done[te][None, :], dones[nxt, te])
        nonterminal = 1.0 - d_next.float()
        delta = rewards[:, te] + GAE_GAMMA * v_next * nonterminal - v
        decay = GAE_GAMMA * GAE_LAMBDA * nonterminal
        _, a = tc.associative_scan(_gae_then, (decay, delta), 0, reverse=True)
        adv[:, te] = a
        ret[:, te] = a + v
    return adv, ret


def _gae_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, E)``: rewards randn, values randn times 2, dones True with probability
    0.05 (the first step of one environment always one), next_done 0.05 likewise."""
    t, e = shape
    if device == "meta":
        r, v, nv = meta_tensors((t, e), (t, e), (e,))
        return (
            r,
            v,
            torch.empty((t, e), dtype=torch.bool, device="meta"),
            nv,
            torch.empty((e,), dtype=torch.bool, device="meta"),
        )
    g = gen(seed)
    rewards = torch.randn((t, e), generator=g)
    values = torch.randn((t, e), generator=g) * 2
    dones = torch.rand((t, e), generator=g) < 0.05
    dones[0, 0] = True
    next_value = torch.randn((e,), generator=g) * 2
    next_done = torch.rand((e,), generator=g) < 0.05
    next_done[-1] = True
    return (
        rewards.to(device),
        values.to(device),
        dones.to(device),
        next_value.to(device),
        next_done.to(device),
    )


def gae_advantages_reference(rewards, values, dones, next_value, next_done):
    """CleanRL's ppo.py loop, verbatim but for names."""
    num_steps = rewards.size(0)
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal = 1.0 - next_done.float()
            nextvalues = next_value
        else:
            nextnonterminal = 1.0 - dones[t + 1].float()
            nextvalues = values[t + 1]
        delta = rewards[t] + GAE_GAMMA * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + GAE_GAMMA * GAE_LAMBDA * nextnonterminal * lastgaelam
    return advantages, advantages + values


# --------------------------------------------------------------------------- DLRM interaction


@tc.kernel(static_shapes=True)
def dlrm_dot_interaction(dense: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
    """DLRM's dot interaction (interact_features with interaction_op "dot", self-interaction
    off): dense [B, D] bf16 (the bottom MLP's output) and emb [B, S, D] bf16 (the S sparse
    features' embeddings). The F = S + 1 vectors of a sample are dotted pairwise (fp32
    accumulation) and the strictly lower triangle (i > j, row-major: DLRM's li / lj order) is
    appended to the dense vector: out [B, D + F (F - 1) / 2] bf16. Feature 0 is the dense
    vector, so the pairs (s + 1, 0) are the dense-embedding dots, and (s + 1, r + 1) with
    r < s the embedding-embedding dots from one batched matmul a block of samples."""
    b, s, d = emb.size()
    n_pairs = (s + 1) * s // 2
    out = torch.empty([b, d + n_pairs], dtype=dense.dtype, device=dense.device)
    for tb in tc.tile(b):
        x = dense[tb, :]
        e = emb[tb, :, :]
        out[tb, :d] = x
        # (s + 1, 0): the dense vector with every embedding
        zd = torch.sum(e.float() * x.float()[:, None, :], dim=-1)  # [B, S]
        si = torch.arange(s)
        rows = tb.index[:, None]
        tc.store(out, [rows, d + (si * (si + 1) // 2)[None, :]], zd.to(out.dtype))
        # (s + 1, r + 1), r < s: pairs of embeddings
        ze = torch.bmm(e, e.transpose(1, 2)).float()  # [B, S, S]
        pos = d + (si * (si + 1) // 2)[:, None] + si[None, :] + 1
        below = (si[None, :] < si[:, None])[None, :, :]
        tc.store(
            out, [tb.index[:, None, None], pos[None, :, :]], ze.to(out.dtype), extra_mask=below
        )
    return out


def _dlrm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, S, D)``: dense and embedding vectors bf16 randn times 0.5."""
    b, s, d = shape
    if device == "meta":
        return meta_tensors((b, d), (b, s, d), dtype=BF16)
    g = gen(seed)
    return randn((b, d), BF16, device, g) * 0.5, randn((b, s, d), BF16, device, g) * 0.5


def dlrm_dot_interaction_reference(dense, emb):
    """facebookresearch/dlrm's interact_features ("dot", arch_interaction_itself False) in
    fp32, cast back to bf16."""
    (batch_size, d) = dense.shape
    T = torch.cat([dense.float()[:, None, :], emb.float()], dim=1)
    Z = torch.bmm(T, torch.transpose(T, 1, 2))
    _, ni, nj = Z.shape
    li = torch.tensor([i for i in range(ni) for j in range(i)], dtype=torch.long)
    lj = torch.tensor([j for i in range(nj) for j in range(i)], dtype=torch.long)
    Zflat = Z[:, li, lj]
    R = torch.cat([dense.float(), Zflat], dim=1)
    return R.to(dense.dtype)


# --------------------------------------------------------------------------- speculative decoding


@tc.kernel(static_shapes=True)
def spec_decode_accept(
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    draft_ids: torch.Tensor,
    uniform: torch.Tensor,
    exp_noise: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Speculative decoding's rejection sampling (Leviathan et al. 2023; vLLM's
    RejectionSampler with pre-drawn noise): draft_probs [B, K, V] fp32 of the draft model,
    target_probs [B, K + 1, V] fp32 of the target model, the K draft_ids [B, K] int64,
    uniform [B, K] fp32 in [0, 1) and exp_noise [B, V] fp32 (Exp(1) draws). Draft token k is
    accepted where u_k q_k(x_k) <= p_k(x_k); the first rejection at n ends the row, and the
    token there is sampled from max(p_n - q_n, 0) (from p_K when all K are accepted) as
    argmax(probs / noise), the exponential race (first index on ties). Returns the accepted
    count [B] int64 and the output tokens [B, K + 1] int64: the accepted drafts, then the
    sampled token, then -1."""
    b, k, v = draft_probs.size()
    n_acc = torch.empty([b], dtype=torch.int64, device=draft_probs.device)
    out_ids = torch.empty([b, k + 1], dtype=torch.int64, device=draft_probs.device)
    for tb in tc.tile(b):
        rows = tb.index[:, None]
        kk = torch.arange(k)[None, :]
        ids = draft_ids[tb, :]
        p_t = target_probs[rows, kk, ids]
        p_d = draft_probs[rows, kk, ids]
        accept = uniform[tb, :] * p_d <= p_t
        n = torch.sum(torch.cumprod(accept.to(torch.int64), dim=1), dim=1)  # [B]
        n_d = torch.clamp(n, max=k - 1)
        has_draft = (n < k)[:, None]
        best = tc.full([tb], -1.0, dtype=torch.float32)
        best_i = tc.zeros([tb], dtype=torch.int64)
        for tv in tc.tile(v):
            p = target_probs[tb.index, n, tv]
            q = torch.where(has_draft, draft_probs[tb.index, n_d, tv], 0.0)
            resid = torch.clamp(p - q, min=0.0)
            score = resid / exp_noise[tb, tv]
            m, i = torch.max(score, dim=1)
            better = m > best
            best_i = torch.where(better, i + tv.begin, best_i)
            best = torch.where(better, m, best)
        n_acc[tb] = n
        slot = torch.arange(k + 1)[None, :]
        prev = draft_ids[rows, torch.clamp(slot, max=k - 1)]
        n2 = n[:, None]
        out_ids[tb, :] = torch.where(slot < n2, prev, torch.where(slot == n2, best_i[:, None], -1))
    return n_acc, out_ids


def _spec_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, K, V)``: draft and target probabilities softmax of randn times 2 (the
    target's logits the draft's plus noise, so most drafts are accepted), draft ids sampled
    from the draft, uniforms, Exp(1) noise."""
    b, k, v = shape
    if device == "meta":
        dp, tp, u, en = meta_tensors((b, k, v), (b, k + 1, v), (b, k), (b, v))
        return dp, tp, torch.empty((b, k), dtype=I64, device="meta"), u, en
    g = gen(seed)
    dl = torch.randn((b, k + 1, v), generator=g) * 2
    tl_ = dl + torch.randn((b, k + 1, v), generator=g) * 0.7
    draft = torch.softmax(dl[:, :k], dim=-1)
    target = torch.softmax(tl_, dim=-1)
    ids = torch.multinomial(draft.reshape(b * k, v), 1, generator=g).view(b, k)
    ids[0, 0] = max(v - 1, 1) if v > 1 else 0
    u = torch.rand((b, k), generator=g)
    noise = -torch.log(1.0 - torch.rand((b, v), generator=g))
    return draft.to(device), target.to(device), ids.to(device), u.to(device), noise.to(device)


def spec_decode_accept_reference(draft_probs, target_probs, draft_ids, uniform, exp_noise):
    """A row at a time, as a reference implementation of the paper's algorithm reads."""
    b, k, v = draft_probs.shape
    n_acc = torch.zeros(b, dtype=I64)
    out = torch.full((b, k + 1), -1, dtype=I64)
    for r in range(b):
        n = 0
        while n < k:
            x = draft_ids[r, n]
            if uniform[r, n] * draft_probs[r, n, x] <= target_probs[r, n, x]:
                out[r, n] = x
                n += 1
            else:
                break
        if n < k:
            dist = torch.clamp(target_probs[r, n] - draft_probs[r, n], min=0.0)
        else:
            dist = target_probs[r, k]
        out[r, n] = torch.argmax(dist / exp_noise[r])
        n_acc[r] = n
    return n_acc.to(draft_probs.device), out.to(draft_probs.device)


# --------------------------------------------------------------------------- RoIAlign

ROI_OUT = 7
ROI_SAMPLES = 2
ROI_SCALE = 0.25


@tc.kernel(static_shapes=True)
def roi_align(feat: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
    """torchvision.ops.roi_align(feat, rois, output_size=7, spatial_scale=1/4,
    sampling_ratio=2, aligned=True): feat [N, C, H, W] fp32, rois [R, 5] fp32 (batch index,
    x1, y1, x2, y2 in image coordinates). Each of the 7 x 7 bins averages 2 x 2 bilinear
    samples, torchvision's bilinear_interpolate edge rules included (0 outside [-1, H] x
    [-1, W], clamped to the last row / column). A program per (roi, channel tile) holds the
    49 bins as a whole dim of 49 and gathers the four corners of each sample."""
    n, c, h, w = feat.size()
    r = rois.size(0)
    out = torch.empty([r, c, ROI_OUT, ROI_OUT], dtype=feat.dtype, device=feat.device)
    fv = feat.view(n, c, h * w)
    ov = out.view(r, c, ROI_OUT * ROI_OUT)
    for tr, tcn in tc.tile([r, c], block_size=[1, None]):
        bi = rois[tr.begin, 0].to(torch.int64)
        x1 = rois[tr.begin, 1] * ROI_SCALE - 0.5
        y1 = rois[tr.begin, 2] * ROI_SCALE - 0.5
        x2 = rois[tr.begin, 3] * ROI_SCALE - 0.5
        y2 = rois[tr.begin, 4] * ROI_SCALE - 0.5
        bin_w = (x2 - x1) / ROI_OUT
        bin_h = (y2 - y1) / ROI_OUT
        p = torch.arange(ROI_OUT * ROI_OUT)
        ph = (p // ROI_OUT).float()
        pw = (p % ROI_OUT).float()
        acc = tc.zeros([tcn, ROI_OUT * ROI_OUT], dtype=torch.float32)
        for iy in tc.static_range(ROI_SAMPLES):
            for ix in tc.static_range(ROI_SAMPLES):
                y = y1 + ph * bin_h + (iy + 0.5) * bin_h / ROI_SAMPLES
                x = x1 + pw * bin_w + (ix + 0.5) * bin_w / ROI_SAMPLES
                inside = (y >= -1.0) & (y <= h) & (x >= -1.0) & (x <= w)
                y = torch.clamp(y, min=0.0)
                x = torch.clamp(x, min=0.0)
                y_low = y.to(torch.int64)
                x_low = x.to(torch.int64)
                y_edge = y_low >= h - 1
                x_edge = x_low >= w - 1
                y_low = torch.where(y_edge, h - 1, y_low)
                x_low = torch.where(x_edge, w - 1, x_low)
                y_high = torch.where(y_edge, h - 1, y_low + 1)
                x_high = torch.where(x_edge, w - 1, x_low + 1)
                y = torch.where(y_edge, y_low.float(), y)
                x = torch.where(x_edge, x_low.float(), x)
                ly = y - y_low.float()
                lx = x - x_low.float()
                hy = 1.0 - ly
                hx = 1.0 - lx
                v1 = fv[bi, tcn, y_low * w + x_low]
                v2 = fv[bi, tcn, y_low * w + x_high]
                v3 = fv[bi, tcn, y_high * w + x_low]
                v4 = fv[bi, tcn, y_high * w + x_high]
                val = (hy * hx)[None, :] * v1 + (hy * lx)[None, :] * v2
                val = val + (ly * hx)[None, :] * v3 + (ly * lx)[None, :] * v4
                acc = acc + torch.where(inside[None, :], val, 0.0)
        ov[tr.begin, tcn, :] = acc / (ROI_SAMPLES * ROI_SAMPLES)
    return out


def _roi_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, C, H, W, R)``: feat randn; R boxes in an image of 4 H x 4 W with corners
    uniform over it and a little past its edges (width and height at least 1 px), batch
    indices uniform in [0, N)."""
    n, c, h, w, r = shape
    if device == "meta":
        return meta_tensors((n, c, h, w), (r, 5))
    g = gen(seed)
    feat = torch.randn((n, c, h, w), generator=g)
    img_h, img_w = 4 * h, 4 * w
    xa = torch.rand(r, generator=g) * (img_w + 8) - 4
    ya = torch.rand(r, generator=g) * (img_h + 8) - 4
    bw = torch.rand(r, generator=g) * img_w + 1
    bh = torch.rand(r, generator=g) * img_h + 1
    bidx = torch.randint(0, n, (r,), generator=g).float()
    rois = torch.stack([bidx, xa, ya, xa + bw, ya + bh], dim=1)
    if r > 1:
        rois[1, 0] = n - 1
    return feat.to(device), rois.to(device)


def roi_align_reference(feat, rois):
    """torchvision's roi_align_forward_kernel (aligned, sampling_ratio 2) written out in
    vectorized torch: every sample point of every bin, its four corners gathered."""
    n, c, h, w = feat.shape
    r = rois.size(0)
    bidx = rois[:, 0].long()
    x1 = rois[:, 1] * ROI_SCALE - 0.5
    y1 = rois[:, 2] * ROI_SCALE - 0.5
    x2 = rois[:, 3] * ROI_SCALE - 0.5
    y2 = rois[:, 4] * ROI_SCALE - 0.5
    bin_w = (x2 - x1) / ROI_OUT
    bin_h = (y2 - y1) / ROI_OUT
    g = torch.arange(ROI_OUT, dtype=F32, device=feat.device)
    s = torch.arange(ROI_SAMPLES, dtype=F32, device=feat.device)
    # [R, 7, 2] sample coordinates along each axis
    ys = (
        y1[:, None, None]
        + g[None, :, None] * bin_h[:, None, None]
        + (s[None, None, :] + 0.5) * bin_h[:, None, None] / ROI_SAMPLES
    )
    xs = (
        x1[:, None, None]
        + g[None, :, None] * bin_w[:, None, None]
        + (s[None, None, :] + 0.5) * bin_w[:, None, None] / ROI_SAMPLES
    )
    y = ys[:, :, :, None, None].expand(r, ROI_OUT, ROI_SAMPLES, ROI_OUT, ROI_SAMPLES)
    x = xs[:, None, None, :, :].expand(r, ROI_OUT, ROI_SAMPLES, ROI_OUT, ROI_SAMPLES)
    inside = (y >= -1.0) & (y <= h) & (x >= -1.0) & (x <= w)
    y = y.clamp(min=0)
    x = x.clamp(min=0)
    y_low = y.long()
    x_low = x.long()
    y_edge = y_low >= h - 1
    x_edge = x_low >= w - 1
    y_low = torch.where(y_edge, h - 1, y_low)
    x_low = torch.where(x_edge, w - 1, x_low)
    y_high = torch.where(y_edge, h - 1, y_low + 1)
    x_high = torch.where(x_edge, w - 1, x_low + 1)
    y = torch.where(y_edge, y_low.float(), y)
    x = torch.where(x_edge, x_low.float(), x)
    ly, lx = y - y_low, x - x_low
    hy, hx = 1 - ly, 1 - lx
    fb = feat[bidx]  # [R, C, H, W]
    fl = fb.reshape(r, c, h * w)

    def at(yy, xx):
        idx = (yy * w + xx).reshape(r, 1, -1).expand(r, c, -1)
        return torch.gather(fl, 2, idx).reshape(r, c, ROI_OUT, ROI_SAMPLES, ROI_OUT, ROI_SAMPLES)

    wts = [(hy * hx), (hy * lx), (ly * hx), (ly * lx)]
    val = (
        wts[0][:, None] * at(y_low, x_low)
        + wts[1][:, None] * at(y_low, x_high)
        + wts[2][:, None] * at(y_high, x_low)
        + wts[3][:, None] * at(y_high, x_high)
    )
    val = torch.where(inside[:, None], val, 0.0)
    return val.sum(dim=(3, 5)) / (ROI_SAMPLES * ROI_SAMPLES)


# --------------------------------------------------------------------------- n-body

NBODY_G = 1.0
NBODY_EPS2 = 0.01


@tc.kernel(static_shapes=True)
def nbody_accel(bodies: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """All-pairs gravitational acceleration with Plummer softening (GPU Gems 3, ch. 31):
    bodies [N, 4] fp32 as (x, y, z, mass). a_i = G sum_j m_j (r_j - r_i) / (|r_j - r_i|^2 +
    eps^2)^(3/2) (the self term is 0) and the potential phi_i = -G sum_{j != i} m_j /
    sqrt(|r_j - r_i|^2 + eps^2). A program per block of bodies walks the others in tiles.
    Returns acc [N, 3] and phi [N]."""
    n = bodies.size(0)
    acc = torch.empty([n, 3], dtype=torch.float32, device=bodies.device)
    phi = torch.empty([n], dtype=torch.float32, device=bodies.device)
    for ti in tc.tile(n):
        xi, yi, zi = bodies[ti, 0][:, None], bodies[ti, 1][:, None], bodies[ti, 2][:, None]
        ax = tc.zeros([ti], dtype=torch.float32)
        ay = tc.zeros([ti], dtype=torch.float32)
        az = tc.zeros([ti], dtype=torch.float32)
        pot = tc.zeros([ti], dtype=torch.float32)
        for tj in tc.tile(n):
            xj, yj, zj, mj = bodies[tj, 0], bodies[tj, 1], bodies[tj, 2], bodies[tj, 3]
            dx = xj[None, :] - xi
            dy = yj[None, :] - yi
            dz = zj[None, :] - zi
            inv_r = torch.rsqrt(dx * dx + dy * dy + dz * dz + NBODY_EPS2)
            s = mj[None, :] * inv_r * inv_r * inv_r
            ax = ax + torch.sum(s * dx, dim=1)
            ay = ay + torch.sum(s * dy, dim=1)
            az = az + torch.sum(s * dz, dim=1)
            not_self = ti.index[:, None] != tj.index[None, :]
            pot = pot + torch.sum(torch.where(not_self, mj[None, :] * inv_r, 0.0), dim=1)
        acc[ti, 0] = NBODY_G * ax
        acc[ti, 1] = NBODY_G * ay
        acc[ti, 2] = NBODY_G * az
        phi[ti] = -NBODY_G * pot
    return acc, phi


def _nbody_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: positions randn (a Gaussian cluster), masses uniform in [0.5, 1.5)."""
    (n,) = shape
    if device == "meta":
        return meta_tensors((n, 4))
    g = gen(seed)
    pos = torch.randn((n, 3), generator=g)
    mass = torch.rand((n, 1), generator=g) + 0.5
    return (torch.cat([pos, mass], dim=1).to(device),)


def nbody_accel_reference(bodies):
    """Dense pairwise differences, a block of 2048 targets at a time (memory)."""
    pos, m = bodies[:, :3], bodies[:, 3]
    n = bodies.size(0)
    accs, phis = [], []
    for a in range(0, n, 2048):
        pi = pos[a : a + 2048]
        d = pos[None, :, :] - pi[:, None, :]  # [b, N, 3]
        r2 = (d * d).sum(-1) + NBODY_EPS2
        inv_r = torch.rsqrt(r2)
        accs.append(NBODY_G * ((m[None, :] * inv_r**3)[:, :, None] * d).sum(1))
        self_mask = (
            torch.arange(a, a + pi.size(0), device=bodies.device)[:, None]
            == torch.arange(n, device=bodies.device)[None, :]
        )
        phis.append(-NBODY_G * (m[None, :] * inv_r).masked_fill(self_mask, 0.0).sum(1))
    return torch.cat(accs), torch.cat(phis)


# --------------------------------------------------------------------------- GRU cell


@tc.kernel(static_shapes=True)
def gru_cell(
    x: torch.Tensor,
    h: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor,
    b_hh: torch.Tensor,
) -> torch.Tensor:
    """torch.nn.GRUCell forward: x [B, I] bf16, h [B, H] bf16, w_ih [3H, I] and w_hh [3H, H]
    bf16 (gate rows r, z, n as nn.GRUCell stores them), biases [3H] fp32. r = sigmoid(x W_ir^T
    + b_ir + h W_hr^T + b_hr), z likewise, n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn)),
    h' = (1 - z) n + z h, fp32 math, bf16 out. A program per (batch tile, hidden tile) keeps
    six accumulators: the three gates of each GEMM (n's two halves stay apart for r)."""
    b, i = x.size()
    hd = h.size(1)
    wi = w_ih.view(3, hd, i)
    wh = w_hh.view(3, hd, hd)
    bi = b_ih.view(3, hd)
    bh = b_hh.view(3, hd)
    out = torch.empty_like(h)
    for tb, th in tc.tile([b, hd]):
        gi_r = tc.zeros([tb, th], dtype=torch.float32)
        gi_z = tc.zeros([tb, th], dtype=torch.float32)
        gi_n = tc.zeros([tb, th], dtype=torch.float32)
        for tk in tc.tile(i):
            xk = x[tb, tk]
            gi_r = tc.dot(xk, wi[0, th, tk].t(), acc=gi_r)
            gi_z = tc.dot(xk, wi[1, th, tk].t(), acc=gi_z)
            gi_n = tc.dot(xk, wi[2, th, tk].t(), acc=gi_n)
        gh_r = tc.zeros([tb, th], dtype=torch.float32)
        gh_z = tc.zeros([tb, th], dtype=torch.float32)
        gh_n = tc.zeros([tb, th], dtype=torch.float32)
        for tk in tc.tile(hd):
            hk = h[tb, tk]
            gh_r = tc.dot(hk, wh[0, th, tk].t(), acc=gh_r)
            gh_z = tc.dot(hk, wh[1, th, tk].t(), acc=gh_z)
            gh_n = tc.dot(hk, wh[2, th, tk].t(), acc=gh_n)
        r = torch.sigmoid(gi_r + bi[0, th][None, :] + gh_r + bh[0, th][None, :])
        z = torch.sigmoid(gi_z + bi[1, th][None, :] + gh_z + bh[1, th][None, :])
        nn_ = torch.tanh(gi_n + bi[2, th][None, :] + r * (gh_n + bh[2, th][None, :]))
        h_old = h[tb, th].float()
        out[tb, th] = ((1.0 - z) * nn_ + z * h_old).to(out.dtype)
    return out


def _gru_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, I, H)``: x, h randn bf16, weights and biases uniform in +-1/sqrt(H)
    (nn.GRUCell's init)."""
    b, i, hd = shape
    if device == "meta":
        x, h, wi, wh = meta_tensors((b, i), (b, hd), (3 * hd, i), (3 * hd, hd), dtype=BF16)
        return x, h, wi, wh, *meta_tensors((3 * hd,), (3 * hd,))
    g = gen(seed)
    k = hd**-0.5
    x = randn((b, i), BF16, device, g)
    h = randn((b, hd), BF16, device, g)
    wi = ((torch.rand((3 * hd, i), generator=g) * 2 - 1) * k).to(device=device, dtype=BF16)
    wh = ((torch.rand((3 * hd, hd), generator=g) * 2 - 1) * k).to(device=device, dtype=BF16)
    bi = ((torch.rand((3 * hd,), generator=g) * 2 - 1) * k).to(device)
    bh = ((torch.rand((3 * hd,), generator=g) * 2 - 1) * k).to(device)
    return x, h, wi, wh, bi, bh


def gru_cell_reference(x, h, w_ih, w_hh, b_ih, b_hh):
    """torch's own GRU cell (torch._VF.gru_cell, what nn.GRUCell calls) in fp32."""
    out = torch._VF.gru_cell(x.float(), h.float(), w_ih.float(), w_hh.float(), b_ih, b_hh)
    return out.to(h.dtype)


# --------------------------------------------------------------------------- CRF log likelihood


@tc.kernel(static_shapes=True)
def crf_log_likelihood(
    emissions: torch.Tensor,
    tags: torch.Tensor,
    mask: torch.Tensor,
    start_transitions: torch.Tensor,
    end_transitions: torch.Tensor,
    transitions: torch.Tensor,
) -> torch.Tensor:
    """pytorch-crf's CRF(num_tags, batch_first=True).forward(emissions, tags, mask,
    reduction="none"): the log likelihood of each tag sequence. emissions [B, T, C] fp32,
    tags [B, T] int64, mask [B, T] bool (a prefix of each row, the first step always on),
    start / end transitions [C], transitions [C, C] (from, to). The gold path's score is
    gathered step by step; the log partition runs the forward algorithm, alpha [B, C] and
    each step a logsumexp over the previous tag of alpha + transitions + emission. A program
    per block of sequences walks the time steps."""
    b, t, c = emissions.size()
    llh = torch.empty([b], dtype=torch.float32, device=emissions.device)
    for tb in tc.tile(b):
        trans = transitions[:, :]
        tag0 = tags[tb, 0]
        alpha = start_transitions[None, :] + emissions[tb, 0, :]
        score = start_transitions[tag0] + emissions[tb.index, 0, tag0]
        prev = tag0
        last = tag0
        for step in tc.grid(1, t):
            on = mask[tb, step]
            cur = tags[tb, step]
            em = emissions[tb, step, :]
            gain = transitions[prev, cur] + emissions[tb.index, step, cur]
            score = score + torch.where(on, gain, 0.0)
            nxt = torch.logsumexp(alpha[:, :, None] + trans[None, :, :] + em[:, None, :], dim=1)
            alpha = torch.where(on[:, None], nxt, alpha)
            last = torch.where(on, cur, last)
            prev = cur
        score = score + end_transitions[last]
        log_z = torch.logsumexp(alpha + end_transitions[None, :], dim=1)
        llh[tb] = score - log_z
    return llh


def _crf_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, C)``: emissions randn, tags uniform, lengths uniform in [1, T] (the
    first one T), transitions uniform in +-0.1 as pytorch-crf initializes them, times 10."""
    b, t, c = shape
    if device == "meta":
        em, st, en, tr = meta_tensors((b, t, c), (c,), (c,), (c, c))
        return (
            em,
            torch.empty((b, t), dtype=I64, device="meta"),
            torch.empty((b, t), dtype=torch.bool, device="meta"),
            st,
            en,
            tr,
        )
    g = gen(seed)
    em = torch.randn((b, t, c), generator=g)
    tags = torch.randint(0, c, (b, t), generator=g)
    if c > 1:
        tags[0, 0] = c - 1
    lens = torch.randint(1, t + 1, (b,), generator=g)
    lens[0] = t
    mask = torch.arange(t)[None, :] < lens[:, None]
    st = (torch.rand(c, generator=g) * 0.2 - 0.1) * 10
    en = (torch.rand(c, generator=g) * 0.2 - 0.1) * 10
    tr = (torch.rand((c, c), generator=g) * 0.2 - 0.1) * 10
    return tuple(x.to(device) for x in (em, tags, mask, st, en, tr))


def crf_log_likelihood_reference(
    emissions, tags, mask, start_transitions, end_transitions, transitions
):
    """pytorch-crf's _compute_score and _compute_normalizer (seq-first after a transpose)."""
    emissions = emissions.transpose(0, 1)
    tags = tags.transpose(0, 1)
    mask = mask.transpose(0, 1)
    seq_length, batch_size = tags.shape
    maskf = mask.float()
    score = start_transitions[tags[0]]
    score = score + emissions[0, torch.arange(batch_size), tags[0]]
    for i in range(1, seq_length):
        score = score + transitions[tags[i - 1], tags[i]] * maskf[i]
        score = score + emissions[i, torch.arange(batch_size), tags[i]] * maskf[i]
    seq_ends = mask.long().sum(dim=0) - 1
    last_tags = tags[seq_ends, torch.arange(batch_size)]
    score = score + end_transitions[last_tags]
    alpha = start_transitions + emissions[0]
    for i in range(1, seq_length):
        broadcast_score = alpha.unsqueeze(2)
        broadcast_emissions = emissions[i].unsqueeze(1)
        next_score = broadcast_score + transitions + broadcast_emissions
        next_score = torch.logsumexp(next_score, dim=1)
        alpha = torch.where(mask[i].unsqueeze(1), next_score, alpha)
    alpha = alpha + end_transitions
    return score - torch.logsumexp(alpha, dim=1)


# --------------------------------------------------------------------------- fp8 1 x 128, UE8M0

FP8_GROUP = 128
FP8_MAX = 448.0


@tc.kernel(static_shapes=True)
def fp8_group_quant_ue8m0(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V3 / DeepGEMM activation quantization (sglang's per_token_group_quant_fp8 with
    scale_ue8m0 and column_major_scales): x [M, K] bf16 in groups of 128 along K; each
    group's scale is amax / 448 (amax at least 1e-4) rounded up to a power of two
    (2^ceil(log2 s), an e8m0 exponent), q = clamp(x / scale, -448, 448) as float8_e4m3fn.
    Returns q [M, K] and the scales [K / 128, M] fp32, transposed (the layout DeepGEMM's TMA
    loads: the scales of one group of columns contiguous over the rows)."""
    m, k = x.size()
    g = k // FP8_GROUP
    xg = x.view(m, g, FP8_GROUP)
    q = torch.empty([m, k], dtype=torch.float8_e4m3fn, device=x.device)
    qg = q.view(m, g, FP8_GROUP)
    scales = torch.empty([g, m], dtype=torch.float32, device=x.device)
    for tm, tg in tc.tile([m, g]):
        xt = xg[tm, tg, :].float()
        amax = torch.clamp(torch.amax(torch.abs(xt), dim=-1), min=1e-4)
        scale = torch.exp2(torch.ceil(torch.log2(amax / FP8_MAX)))
        qt = torch.clamp(xt / scale[:, :, None], -FP8_MAX, FP8_MAX)
        qg[tm, tg, :] = qt.to(torch.float8_e4m3fn)
        scales[tg, tm] = scale.t()
    return q, scales


def _fp8_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K)``: bf16 randn times a per-group magnitude 10^U(-3, 2) (one group all
    tiny, 1e-6, so its amax clamps to 1e-4)."""
    m, k = shape
    if device == "meta":
        return meta_tensors((m, k), dtype=BF16)
    g = gen(seed)
    mag = 10.0 ** (torch.rand((m, k // FP8_GROUP, 1), generator=g) * 5 - 3)
    x = torch.randn((m, k // FP8_GROUP, FP8_GROUP), generator=g) * mag
    x[0, -1] = x[0, -1] * 1e-6 / mag[0, -1]
    return (x.view(m, k).to(device=device, dtype=BF16),)


def fp8_group_quant_ue8m0_reference(x):
    """sglang's per_token_group_quant_fp8 Triton kernel's math in torch."""
    m, k = x.shape
    xg = x.float().view(m, k // FP8_GROUP, FP8_GROUP)
    amax = xg.abs().amax(dim=-1).clamp(min=1e-4)
    scale = torch.exp2(torch.ceil(torch.log2(amax / FP8_MAX)))
    q = (xg / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(m, k), scale.t().contiguous()


CASES: list[Case] = [
    one_kernel_case(
        "gae_advantages",
        gae_advantages,
        _gae_inputs,
        gae_advantages_reference,
        ((2048, 16384),),  # 2048 steps x 16k envs: 4 x 134 MB fp32 + bools in, 2 x 134 MB out
        ((37, 5), (1, 1), (64, 3)),
        1e-5,  # fp32 |A| < 10: a scan in another order than the loop
    ),
    one_kernel_case(
        "dlrm_dot_interaction",
        dlrm_dot_interaction,
        _dlrm_inputs,
        dlrm_dot_interaction_reference,
        ((16384, 26, 128),),  # 16k samples, 26 sparse features of 128: 109 MB bf16 in
        ((5, 3, 16), (1, 1, 16), (7, 26, 32)),
        2.0**-4,  # bf16 out |z| < 16: one ulp of a dot summed in another order
    ),
    one_kernel_case(
        "spec_decode_accept",
        spec_decode_accept,
        _spec_inputs,
        spec_decode_accept_reference,
        ((64, 4, 128256),),  # 64 rows, 4 drafts, Llama-3's vocab: 295 MB of fp32 probs
        ((3, 2, 50), (1, 1, 2), (5, 4, 97)),
        0.5,  # counts and token ids: exact (u q <= p is one rounding on both sides)
    ),
    one_kernel_case(
        "roi_align",
        roi_align,
        _roi_inputs,
        roi_align_reference,
        ((8, 256, 200, 304, 1024),),  # an FPN P2 level, 1024 rois: 498 MB in, 51 MB out
        ((2, 5, 7, 9, 3), (1, 1, 1, 1, 1), (2, 16, 13, 11, 6)),
        1e-5,
    ),
    one_kernel_case(
        "nbody_accel",
        nbody_accel,
        _nbody_inputs,
        nbody_accel_reference,
        ((32768,),),  # 32k bodies: 1G pairs, compute-bound
        ((37,), (3,), (100,)),
        1e-3,  # fp32 sums up to ~70 over N terms in another order
    ),
    one_kernel_case(
        "gru_cell",
        gru_cell,
        _gru_inputs,
        gru_cell_reference,
        ((256, 2048, 2048),),  # batch 256, 2048 in and hidden: 50 MB of bf16 weights
        ((5, 20, 24), (1, 1, 1), (3, 40, 33)),
        2.0**-6,  # bf16 out |h| < 4: one ulp where an fp32 dot rounds the other way
    ),
    one_kernel_case(
        "crf_log_likelihood",
        crf_log_likelihood,
        _crf_inputs,
        crf_log_likelihood_reference,
        ((4096, 512, 32),),  # 4096 sentences of 512 tokens, 32 tags: 268 MB of emissions
        ((3, 7, 5), (1, 1, 2), (4, 13, 9)),
        1e-4,  # fp32 log likelihoods up to ~100: logsumexp steps in another order
    ),
    one_kernel_case(
        "fp8_group_quant_ue8m0",
        fp8_group_quant_ue8m0,
        _fp8_inputs,
        fp8_group_quant_ue8m0_reference,
        ((16384, 7168),),  # 16k tokens of DeepSeek-V3's hidden 7168: 235 MB bf16 in
        ((5, 256), (1, 128), (7, 384)),
        1e-6,  # power-of-two scales: codes and scales exact
    ),
]

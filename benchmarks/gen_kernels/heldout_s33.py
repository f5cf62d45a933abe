"""Held-out kernels written from the docs only, session 33 (see :mod:`.heldout_rows` for why
held-out kernels exist): serving, graph, vision, diffusion, sampling and geometry pieces. vLLM's
reshape_and_cache into the paged cache's split-x key layout and transposed value layout (a
scatter at loaded slots); a softmax over each node's incoming edges given by CSR offsets (graph
attention scores); causal GQA attention with gpt-oss style learned per-head sink logits in the
softmax denominator; axial 2-D rotary embedding of vision tokens (the head's halves rotated by
the patch's row and column); GroupNorm fused with SiLU on channels-last maps (a diffusion UNet's
norm, 10 channels a group); min-p sampling's renormalized probabilities; per-batch 4 x 4 rigid
transforms applied to point clouds; and Swin's shifted-window attention with the relative
position bias gathered from its table. Each comes with its eager reference (see :mod:`.case`).

Notes: all eight compile and match at every CPU shape (seeds 0 and 1, compiled and in ref mode): max
errors 0 for the cache write and the RoPE, <= 1.2e-7 for the fp32 segment softmax and min-p
probabilities, 3.8e-6 for the transformed points (|out| < 40), one bf16 ulp for GroupNorm (0.002)
and both attentions (0.008 to 0.016, p rounded to bf16 for the PV dot). One bug, worked around:
``rigid_transform_points`` was first written ``torch.sum(pts[:, None, :] * rot[None, :, :],
dim=-1)`` (pts ``points[n, tp, :]`` [BP, 3], rot ``transforms[n, :3, :3]``), which torch broadcasts
by position, but tracing fails with ``ShapeError: ...: shapes [BLOCK_1, 1, RDIM_2] and [1, RDIM_2,
RDIM_3] do not broadcast``: the two size-3 dims of rot get distinct names and ``rdims.conform_all``
relabels every operand to the widest (the first, pts), which would give rot two dims of one name, so
nothing is relabeled. The same product with the operands swapped (``rot[None, :, :] * pts[:, None,
:]``) traced; a [N, 3, 3] tensor's whole dims failed the same way. Fixed in session 33
(``rdims._common_shape``: a place whose names differ takes a name used nowhere else), and the
kernel is written points-first again. Not bugs: ``tc.store`` index lists need ``slice(None)`` for ``:``
(documented; ``[blk, th, :, off, :]`` is a SyntaxError in a list); ``(q @ k.t()).to(F32)`` on bf16
tiles rounds the scores to bf16 as torch does (the Swin kernel keeps the form, an autocast forward's
numerics); the interpreter warns "invalid value encountered in divide" for min-p (padded rows read
temperature 0).

Cross-compiled for sm_90 at the GPU shapes (default configs, meta tensors, not timed: no GPU).
``reshape_and_cache_split_x`` [8192 tokens, 8 heads, 128]: [8 tokens, 8 heads] at 8 warps, 48
registers, no spill; the key scatter is 16-byte (4 ``st.global.v4`` a thread: X = 8 bf16), the value
scatter into the transposed [D, block] layout 32 ``st.global.b16`` (each element its own 32-byte
sector: inherent to vLLM's layout). ``segment_softmax_csr`` [262144 nodes, 8.4M edges, 8 heads]: one
node and all 8 heads a program, 256 edges a step at 4 warps, 46 registers, no spill, 16-byte loads
(evict_last) and stores; but a node has 32 edges on average, so about 7/8 of each step's lanes are
masked (the default cannot know the loaded lengths). ``sink_attention_gqa`` [2, 64 q / 8 kv heads,
4096, 64]: [128 queries, 64 keys] at 8 warps, 3 stages, 117 registers, no spill, but K and V are
``cp.async`` pointer loads, not TMA: their index ``th.begin // group`` is a computed scalar, which
``space._access_ok`` keeps off tensor descriptors (asking for ``indexing="tensor_descriptor"``
normalizes them back to pointers); written with q viewed [B, Hkv, G, S, D] and a tile per kv head
and group member (/work/s33helper/sink_variant_5d.py) the default is all-TMA, [256, 64] at 5 stages,
189 registers, no spill. ``rope_2d_axial`` [32, 1024 patches, 16 heads, 64]: [8 patches, 8 heads] at
4 warps, 67 registers, 16-byte x loads and stores; ptx_counts reports 32 bytes of "spills", which is
libdevice's sinf / cosf Payne-Hanek slow path (a 28-byte local array, 96 ``ld.local`` / 64
``st.local`` and 32 scalar ``ld.global.nc`` of its ``__cudart_i2opi_f`` table, run only for angles
over about 1e5), not a register spill. ``group_norm_silu_nhwc`` [4, 128, 128, 320]: one (image,
group) a program, 10 channels padded to 16 (3/8 of the lanes idle), 512 positions a step at 16
warps, 32 registers, no spill; the 20-byte group rows load as 18 ``ld.global.b32`` (bf16 pairs) and
store as 6 ``st.global.b32``; the first pass splits in two (split_reductions, 256 programs) but the
variance and output passes run in the last program of each tile, 128 programs for 2/3 of the
traffic, under one wave of 132 SMs. At [8, 32, 32, 1280] (40 channels a group, padded to 64): 128
positions a step, 40 registers, 16-byte loads (8) and stores (2). ``min_p_sampling_probs`` [256,
128256] (and [64, 151936]): one row a program in chunks of 8192 at 16 warps, 40 registers, no spill,
16-byte loads and stores, but five passes over the row (max, sum, the max of p, the kept sum, the
store): ``torch.amax(p)`` of a softmax is 1 / sum, known after the second pass.
``rigid_transform_points`` [16, 1M points] (and [1024, 16384]): 64 points a program (the [64, 4, 4]
broadcast product is the tile budget's thousand elements) at 4 warps, 29 registers, 4 scalar
``ld.global.b32`` a thread (2 of them the stride-3 points: 12-byte rows padded to 4 lanes) and 2
``st.global.b32``, and the 3-term sum costs 16 ``shfl.sync.bfly``; written per component
(``points[n, tp, 0]`` .. ``2``, /work/s33helper/rigid_variant_columns.py) the default takes 1024
points at 64 registers, still 24 scalar loads and 24 scalar stores a thread.
``swin_window_attention`` [4096 windows of 49, 3 heads, 32] (and [256 windows, 12 heads]): one
(window, head) a program, 49 padded to 64, 4 warps, 126 registers, no spill; q, k, v 16-byte loads,
but rel_index is 32 scalar ``ld.global.b64``, the table gather 32 ``ld.global.b32``, and the mask
(196-byte rows) 32 scalar ``ld.global.b32`` a thread, each program gathers the same [49, 49] bias
again, and the index, gathered bias and mask move to the dot's layout through shared memory (27
``bar.sync``, 8-bit mask bits included).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

F32 = torch.float32
BF16 = torch.bfloat16
CACHE_X = 8  # reshape_and_cache_split_x: bf16 elements in 16 bytes, the key cache's last dim
GN_GROUPS = 32  # group_norm_silu_nhwc: a diffusion UNet's norm_num_groups
GN_EPS = 1e-5
ROPE_BASE = 10000.0  # rope_2d_axial
SWIN_SHIFT_MASK = -100.0  # swin_window_attention: Swin's fill for pairs from different regions


# --------------------------------------------------------------------------- paged KV cache write


@tc.kernel(static_shapes=True)
def reshape_and_cache_split_x(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's reshape_and_cache into its original paged layouts: key, value [T, H, D] bf16
    (views into the qkv projection's output), key_cache [num_blocks, H, D / X, block_size, X]
    bf16 (X = 8: 16 bytes of a head's dim together, for the paged attention kernel's loads),
    value_cache [num_blocks, H, D, block_size] bf16 (transposed: a block's tokens contiguous),
    slot_mapping [T] int64 (block * block_size + offset, -1 for a padding token, skipped). Token
    t's key goes to key_cache[slot // block_size, :, :, slot % block_size, :] and its value to
    value_cache[slot // block_size, :, :, slot % block_size], in place. Each program takes a
    block of tokens and a block of heads."""
    t, h, d = key.size()
    _, _, _, block_size, x = key_cache.size()
    key4 = key.view(t, h, d // x, x)
    for tt, th in tc.tile([t, h]):
        slot = slot_mapping[tt]
        valid = slot >= 0
        blk = slot // block_size
        off = slot % block_size
        tc.store(
            key_cache,
            [blk, th, slice(None), off, slice(None)],
            key4[tt, th, :, :],
            extra_mask=valid[:, None, None, None],
        )
        tc.store(
            value_cache,
            [blk, th, slice(None), off],
            value[tt, th, :],
            extra_mask=valid[:, None, None],
        )
    return key_cache, value_cache


def _cache_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, H, D, num_blocks, block_size)``: key and value sliced out of a [T, (4 + 2)
    H D] bf16 qkv output (4 query heads a kv head); slots of a prefill batch as vLLM's block
    tables give them: sequences of random lengths up to T / 4, each filling distinct random
    blocks from offset 0, then one token in twenty of padding (-1) at the end; the caches
    already hold other tokens."""
    t, h, d, nb, bs = shape
    g = gen(seed)
    qkv = randn((t, 6 * h * d), BF16, device, g)
    key = qkv[:, 4 * h * d : 5 * h * d].view(t, h, d)
    value = qkv[:, 5 * h * d :].view(t, h, d)
    key_cache = randn((nb, h, d // CACHE_X, bs, CACHE_X), BF16, device, g)
    value_cache = randn((nb, h, d, bs), BF16, device, g)
    if device == "meta":
        slot_mapping = torch.empty((t,), dtype=torch.int64, device=device)
        return key, value, key_cache, value_cache, slot_mapping
    padding = max(1, t // 20) if t > 2 else 0
    blocks = torch.randperm(nb, generator=g).tolist()
    parts: list[torch.Tensor] = []
    left = t - padding
    while left > 0:
        length = min(left, int(torch.randint(1, max(2, t // 4), (1,), generator=g)))
        pos = torch.arange(length)
        mine = torch.tensor([blocks.pop() for _ in range(-(-length // bs))])
        parts.append(mine[pos // bs] * bs + pos % bs)
        left -= length
    parts.append(torch.full((padding,), -1))
    return key, value, key_cache, value_cache, torch.cat(parts).to(device)


def _write_cache_eager(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    t, h, d = key.shape
    bs, x = key_cache.shape[3], key_cache.shape[4]
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    blk, off = slots // bs, slots % bs
    key_cache[blk, :, :, off, :] = key[keep].reshape(-1, h, d // x, x)
    value_cache[blk, :, :, off] = value[keep]
    return key_cache, value_cache


def reshape_and_cache_split_x_reference(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _write_cache_eager(key, value, key_cache.clone(), value_cache.clone(), slot_mapping)


def _run_cache(
    kernels: Mapping[str, Callable[..., Any]], inputs: Inputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel writes the caches in place: copy them first, so the inputs stay as they were."""
    key, value, key_cache, value_cache, slots = inputs
    return kernels["reshape_and_cache_split_x"](
        key, value, key_cache.clone(), value_cache.clone(), slots
    )


# --------------------------------------------------------------------------- CSR segment softmax


@tc.kernel(static_shapes=True)
def segment_softmax_csr(scores: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The softmax of graph attention (GAT) scores over each node's incoming edges: scores [E, H]
    fp32 (one per edge and head), edges sorted by destination, offsets [N + 1] int32 (CSR: node
    i's edges are offsets[i] to offsets[i + 1], possibly none). out [E, H] fp32. Each program
    takes one node and a block of heads: an online max / sum pass over the node's edges, then a
    pass that writes the probabilities."""
    _, h = scores.size()
    n = offsets.size(0) - 1
    out = torch.empty_like(scores)
    for node, th in tc.tile([n, h], block_size=[1, None]):
        start = offsets[node.begin]
        end = offsets[node.begin + 1]
        m_i = tc.full([th], float("-inf"), dtype=F32)
        l_i = tc.zeros([th], dtype=F32)
        for te in tc.tile(start, end):
            s = scores[te, th]
            m_new = torch.maximum(m_i, torch.amax(s, dim=0))
            l_i = l_i * torch.exp(m_i - m_new) + torch.sum(torch.exp(s - m_new[None, :]), dim=0)
            m_i = m_new
        for te in tc.tile(start, end):
            out[te, th] = torch.exp(scores[te, th] - m_i[None, :]) / l_i[None, :]
    return out


def _segment_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, E, H)``: fp32 scores randn times 2 and CSR offsets from N - 1 sorted random
    cut points in [0, E] (segment lengths roughly exponential; node 1 has no edges)."""
    n, e, h = shape
    g = gen(seed)
    scores = randn((e, h), F32, device, g) * 2
    if device == "meta":
        return scores, torch.empty((n + 1,), dtype=torch.int32, device=device)
    cuts = torch.sort(torch.randint(0, e + 1, (n - 1,), generator=g)).values
    if n > 2:
        cuts[1] = cuts[0]  # an empty segment
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), cuts, torch.full((1,), e)])
    return scores, offsets.to(torch.int32).to(device)


def segment_softmax_csr_reference(scores: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """torch_scatter's scatter_softmax in eager torch: a segment max, exp, a segment sum."""
    n = offsets.numel() - 1
    h = scores.shape[1]
    counts = (offsets[1:] - offsets[:-1]).long()
    seg = torch.repeat_interleave(torch.arange(n, device=scores.device), counts)
    index = seg[:, None].expand(-1, h)
    top = torch.full((n, h), float("-inf"), device=scores.device)
    top = top.scatter_reduce(0, index, scores, "amax")
    ex = torch.exp(scores - top[seg])
    den = torch.zeros((n, h), device=scores.device).index_add(0, seg, ex)
    return ex / den[seg]


# --------------------------------------------------------------------------- attention with sinks


@tc.kernel(static_shapes=True)
def sink_attention_gqa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sinks: torch.Tensor
) -> torch.Tensor:
    """Causal GQA attention with learned attention sinks (gpt-oss): q [B, Hq, S, D] bf16, k, v
    [B, Hkv, S, D] bf16 (query head h reads kv head h // (Hq / Hkv)), sinks [Hq] fp32: each
    head's softmax has one extra logit sinks[h] in its denominator, which takes probability but
    adds no value. out [B, Hq, S, D] bf16. Each program takes one (batch, head) and a block of
    queries: an online softmax (fp32) over the key blocks up to the block's end, with the sink
    folded in after the loop."""
    b, hq, s, d = q.size()
    hkv = k.size(1)
    d = tc.specialize(d)
    group = hq // hkv
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, th, tq in tc.tile([b, hq, s], block_size=[1, 1, None]):
        kvh = th.begin // group
        qt = q[tb.begin, th.begin, tq, :]
        m_i = tc.full([tq], float("-inf"), dtype=F32)
        l_i = tc.zeros([tq], dtype=F32)
        acc = tc.zeros([tq, d], dtype=F32)
        for tk in tc.tile(tq.end):
            sc = tc.dot(qt, k[tb.begin, kvh, tk, :].t(), out_dtype=F32) * scale
            sc = torch.where(tk.index[None, :] <= tq.index[:, None], sc, float("-inf"))
            m_new = torch.maximum(m_i, torch.amax(sc, dim=1))
            p = torch.exp(sc - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=1)
            acc = tc.dot(p.to(v.dtype), v[tb.begin, kvh, tk, :], acc=acc * alpha[:, None])
            m_i = m_new
        sink = sinks[th.begin]
        m_f = torch.maximum(m_i, sink)
        alpha = torch.exp(m_i - m_f)
        l_f = l_i * alpha + torch.exp(sink - m_f)
        out[tb.begin, th.begin, tq, :] = (acc * (alpha / l_f)[:, None]).to(out.dtype)
    return out


def _sink_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, Hq, Hkv, S, D)``: q, k, v bf16 randn and sinks fp32 randn times 2."""
    b, hq, hkv, s, d = shape
    g = gen(seed)
    q = randn((b, hq, s, d), BF16, device, g)
    k = randn((b, hkv, s, d), BF16, device, g)
    v = randn((b, hkv, s, d), BF16, device, g)
    return q, k, v, randn((hq,), F32, device, g) * 2


def sink_attention_gqa_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sinks: torch.Tensor
) -> torch.Tensor:
    """gpt-oss's reference: the sink appended to each row of masked scores, softmax, the sink's
    column dropped."""
    b, hq, s, d = q.shape
    group = hq // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    scores = q.float() @ kf.transpose(-1, -2) / math.sqrt(d)
    future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    sink = sinks.float()[None, :, None, None].expand(b, hq, s, 1)
    probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    return (probs @ vf).to(q.dtype)


# --------------------------------------------------------------------------- 2-D axial RoPE


@tc.kernel(static_shapes=True)
def rope_2d_axial(x: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Axial 2-D rotary embedding of vision transformer tokens: x [B, N, H, D] bf16 (N patches
    of a grid), pos [N, 2] int64 (each patch's row and column), inv_freq [D / 4] fp32. The first
    half of each head is rotated NeoX-style (rotate_half within the half) by row * inv_freq, the
    second half by column * inv_freq; cos and sin are computed in the kernel. out [B, N, H, D]
    bf16. Each program takes one image, a block of patches and a block of heads."""
    b, n, h, d = x.size()
    q = d // 4
    out = torch.empty_like(x)
    for tb, tn, th in tc.tile([b, n, h], block_size=[1, None, None]):
        ang_r = pos[tn, 0].to(F32)[:, None] * inv_freq[None, :]
        ang_c = pos[tn, 1].to(F32)[:, None] * inv_freq[None, :]
        cos_r, sin_r = torch.cos(ang_r)[:, None, :], torch.sin(ang_r)[:, None, :]
        cos_c, sin_c = torch.cos(ang_c)[:, None, :], torch.sin(ang_c)[:, None, :]
        x0 = x[tb.begin, tn, th, :q].to(F32)
        x1 = x[tb.begin, tn, th, q : 2 * q].to(F32)
        x2 = x[tb.begin, tn, th, 2 * q : 3 * q].to(F32)
        x3 = x[tb.begin, tn, th, 3 * q :].to(F32)
        out[tb.begin, tn, th, :q] = (x0 * cos_r - x1 * sin_r).to(out.dtype)
        out[tb.begin, tn, th, q : 2 * q] = (x1 * cos_r + x0 * sin_r).to(out.dtype)
        out[tb.begin, tn, th, 2 * q : 3 * q] = (x2 * cos_c - x3 * sin_c).to(out.dtype)
        out[tb.begin, tn, th, 3 * q :] = (x3 * cos_c + x2 * sin_c).to(out.dtype)
    return out


def _rope2d_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, grid_h, grid_w, H, D)``: x bf16 randn for the grid_h x grid_w patches of
    each image, their (row, column) and the inverse frequencies of base 10000 over D / 2."""
    b, gh, gw, h, d = shape
    x = randn((b, gh * gw, h, d), BF16, device, gen(seed))
    if device == "meta":
        return (
            x,
            torch.empty((gh * gw, 2), dtype=torch.int64, device=device),
            torch.empty((d // 4,), dtype=F32, device=device),
        )
    rows, cols = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    pos = torch.stack([rows, cols], dim=-1).reshape(gh * gw, 2)
    inv_freq = 1.0 / ROPE_BASE ** (torch.arange(0, d // 2, 2, dtype=F32) / (d // 2))
    return x, pos.to(device), inv_freq.to(device)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def rope_2d_axial_reference(
    x: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor
) -> torch.Tensor:
    xf = x.float()
    halves = []
    for axis, part in enumerate(xf.chunk(2, dim=-1)):
        ang = pos[:, axis].float()[:, None] * inv_freq[None, :]
        emb = torch.cat([ang, ang], dim=-1)[None, :, None, :]
        halves.append(part * emb.cos() + _rotate_half(part) * emb.sin())
    return torch.cat(halves, dim=-1).to(x.dtype)


# --------------------------------------------------------------------------- GroupNorm + SiLU NHWC


@tc.kernel(static_shapes=True)
def group_norm_silu_nhwc(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    groups: int = GN_GROUPS,
    eps: float = GN_EPS,
) -> torch.Tensor:
    """GroupNorm then SiLU on channels-last maps, as a diffusion UNet's resnet block runs them:
    x [B, H, W, C] bf16 (C contiguous), weight, bias [C] bf16, ``groups`` groups of C / groups
    consecutive channels; mean and biased variance per (image, group) over H W and the group's
    channels in fp32 (two passes), then silu((x - mean) * rstd * weight + bias) in a third.
    out [B, H, W, C] bf16. Each program takes one image and a block of groups."""
    b, hh, ww, c = x.size()
    hw = hh * ww
    cg = c // groups
    xv = x.view(b, hw, groups, cg)
    wv = weight.view(groups, cg)
    bv = bias.view(groups, cg)
    out = torch.empty_like(xv)
    count = hw * cg
    for tb, tg in tc.tile([b, groups], block_size=[1, None]):
        total = tc.zeros([tg], dtype=F32)
        for ts in tc.tile(hw):
            total = total + torch.sum(xv[tb.begin, ts, tg, :].to(F32), dim=[0, 2])
        mean = total / count
        sq = tc.zeros([tg], dtype=F32)
        for ts in tc.tile(hw):
            xc = xv[tb.begin, ts, tg, :].to(F32) - mean[None, :, None]
            sq = sq + torch.sum(xc * xc, dim=[0, 2])
        rstd = torch.rsqrt(sq / count + eps)
        w = wv[tg, :].to(F32)[None, :, :]
        bb = bv[tg, :].to(F32)[None, :, :]
        for ts in tc.tile(hw):
            xc = xv[tb.begin, ts, tg, :].to(F32) - mean[None, :, None]
            y = xc * rstd[None, :, None] * w + bb
            out[tb.begin, ts, tg, :] = torch.nn.functional.silu(y).to(out.dtype)
    return out.view(b, hh, ww, c)


def _gn_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, W, C)``: x bf16 randn plus 0.5 (a mean to subtract), weight near 1 and
    a small bias, bf16."""
    g = gen(seed)
    x = randn(shape, F32, device, g) + 0.5
    c = shape[3]
    w = randn((c,), F32, device, g)
    bias = randn((c,), F32, device, g)
    return x.to(BF16), (1.0 + 0.1 * w).to(BF16), (0.1 * bias).to(BF16)


def group_norm_silu_nhwc_reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    xf = x.float().permute(0, 3, 1, 2)  # an NCHW view of the channels-last data
    y = torch.nn.functional.group_norm(xf, GN_GROUPS, weight.float(), bias.float(), GN_EPS)
    return torch.nn.functional.silu(y).permute(0, 2, 3, 1).to(x.dtype)


# --------------------------------------------------------------------------- min-p sampling


@tc.kernel(static_shapes=True)
def min_p_sampling_probs(
    logits: torch.Tensor, temperature: torch.Tensor, min_p: torch.Tensor
) -> torch.Tensor:
    """Min-p sampling's distribution: logits [B, V] bf16, temperature and min_p [B] fp32 per
    request. p = softmax(logits / temperature); tokens with p below min_p times the row's
    largest p are dropped and the rest renormalized. out [B, V] fp32 (what torch.multinomial
    then draws from). Each program takes a block of whole rows."""
    b, v = logits.size()
    out = torch.empty([b, v], dtype=F32, device=logits.device)
    for tb in tc.tile(b):
        z = logits[tb, :].to(F32) / temperature[tb][:, None]
        p = torch.softmax(z, dim=1)
        keep = p >= (min_p[tb] * torch.amax(p, dim=1))[:, None]
        kept = torch.where(keep, p, 0.0)
        out[tb, :] = kept / torch.sum(kept, dim=1)[:, None]
    return out


def _min_p_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V)``: logits bf16 randn times 2, temperature uniform in [0.7, 1.3), min_p
    uniform in [0.02, 0.12)."""
    b, _ = shape
    g = gen(seed)
    logits = (randn(shape, F32, device, g) * 2).to(BF16)
    if device == "meta":
        return (
            logits,
            torch.empty((b,), dtype=F32, device=device),
            torch.empty((b,), dtype=F32, device=device),
        )
    temperature = torch.rand((b,), generator=g) * 0.6 + 0.7
    min_p = torch.rand((b,), generator=g) * 0.1 + 0.02
    return logits, temperature.to(device), min_p.to(device)


def min_p_sampling_probs_reference(
    logits: torch.Tensor, temperature: torch.Tensor, min_p: torch.Tensor
) -> torch.Tensor:
    probs = torch.softmax(logits.float() / temperature[:, None], dim=-1)
    top = probs.amax(dim=-1, keepdim=True)
    probs = probs.masked_fill(probs < min_p[:, None] * top, 0.0)
    return probs / probs.sum(dim=-1, keepdim=True)


# --------------------------------------------------------------------------- rigid transforms


@tc.kernel(static_shapes=True)
def rigid_transform_points(transforms: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Per-batch rigid (or any affine) transforms of point clouds: transforms [N, 4, 4] fp32
    homogeneous matrices, points [N, P, 3] fp32; out[n, p] = R_n points[n, p] + t_n with R_n =
    transforms[n, :3, :3] and t_n = transforms[n, :3, 3], [N, P, 3] fp32. Each program takes one
    cloud and a block of points; the 3 x 3 product is a broadcast multiply and a sum over the
    last dim."""
    n, p, _ = points.size()
    out = torch.empty_like(points)
    for tn, tp in tc.tile([n, p], block_size=[1, None]):
        rot = transforms[tn.begin, :3, :3]
        shift = transforms[tn.begin, :3, 3]
        pts = points[tn.begin, tp, :]
        out[tn.begin, tp, :] = torch.sum(pts[:, None, :] * rot[None, :, :], dim=-1) + shift[None, :]
    return out


def _rigid_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N, P)``: random rotations (QR of a normal matrix) with translations randn in
    homogeneous 4 x 4 form, and points randn times 10, fp32."""
    n, p = shape
    g = gen(seed)
    if device == "meta":
        return (
            torch.empty((n, 4, 4), dtype=F32, device=device),
            torch.empty((n, p, 3), dtype=F32, device=device),
        )
    rot, _ = torch.linalg.qr(torch.randn((n, 3, 3), generator=g))
    tf = torch.zeros((n, 4, 4))
    tf[:, :3, :3] = rot
    tf[:, :3, 3] = torch.randn((n, 3), generator=g) * 5
    tf[:, 3, 3] = 1.0
    return tf.to(device), randn((n, p, 3), F32, device, g) * 10


def rigid_transform_points_reference(
    transforms: torch.Tensor, points: torch.Tensor
) -> torch.Tensor:
    homo = torch.cat([points, torch.ones_like(points[..., :1])], dim=-1)  # [N, P, 4]
    return (homo @ transforms.transpose(1, 2))[..., :3]


# --------------------------------------------------------------------------- Swin window attention


@tc.kernel(static_shapes=True)
def swin_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias_table: torch.Tensor,
    rel_index: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Swin Transformer's (shifted) window attention: q, k, v [B nW, H, N, D] bf16 (N = ws^2
    tokens a window; strided views of the qkv projection's [B nW, N, 3, H, D] output),
    bias_table [(2 ws - 1)^2, H] fp32, rel_index [N, N] int64 (the table row of each query /
    key pair), mask [nW, N, N] fp32 (0, or -100 between tokens of different regions of a
    shifted window). softmax(q k^T / sqrt(D) + bias_table[rel_index, h] + mask[w % nW]) v, out
    [B nW, N, H D] bf16. Each program takes one (window, head) with the window's N tokens
    whole."""
    bw, h, n, d = q.size()
    nw = mask.size(0)
    scale = 1.0 / math.sqrt(d)
    out = torch.empty([bw, n, h, d], dtype=q.dtype, device=q.device)
    for tw, th in tc.tile([bw, h], block_size=[1, 1]):
        qt = q[tw.begin, th.begin, :, :]
        kt = k[tw.begin, th.begin, :, :]
        s = (qt @ kt.t()).to(F32) * scale
        s = s + bias_table[rel_index[:, :], th.begin] + mask[tw.begin % nw, :, :]
        p = torch.softmax(s, dim=-1)
        o = p.to(v.dtype) @ v[tw.begin, th.begin, :, :]
        out[tw.begin, :, th.begin, :] = o.to(out.dtype)
    return out.view(bw, n, h * d)


def _swin_rel_index(ws: int) -> torch.Tensor:
    """Swin's relative_position_index [ws^2, ws^2]."""
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij"))
    flat = coords.flatten(1)  # [2, N]
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0) + (ws - 1)
    return rel[..., 0] * (2 * ws - 1) + rel[..., 1]


def _swin_shift_mask(side: int, ws: int) -> torch.Tensor:
    """Swin's attn_mask [side^2, ws^2, ws^2] for a side x side grid of windows shifted by
    ws // 2."""
    shift = ws // 2
    img = torch.zeros(side * ws, side * ws)
    cnt = 0
    for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
        for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            img[hs, wsl] = cnt
            cnt += 1
    windows = img.view(side, ws, side, ws).permute(0, 2, 1, 3).reshape(side * side, ws * ws)
    diff = windows[:, None, :] - windows[:, :, None]
    return torch.where(diff != 0, SWIN_SHIFT_MASK, 0.0)


def _swin_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, nW, ws, H, D)``: nW (a square) windows of ws x ws tokens per image; q, k, v
    are views of one bf16 randn qkv tensor, the bias table randn times 0.5 (fp32), Swin's
    relative index and its shifted-window mask."""
    b, nw, ws, h, d = shape
    n = ws * ws
    g = gen(seed)
    qkv = randn((b * nw, n, 3, h, d), BF16, device, g)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    table = randn(((2 * ws - 1) ** 2, h), F32, device, g) * 0.5
    if device == "meta":
        return (
            q,
            k,
            v,
            table,
            torch.empty((n, n), dtype=torch.int64, device=device),
            torch.empty((nw, n, n), dtype=F32, device=device),
        )
    side = math.isqrt(nw)
    return q, k, v, table, _swin_rel_index(ws).to(device), _swin_shift_mask(side, ws).to(device)


def swin_window_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias_table: torch.Tensor,
    rel_index: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Swin's WindowAttention.forward after the qkv projection, in fp32."""
    bw, h, n, d = q.shape
    nw = mask.shape[0]
    attn = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d)
    bias = bias_table[rel_index.view(-1)].view(n, n, h).permute(2, 0, 1)
    attn = attn + bias[None]
    attn = attn.view(bw // nw, nw, h, n, n) + mask[None, :, None]
    attn = torch.softmax(attn.view(bw, h, n, n), dim=-1)
    return (attn @ v.float()).transpose(1, 2).reshape(bw, n, h * d).to(q.dtype)


CASES: list[Case] = [
    Case(
        name="reshape_and_cache_split_x",
        kernels=(reshape_and_cache_split_x,),
        make_inputs=_cache_inputs,
        reference=reshape_and_cache_split_x_reference,
        run=_run_cache,
        # 2 x 17 MB read and scattered into 2 x 268 MB caches (Llama-3-8B's 8 kv heads)
        gpu_shapes=((8192, 8, 128, 8192, 16),),
        cpu_shapes=((37, 3, 32, 40, 16), (3, 1, 8, 2, 4)),
        atol=1e-6,  # copies: exact
        timed_run=lambda k, inp: k["reshape_and_cache_split_x"](*inp),
        timed_reference=_write_cache_eager,
    ),
    one_kernel_case(
        "segment_softmax_csr",
        segment_softmax_csr,
        _segment_inputs,
        segment_softmax_csr_reference,
        ((262144, 8388608, 8),),  # 268 MB read twice, 268 MB written
        ((13, 100, 4), (4, 37, 3), (3, 5, 1)),
        1e-6,  # probabilities in fp32
    ),
    one_kernel_case(
        "sink_attention_gqa",
        sink_attention_gqa,
        _sink_inputs,
        sink_attention_gqa_reference,
        ((2, 64, 8, 4096, 64),),  # gpt-oss: 64 query heads, 8 kv heads, D 64; q 67 MB
        ((1, 4, 2, 37, 64), (2, 2, 1, 5, 16), (1, 2, 1, 1, 16)),
        2.0**-5,  # bf16 out, |o| < 4: two ulps (p is rounded to bf16 for the PV dot)
    ),
    one_kernel_case(
        "rope_2d_axial",
        rope_2d_axial,
        _rope2d_inputs,
        rope_2d_axial_reference,
        ((32, 32, 32, 16, 64),),  # ViT-L/14 at 448 px: 1024 patches; 67 MB each way
        ((2, 5, 7, 3, 32), (1, 1, 3, 2, 8)),
        2.0**-5,  # bf16 out, |y| < 8: one ulp where cos / sin round the other way
    ),
    one_kernel_case(
        "group_norm_silu_nhwc",
        group_norm_silu_nhwc,
        _gn_inputs,
        group_norm_silu_nhwc_reference,
        # SDXL's first UNet stage at 1024 px (10 channels a group): 42 MB each way; a
        # 1280-channel stage (40 a group): 21 MB
        ((4, 128, 128, 320), (8, 32, 32, 1280)),
        ((2, 5, 7, 320), (1, 2, 3, 64)),
        2.0**-5,  # bf16 out, |y| < 8: one ulp of fp32 sums in another order
    ),
    one_kernel_case(
        "min_p_sampling_probs",
        min_p_sampling_probs,
        _min_p_inputs,
        min_p_sampling_probs_reference,
        ((256, 128256), (64, 151936)),  # Llama-3 / Qwen vocabularies: 66 MB read, 131 MB out
        ((5, 300), (1, 37)),
        1e-6,  # fp32 probabilities (a token exactly at the threshold would differ)
    ),
    one_kernel_case(
        "rigid_transform_points",
        rigid_transform_points,
        _rigid_inputs,
        rigid_transform_points_reference,
        ((16, 1048576), (1024, 16384)),  # 201 MB each way
        ((3, 37), (1, 1)),
        2e-5,  # fp32, |out| < 64: a few ulps of three products summed in another order
    ),
    one_kernel_case(
        "swin_window_attention",
        swin_window_attention,
        _swin_inputs,
        swin_window_attention_reference,
        # Swin-T at 224 px, batch 64: stage 1 (8 x 8 windows of 7 x 7, 3 heads; qkv 116 MB)
        # and stage 3 (2 x 2 windows, 12 heads; 29 MB)
        ((64, 64, 7, 3, 32), (64, 4, 7, 12, 32)),
        ((2, 4, 3, 2, 16), (1, 4, 7, 1, 16)),
        2.0**-5,  # bf16 out, |o| < 4: two ulps (p is rounded to bf16 for the PV dot)
    ),
]

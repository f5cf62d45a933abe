"""Held-out kernels written from the docs only, session 31, third batch (see :mod:`.heldout_rows`
for why held-out kernels exist): RL, recommendation, distillation, sampling, attention, pooling,
audio and MoE routing pieces. GRPO group-normalized advantages broadcast to a token mask; a
sum-mode embedding bag over bags of varying length; the batch-mean KL divergence between two
log-distributions; the forward of a straight-through hard Gumbel-softmax with pre-drawn noise;
ALiBi bias plus causal mask then softmax; 1-D max pooling over windows whose bounds are loaded
values; framing a signal with a Hann window; and capacity-limited top-1 MoE dispatch (expert,
position within the expert, keep mask). Each comes with its eager reference (see :mod:`.case`).

Notes: all eight compile and match; one needed a rewrite, for a bug that also hits a second
kernel at a shape outside its case. ``capacity_topk_dispatch`` was first written with the
one-hot of each token's expert as ``onehot = (tc.arange(e)[None, :] == best[:, None]).to(
torch.int32)`` and the block's counts stored as ``counts[tt.id, :] = torch.sum(onehot,
dim=0).to(torch.int32)``: right at E = 7, but at E = 1 (the (45, 1) CPU shape) tracing fails
with ``ShapeError: .../heldout_s31c.py:338 (the line then): store into 'counts': value of shape
[RDIM_1] does not fit the indexed shape [1]``: ``tc.arange(1)`` gets a symbolic size RDIM_1 that
the store does not equate with the static 1 of the size-1 dim. ``tc.arange(0, e)``,
``tc.arange(tc.specialize(e))``, ``tc.store(counts, [tt.id, slice(None)], ...)`` and
broadcasting ``tc.arange(e)`` against the loaded ``[BT, E]`` tile fail the same way; even
``out[:] = tc.arange(t).to(torch.float32)`` into a ``[1]`` tensor does. Repro:
s31tmp/repro_c_8.py (prints ``e=1: ERROR ShapeError ...``). The same bug hits
``gumbel_softmax_hard`` at V = 1 (``store into 'out': value of shape [BLOCK_0, RDIM_1] does not
fit the indexed shape [BLOCK_0, 1]``), whose CPU shapes do not have V = 1. Rewritten without
``tc.arange``: the one-hot is the first max of the row, ``is_max = row == amax(row)`` kept where
``cumsum(is_max, dim=1) == 1`` (argmax's tie rule), which compiles and is exact at both shapes.
In ``embedding_bag_offsets_sum`` the last bag's end is ``n`` (offsets has B entries); ``end =
offsets[tb.begin + 1] if tb.begin + 1 < b else n`` is a clear ``DeviceCodeError: ... a scalar
device value was used as a Python bool (in ... a if c else b ...)`` whose hint offers
``torch.where`` or an ``if`` statement; the ``if`` statement is the kernel (ruff's SIM108 then
asks for the very ternary that is rejected, hence the noqa), and the hinted
``torch.where(tb.begin + 1 < b, offsets[tb.begin + 1], n)`` is right but loads ``offsets[b]`` in
the last program, which ref mode reports as an out-of-range index (a RuntimeWarning that the
accuracy baseline failed, with a clear clamp / extra_mask hint). Other forms tried as
experiments, not as the kernels: ``F.one_hot`` and ``F.kl_div(..., reduction= "none",
log_target=True)`` on tiles are clear ``UnsupportedOpError``s; ``x.unfold(1, 512, 128)`` on the
host (an overlapping strided view) tiled as ``frames[tb, tf, :]`` is right at both hann_frames
shapes; the KL loss as one ``tc.atomic_add(total, [0], torch.sum(...))`` a program is right;
ALiBi with [b, h, q] tiles on 4-D loads (``slopes[th][None, :, None, None]``) is right;
``weight.index_select(0, ids[tt])[:, td]`` is right. The interpreter prints a harmless "divide
by zero encountered in log" for gumbel_softmax_hard (padded lanes of u read 0).

Cross-compiled for sm_90 at the GPU shapes (default configs, meta tensors, first device loop
only, not timed: no GPU), weakest first. ``roi_max_pool_1d`` [256, 65536, 1024 windows of
<= 256]: [64 channels, 128 positions] a step at 8 warps, 76 registers, no spill, but x comes in
as 32 scalar ``ld.global.b16`` a thread (a window starts at a loaded position, so nothing is
known about alignment) and the amax is 162 ``shfl.sync.bfly``; the out store is scalar
``st.global.b16`` (out [R, C] is written along C). ``capacity_topk_dispatch`` [131072, 128]: 64
tokens a program at 8 warps, 114 registers, no spill, 8 ``ld.global.v4`` of probs, but the
int32 cumsum along the token tile costs 80 ``shfl.sync.up``, 262 ``ld.shared.b32`` and 40
``st.shared.b32``, and the three [T] outputs are scalar ``st.global.b32``; the exclusive cumsum
of the [2048, 128] counts between the loops is a few small eager launches.
``gumbel_softmax_hard`` [256, 32000]: one row a program (256 programs, under two waves of 132
SMs) in chunks of 8192 at 16 warps, 96 registers, no spill, 16-byte loads (8) and stores (2).
``embedding_bag_offsets_sum`` [V 200000, D 256, 8192 bags of 16 on average]: one bag and 128
of D a program, 64 ids a step at 8 warps (deferred_sums), 56 registers, no spill, the ids 6
scalar ``ld.global.b64``, the weight rows ``ld.global.v4`` (4), out one ``st.global.b32`` a
thread. ``alibi_bias_softmax`` [1, 16, 1024, 1024]: 8 query rows a program with the 1024 keys
whole at 8 warps, 64 registers, no spill, 8 ``ld.global.v4`` and 8 ``st.global.v4``, 86
shuffles. ``kl_div_log_target`` [512, 32000]: one row a program in chunks of 8192 at 16 warps,
51 registers, no spill, 8 ``ld.global.v4``, the row sum one scalar store; the host adds the 512
row sums and divides (two small launches). ``hann_frames`` [64, 131072]: 16 frames of 512 a
program at 8 warps, 60 registers, no spill; the gather ``x[b, 128 f + n]`` compiles to 16-byte
loads (8 ``ld.global.v4``), a layout change through shared memory (8 ``st.shared.v4``, 10
``ld.shared.v4``) and 16-byte bf16 stores (4 ``st.global.v4``), the window one
``ld.global.v2``. ``grpo_advantages`` [683 groups of 12, 2048 tokens]: [16 groups (the 12
completions padded to 16), 32 tokens] at 8 warps, 46 registers, no spill, the mask 16-byte
loads, 8 ``st.global.v4`` a thread of advantages; nothing to fix.
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randint, randn

F32 = torch.float32
GRPO_EPS = 1e-4  # grpo_advantages: added to the group std
GRPO_K = 12  # grpo_advantages: completions sampled per prompt (a group)
GUMBEL_TAU = 0.5  # gumbel_softmax_hard
FRAME = 512  # hann_frames: frame length
HOP = 128  # hann_frames: hop between frames
CAPACITY_FACTOR = 1.25  # capacity_topk_dispatch: capacity = ceil(factor * T / E)


# --------------------------------------------------------------------------- GRPO advantages


@tc.kernel(static_shapes=True)
def grpo_advantages(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GRPO advantages: rewards [G * K] fp32 of K = 12 sampled completions for each of G prompts,
    normalized within each group, adv = (r - mean) / (std + 1e-4) (torch.std: unbiased), then
    broadcast over each completion's tokens: mask [G * K, T] bool (True for a completion token)
    -> [G * K, T] fp32, 0 where the mask is False. Each program takes a block of groups and a
    block of tokens, with the K completions of a group whole."""
    n, t = mask.size()
    k = GRPO_K
    g = n // k
    rg = rewards.view(g, k)
    mg = mask.view(g, k, t)
    out = torch.empty([g, k, t], dtype=F32, device=mask.device)
    for tg, tt in tc.tile([g, t]):
        r = rg[tg, :]
        mean = torch.mean(r, dim=1)
        std = torch.std(r, dim=1)
        adv = (r - mean[:, None]) / (std[:, None] + GRPO_EPS)
        out[tg, :, tt] = torch.where(mg[tg, :, tt], adv[:, :, None], 0.0)
    return out.view(n, t)


def _grpo_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (G, T)``: rewards randn, and a completion mask whose row i is True for the
    first len_i tokens (lengths uniform in [1, T])."""
    grp, t = shape
    k = GRPO_K
    g = gen(seed)
    rewards = randn((grp * k,), F32, device, g)
    if device == "meta":
        return rewards, torch.empty((grp * k, t), dtype=torch.bool, device=device)
    lengths = torch.randint(1, t + 1, (grp * k, 1), generator=g)
    mask = torch.arange(t)[None, :] < lengths
    return rewards, mask.to(device)


def grpo_advantages_reference(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    r = rewards.view(-1, GRPO_K)
    adv = (r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, keepdim=True) + GRPO_EPS)
    return torch.where(mask, adv.reshape(-1, 1), 0.0)


# --------------------------------------------------------------------------- embedding bag


@tc.kernel(static_shapes=True)
def embedding_bag_offsets_sum(
    ids: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor
) -> torch.Tensor:
    """F.embedding_bag(ids, weight, offsets, mode="sum") with 1-D ids [N] int64 and offsets [B]
    int64 (bag b is ids[offsets[b]:offsets[b + 1]], the last one runs to N; a bag may be
    empty), weight [V, D] bf16, summed in fp32: [B, D] fp32. Each program takes one bag and a
    block of D and loops over the bag's ids in blocks."""
    n = ids.size(0)
    b = offsets.size(0)
    d = weight.size(1)
    out = torch.empty([b, d], dtype=F32, device=weight.device)
    for tb, td in tc.tile([b, d], block_size=[1, None]):
        start = offsets[tb.begin]
        if tb.begin + 1 < b:  # noqa: SIM108 (see Notes: the ternary is rejected)
            end = offsets[tb.begin + 1]
        else:
            end = n
        acc = tc.zeros([td], dtype=F32)
        for tt in tc.tile(start, end):
            acc = acc + torch.sum(weight[ids[tt], td].to(F32), dim=0)
        out[tb.begin, td] = acc
    return out


def _bag_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (V, D, B, L)``: B bags of L ids on average (N = B * L ids uniform in [0, V)),
    bag starts sorted uniform in [0, N] with the first at 0 (some bags are empty), weight bf16
    randn."""
    v, d, b, length = shape
    n = b * length
    g = gen(seed)
    ids = randint(0, v, (n,), device, g)
    weight = randn((v, d), torch.bfloat16, device, g)
    if device == "meta":
        return ids, weight, torch.empty((b,), dtype=torch.int64, device=device)
    starts = torch.sort(torch.randint(0, n + 1, (b,), generator=g)).values
    starts[0] = 0
    return ids, weight, starts.to(device)


def embedding_bag_offsets_sum_reference(
    ids: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor
) -> torch.Tensor:
    return torch.nn.functional.embedding_bag(ids, weight.float(), offsets, mode="sum")


# --------------------------------------------------------------------------- KL divergence


@tc.kernel(static_shapes=True)
def kl_div_log_target(log_q: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
    """F.kl_div(log_q, log_p, reduction="batchmean", log_target=True) for log-probabilities
    [B, V] fp32: sum(exp(log_p) (log_p - log_q)) / B, a 0-dim fp32 tensor (a distillation
    loss). Each program sums a block of whole rows; the host adds the row sums."""
    b, v = log_q.size()
    rows = torch.empty([b], dtype=F32, device=log_q.device)
    for tb in tc.tile(b):
        lp = log_p[tb, :]
        rows[tb] = torch.sum(torch.exp(lp) * (lp - log_q[tb, :]), dim=1)
    return rows.sum() / b


def _kl_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V)``: two log_softmax rows of randn logits (student q, teacher p)."""
    g = gen(seed)
    q = randn(shape, F32, device, g)
    p = randn(shape, F32, device, g) * 2
    if device == "meta":
        return q, p
    return torch.log_softmax(q, dim=-1), torch.log_softmax(p, dim=-1)


def kl_div_log_target_reference(log_q: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.kl_div(log_q, log_p, reduction="batchmean", log_target=True)


# --------------------------------------------------------------------------- hard Gumbel-softmax


@tc.kernel(static_shapes=True)
def gumbel_softmax_hard(logits: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Forward of F.gumbel_softmax(logits, tau, hard=True) with the uniform noise u [B, V]
    drawn beforehand (so the result is deterministic): the one-hot of argmax((logits -
    log(-log u)) / tau) along V, [B, V] bf16 (the straight-through value y_hard - y_soft +
    y_soft is y_hard). Each program takes a block of whole rows."""
    b, v = logits.size()
    out = torch.empty([b, v], dtype=torch.bfloat16, device=logits.device)
    for tb in tc.tile(b):
        y = (logits[tb, :] - torch.log(-torch.log(u[tb, :]))) / GUMBEL_TAU
        idx = torch.argmax(y, dim=1)
        cols = tc.arange(v)
        out[tb, :] = (cols[None, :] == idx[:, None]).to(torch.bfloat16)
    return out


def _gumbel_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V)``: logits randn times 2, u uniform in [1e-6, 1 - 1e-6]."""
    g = gen(seed)
    logits = randn(shape, F32, device, g) * 2
    if device == "meta":
        return logits, torch.empty(shape, dtype=F32, device=device)
    u = torch.rand(shape, generator=g).clamp(1e-6, 1 - 1e-6)
    return logits, u.to(device)


def gumbel_softmax_hard_reference(logits: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    y_soft = torch.softmax((logits - torch.log(-torch.log(u))) / GUMBEL_TAU, dim=-1)
    index = y_soft.argmax(dim=-1, keepdim=True)
    y_hard = torch.zeros_like(y_soft).scatter_(-1, index, 1.0)
    return (y_hard - y_soft + y_soft).to(torch.bfloat16)


# --------------------------------------------------------------------------- ALiBi softmax


@tc.kernel(static_shapes=True)
def alibi_bias_softmax(scores: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    """Attention probabilities with ALiBi: scores [B, H, Sq, Sk] fp32 plus slopes[h] (k - q)
    for key k and query q (the queries are the last Sq positions, q = Sk - Sq + i), -inf where
    k > q (causal), then softmax along Sk. Each program takes one (batch, head) and a block of
    query rows, with the keys whole."""
    b, h, sq, sk = scores.size()
    out = torch.empty_like(scores)
    for tb, th, tq in tc.tile([b, h, sq], block_size=[1, 1, None]):
        row = scores[tb.begin, th.begin, tq, :]
        kpos = tc.arange(sk)
        qpos = tq.index + (sk - sq)
        rel = (kpos[None, :] - qpos[:, None]).to(F32)
        biased = row + slopes[th.begin] * rel
        biased = torch.where(kpos[None, :] > qpos[:, None], float("-inf"), biased)
        out[tb.begin, th.begin, tq, :] = torch.softmax(biased, dim=1)
    return out


def _alibi_slopes(h: int) -> torch.Tensor:
    """The ALiBi paper's slopes for a power of two H, 2^(-8 i / H); other H continue the
    sequence (good enough for a benchmark)."""
    return torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], dtype=F32)


def _alibi_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, Sq, Sk)``: scores randn times 2, the head slopes."""
    scores = randn(shape, F32, device, gen(seed)) * 2
    if device == "meta":
        return scores, torch.empty((shape[1],), dtype=F32, device=device)
    return scores, _alibi_slopes(shape[1]).to(device)


def alibi_bias_softmax_reference(scores: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    sq, sk = scores.shape[-2:]
    qpos = torch.arange(sk - sq, sk, device=scores.device)
    kpos = torch.arange(sk, device=scores.device)
    rel = (kpos[None, :] - qpos[:, None]).float()
    biased = scores + slopes[:, None, None] * rel
    biased = biased.masked_fill(kpos[None, :] > qpos[:, None], float("-inf"))
    return torch.softmax(biased, dim=-1)


# --------------------------------------------------------------------------- 1-D ROI max pool


@tc.kernel(static_shapes=True)
def roi_max_pool_1d(x: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """Max pooling of a signal x [C, L] bf16 over R windows [starts[r], ends[r]) (int32, each at
    least one long; a 1-D RoI pool of temporal proposals): out [R, C] bf16. Each program takes
    one window and a block of channels and loops over the window in blocks."""
    c, _ = x.size()
    r = starts.size(0)
    out = torch.empty([r, c], dtype=x.dtype, device=x.device)
    for tr, tc_ in tc.tile([r, c], block_size=[1, None]):
        lo = starts[tr.begin]
        hi = ends[tr.begin]
        acc = tc.full([tc_], float("-inf"), dtype=F32)
        for tl_ in tc.tile(lo, hi):
            acc = torch.maximum(acc, torch.amax(x[tc_, tl_].to(F32), dim=1))
        out[tr.begin, tc_] = acc.to(out.dtype)
    return out


def _roi_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (C, L, R, W)``: x bf16 randn, R windows of lengths uniform in [1, W] at starts
    uniform in [0, L - length]."""
    c, length, r, w = shape
    g = gen(seed)
    x = randn((c, length), torch.bfloat16, device, g)
    if device == "meta":
        idx = torch.empty((r,), dtype=torch.int32, device=device)
        return x, idx, idx.clone()
    lens = torch.randint(1, w + 1, (r,), generator=g)
    starts = (torch.rand(r, generator=g) * (length - lens + 1)).long()
    ends = starts + lens
    return x, starts.int().to(device), ends.int().to(device)


def roi_max_pool_1d_reference(
    x: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor
) -> torch.Tensor:
    # Vectorized (one gather over the longest window, the tail masked) so that eager and
    # torch.compile time one graph, not a Python loop of R slices.
    starts, ends = starts.long(), ends.long()
    width = int((ends - starts).max())
    pos = starts[:, None] + torch.arange(width, device=x.device)[None, :]  # [R, W]
    inside = pos < ends[:, None]
    vals = x[:, pos.clamp(max=x.size(1) - 1)]  # [C, R, W]
    vals = vals.masked_fill(~inside[None], float("-inf"))
    return vals.amax(dim=2).t().contiguous()


# --------------------------------------------------------------------------- Hann frames


@tc.kernel(static_shapes=True)
def hann_frames(x: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """The frames of an STFT: x [B, L] fp32 cut into F = 1 + (L - 512) // 128 overlapping frames
    of 512 samples, hop 128, each times the window [512] fp32 (Hann): [B, F, 512] bf16. Each
    program takes one signal and a block of frames; frame f reads x[b, 128 f : 128 f + 512]."""
    b, length = x.size()
    nf = 1 + (length - FRAME) // HOP
    out = torch.empty([b, nf, FRAME], dtype=torch.bfloat16, device=x.device)
    for tb, tf in tc.tile([b, nf], block_size=[1, None]):
        pos = tf.index[:, None] * HOP + tc.arange(FRAME)[None, :]
        frames = x[tb.begin, pos]
        out[tb.begin, tf, :] = (frames * window[None, :]).to(out.dtype)
    return out


def _frames_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, L)``: x randn, the periodic Hann window of 512."""
    x = randn(shape, F32, device, gen(seed))
    if device == "meta":
        return x, torch.empty((FRAME,), dtype=F32, device=device)
    return x, torch.hann_window(FRAME, dtype=F32).to(device)


def hann_frames_reference(x: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    return (x.unfold(1, FRAME, HOP) * window).to(torch.bfloat16)


# --------------------------------------------------------------------------- MoE capacity dispatch


@tc.kernel(static_shapes=True)
def capacity_topk_dispatch(
    probs: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-1 MoE dispatch with a capacity: router probs [T, E] fp32 -> each token's expert (the
    argmax) [T] int32, its position among the tokens routed to that expert in token order [T]
    int32, and keep = position < capacity [T] bool, capacity = ceil(1.25 T / E) (Switch
    Transformer). Two loops: the first takes a block of tokens, finds the experts, ranks each
    token within its block and stores the block's count per expert; the host turns the counts
    into each block's start per expert (an exclusive cumsum over blocks); the second adds the
    block's start to the rank."""
    t, e = probs.size()
    capacity = math.ceil(CAPACITY_FACTOR * t / e)
    bt = tc.register_block_size(t)
    expert = torch.empty([t], dtype=torch.int32, device=probs.device)
    position = torch.empty([t], dtype=torch.int32, device=probs.device)
    keep = torch.empty([t], dtype=torch.bool, device=probs.device)
    counts = torch.empty([tc.cdiv(t, bt), e], dtype=torch.int32, device=probs.device)
    for tt in tc.tile(t, block_size=bt):
        row = probs[tt, :]
        best = torch.argmax(row, dim=1)
        # the first max of each row, as argmax picks it (see Notes: the one-hot written as
        # tc.arange(e)[None, :] == best[:, None] fails to store at E = 1)
        is_max = (row == torch.amax(row, dim=1)[:, None]).to(torch.int32)
        onehot = torch.where(torch.cumsum(is_max, dim=1) == 1, is_max, 0)
        rank = torch.sum(torch.where(onehot == 1, torch.cumsum(onehot, dim=0) - 1, 0), dim=1)
        expert[tt] = best.to(torch.int32)
        position[tt] = rank.to(torch.int32)
        counts[tt.id, :] = torch.sum(onehot, dim=0).to(torch.int32)
    starts = (torch.cumsum(counts, dim=0) - counts).to(torch.int32)
    for tt in tc.tile(t, block_size=bt):
        pos = position[tt] + starts[tt.index // bt, expert[tt]]
        position[tt] = pos
        keep[tt] = pos < capacity
    return expert, position, keep


def _router_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, E)``: softmax of randn router logits."""
    logits = randn(shape, F32, device, gen(seed))
    if device == "meta":
        return (logits,)
    return (torch.softmax(logits, dim=-1),)


def capacity_topk_dispatch_reference(
    probs: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    t, e = probs.shape
    capacity = math.ceil(CAPACITY_FACTOR * t / e)
    expert = probs.argmax(dim=-1)
    onehot = torch.nn.functional.one_hot(expert, e)
    position = (torch.cumsum(onehot, dim=0) - 1).gather(1, expert[:, None])[:, 0]
    return expert.int(), position.int(), position < capacity


CASES: list[Case] = [
    one_kernel_case(
        "grpo_advantages",
        grpo_advantages,
        _grpo_inputs,
        grpo_advantages_reference,
        ((683, 2048),),  # 8196 completions of 2048 tokens: 17 MB mask read, 67 MB written
        ((5, 37), (1, 50)),
        1e-5,  # fp32 advantages, |adv| < 4
    ),
    one_kernel_case(
        "embedding_bag_offsets_sum",
        embedding_bag_offsets_sum,
        _bag_inputs,
        embedding_bag_offsets_sum_reference,
        ((200000, 256, 8192, 16),),  # 131072 rows of 512 B gathered: 67 MB, 8 MB written
        ((50, 37, 7, 3), (13, 1, 6, 5)),
        1e-4,  # fp32 sums of up to ~30 bf16 values in another order
    ),
    one_kernel_case(
        "kl_div_log_target",
        kl_div_log_target,
        _kl_inputs,
        kl_div_log_target_reference,
        ((512, 32000),),  # 512 tokens over the Llama-2 vocabulary: 2 x 66 MB read
        ((7, 300), (1, 37)),
        1e-5,  # an fp32 mean of row sums (about 1 to 3)
    ),
    one_kernel_case(
        "gumbel_softmax_hard",
        gumbel_softmax_hard,
        _gumbel_inputs,
        gumbel_softmax_hard_reference,
        ((256, 32000),),  # 2 x 33 MB read, 16 MB written
        ((7, 300), (1, 37)),
        1e-6,  # one-hot: exact unless the argmax differs
    ),
    one_kernel_case(
        "alibi_bias_softmax",
        alibi_bias_softmax,
        _alibi_inputs,
        alibi_bias_softmax_reference,
        ((1, 16, 1024, 1024),),  # 67 MB each way
        ((2, 3, 37, 37), (1, 5, 1, 50)),
        1e-6,  # fp32 probabilities in [0, 1]
    ),
    one_kernel_case(
        "roi_max_pool_1d",
        roi_max_pool_1d,
        _roi_inputs,
        roi_max_pool_1d_reference,
        ((256, 65536, 1024, 256),),  # 1024 windows of 128 on average x 256 channels: 67 MB
        ((37, 100, 7, 20), (1, 50, 5, 9)),
        1e-6,  # a max: exact
    ),
    one_kernel_case(
        "hann_frames",
        hann_frames,
        _frames_inputs,
        hann_frames_reference,
        ((64, 131072),),  # 34 MB read (each sample in 4 frames), 67 MB of frames written
        ((3, 1001), (1, 700)),
        2.0**-7,  # bf16 out, |y| < 5: one ulp where the fp32 product rounds the other way
    ),
    one_kernel_case(
        "capacity_topk_dispatch",
        capacity_topk_dispatch,
        _router_inputs,
        capacity_topk_dispatch_reference,
        ((131072, 128),),  # 67 MB of router probabilities read
        ((300, 7), (45, 1)),
        1e-6,  # integers and bools: exact
    ),
]

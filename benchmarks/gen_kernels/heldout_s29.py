"""Held-out kernels written from the docs only, session 29 (see :mod:`.heldout_rows` for why
held-out kernels exist), all data movement with shifted, reversed, repeated, strided or
concatenated indexing: grouped-query attention's KV head repeat (output head h reads input head
h // G, a scalar index from the tile's begin); two bf16 matrices concatenated along the last
dim (widths not multiples of 128, stored through constant slices); RWKV's token shift mixed
with the current token (the previous row loaded through ``tc.load`` with ``extra_mask=``, zero
at t = 0); the last dim reversed (a column index ``n - 1 - j``); a stride-2 subsample of NCHW
images (``x[:, :, ::2, ::2]`` as computed row and column indices); the trace of each matrix of
a batch (a diagonal read, two paired index tensors); and a causal mask written in place (-inf
above the diagonal through ``tc.store(..., extra_mask=)``, nothing read). Each comes with its
eager reference (see :mod:`.case`).

Notes: ``tc.full([ti, tj], -inf, dtype=torch.bfloat16)`` (and an fp32 ``tc.full`` cast with
``.to(torch.bfloat16)``, folded into the same ``tl.full`` in bf16) fails in the Triton
interpreter ("'InterpreterBuilder' object has no attribute 'get_bf16'", every candidate), though
it cross-compiles for sm_90; ``causal_mask_fill_`` stores the scalar -inf instead. Everything
else was supported as first written. Cross-compiled for sm_90 at the benchmark shapes, the
defaults: ``kv_repeat_gqa`` blocks [32] of rows (the head index ``th.begin // n_rep`` a scalar),
30 registers, 16-byte loads and stores; ``concat_last_dim`` blocks [2] of rows at 8 warps (the
1000 and 3000 wide rows padded to 1024 and 4096), 31 registers, 16-byte loads and stores through
both constant slices; ``time_shift_mix`` [32, 128] at 56 registers, the block one position back
loaded with 16-byte vectors like the current one (the shift is along rows); ``flip_last_dim``
[32, 128], 32 registers, loads the mirrored columns ``n - 1 - j`` as scalar 2-byte
``ld.global.b16`` (32 a thread, where a reversed 16-byte vector would do), stores 16-byte
vectors; a whole-row ``torch.flip(x[tm, :], [1])`` instead compiles (rows [2], 8 warps) to
16-byte loads and stores at 115 registers. ``downsample2x_nchw`` [32, 128], 40 registers, loads columns 2j as
scalar ``ld.global.b16`` (so does the slice form ``planes[p, 2 * ti.index, ::2]``), stores
16-byte vectors; ``batched_trace`` [128, 64] at 8 warps (``deferred_sums``), 32 registers, one 4-byte load an
element (the diagonal is 4 (N + 1) bytes apart); ``causal_mask_fill_`` [32, 128], 24 registers,
scalar masked ``st.global.b16`` (32 a thread) even in the blocks wholly above the diagonal, and
the blocks below it launch and store nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randn

GQA_GROUPS = 4  # kv_repeat_gqa: query heads per KV head (Llama-3 8B: 32 query, 8 KV heads)
NEG_INF = float("-inf")


# --------------------------------------------------------------------------- GQA KV repeat


@tc.kernel(static_shapes=True)
def kv_repeat_gqa(k: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Hugging Face's ``repeat_kv``: keys (or values) k [B, Hkv, S, D] bf16 to [B, Hkv n_rep,
    S, D] for grouped-query attention, output head h a copy of input head h // n_rep. One
    program per (batch, output head, block of positions) copies rows of D."""
    b, hkv, s, _ = k.size()
    out = torch.empty([b, hkv * n_rep, s, k.size(3)], dtype=k.dtype, device=k.device)
    for tb, th, ts in tc.tile([b, hkv * n_rep, s], block_size=[1, 1, None]):
        out[tb.begin, th.begin, ts, :] = k[tb.begin, th.begin // n_rep, ts, :]
    return out


def _kv_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, Hkv, S, D)``: bf16 keys, randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def kv_repeat_gqa_reference(k: torch.Tensor, n_rep: int) -> torch.Tensor:
    b, hkv, s, d = k.shape
    return k[:, :, None, :, :].expand(b, hkv, n_rep, s, d).reshape(b, hkv * n_rep, s, d)


# --------------------------------------------------------------------------- concat last dim


@tc.kernel(static_shapes=True)
def concat_last_dim(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.cat([a, b], dim=-1) of a [M, N1] and b [M, N2] bf16 (two feature sets side by
    side). Each program takes a block of rows: a's whole rows go to the constant slice
    out[:, :N1], b's to out[:, N1:]."""
    m, n1 = a.size()
    n2 = b.size(1)
    out = torch.empty([m, n1 + n2], dtype=a.dtype, device=a.device)
    for tm in tc.tile(m):
        out[tm, :n1] = a[tm, :]
        out[tm, n1:] = b[tm, :]
    return out


def _concat_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N1, N2)``: a and b bf16 randn."""
    m, n1, n2 = shape
    g = gen(seed)
    return randn((m, n1), torch.bfloat16, device, g), randn((m, n2), torch.bfloat16, device, g)


def concat_last_dim_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.cat([a, b], dim=-1)


# --------------------------------------------------------------------------- RWKV token shift


@tc.kernel(static_shapes=True)
def time_shift_mix(x: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """RWKV's token shift: out[b, t] = mu * x[b, t] + (1 - mu) * x[b, t - 1] (x[b, -1] = 0)
    for x [B, T, C] bf16 and a per-channel mix mu [C] fp32; fp32 math, bf16 out. Each
    program takes one batch's block of positions and channels and loads the block one
    position back, masked at t = 0."""
    b, t, c = x.size()
    out = torch.empty_like(x)
    for tb, tt, tch in tc.tile([b, t, c], block_size=[1, None, None]):
        cur = x[tb.begin, tt, tch].to(torch.float32)
        has_prev = (tt.index >= 1)[:, None]
        prev = tc.load(x, [tb.begin, tt.index - 1, tch], extra_mask=has_prev).to(torch.float32)
        m = mu[tch][None, :]
        out[tb.begin, tt, tch] = (m * cur + (1.0 - m) * prev).to(out.dtype)
    return out


def _shift_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, C)``: bf16 activations (randn) and mu [C] fp32 uniform in (0, 1), as
    RWKV initializes its time-mix ratios."""
    b, t, c = shape
    g = gen(seed)
    x = randn((b, t, c), torch.bfloat16, device, g)
    if device == "meta":
        return x, torch.empty((c,), dtype=torch.float32, device=device)
    return x, torch.rand((c,), generator=g).to(device)


def time_shift_mix_reference(x: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    xx = torch.nn.functional.pad(x, (0, 0, 1, -1))  # RWKV's nn.ZeroPad2d((0, 0, 1, -1))
    return (x.float() * mu + xx.float() * (1 - mu)).to(x.dtype)


# --------------------------------------------------------------------------- flip last dim


@tc.kernel(static_shapes=True)
def flip_last_dim(x: torch.Tensor) -> torch.Tensor:
    """torch.flip(x, [-1]) of x [M, N] bf16 (e.g. a time-reversed signal for a bidirectional
    scan). Each program stores an [M, N] block, loading the mirrored columns n - 1 - j."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, n - 1 - tn.index]
    return out


def _matrix_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: bf16 randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def flip_last_dim_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.flip(x, [-1])


# --------------------------------------------------------------------------- 2x subsample


@tc.kernel(static_shapes=True)
def downsample2x_nchw(x: torch.Tensor) -> torch.Tensor:
    """x[:, :, ::2, ::2] of NCHW images x [B, C, H, W] bf16 into a contiguous [B, C, H / 2,
    W / 2] (a stride-2 1x1 conv's input, or a ResNet-D shortcut before its pooling). The
    images are viewed as [B C, H, W]; each program takes one image's block of output rows
    and columns and loads rows 2i, columns 2j."""
    b, c, h, w = x.size()
    planes = x.view(b * c, h, w)
    out = torch.empty([b * c, h // 2, w // 2], dtype=x.dtype, device=x.device)
    for tp, ti, tj in tc.tile([b * c, h // 2, w // 2], block_size=[1, None, None]):
        rows = (2 * ti.index)[:, None]
        cols = (2 * tj.index)[None, :]
        out[tp.begin, ti, tj] = planes[tp.begin, rows, cols]
    return out.view(b, c, h // 2, w // 2)


def _image_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, H, W)``: bf16 feature maps, randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def downsample2x_nchw_reference(x: torch.Tensor) -> torch.Tensor:
    return x[:, :, ::2, ::2].contiguous()


# --------------------------------------------------------------------------- batched trace


@tc.kernel(static_shapes=True)
def batched_trace(x: torch.Tensor) -> torch.Tensor:
    """The trace of each matrix of x [B, N, N] fp32: [B] fp32 (e.g. a continuous normalizing
    flow's exact divergence, the trace of each sample's N x N Jacobian). Each program takes a
    block of matrices and walks the diagonal in blocks, x[b, i, i] read with the same index
    tensor for both dims."""
    b, n, _ = x.size()
    out = torch.empty([b], dtype=torch.float32, device=x.device)
    for tb in tc.tile(b):
        acc = tc.zeros([tb], dtype=torch.float32)
        for ti in tc.tile(n):
            acc = acc + torch.sum(x[tb, ti.index, ti.index], dim=1)
        out[tb] = acc
    return out


def _trace_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, N)``: x [B, N, N] fp32 randn."""
    b, n = shape
    return (randn((b, n, n), torch.float32, device, gen(seed)),)


def batched_trace_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.diagonal(x, dim1=-2, dim2=-1).sum(-1)


# --------------------------------------------------------------------------- causal mask fill


@tc.kernel(static_shapes=True)
def causal_mask_fill_(scores: torch.Tensor) -> None:
    """scores.masked_fill_(j > i, -inf) in place for attention scores [B, H, S, S] bf16
    (query i, key j): the causal mask of an eager attention. The scores are viewed as
    [B H, S, S]; each program takes one head's block of (query, key) positions and stores
    -inf only where the key is after the query, reading nothing."""
    b, h, s, _ = scores.size()
    sc = scores.view(b * h, s, s)
    for tp, ti, tj in tc.tile([b * h, s, s], block_size=[1, None, None]):
        above = tj.index[None, :] > ti.index[:, None]
        tc.store(sc, [tp.begin, ti, tj], NEG_INF, extra_mask=above)


def _scores_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S)``: bf16 scores [B, H, S, S], 3 randn (q k^T / sqrt(d) of trained
    heads)."""
    b, h, s = shape
    return ((randn((b, h, s, s), torch.float32, device, gen(seed)) * 3).to(torch.bfloat16),)


def _causal_fill_in_place(scores: torch.Tensor) -> torch.Tensor:
    """What a user writes: the mask built from the shape, then masked_fill_."""
    s = scores.shape[-1]
    above = torch.ones(s, s, dtype=torch.bool, device=scores.device).triu(1)
    return scores.masked_fill_(above, NEG_INF)


def causal_mask_fill_reference(scores: torch.Tensor) -> torch.Tensor:
    """The in-place fill on a copy (the case's run copies the scores before the kernel)."""
    return _causal_fill_in_place(scores.clone())


def _run_causal_fill(kernels: Mapping[str, Callable[..., Any]], inputs: Inputs) -> torch.Tensor:
    """The kernel fills in place: copy the scores first, so the case's inputs stay as they
    were for the next run and the reference."""
    (scores,) = inputs
    out = scores.clone()
    kernels["causal_mask_fill_"](out)
    return out


CASES = [
    Case(
        name="kv_repeat_gqa",
        kernels=(kv_repeat_gqa,),
        make_inputs=_kv_inputs,
        reference=lambda k: kv_repeat_gqa_reference(k, GQA_GROUPS),
        run=lambda ks, inp: ks["kv_repeat_gqa"](*inp, GQA_GROUPS),
        gpu_shapes=((8, 8, 2048, 128),),
        cpu_shapes=((2, 3, 37, 16), (1, 2, 13, 40)),
        atol=1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "concat_last_dim",
        concat_last_dim,
        _concat_inputs,
        concat_last_dim_reference,
        ((16384, 1000, 3000),),
        ((37, 100, 60), (5, 13, 200)),
        1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "time_shift_mix",
        time_shift_mix,
        _shift_inputs,
        time_shift_mix_reference,
        ((16, 4096, 2048),),
        ((2, 37, 100), (3, 5, 130)),
        0.04,  # bf16 out, |x| < 8 (randn): one ulp (2^-5) where a fused multiply-add rounds
        # the fp32 mix to the other bf16 neighbour
    ),
    one_kernel_case(
        "flip_last_dim",
        flip_last_dim,
        _matrix_inputs,
        flip_last_dim_reference,
        ((16384, 4096),),
        ((37, 100), (300, 7)),
        1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "downsample2x_nchw",
        downsample2x_nchw,
        _image_inputs,
        downsample2x_nchw_reference,
        ((32, 64, 256, 256),),
        ((2, 3, 14, 38), (1, 5, 30, 10)),
        1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "batched_trace",
        batched_trace,
        _trace_inputs,
        batched_trace_reference,
        ((65536, 64),),  # 1 GiB, of which the 4M diagonal elements touch 134 MB of sectors
        ((37, 20), (3, 100)),
        1e-4,  # a sum of N <= 100 randn (|trace| ~ 10) in another order: fp32 rounding ~1e-6
    ),
    Case(
        name="causal_mask_fill_",
        kernels=(causal_mask_fill_,),
        make_inputs=_scores_inputs,
        reference=causal_mask_fill_reference,
        run=_run_causal_fill,
        gpu_shapes=((4, 16, 2048),),
        cpu_shapes=((2, 3, 37), (1, 5, 70)),
        atol=1e-6,  # stores of -inf and untouched elements: exact (-inf on both sides is 0)
        timed_run=lambda ks, inp: ks["causal_mask_fill_"](*inp),
        timed_reference=_causal_fill_in_place,
    ),
]

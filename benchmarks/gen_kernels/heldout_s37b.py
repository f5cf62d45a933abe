"""Held-out kernels written from the docs only, session 37b (see :mod:`.heldout_rows` for why
held-out kernels exist): recent LLM training and inference practice. DeepSeek MLA decode
attention over the compressed latent KV cache (W_UK absorbed into the query, the rotary part a
second dot against the shared rope key, the latent both key and value; a program per
(sequence, block of heads), an online softmax over a loop bounded by the loaded cache length);
Mamba-2's SSD forward in chunks (the intra-chunk segsum decay mask on ``C B^T``, the carried
[P, N] state's contribution, the state passed to the next chunk; a fixed ``block_size`` chunk
loop); OCP MXFP4 quantization (an E8M0 scale per 32 from ``floor(log2(amax))``, round half to
even onto e2m1, two codes a byte) and NVFP4 dequantization (nibbles decoded arithmetically,
an e4m3 scale per 16 and a global fp32 scale, bf16 out); TRL's DPO sigmoid loss with label
smoothing from per-token log-probs and a completion mask (losses and chosen / rejected
rewards); Muon's Newton-Schulz quintic iteration (five steps of three tiled bf16 GEMM loops in a
host loop); Gemma-2 final-logit soft-capping, per-row temperature, vLLM's top-k threshold by
``torch.topk`` and an exponential-race sample with pre-drawn noise; and KIVI-style asymmetric
int4 KV-cache quantization per group of 32 (fp16 scale and minimum, packed). Each comes with its
eager reference (see :mod:`.case`): FlashMLA's test reference, ``ssd_minimal_discrete`` from the
Mamba-2 paper (fp64), torchao's to_mx bit extraction, a 16-entry e2m1 table, TRL's
concatenated_forward / dpo_loss, Keller Jordan's zeropower_via_newtonschulz5 verbatim, HF's
softcapping then vLLM's sampler, and KIVI's quantization math.

Notes: all eight match at every CPU shape (seeds 0 and 1) with the autotuner on an empty cache,
with ``TILECRAFT_NO_AUTOTUNE=1``, in ref mode and with the ``SMALL_CONFIGS`` below, and their
defaults cross-compile for cuda:90 and hip:gfx942 at the CPU and the GPU shapes
(/work/fuzz37b/verify.py, gpu_dry.py). Max errors: 0 for MXFP4 codes and scales, NVFP4 (bf16),
the int4 codes / scales / mins and the sampled tokens; 3.9e-3 for MLA (half a bf16 ulp);
4.8e-6 for the SSD against fp64; 3e-6 for DPO; 1.3e-6 for the top-k probabilities; 3.8e-2 for
Muon, whose verbatim reference rounds every intermediate (``c * A @ A``, ``b * A``, their sum)
to bf16 while the kernel rounds each product once (bit-exact against such a reference).
Natural variants that also worked (/work/fuzz37b/probes): FlashMLA's packed q / cache layout
through ``[..., :C]`` / ``[..., C:]`` slices, the whole cache at once with ``torch.softmax``,
flash-decoding splits with an lse combine loop; the paper's ``masked_fill(-inf)`` segsum and
``torch.einsum`` in the SSD, ``tc.grid`` chunks, a partial last chunk against a sequential scan;
``amax.view(torch.int32) >> 23`` for the MX exponent, RNE by threshold compares, ``code[...,
0::2] | code[..., 1::2] << 4``, a LUT gather for NVFP4, a 0-d global scale; TRL's
``(logps * mask).sum(-1)`` with the loss in host glue, DPO autograd through
``register_backward``; ``@`` / ``.mT`` / ``torch.addmm`` in Muon's loops; ``topk(...).values[:,
-1]`` and a descending ``torch.sort`` for the threshold; strided / transposed inputs,
static_shapes=False (but see below), torch.compile(fullgraph=True) eager and inductor, dynamic=True,
standalone export (MLA, MXFP4, DPO).

Bugs found (repro_N.py in /work/fuzz37b, REPORT.md there): (1) a host loop that relaunches
device loops on a tensor whose strides change (Muon's ``x = g.mT`` for a tall G, then ``x =
x_new``) is a DeviceCodeError "another shape/dtype" with a hint (static_shapes=False) that fails
the same way; the kernel here makes the transposed copy ``.contiguous()``; (2) ``acs[-1]`` of a
chunk tile with a fixed ``block_size`` is a ShapeError claiming the positions depend on the
config (the SSD sums ``a`` instead); (3) with static_shapes=False a tile ``.view(.., 16, 2)`` of a
dim the host code's view wrote as the literal 32 is refused (kv_int4_quantize); (4) with
static_shapes=False ``torch.topk(x, k).values[:, -1:]`` fails when the run-time V equals k, and
(6) the same cause gives silent wrong values: ``Tracer.rdim_for`` hands a compile-time whole dim
(``torch.arange(20)``, topk's k) the Sym of a run-time dim that had that size at the first call,
so a later call with V = 25 runs the arange over 25; (5) a device ``for v in (lo, hi)`` /
``enumerate((...))`` is refused while a list comprehension over the same tuple works (the FP4
kernels call a helper twice); (7) the standalone export refuses a module-level tuple of floats
(Muon's ``NS_COEFFS``); (8) the cuda:90 default of the SSD chunk loop spills (predicted 82 / 202
registers, ptxas 255 plus 408 / 1968 bytes of spills). Not bugs: ``torch.cat`` of a 512- and a 64-wide tile (documented), an
un-indexed host weight in device code (``w.float()``: DeviceCodeError with a hint; ref mode runs
it), fp16 MX scales overflowing (the kernel's own fp16 math, as eager). Unsupported ops wanted:
``torch.cat`` of unequal widths, ``torch.frexp``, device ``for`` over tuples, an int index of a
fixed-block tile.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

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
F16 = torch.float16
I64 = torch.int64
U8 = torch.uint8


# --------------------------------------------------------------------------- MLA decode

MLA_SCALE = 1.0 / math.sqrt(128 + 64)  # DeepSeek: qk_nope_head_dim + qk_rope_head_dim


@tc.kernel(static_shapes=True)
def mla_decode(
    q_lat: torch.Tensor,
    q_pe: torch.Tensor,
    ckv: torch.Tensor,
    kpe: torch.Tensor,
    cache_lens: torch.Tensor,
) -> torch.Tensor:
    """DeepSeek-V2/V3 multi-head latent attention, one decode token, weights absorbed (FlashMLA's
    interface): q_lat [B, H, C] bf16 is q_nope already multiplied by W_UK (C = kv_lora_rank),
    q_pe [B, H, R] bf16 the rotary part; the cache holds the compressed latent ckv [B, L, C]
    bf16 (it is both key and value) and the shared rotary key kpe [B, L, R] bf16; cache_lens [B]
    int32. score = (q_lat . c + q_pe . k_pe) * scale over the first cache_lens[b] positions,
    softmax in fp32, out [B, H, C] bf16 = p @ ckv (W_UV is applied after). A program per
    (sequence, block of heads), an online softmax over the cache."""
    b, h, c = q_lat.size()
    out = torch.empty_like(q_lat)
    for tb, th in tc.tile([b, h], block_size=[1, None]):
        ql = q_lat[tb.begin, th, :]
        qp = q_pe[tb.begin, th, :]
        n = cache_lens[tb.begin]
        m_i = tc.full([th], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([th], dtype=torch.float32)
        acc = tc.zeros([th, c], dtype=torch.float32)
        for tl in tc.tile(0, n):
            kv = ckv[tb.begin, tl, :]
            s = tc.dot(ql, kv.t(), out_dtype=torch.float32)
            s = tc.dot(qp, kpe[tb.begin, tl, :].t(), acc=s)
            s = s * MLA_SCALE
            m_new = torch.maximum(m_i, torch.amax(s, dim=1))
            p = torch.exp(s - m_new[:, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=1)
            acc = tc.dot(p.to(kv.dtype), kv, acc=acc * alpha[:, None])
            m_i = m_new
        out[tb.begin, th, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


def _mla_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, L, C, R)``: bf16 randn, cache lengths in [1, L] (the first one L)."""
    b, h, l, c, r = shape  # noqa: E741 - the paper's L
    if device == "meta":
        ql, qp, kv, kp = meta_tensors((b, h, c), (b, h, r), (b, l, c), (b, l, r), dtype=BF16)
        return ql, qp, kv, kp, torch.empty((b,), dtype=torch.int32, device="meta")
    g = gen(seed)
    ql = randn((b, h, c), BF16, device, g)
    qp = randn((b, h, r), BF16, device, g)
    kv = randn((b, l, c), BF16, device, g)
    kp = randn((b, l, r), BF16, device, g)
    lens = torch.randint(1, l + 1, (b,), generator=g, dtype=torch.int32)
    lens[0] = l
    return ql, qp, kv, kp, lens.to(device)


def mla_decode_reference(q_lat, q_pe, ckv, kpe, cache_lens):
    """FlashMLA's test reference (scaled_dot_product_attention over the latent, a length mask),
    per sequence, in fp32."""
    b, h, c = q_lat.shape
    out = torch.empty_like(q_lat)
    for i in range(b):
        n = int(cache_lens[i])
        q = torch.cat([q_lat[i], q_pe[i]], dim=-1).float()  # [H, C + R]
        k = torch.cat([ckv[i, :n], kpe[i, :n]], dim=-1).float()  # [n, C + R]
        v = ckv[i, :n].float()
        attn = torch.softmax(q @ k.T * MLA_SCALE, dim=-1)
        out[i] = (attn @ v).to(q_lat.dtype)
    return out


# --------------------------------------------------------------------------- Mamba-2 SSD

SSD_CHUNK = 32


@tc.kernel(static_shapes=True)
def mamba2_ssd(
    x: torch.Tensor, a: torch.Tensor, bm: torch.Tensor, cm: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2's state space dual (SSD) forward in chunks (ssd_minimal_discrete of the paper,
    inputs already discretized): x [B, L, H, P] fp32 (x * dt), a [B, L, H] fp32 (A * dt, <= 0),
    bm, cm [B, L, H, N] fp32. Each chunk of SSD_CHUNK steps: the intra-chunk (diagonal block)
    output (C B^T masked by exp(segsum(a))) @ x, plus the carried state's contribution
    (C state^T) * exp(cumsum(a)); then the state passes to the next chunk, decayed by the
    chunk's total and added the chunk's own (x * exp(total - cumsum))^T @ B. A program per
    (batch, head, block of P), the chunks walked in order. Returns y [B, L, H, P] and the final
    state [B, H, P, N]."""
    b, l, h, p = x.size()  # noqa: E741 - the paper's L
    n = bm.size(3)
    y = torch.empty_like(x)
    final = torch.empty([b, h, p, n], dtype=torch.float32, device=x.device)
    for tb, th, tp in tc.tile([b, h, p], block_size=[1, 1, None]):
        state = tc.zeros([tp, n], dtype=torch.float32)
        for tt in tc.tile(l, block_size=SSD_CHUNK):
            at = a[tb.begin, tt, th.begin]
            acs = torch.cumsum(at, dim=0)
            seg = acs[:, None] - acs[None, :]
            causal = tt.index[:, None] >= tt.index[None, :]
            decay = torch.where(causal, torch.exp(seg), 0.0)
            ct = cm[tb.begin, tt, th.begin, :]
            bt = bm[tb.begin, tt, th.begin, :]
            xt = x[tb.begin, tt, th.begin, tp]
            scores = (ct @ bt.t()) * decay
            y_diag = scores @ xt
            y_off = (ct @ state.t()) * torch.exp(acs)[:, None]
            y[tb.begin, tt, th.begin, tp] = y_diag + y_off
            total = torch.sum(at, dim=0)
            w = torch.exp(total - acs)
            state = state * torch.exp(total) + (xt * w[:, None]).t() @ bt
        final[tb.begin, th.begin, tp, :] = state
    return y, final


def _ssd_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, L, H, P, N)``: dt = softplus(randn - 1), A = -exp(randn * 0.5) per head,
    x * dt, A * dt, B and C randn * 0.5 (L a multiple of SSD_CHUNK)."""
    b, l, h, p, n = shape  # noqa: E741 - the paper's L
    if device == "meta":
        return meta_tensors((b, l, h, p), (b, l, h), (b, l, h, n), (b, l, h, n))
    g = gen(seed)
    dt = F.softplus(torch.randn((b, l, h), generator=g) - 1.0)
    a_head = -torch.exp(torch.randn((h,), generator=g) * 0.5)
    x = torch.randn((b, l, h, p), generator=g) * dt[..., None]
    a = a_head * dt
    bm = torch.randn((b, l, h, n), generator=g) * 0.5
    cm = torch.randn((b, l, h, n), generator=g) * 0.5
    return x.to(device), a.to(device), bm.to(device), cm.to(device)


def _segsum(x):
    """The paper's stable segsum: [..., T] -> [..., T, T], -inf above the diagonal."""
    t = x.size(-1)
    x = x[..., None].expand(*x.shape, t)
    mask = torch.tril(torch.ones(t, t, device=x.device, dtype=torch.bool), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    x_segsum = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(t, t, device=x.device, dtype=torch.bool), diagonal=0)
    return x_segsum.masked_fill(~mask, -torch.inf)


def mamba2_ssd_reference(x, a, bm, cm):
    """ssd_minimal_discrete from the Mamba-2 paper / state-spaces/mamba, einsums as written
    (rearranges as views), in fp64."""
    bsz, l, h, p = x.shape  # noqa: E741 - the paper's L
    q = SSD_CHUNK
    c = l // q
    X = x.double().view(bsz, c, q, h, p)
    A = a.double().view(bsz, c, q, h).permute(0, 3, 1, 2)  # b h c l
    B = bm.double().view(bsz, c, q, h, -1)
    C = cm.double().view(bsz, c, q, h, -1)
    A_cumsum = torch.cumsum(A, dim=-1)
    L = torch.exp(_segsum(A))
    Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, X)
    decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_states, X)
    initial_states = torch.zeros_like(states[:, :1])
    states = torch.cat([initial_states, states], dim=1)
    decay_chunk = torch.exp(_segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
    new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    states, final_state = new_states[:, :-1], new_states[:, -1]
    state_decay_out = torch.exp(A_cumsum)
    Y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, states, state_decay_out)
    Y = (Y_diag + Y_off).reshape(bsz, l, h, p)
    return Y.float(), final_state.float()


# --------------------------------------------------------------------------- MXFP4 quantize

MX_BLOCK = 32
FP4_EMAX = 2  # the largest power of two of e2m1 (6 = 1.5 * 2^2)


def _e2m1_code(s: torch.Tensor) -> torch.Tensor:
    """The 4-bit E2M1 code of s (round half to even, saturating at 6; sign in bit 3)."""
    a = torch.clamp(s.abs(), max=6.0)
    q = torch.where(
        a < 2.0,
        torch.round(a * 2.0) * 0.5,
        torch.where(a < 4.0, torch.round(a), torch.round(a * 0.5) * 2.0),
    )
    mag = torch.where(
        q < 2.0, q * 2.0, torch.where(q < 4.0, q + 2.0, torch.where(q < 6.0, 6.0, 7.0))
    )
    return mag.to(torch.uint8) | torch.where(s < 0, 8, 0).to(torch.uint8)


@tc.kernel(static_shapes=True)
def mxfp4_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """OCP Microscaling MXFP4 quantization of x [M, K] fp32 (K a multiple of 32): each block of
    32 along K shares an E8M0 scale 2^(floor(log2(amax)) - 2) (stored as its biased exponent,
    uint8); each element x / scale is rounded to FP4 E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6, round half
    to even, saturating at 6) and stored as a 4-bit code (sign bit 3), two a byte (element 2i
    in the low nibble). Returns packed [M, K / 2] uint8 and scales [M, K / 32] uint8."""
    m, k = x.size()
    nb = k // MX_BLOCK
    xv = x.view(m, nb, MX_BLOCK // 2, 2)
    packed = torch.empty([m, nb, MX_BLOCK // 2], dtype=torch.uint8, device=x.device)
    scales = torch.empty([m, nb], dtype=torch.uint8, device=x.device)
    for tm, tg in tc.tile([m, nb]):
        lo = xv[tm, tg, :, 0]
        hi = xv[tm, tg, :, 1]
        amax = torch.maximum(lo.abs().amax(dim=-1), hi.abs().amax(dim=-1))
        e = torch.floor(torch.log2(amax)) - FP4_EMAX
        e = torch.where(amax == 0, -127.0, torch.clamp(e, -127.0, 127.0))
        inv = torch.exp2(-e)[:, :, None]
        # a device `for v in (lo, hi)` is refused (see the module docstring): a helper twice
        packed[tm, tg, :] = _e2m1_code(lo * inv) | (_e2m1_code(hi * inv) << 4)
        scales[tm, tg] = (e + 127.0).to(torch.uint8)
    return packed.view(m, k // 2), scales


def _mx_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K)``: randn times a per-row magnitude in [1e-3, 1e3]; one block all zeros
    but one element, one block of exact powers of two."""
    m, k = shape
    if device == "meta":
        return meta_tensors((m, k))
    g = gen(seed)
    x = torch.randn((m, k), generator=g) * torch.exp(torch.randn((m, 1), generator=g) * 3)
    x[0, :MX_BLOCK] = 0.0
    x[0, 3] = 0.75
    x[-1, -MX_BLOCK:] = 2.0 ** torch.randint(-4, 4, (MX_BLOCK,), generator=g).float()
    return (x.to(device),)


def mxfp4_quantize_reference(x):
    """torchao's to_mx (FLOOR scale mode) for elem_dtype fp4_e2m1: the shared exponent from the
    amax's fp32 exponent bits, then round-to-nearest-even to e2m1 and pack_uint4."""
    m, k = x.shape
    xb = x.reshape(m, k // MX_BLOCK, MX_BLOCK)
    max_abs = xb.abs().amax(dim=-1)
    extracted_pow2 = ((max_abs.view(torch.int32) >> 23) & 0xFF) - 127
    scale_e8m0_unbiased = torch.clamp(extracted_pow2 - FP4_EMAX, -127, 128)
    scale_e8m0_unbiased = torch.where(max_abs == 0, -127, scale_e8m0_unbiased)
    scale_biased = (scale_e8m0_unbiased + 127).to(torch.uint8)
    scale_fp = torch.exp2(scale_e8m0_unbiased.float())
    data = xb / scale_fp[..., None]
    a = data.abs().clamp(max=6.0)
    q = torch.where(
        a < 2, torch.round(a * 2) / 2, torch.where(a < 4, torch.round(a), torch.round(a / 2) * 2)
    )
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], device=x.device)
    mag = torch.searchsorted(grid, q.contiguous())
    code = (mag | torch.where(data < 0, 8, 0)).to(torch.uint8).reshape(m, k)
    packed = code[:, 0::2] | (code[:, 1::2] << 4)
    return packed, scale_biased


# --------------------------------------------------------------------------- NVFP4 dequantize

NV_BLOCK = 16


def _e2m1_value(code: torch.Tensor) -> torch.Tensor:
    """The fp32 value of 4-bit E2M1 codes (sign bit 3, two exponent bits, one mantissa bit)."""
    mag = (code & 7).to(torch.int32)
    ex = mag >> 1
    mant = (mag & 1).to(torch.float32)
    val = torch.where(
        ex == 0, mant * 0.5, (1.0 + mant * 0.5) * torch.exp2((ex - 1).to(torch.float32))
    )
    return torch.where((code & 8) != 0, -val, val)


@tc.kernel(static_shapes=True)
def nvfp4_dequantize(
    packed: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor
) -> torch.Tensor:
    """NVFP4 dequantization to bf16: packed [M, K / 2] uint8 (two e2m1 codes a byte, element 2i
    in the low nibble), scales [M, K / 16] float8_e4m3fn (one per 16 elements), global_scale
    [1] fp32 (per tensor). x = e2m1(code) * float(scale) * global_scale. Returns [M, K] bf16."""
    m, k2 = packed.size()
    k = k2 * 2
    nb = k // NV_BLOCK
    pv = packed.view(m, nb, NV_BLOCK // 2)
    out = torch.empty([m, nb, NV_BLOCK // 2, 2], dtype=torch.bfloat16, device=packed.device)
    for tm, tg in tc.tile([m, nb]):
        byte = pv[tm, tg, :]
        s = scales[tm, tg].to(torch.float32) * global_scale[0]
        # a device `for j, code in enumerate(...)` is refused: a helper per nibble
        out[tm, tg, :, 0] = (_e2m1_value(byte & 0xF) * s[:, :, None]).to(torch.bfloat16)
        out[tm, tg, :, 1] = (_e2m1_value(byte >> 4) * s[:, :, None]).to(torch.bfloat16)
    return out.view(m, k)


def _nv_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, K)``: random bytes, e4m3 scales in [0.01, 448] (a few subnormal), a global
    scale amax / (448 * 6)-like."""
    m, k = shape
    if device == "meta":
        return (
            torch.empty((m, k // 2), dtype=U8, device="meta"),
            torch.empty((m, k // NV_BLOCK), dtype=torch.float8_e4m3fn, device="meta"),
            torch.empty((1,), dtype=F32, device="meta"),
        )
    g = gen(seed)
    packed = torch.randint(0, 256, (m, k // 2), generator=g).to(U8)
    sc = torch.exp(torch.rand((m, k // NV_BLOCK), generator=g) * 10 - 4).clamp(max=448.0)
    sc.view(-1)[0] = 2.0**-8  # an e4m3 subnormal
    scales = sc.to(torch.float8_e4m3fn)
    gs = torch.tensor([0.0173], dtype=F32)
    return packed.to(device), scales.to(device), gs.to(device)


E2M1_VALUES = [
    0.0,
    0.5,
    1.0,
    1.5,
    2.0,
    3.0,
    4.0,
    6.0,
    -0.0,
    -0.5,
    -1.0,
    -1.5,
    -2.0,
    -3.0,
    -4.0,
    -6.0,
]


def nvfp4_dequantize_reference(packed, scales, global_scale):
    """FlashInfer / TensorRT-LLM's e2m1_and_ufp8sf_scale_to_float in torch: a lookup table of
    the 16 codes, unpack low then high nibble, times the block scale and the global scale."""
    m, k2 = packed.shape
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)
    lo = (packed & 0xF).long()
    hi = (packed >> 4).long()
    vals = torch.stack([lut[lo], lut[hi]], dim=-1).reshape(m, k2 * 2)
    sf = scales.float().repeat_interleave(NV_BLOCK, dim=1)
    return (vals * sf * global_scale).to(torch.bfloat16)


# --------------------------------------------------------------------------- DPO loss

DPO_BETA = 0.1
DPO_LABEL_SMOOTHING = 0.1


@tc.kernel(static_shapes=True)
def dpo_loss(
    policy_logps: torch.Tensor, ref_logps: torch.Tensor, loss_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """TRL's DPO "sigmoid" loss with label smoothing (cDPO) from per-token log-probabilities:
    policy_logps, ref_logps [2B, T] fp32 (the B chosen sequences, then the B rejected ones, as
    TRL's concatenated forward), loss_mask [2B, T] bool (the completion tokens). Sequence
    log-probabilities are the masked sums; logits = (pi_c - pi_r) - (ref_c - ref_r); loss =
    -logsigmoid(beta logits) (1 - ls) - logsigmoid(-beta logits) ls. Returns the per-pair
    losses [B] and the chosen / rejected rewards beta (pi - ref) [B]."""
    b2, t = policy_logps.size()
    b = b2 // 2
    pol = policy_logps.view(2, b, t)
    ref = ref_logps.view(2, b, t)
    msk = loss_mask.view(2, b, t)
    losses = torch.empty([b], dtype=torch.float32, device=policy_logps.device)
    chosen_rewards = torch.empty([b], dtype=torch.float32, device=policy_logps.device)
    rejected_rewards = torch.empty([b], dtype=torch.float32, device=policy_logps.device)
    for tb in tc.tile(b):
        pc = tc.zeros([tb], dtype=torch.float32)
        pr = tc.zeros([tb], dtype=torch.float32)
        rc = tc.zeros([tb], dtype=torch.float32)
        rr = tc.zeros([tb], dtype=torch.float32)
        for tt in tc.tile(t):
            mc = msk[0, tb, tt]
            mr = msk[1, tb, tt]
            pc = pc + torch.sum(torch.where(mc, pol[0, tb, tt], 0.0), dim=1)
            pr = pr + torch.sum(torch.where(mr, pol[1, tb, tt], 0.0), dim=1)
            rc = rc + torch.sum(torch.where(mc, ref[0, tb, tt], 0.0), dim=1)
            rr = rr + torch.sum(torch.where(mr, ref[1, tb, tt], 0.0), dim=1)
        logits = (pc - pr) - (rc - rr)
        losses[tb] = (
            -F.logsigmoid(DPO_BETA * logits) * (1 - DPO_LABEL_SMOOTHING)
            - F.logsigmoid(-DPO_BETA * logits) * DPO_LABEL_SMOOTHING
        )
        chosen_rewards[tb] = DPO_BETA * (pc - rc)
        rejected_rewards[tb] = DPO_BETA * (pr - rr)
    return losses, chosen_rewards, rejected_rewards


def _dpo_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T)``: per-token log-probs -|randn| * 2 (the reference's the policy's plus
    noise), a mask of the completion: from a random prompt length to a random end."""
    b, t = shape
    if device == "meta":
        p, r = meta_tensors((2 * b, t), (2 * b, t))
        return p, r, torch.empty((2 * b, t), dtype=torch.bool, device="meta")
    g = gen(seed)
    pol = -torch.randn((2 * b, t), generator=g).abs() * 2
    ref = pol - torch.randn((2 * b, t), generator=g) * 0.3
    start = torch.randint(0, max(t // 2, 1), (2 * b, 1), generator=g)
    end = torch.randint(t // 2, t + 1, (2 * b, 1), generator=g)
    pos = torch.arange(t)[None, :]
    mask = (pos >= start) & (pos < end)
    return pol.to(device), ref.to(device), mask.to(device)


def dpo_loss_reference(policy_logps, ref_logps, loss_mask):
    """TRL's DPOTrainer: concatenated_forward's masked sum, then dpo_loss (loss_type sigmoid)."""
    b = policy_logps.shape[0] // 2
    all_pol = (policy_logps * loss_mask).sum(-1)
    all_ref = (ref_logps * loss_mask).sum(-1)
    chosen_logps, rejected_logps = all_pol[:b], all_pol[b:]
    ref_chosen_logps, ref_rejected_logps = all_ref[:b], all_ref[b:]
    logratios = chosen_logps - rejected_logps
    ref_logratios = ref_chosen_logps - ref_rejected_logps
    logits = logratios - ref_logratios
    losses = (
        -F.logsigmoid(DPO_BETA * logits) * (1 - DPO_LABEL_SMOOTHING)
        - F.logsigmoid(-DPO_BETA * logits) * DPO_LABEL_SMOOTHING
    )
    chosen_rewards = DPO_BETA * (chosen_logps - ref_chosen_logps)
    rejected_rewards = DPO_BETA * (rejected_logps - ref_rejected_logps)
    return losses, chosen_rewards, rejected_rewards


# --------------------------------------------------------------------------- Muon Newton-Schulz

NS_COEFFS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5


@tc.kernel(static_shapes=True)
def muon_newton_schulz(g: torch.Tensor) -> torch.Tensor:
    """Muon's zeropower_via_newtonschulz5: G [M, N] fp32 is cast to bf16, transposed when tall,
    divided by its Frobenius norm (+ 1e-7), then NS_STEPS quintic iterations A = X X^T,
    B = b A + c A A, X = a X + B X, each product in bf16 with fp32 accumulation, as Muon runs
    it. Three device loops an iteration (A, B, then the new X), each a tiled GEMM."""
    a_c, b_c, c_c = NS_COEFFS
    x = g.to(torch.bfloat16)
    transposed = g.size(0) > g.size(1)
    if transposed:
        x = x.mT.contiguous()  # a strided view would change layout between launches (repro_1)
    x = x / (x.norm() + 1e-7)
    m, n = x.size()
    for _ in range(NS_STEPS):
        gram = torch.empty([m, m], dtype=torch.bfloat16, device=g.device)
        for ti, tj in tc.tile([m, m]):
            acc = tc.zeros([ti, tj], dtype=torch.float32)
            for tk in tc.tile(n):
                acc = tc.dot(x[ti, tk], x[tj, tk].t(), acc=acc)
            gram[ti, tj] = acc.to(torch.bfloat16)
        poly = torch.empty([m, m], dtype=torch.bfloat16, device=g.device)
        for ti, tj in tc.tile([m, m]):
            acc = tc.zeros([ti, tj], dtype=torch.float32)
            for tk in tc.tile(m):
                acc = tc.dot(gram[ti, tk], gram[tk, tj], acc=acc)
            poly[ti, tj] = (b_c * gram[ti, tj].to(torch.float32) + c_c * acc).to(torch.bfloat16)
        x_new = torch.empty([m, n], dtype=torch.bfloat16, device=g.device)
        for ti, tj in tc.tile([m, n]):
            acc = tc.zeros([ti, tj], dtype=torch.float32)
            for tk in tc.tile(m):
                acc = tc.dot(poly[ti, tk], x[tk, tj], acc=acc)
            x_new[ti, tj] = (a_c * x[ti, tj].to(torch.float32) + acc).to(torch.bfloat16)
        x = x_new
    if transposed:
        x = x.mT
    return x


def _ns_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: a gradient-like randn matrix."""
    m, n = shape
    if device == "meta":
        return meta_tensors((m, n))
    return (randn((m, n), F32, device, gen(seed)),)


def muon_newton_schulz_reference(g):
    """KellerJordan/Muon's zeropower_via_newtonschulz5, verbatim but for names."""
    a, b, c = NS_COEFFS
    X = g.bfloat16()
    if g.size(-2) > g.size(-1):
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(NS_STEPS):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X + B @ X
    if g.size(-2) > g.size(-1):
        X = X.mT
    return X


# --------------------------------------------------------------------------- softcap top-k sampling

FINAL_SOFTCAP = 30.0
TOPK = 20


@tc.kernel(static_shapes=True)
def softcap_topk_sample(
    logits: torch.Tensor, temperature: torch.Tensor, exp_noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sampling step for Gemma-2 logits [B, V] bf16: final-logit soft-capping
    cap * tanh(x / cap) (cap 30), division by the row's temperature [B] fp32, vLLM's top-k
    filter (everything below the k-th largest to -inf, ties kept), the softmax, and a sample by
    the exponential race argmax(p / q) with pre-drawn q ~ Exp(1) [B, V] fp32 (vLLM's
    random_sample). Returns the token ids [B] int64 and the filtered probabilities [B, V]."""
    b, v = logits.size()
    tokens = torch.empty([b], dtype=torch.int64, device=logits.device)
    probs = torch.empty([b, v], dtype=torch.float32, device=logits.device)
    for tb in tc.tile(b):
        x = logits[tb, :].to(torch.float32)
        x = torch.tanh(x / FINAL_SOFTCAP) * FINAL_SOFTCAP
        x = x / temperature[tb][:, None]
        top_vals, _ = torch.topk(x, TOPK, dim=-1)
        kth = top_vals[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
        p = torch.softmax(x, dim=-1)
        probs[tb, :] = p
        tokens[tb] = torch.argmax(p / exp_noise[tb, :], dim=-1)
    return tokens, probs


def _sample_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, V)``: logits randn * 8 in bf16 (so the cap bites), temperatures in
    [0.5, 1.5], Exp(1) noise."""
    b, v = shape
    if device == "meta":
        lg, t, q = meta_tensors((b, v), (b,), (b, v))
        return lg.to(BF16), t, q
    g = gen(seed)
    logits = (torch.randn((b, v), generator=g) * 8).to(BF16)
    temp = torch.rand((b,), generator=g) + 0.5
    noise = -torch.log(1.0 - torch.rand((b, v), generator=g))
    return logits.to(device), temp.to(device), noise.to(device)


def softcap_topk_sample_reference(logits, temperature, exp_noise):
    """HF Gemma-2's final_logit_softcapping, then vLLM's Sampler: apply_temperature,
    apply_top_k_top_p (topk's k-th value as the threshold), softmax, random_sample."""
    x = logits.float()
    x = x / FINAL_SOFTCAP
    x = torch.tanh(x)
    x = x * FINAL_SOFTCAP
    x = x / temperature.unsqueeze(dim=1)
    top_k_mask = x.topk(TOPK, dim=1).values[:, -1:]
    x = x.masked_fill(x < top_k_mask, -float("inf"))
    probs = torch.softmax(x, dim=-1, dtype=torch.float32)
    tokens = probs.div(exp_noise).argmax(dim=-1).view(-1)
    return tokens, probs


# --------------------------------------------------------------------------- KV cache int4

KV_GROUP = 32


@tc.kernel(static_shapes=True)
def kv_int4_quantize(
    kv: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """KIVI-style asymmetric int4 quantization of new KV-cache entries kv [T, H, D] bf16, per
    token and head in groups of KV_GROUP channels: mn, mx of the group, scale = (mx - mn) / 15
    (at least 1e-5), q = clamp(round((x - mn) / scale), 0, 15), packed two a byte (channel 2i
    in the low nibble); the scale and the minimum (the zero point) kept in fp16. Returns packed
    [T, H, D / 2] uint8, scales and mins [T, H, D / KV_GROUP] fp16."""
    t, h, d = kv.size()
    ng = d // KV_GROUP
    xv = kv.view(t * h, ng, KV_GROUP)
    packed = torch.empty([t * h, ng, KV_GROUP // 2], dtype=torch.uint8, device=kv.device)
    scales = torch.empty([t, h, ng], dtype=torch.float16, device=kv.device)
    mins = torch.empty([t, h, ng], dtype=torch.float16, device=kv.device)
    sv = scales.view(t * h, ng)
    mv = mins.view(t * h, ng)
    for tr, tg in tc.tile([t * h, ng]):
        x = xv[tr, tg, :].to(torch.float32)
        mn = x.amin(dim=-1, keepdim=True)
        mx = x.amax(dim=-1, keepdim=True)
        scale = torch.clamp((mx - mn) / 15.0, min=1e-5)
        q = torch.clamp(torch.round((x - mn) / scale), 0, 15).to(torch.uint8)
        q2 = q.view(q.size(0), q.size(1), KV_GROUP // 2, 2)
        packed[tr, tg, :] = q2[:, :, :, 0] | (q2[:, :, :, 1] << 4)
        sv[tr, tg] = scale[:, :, 0].to(torch.float16)
        mv[tr, tg] = mn[:, :, 0].to(torch.float16)
    return packed.view(t, h, d // 2), scales, mins


def _kv_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (T, H, D)``: bf16 randn with a per-channel outlier scale (KIVI's key cache),
    one group constant."""
    t, h, d = shape
    if device == "meta":
        return meta_tensors((t, h, d), dtype=BF16)
    g = gen(seed)
    x = torch.randn((t, h, d), generator=g) * (1 + 4 * torch.rand((d,), generator=g))
    x[0, 0, :KV_GROUP] = 0.5
    return (x.to(device=device, dtype=BF16),)


def kv_int4_quantize_reference(kv):
    """KIVI's group-wise asymmetric quantization (quant/new_pack.py's triton_quantize_and_pack
    math in torch), then the two-per-byte packing."""
    t, h, d = kv.shape
    x = kv.float().reshape(t, h, d // KV_GROUP, KV_GROUP)
    mn = x.min(dim=-1, keepdim=True).values
    mx = x.max(dim=-1, keepdim=True).values
    scale = ((mx - mn) / 15).clamp(min=1e-5)
    q = ((x - mn) / scale).round().clamp(0, 15).to(torch.uint8).reshape(t, h, d)
    packed = q[..., 0::2] | (q[..., 1::2] << 4)
    return packed, scale[..., 0].to(torch.float16), mn[..., 0].to(torch.float16)


# --------------------------------------------------------------------------- cases

CASES: list[Case] = [
    one_kernel_case(
        "mla_decode",
        mla_decode,
        _mla_inputs,
        mla_decode_reference,
        ((64, 16, 4096, 512, 64),),  # DeepSeek-V3 at TP8: 16 heads, 4k cache, rank 512 + 64
        ((2, 4, 40, 32, 16), (1, 1, 1, 32, 16), (3, 20, 70, 64, 16)),
        2.0**-6,  # bf16 out |o| < 2: one ulp
    ),
    one_kernel_case(
        "mamba2_ssd",
        mamba2_ssd,
        _ssd_inputs,
        mamba2_ssd_reference,
        ((4, 4096, 32, 64, 128),),  # Mamba-2 2.7B-like: 32 heads of 64, state 128
        ((1, 64, 2, 16, 16), (2, 32, 1, 20, 16), (1, 96, 3, 16, 32)),
        1e-4,
    ),
    one_kernel_case(
        "mxfp4_quantize",
        mxfp4_quantize,
        _mx_inputs,
        mxfp4_quantize_reference,
        ((8192, 7168),),  # a DeepSeek-V3 activation: 235 MB fp32 in
        ((4, 64), (1, 32), (7, 96)),
        0.5,  # codes and exponents: exact
    ),
    one_kernel_case(
        "nvfp4_dequantize",
        nvfp4_dequantize,
        _nv_inputs,
        nvfp4_dequantize_reference,
        ((8192, 8192),),  # a Llama-70B-sized weight: 34 MB packed in, 134 MB bf16 out
        ((4, 64), (1, 16), (5, 112)),
        1e-6,  # exact: one bf16 rounding of the same product
    ),
    one_kernel_case(
        "dpo_loss",
        dpo_loss,
        _dpo_inputs,
        dpo_loss_reference,
        ((64, 4096),),  # 64 pairs of 4k tokens
        ((3, 50), (1, 1), (5, 130)),
        1e-4,  # fp32 sums of up to T log-probs in another order
    ),
    one_kernel_case(
        "muon_newton_schulz",
        muon_newton_schulz,
        _ns_inputs,
        muon_newton_schulz_reference,
        ((4096, 1024),),  # an MLP weight's gradient (tall: transposed)
        ((16, 32), (48, 32), (32, 32)),
        2.0**-4,
    ),
    one_kernel_case(
        "softcap_topk_sample",
        softcap_topk_sample,
        _sample_inputs,
        softcap_topk_sample_reference,
        ((128, 32768),),
        ((3, 100), (1, 20), (4, 257)),
        1e-5,
    ),
    one_kernel_case(
        "kv_int4_quantize",
        kv_int4_quantize,
        _kv_inputs,
        kv_int4_quantize_reference,
        ((4096, 8, 128),),  # a 4k-token prefill, 8 KV heads of 128
        ((3, 2, 64), (1, 1, 32), (5, 3, 96)),
        0.5,  # codes exact; fp16 scales and mins: same rounding
    ),
]

# Explicit small configs each case was also checked with (verify.py configs).
SMALL_CONFIGS: dict[str, list[tc.Config]] = {
    "mla_decode": [
        tc.Config(block_sizes=[16, 16], num_warps=2),
        tc.Config(block_sizes=[32, 32], num_warps=4, pid_type="persistent_interleaved"),
        tc.Config(block_sizes=[16, 64], num_warps=8, num_stages=1, indexing="block_ptr"),
    ],
    "mamba2_ssd": [
        tc.Config(block_sizes=[32], num_warps=2),
        tc.Config(block_sizes=[16], num_warps=8, pid_type="persistent_blocked"),
    ],
    "mxfp4_quantize": [
        tc.Config(block_sizes=[1, 1], num_warps=1),
        tc.Config(block_sizes=[2, 4], num_warps=2, pid_type="xyz"),
        tc.Config(block_sizes=[8, 2], num_warps=4, loop_orders=[[0, 1]]),
    ],
    "nvfp4_dequantize": [
        tc.Config(block_sizes=[1, 1], num_warps=1),
        tc.Config(block_sizes=[2, 8], num_warps=2, pid_type="persistent_interleaved"),
    ],
    "dpo_loss": [
        tc.Config(block_sizes=[1, 16], num_warps=1, deferred_sums=False),
        tc.Config(block_sizes=[4, 32], num_warps=2),
        tc.Config(block_sizes=[2, 64], num_warps=4, split_reductions=[2]),
    ],
    "muon_newton_schulz": [
        tc.Config(block_sizes=[16] * 9, num_warps=1),
        tc.Config(block_sizes=[32, 16, 16, 16, 32, 16, 32, 16, 32], num_warps=2, pid_type="xyz"),
    ],
    "softcap_topk_sample": [
        tc.Config(block_sizes=[1], num_warps=1),
        tc.Config(block_sizes=[2], num_warps=2, reduction_loops=[None, None]),
    ],
    "kv_int4_quantize": [
        tc.Config(block_sizes=[1, 1], num_warps=1),
        tc.Config(block_sizes=[4, 4], num_warps=2, pid_type="xyz"),
        tc.Config(block_sizes=[16, 1], num_warps=8, loop_orders=[[0, 1]]),
    ],
}

"""Held-out kernels written from the docs only, session 43d: dtype semantics, where PyTorch's
type promotion and reduction dtypes decide the answer. int8 activation row statistics (int8 sums
give int64, an int64 sum over an int gives fp32, bools summed, an int16 abs max); a T5 relative
position bias with a floor-divided chunk mask over left-padded (negative) position ids; int4
weights packed two to a uint8 (shifts, masks, sign extension through int8) dequantized with fp16
group scales (bf16 * fp16 promotes to fp32) and a bf16 bias; a bf16 residual add gated by an fp32
vector, masked by int64 attention masks, clamped with int bounds and rounded to fp16 (large
values to inf), with bf16-vs-fp32 threshold counts; a NaN-aware greedy decode over fp16 logits
(argmax with NaN and ties, torch.where with a Python int). A sixth, fp16 per-channel moments with
sum(dtype=torch.float32), is held out in refused_s43d.py (wrong values: REPORT.md bug 1).
Each comes with its eager reference; every output's dtype is eager's.

See /work/fuzz43d/REPORT.md for results and the kernels held out.
"""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, gen, with_args

I8, U8, I16, I64 = torch.int8, torch.uint8, torch.int16, torch.int64
BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32


# --------------------------------------------------------------------------- int8 row statistics


@tc.kernel(static_shapes=True)
def int8_row_stats(
    x: torch.Tensor, zp: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Statistics of int8 activation rows x [M, N] with a uint8 zero point per row zp [M]:
    the row sum (int64, as torch.sum of int8 gives), the mean of the zero-point-centred codes
    (an int64 sum divided by an int is fp32), how many codes are above the zero point (a bool
    sum, int64) and the largest |code| (int16: abs of int8 -128 would stay -128)."""
    m, n = x.size()
    total = torch.empty([m], dtype=torch.int64, device=x.device)
    mean = torch.empty([m], dtype=torch.float32, device=x.device)
    above = torch.empty([m], dtype=torch.int64, device=x.device)
    amax = torch.empty([m], dtype=torch.int16, device=x.device)
    for tm in tc.tile(m):
        v = x[tm, :]
        z = zp[tm]
        total[tm] = v.sum(dim=1)
        centred = v.to(torch.int32) - z[:, None]
        mean[tm] = centred.sum(dim=1) / n
        above[tm] = (v > z[:, None]).sum(dim=1)
        amax[tm] = v.to(torch.int16).abs().amax(dim=1)
    return total, mean, above, amax


def int8_row_stats_reference(x, zp):
    centred = x.to(torch.int32) - zp[:, None]
    return (
        x.sum(dim=1),
        centred.sum(dim=1) / x.shape[1],
        (x > zp[:, None]).sum(dim=1),
        x.to(torch.int16).abs().amax(dim=1),
    )


def _int8_inputs(shape, device, seed):
    m, n = shape
    if device == "meta":
        return (
            torch.empty(shape, dtype=I8, device="meta"),
            torch.empty([m], dtype=U8, device="meta"),
        )
    g = gen(seed)
    x = torch.randint(-128, 128, (m, n), generator=g).to(I8)
    x[0, :3] = -128
    zp = torch.randint(0, 256, (m,), generator=g).to(U8)
    return x.to(device), zp.to(device)


# --------------------------------------------------------------------------- T5 bias + chunks

NUM_BUCKETS, MAX_DISTANCE, CHUNK = 32, 128, 16


@tc.kernel(static_shapes=True)
def t5_bias_chunked(q_pos: torch.Tensor, k_pos: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """T5 bidirectional relative position bias [H, Q, K] bf16 from the bucket table [32, H] bf16,
    for query / key position ids (int64; left padding gives negative ids), -inf where the query
    and key fall in different chunks of CHUNK positions (floor division, as torch's // on
    negative ints)."""
    qn, kn = q_pos.size(0), k_pos.size(0)
    h = table.size(1)
    out = torch.empty([h, qn, kn], dtype=torch.bfloat16, device=table.device)
    for th, tq, tk in tc.tile([h, qn, kn], block_size=[1, None, None]):
        qp = q_pos[tq]
        kp = k_pos[tk]
        rel = kp[None, :] - qp[:, None]
        nb = NUM_BUCKETS // 2
        bucket = (rel > 0).to(torch.long) * nb
        rel = torch.abs(rel)
        max_exact = nb // 2
        is_small = rel < max_exact
        large = max_exact + (
            torch.log(rel.float() / max_exact)
            / math.log(MAX_DISTANCE / max_exact)
            * (nb - max_exact)
        ).to(torch.long)
        large = torch.min(large, torch.full_like(large, nb - 1))
        bucket = bucket + torch.where(is_small, rel, large)
        bias = table[bucket, th.begin]
        same = (qp // CHUNK)[:, None] == torch.div(kp, CHUNK, rounding_mode="floor")[None, :]
        out[th.begin, tq, tk] = torch.where(same, bias, float("-inf"))
    return out


def t5_bias_chunked_reference(q_pos, k_pos, table):
    rel = k_pos[None, :] - q_pos[:, None]
    nb = NUM_BUCKETS // 2
    bucket = (rel > 0).to(torch.long) * nb
    rel = torch.abs(rel)
    max_exact = nb // 2
    is_small = rel < max_exact
    large = max_exact + (
        torch.log(rel.float() / max_exact) / math.log(MAX_DISTANCE / max_exact) * (nb - max_exact)
    ).to(torch.long)
    large = torch.min(large, torch.full_like(large, nb - 1))
    bucket = bucket + torch.where(is_small, rel, large)
    bias = table[bucket].permute(2, 0, 1)  # [H, Q, K]
    same = (q_pos // CHUNK)[:, None] == torch.div(k_pos, CHUNK, rounding_mode="floor")[None, :]
    return torch.where(same[None], bias, float("-inf"))


def _t5_inputs(shape, device, seed):
    h, qn, kn = shape
    if device == "meta":
        return (
            torch.empty([qn], dtype=I64, device="meta"),
            torch.empty([kn], dtype=I64, device="meta"),
            torch.empty([NUM_BUCKETS, h], dtype=BF16, device="meta"),
        )
    g = gen(seed)
    pad = int(torch.randint(1, max(2, kn // 3), (1,), generator=g))
    k_pos = torch.arange(kn) - pad  # left padding: negative ids
    q_pos = k_pos[kn - qn :] if qn <= kn else torch.arange(qn) - pad
    table = torch.randn(NUM_BUCKETS, h, generator=g).to(BF16)
    return q_pos.to(device), k_pos.to(device), table.to(device)


# --------------------------------------------------------------------------- int4 dequant

GROUP = 32


@tc.kernel(static_shapes=True)
def int4_dequant(
    packed: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Signed int4 weights packed two per uint8 (low nibble first) packed [N, K/2], fp16 group
    scales [N, K/GROUP], bf16 bias [N]: w.to(bf16) * scale (bf16 * fp16 is fp32) + bias, rounded
    once to bf16 [N, K]; the per-row code sum (int8 summed: int64) and an int16 checksum of the
    packed bytes ((byte << 7) ^ byte, summed: int64)."""
    n, kh = packed.size()
    k = kh * 2
    out = torch.empty([n, k], dtype=torch.bfloat16, device=packed.device)
    codesum = torch.empty([n], dtype=torch.int64, device=packed.device)
    check = torch.empty([n], dtype=torch.int64, device=packed.device)
    for tn in tc.tile(n):
        p = packed[tn, :]
        lo = (p & 0xF).to(torch.int8)
        hi = (p >> 4).to(torch.int8)
        lo = lo - ((lo & 8) << 1)
        hi = hi - ((hi & 8) << 1)
        w = torch.stack([lo, hi], dim=2).reshape(tn, k)
        s = scales[tn, :].repeat_interleave(GROUP, dim=1)
        y = w.to(torch.bfloat16) * s + bias[tn][:, None]
        out[tn, :] = y.to(torch.bfloat16)
        codesum[tn] = w.sum(dim=1)
        check[tn] = ((p.to(torch.int16) << 7) ^ p).sum(dim=1)
    return out, codesum, check


def int4_dequant_reference(packed, scales, bias):
    lo = (packed & 0xF).to(torch.int8)
    hi = (packed >> 4).to(torch.int8)
    lo = lo - ((lo & 8) << 1)
    hi = hi - ((hi & 8) << 1)
    w = torch.stack([lo, hi], dim=2).reshape(packed.shape[0], -1)
    s = scales.repeat_interleave(GROUP, dim=1)
    y = w.to(torch.bfloat16) * s + bias[:, None]
    return y.to(torch.bfloat16), w.sum(dim=1), ((packed.to(torch.int16) << 7) ^ packed).sum(dim=1)


def _int4_inputs(shape, device, seed):
    n, k = shape
    if device == "meta":
        return (
            torch.empty([n, k // 2], dtype=U8, device="meta"),
            torch.empty([n, k // GROUP], dtype=F16, device="meta"),
            torch.empty([n], dtype=BF16, device="meta"),
        )
    g = gen(seed)
    packed = torch.randint(0, 256, (n, k // 2), generator=g).to(U8)
    scales = (torch.rand(n, k // GROUP, generator=g) * 0.02 + 0.001).to(F16)
    bias = torch.randn(n, generator=g).to(BF16)
    return packed.to(device), scales.to(device), bias.to(device)


# --------------------------------------------------------------------------- gated residual


@tc.kernel(static_shapes=True)
def gated_residual_fp16(
    x: torch.Tensor, res: torch.Tensor, gate: torch.Tensor, mask: torch.Tensor, thresh: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x, res [T, D] bf16, gate [D] fp32, mask [T] int64 (0 for padding), thresh [D] fp32.
    h = x + res (bf16); y = h * gate (fp32) * mask (int64: stays fp32), clamped to +-70000 (int
    bounds) and rounded to fp16 (past 65504: inf). Also the masked bf16 stream
    where(mask != 0, h, 0) * 2 + 1 (bf16 with Python ints) and per row the count of h above
    thresh (a bf16 vs fp32 compare, a bool sum: int64)."""
    t, d = x.size()
    out16 = torch.empty([t, d], dtype=torch.float16, device=x.device)
    stream = torch.empty([t, d], dtype=torch.bfloat16, device=x.device)
    count = torch.empty([t], dtype=torch.int64, device=x.device)
    for tt in tc.tile(t):
        h = x[tt, :] + res[tt, :]
        mk = mask[tt][:, None]
        y = h * gate[None, :] * mk
        y = torch.clamp(y, -70000, 70000)
        out16[tt, :] = y.to(torch.float16)
        stream[tt, :] = torch.where(mk != 0, h, 0) * 2 + 1
        count[tt] = (h > thresh[None, :]).sum(dim=1)
    return out16, stream, count


def gated_residual_fp16_reference(x, res, gate, mask, thresh):
    h = x + res
    mk = mask[:, None]
    y = torch.clamp(h * gate[None, :] * mk, -70000, 70000)
    return (
        y.to(torch.float16),
        torch.where(mk != 0, h, 0) * 2 + 1,
        (h > thresh[None, :]).sum(dim=1),
    )


def _gated_inputs(shape, device, seed):
    t, d = shape
    if device == "meta":
        return (
            torch.empty(shape, dtype=BF16, device="meta"),
            torch.empty(shape, dtype=BF16, device="meta"),
            torch.empty([d], dtype=F32, device="meta"),
            torch.empty([t], dtype=I64, device="meta"),
            torch.empty([d], dtype=F32, device="meta"),
        )
    g = gen(seed)
    x = (torch.randn(t, d, generator=g) * 3).to(BF16)
    res = (torch.randn(t, d, generator=g) * 3).to(BF16)
    gate = torch.randn(d, generator=g) * 3000  # some products past fp16's range
    mask = (torch.rand(t, generator=g) > 0.2).to(I64)
    thresh = torch.randn(d, generator=g) * 2
    thresh[: d // 4] = (x[0, : d // 4] + res[0, : d // 4]).float()  # exact ties in row 0
    return x.to(device), res.to(device), gate.to(device), mask.to(device), thresh.to(device)


# --------------------------------------------------------------------------- NaN-aware greedy


@tc.kernel(static_shapes=True)
def nan_aware_greedy(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Greedy decode over fp16 logits [B, V] that may hold NaN (a diverged row) and ties
    (quantized logits): the argmax (torch: the first NaN wins, else the first of tied maxima),
    -1 where the row's max is NaN (torch.where with a Python int: int64); the top-1 probability
    (softmax in fp32); the row's max - min spread in fp16 (NaN where a NaN is)."""
    b, v = logits.size()
    idx = torch.empty([b], dtype=torch.int64, device=logits.device)
    conf = torch.empty([b], dtype=torch.float32, device=logits.device)
    spread = torch.empty([b], dtype=torch.float16, device=logits.device)
    for tb in tc.tile(b):
        x = logits[tb, :]
        mx = x.amax(dim=1)
        best = x.argmax(dim=1)
        idx[tb] = torch.where(torch.isnan(mx), -1, best)
        conf[tb] = torch.softmax(x, dim=1, dtype=torch.float32).amax(dim=1)
        spread[tb] = mx - x.amin(dim=1)
    return idx, conf, spread


def nan_aware_greedy_reference(logits):
    mx = logits.amax(dim=1)
    return (
        torch.where(torch.isnan(mx), -1, logits.argmax(dim=1)),
        torch.softmax(logits, dim=1, dtype=torch.float32).amax(dim=1),
        mx - logits.amin(dim=1),
    )


def _greedy_inputs(shape, device, seed):
    b, v = shape
    if device == "meta":
        return (torch.empty(shape, dtype=F16, device="meta"),)
    g = gen(seed)
    x = torch.round(torch.randn(b, v, generator=g) * 4) / 2  # quantized: many ties at the max
    x[0, v // 3] = float("nan")
    x[0, v // 2] = float("nan")
    if b > 2:
        x[2, v - 1] = float("nan")
    return (x.to(F16).to(device),)


def _one(name, kernel, make_inputs, reference, gpu, cpu, atol):
    return Case(
        name=name,
        kernels=(kernel,),
        make_inputs=make_inputs,
        reference=reference,
        run=with_args(kernel.__name__),
        gpu_shapes=gpu,
        cpu_shapes=cpu,
        atol=atol,
    )


ALL_CASES: list[Case] = [
    _one(
        "int8_row_stats_s43d",
        int8_row_stats,
        _int8_inputs,
        int8_row_stats_reference,
        ((8192, 4096),),
        ((5, 300), (17, 129), (3, 1000)),
        1e-5,
    ),
    _one(
        "t5_bias_chunked_s43d",
        t5_bias_chunked,
        _t5_inputs,
        t5_bias_chunked_reference,
        ((32, 2048, 2048),),
        ((2, 20, 37), (3, 33, 33), (1, 7, 70)),
        1e-6,
    ),
    _one(
        "int4_dequant_s43d",
        int4_dequant,
        _int4_inputs,
        int4_dequant_reference,
        ((4096, 4096),),
        ((4, 64), (9, 128), (3, 256)),
        1e-6,
    ),
    _one(
        "gated_residual_fp16_s43d",
        gated_residual_fp16,
        _gated_inputs,
        gated_residual_fp16_reference,
        ((8192, 4096),),
        ((5, 64), (13, 100), (2, 257)),
        1e-6,
    ),
    _one(
        "nan_aware_greedy_s43d",
        nan_aware_greedy,
        _greedy_inputs,
        nan_aware_greedy_reference,
        ((64, 128256),),
        ((4, 100), (3, 1001), (7, 33)),
        1e-6,
    ),
]
_HELD_OUT: set[str] = set()
CASES = [c for c in ALL_CASES if c.name not in _HELD_OUT]

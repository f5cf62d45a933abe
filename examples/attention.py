"""Attention forward, causal and non-causal, with an online softmax (loop-carried running max,
running sum and fp32 accumulator) in exp2; the softmax scale multiplies the row max (a [rows]
vector) and folds into the exponent's subtract (one FMA per score, not a multiply and a subtract);
the causal variant walks the keys before each query block without a mask, then the diagonal
block with one, and never visits the blocks after it. Shape: ``(batch, heads, seq, head_dim)``; the kernel works on
``[batch * heads, seq, head_dim]`` views."""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn

LOG2E = 1.4426950408889634  # exp(x) == exp2(x * log2(e)): the scale folds into one multiply


def _attend(
    qk: torch.Tensor,
    scale: float,
    m_i: torch.Tensor,
    l_i: torch.Tensor,
    acc: torch.Tensor,
    vt: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One online-softmax step over a block of raw scores ``qk``; ``scale`` (> 0) takes them to
    log2 units (exp2), so it commutes with the max."""
    m_new = torch.maximum(m_i, torch.amax(qk, dim=-1) * scale)
    p = torch.exp2(qk * scale - m_new[:, None])
    alpha = torch.exp2(m_i - m_new)
    l_i = l_i * alpha + torch.sum(p, dim=-1)
    acc = tc.dot(p.to(vt.dtype), vt, acc=acc * alpha[:, None])
    return m_new, l_i, acc


@tc.kernel(static_shapes=True)
def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: tc.constexpr = False
) -> torch.Tensor:
    bh, s, d = q.size()
    d = tc.specialize(d)
    qk_scale = LOG2E / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, tm in tc.tile([bh, s], block_size=[1, None]):
        qt = q[tb, tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        acc = tc.zeros([tm, d], dtype=torch.float32)
        if causal:
            # keys before the query block: every score is kept, no mask
            for tn in tc.tile(tm.begin):
                qk = tc.dot(qt, k[tb, tn, :].t(), out_dtype=torch.float32)
                m_i, l_i, acc = _attend(qk, qk_scale, m_i, l_i, acc, v[tb, tn, :])
            # the diagonal block: keys up to each query; blocks past it are never visited
            for tn in tc.tile(tm.begin, tm.end):
                qk = tc.dot(qt, k[tb, tn, :].t(), out_dtype=torch.float32)
                qk = torch.where(tm.index[:, None] >= tn.index[None, :], qk, float("-inf"))
                m_i, l_i, acc = _attend(qk, qk_scale, m_i, l_i, acc, v[tb, tn, :])
        else:
            for tn in tc.tile(s):
                qk = tc.dot(qt, k[tb, tn, :].t(), out_dtype=torch.float32)
                m_i, l_i, acc = _attend(qk, qk_scale, m_i, l_i, acc, v[tb, tn, :])
        out[tb, tm, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


KERNELS = {"attention": attention}
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
BENCH_SHAPES = [
    (4, 32, 1024, 128),
    (2, 32, 4096, 128),
    (1, 16, 8192, 128),
    (8, 16, 2048, 64),
    (1, 32, 3000, 128),
    (3, 5, 1000, 64),
]
TEST_SHAPES = [(1, 2, 37, 64), (1, 1, 1, 64), (2, 1, 64, 128), (1, 3, 100, 64)]
# fp32 inputs go through tl.dot, which may use TF32 on GPUs
TOLERANCES = {torch.float32: (2e-3, 2e-3)}


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(q, k, v)``, each ``[batch, heads, seq, head_dim]``."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(randn(shape, dtype, device, gen) for _ in range(3))  # type: ignore[return-value]


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(non-causal out, causal out)`` with fp32 math."""
    qf, kf, vf = q.float(), k.float(), v.float()
    full = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf)
    causal = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=True)
    return full.to(q.dtype), causal.to(q.dtype)


def peer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What a PyTorch user runs: SDPA at the inputs' dtype (flash attention on GPUs)."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return sdpa(q, k, v), sdpa(q, k, v, is_causal=True)


def flops(shape: tuple[int, ...]) -> int:
    b, h, s, d = shape
    full = 4 * b * h * s * s * d  # q @ k^T and p @ v
    return full + full // 2  # non-causal + causal (half the score matrix)


def run(
    inputs: tuple[torch.Tensor, ...], call: Call = default_call
) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, v = inputs
    b, h, s, d = q.shape
    q3, k3, v3 = (t.reshape(b * h, s, d) for t in (q, k, v))
    outs = [call(attention, q3, k3, v3, causal).view(b, h, s, d) for causal in (False, True)]
    return outs[0], outs[1]

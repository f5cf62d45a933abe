"""Block-sparse attention forward: a ``[batch * heads, seq / 64, seq / 64]`` block mask says which
64 x 64 blocks of the score matrix exist, and each query block's key loop skips the others with an
``if`` on the loaded mask entry (data-dependent control flow: a skipped block costs no loads and
no dots). Online softmax as in :mod:`examples.attention`; every row keeps its diagonal block.
Shape: ``(batch, heads, seq, head_dim, keep_percent)``."""

from __future__ import annotations

import math

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn

BLOCK = 64


@tc.kernel(static_shapes=True)
def block_sparse_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask: torch.Tensor
) -> torch.Tensor:
    bh, s, d = q.size()
    d = tc.specialize(d)
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for tb, tm in tc.tile([bh, s], block_size=[1, 64]):
        qt = q[tb, tm, :]
        m_i = tc.full([tm], float("-inf"), dtype=torch.float32)
        l_i = tc.zeros([tm], dtype=torch.float32)
        acc = tc.zeros([tm, d], dtype=torch.float32)
        for tn in tc.tile(s, block_size=64):
            if block_mask[tb, tm.id, tn.id] != 0:
                qk = tc.dot(qt, k[tb, tn, :].t(), out_dtype=torch.float32) * scale
                qk = torch.where(tn.index[None, :] < s, qk, float("-inf"))
                m_new = torch.maximum(m_i, torch.amax(qk, dim=-1))
                p = torch.exp(qk - m_new[:, None])
                alpha = torch.exp(m_i - m_new)
                l_i = l_i * alpha + torch.sum(p, dim=-1)
                acc = tc.dot(p.to(v.dtype), v[tb, tn, :], acc=acc * alpha[:, None])
                m_i = m_new
        out[tb, tm, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


KERNELS = {"block_sparse_attention": block_sparse_attention}
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
BENCH_SHAPES = [(4, 32, 4096, 128, 25), (2, 16, 8192, 128, 10), (8, 16, 2048, 64, 50)]
TEST_SHAPES = [(1, 1, 128, 32, 50), (1, 1, 100, 32, 60)]
# fp32 inputs go through tl.dot, which may use TF32 on GPUs
TOLERANCES = {torch.float32: (2e-3, 2e-3)}


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, ...]:
    """``(q, k, v, block_mask, dense_mask)``: ``[batch * heads, seq, head_dim]`` tensors, an int8
    mask of about ``keep_percent`` of the blocks (the diagonal always kept), and the same mask
    expanded to elements for SDPA (made once here, so the peer's timing does not include it)."""
    b, h, s, d, keep = shape
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (randn((b * h, s, d), dtype, device, gen) for _ in range(3))
    nb = -(-s // BLOCK)
    mask = torch.rand(b * h, nb, nb, generator=gen) < keep / 100
    mask |= torch.eye(nb, dtype=torch.bool)[None]
    block_mask = mask.to(device=device, dtype=torch.int8)
    return q, k, v, block_mask, _dense_mask(block_mask, s)


def _dense_mask(block_mask: torch.Tensor, s: int) -> torch.Tensor:
    full = block_mask.bool().repeat_interleave(BLOCK, 1).repeat_interleave(BLOCK, 2)
    return full[:, :s, :s]


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_mask: torch.Tensor,
    dense_mask: torch.Tensor,
) -> torch.Tensor:
    """Dense attention in fp32 with the block mask expanded to elements."""
    out = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=dense_mask
    )
    return out.to(q.dtype)


def peer(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_mask: torch.Tensor,
    dense_mask: torch.Tensor,
) -> torch.Tensor:
    """What a PyTorch user runs: SDPA at the inputs' dtype with the element mask."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask)


def flops(shape: tuple[int, ...]) -> int:
    b, h, s, d, keep = shape
    return 4 * b * h * s * s * d * keep // 100  # q @ k^T and p @ v over the kept blocks


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    q, k, v, block_mask, _ = inputs
    return call(block_sparse_attention, q, k, v, block_mask)

"""User-style dot kernels: attention that upcasts q, k and v to fp32 before its dots with a grid
over (batch * heads) only (the query loop runs inside each program), and a 3-D batched matmul with
a grid over (batch, M, N) tiles. Each comes with its eager reference (see :mod:`.case`)."""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, randn


@tc.kernel(static_shapes=True)
def attention_fp32_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    bh, s, d = q.size()
    d = tc.specialize(d)
    scale = d**-0.5
    out = torch.empty_like(q)
    for h in tc.grid(bh):
        for tq in tc.tile(s):
            qf = q[h, tq, :].to(torch.float32)
            row_max = tc.full([tq], float("-inf"), dtype=torch.float32)
            denom = tc.zeros([tq], dtype=torch.float32)
            acc = tc.zeros([tq, d], dtype=torch.float32)
            for tk in tc.tile(s):
                kf = k[h, tk, :].to(torch.float32)
                scores = torch.matmul(qf, kf.t()) * scale
                scores = torch.where(tk.index[None, :] < s, scores, float("-inf"))
                new_max = torch.maximum(row_max, torch.amax(scores, dim=-1))
                p = torch.exp(scores - new_max[:, None])
                alpha = torch.exp(row_max - new_max)
                denom = denom * alpha + torch.sum(p, dim=-1)
                acc = acc * alpha[:, None] + torch.matmul(p, v[h, tk, :].to(torch.float32))
                row_max = new_max
            out[h, tq, :] = (acc / denom[:, None]).to(out.dtype)
    return out


def _qkv(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``(q, k, v)`` of ``[batch * heads, seq, head_dim]``."""
    g = gen(seed)
    return tuple(randn(shape, torch.bfloat16, device, g) for _ in range(3))


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The same math eagerly: fp32 scores, softmax, fp32 weighted sum."""
    qf, kf, vf = q.float(), k.float(), v.float()
    scores = qf @ kf.transpose(-1, -2) * q.shape[-1] ** -0.5
    return (torch.softmax(scores, dim=-1) @ vf).to(q.dtype)


@tc.kernel(static_shapes=True)
def bmm_3d(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.size()
    n = b.size(2)
    out = torch.empty([batch, m, n], dtype=a.dtype, device=a.device)
    for tb, tm, tn in tc.tile([batch, m, n], block_size=[1, None, None]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc += torch.matmul(a[tb, tm, tk], b[tb, tk, tn])
        out[tb, tm, tn] = acc.to(out.dtype)
    return out


def _bmm_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    batch, m, k, n = shape
    g = gen(seed)
    a = randn((batch, m, k), torch.bfloat16, device, g)
    return a, randn((batch, k, n), torch.bfloat16, device, g) / k**0.5


def bmm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a, b)


CASES = [
    Case(
        name="attention_fp32_grid_heads",
        kernels=(attention_fp32_heads,),
        make_inputs=_qkv,
        reference=attention_reference,
        run=lambda k, inp: k["attention_fp32_heads"](*inp),
        gpu_shapes=((32, 4096, 128),),
        cpu_shapes=((2, 40, 16),),
        atol=0.02,
    ),
    Case(
        name="bmm_3d",
        kernels=(bmm_3d,),
        make_inputs=_bmm_inputs,
        reference=bmm_reference,
        run=lambda k, inp: k["bmm_3d"](*inp),
        gpu_shapes=((16, 1024, 1024, 1024),),
        cpu_shapes=((3, 40, 50, 30),),
        atol=0.05,
    ),
]

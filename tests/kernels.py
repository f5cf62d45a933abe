"""Test kernels shared by several test modules (one definition each, imported by name)."""

from __future__ import annotations

import torch

import tilecraft as tc


@tc.kernel
def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """The README's rms_norm: a row reduction with fp32 math and an output in x's dtype."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        inv = torch.rsqrt(torch.mean(xt * xt, dim=-1) + eps)
        out[tm, :] = (xt * inv[:, None] * w[None, :].to(torch.float32)).to(out.dtype)
    return out


@tc.kernel
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A tiled matmul: an fp32 accumulator carried over the K loop, stored in a's dtype."""
    m, k = a.size()
    _, n = b.size()
    out = torch.empty(m, n, dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = torch.addmm(acc, a[tm, tk], b[tk, tn])
        out[tm, tn] = acc.to(out.dtype)
    return out


def rms_norm_ref(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


@tc.kernel
def plus_one(x: torch.Tensor) -> torch.Tensor:
    """The smallest kernel: ``x + 1`` (cache and option tests; ``plus_one.fn`` to decorate anew)."""
    (n,) = x.size()
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] + 1
    return out

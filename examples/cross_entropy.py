"""Cross-entropy loss over a large vocabulary: per row ``logsumexp(logits) - logits[label]`` in
the kernel, the mean over rows on the host. Shape: ``(rows, vocab)``."""

from __future__ import annotations

from typing import Any

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn


@tc.kernel(static_shapes=True)
def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    n, v = logits.size()
    losses = torch.empty([n], dtype=torch.float32, device=logits.device)
    flat = logits.view(-1)
    for tn in tc.tile(n):
        lse = torch.logsumexp(logits[tn, :].to(torch.float32), dim=-1)
        picked = flat[tn.index * v + labels[tn]].to(torch.float32)
        losses[tn] = lse - picked
    return losses.mean()


@tc.kernel(static_shapes=True)
def cross_entropy_bwd(
    logits: torch.Tensor, labels: torch.Tensor, grad_loss: torch.Tensor
) -> torch.Tensor:
    """d(mean loss)/d(logits) = (softmax(logits) - onehot(labels)) * grad_loss / rows."""
    n, v = logits.size()
    lse = torch.empty([n], dtype=torch.float32, device=logits.device)
    grad_logits = torch.empty_like(logits, dtype=torch.float32)
    for tn in tc.tile(n):
        lse[tn] = torch.logsumexp(logits[tn, :].to(torch.float32), dim=-1)
    for tn, tv in tc.tile([n, v]):
        p = torch.exp(logits[tn, tv].to(torch.float32) - lse[tn][:, None])
        hit = tv.index[None, :] == labels[tn][:, None]
        grad_logits[tn, tv] = p - hit.to(torch.float32)
    return (grad_logits * (grad_loss / n)).to(logits.dtype)


def _cross_entropy_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.save_for_backward(*inputs)


def _cross_entropy_backward(ctx: Any, grad_loss: torch.Tensor) -> tuple[Any, None]:
    logits, labels = ctx.saved_tensors
    return cross_entropy_bwd(logits, labels, grad_loss), None


cross_entropy.register_backward(_cross_entropy_backward, setup_context=_cross_entropy_setup)

KERNELS = {"cross_entropy": cross_entropy}
DTYPES = [torch.float32, torch.bfloat16]
BENCH_SHAPES = [(4096, 32000), (8192, 128256), (32768, 32000), (4608, 40920), (1000, 50257)]
TEST_SHAPES = [(37, 1000), (1, 7), (64, 64), (3, 10000)]


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logits, labels)``; labels are int64 in ``[0, vocab)``."""
    n, v = shape
    gen = torch.Generator().manual_seed(seed)
    logits = randn(shape, dtype, device, gen) * 4
    labels = torch.randint(0, v, (n,), generator=gen).to(device)
    return logits, labels


def reference(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.float(), labels)


def run(inputs: tuple[torch.Tensor, ...], call: Call = default_call) -> torch.Tensor:
    return call(cross_entropy, *inputs)

"""Cross-entropy loss over a large vocabulary: per row ``logsumexp(logits) - logits[label]`` in
the kernel, the mean over rows on the host. Shape: ``(rows, vocab)``."""

from __future__ import annotations

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

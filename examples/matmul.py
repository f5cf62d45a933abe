"""Matrix multiply ``a @ b`` (fp32 accumulation), plain and with a fused ``bias`` + GELU (tanh)
epilogue. Shape: ``(m, k, n)``."""

from __future__ import annotations

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn


@tc.kernel(static_shapes=True)
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    _, n = b.size()
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc.to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def matmul_bias_gelu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    _, n = b.size()
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = tc.dot(a[tm, tk], b[tk, tn], acc=acc)
        y = acc + bias[None, tn].to(torch.float32)
        out[tm, tn] = torch.nn.functional.gelu(y, approximate="tanh").to(out.dtype)
    return out


KERNELS = {"matmul": matmul, "matmul_bias_gelu": matmul_bias_gelu}
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
BENCH_SHAPES = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 4096, 14336),
    (4096, 4096, 128256),
    (4608, 4096, 40920),
    (1000, 1000, 1000),
    (1, 4096, 4096),
]
TEST_SHAPES = [(37, 100, 50), (1, 7, 5), (64, 64, 64), (100, 33, 130)]
# fp32 inputs go through tl.dot, which may use TF32 on GPUs
TOLERANCES = {torch.float32: (2e-3, 2e-3)}


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(a, b, bias)``."""
    m, k, n = shape
    gen = torch.Generator().manual_seed(seed)
    a = randn((m, k), dtype, device, gen)
    b = randn((k, n), dtype, device, gen) / k**0.5
    return a, b, randn((n,), dtype, device, gen)


def reference(
    a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a @ b, gelu_tanh(a @ b + bias))`` with fp32 math."""
    ab = a.float() @ b.float()
    act = torch.nn.functional.gelu(ab + bias.float(), approximate="tanh")
    return ab.to(a.dtype), act.to(a.dtype)


def peer(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What a PyTorch user runs: ``torch.mm`` at the inputs' dtype, then the epilogue."""
    ab = a @ b
    return ab, torch.nn.functional.gelu(a @ b + bias, approximate="tanh")


def flops(shape: tuple[int, ...]) -> int:
    m, k, n = shape
    return 2 * (2 * m * n * k)  # two matmuls per run (plain and with the epilogue)


def run(
    inputs: tuple[torch.Tensor, ...], call: Call = default_call
) -> tuple[torch.Tensor, torch.Tensor]:
    a, b, bias = inputs
    return call(matmul, a, b), call(matmul_bias_gelu, a, b, bias)

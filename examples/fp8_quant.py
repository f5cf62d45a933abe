"""fp8 (``float8_e4m3fn``): per-token-group quantization and a GEMM with per-row / per-column
scales. Shape: ``(m, k, n)``.

``quant_groups`` splits each row of ``x [m, k]`` into groups of 128, takes each group's absolute
maximum, and stores ``x / scale`` as fp8 with ``scale = absmax / 448`` (448 is e4m3fn's largest
value), plus the fp32 scales ``[m, k / 128]``. ``fp8_gemm`` multiplies fp8 ``a [m, k]`` by fp8
``b [k, n]`` (stored column-major, as weights usually are) in fp32 and applies ``scale_a[m]`` and
``scale_b[n]``: the quantized matmul of the rows and columns that ``quantize_rows`` makes. The fp8
GEMM needs an fp8 tensor-core dot (sm_89+ / sm_90; tilecraft refuses it elsewhere).
"""

from __future__ import annotations

import contextlib

import torch

import tilecraft as tc
from examples._common import Call, default_call, randn

GROUP = 128
E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0


@tc.kernel(static_shapes=True)
def quant_groups(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, k = x.size()
    groups = k // 128
    xg = x.view(m, groups, 128)
    q = torch.empty([m, groups, 128], dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty([m, groups], dtype=torch.float32, device=x.device)
    for tm, tg in tc.tile([m, groups]):
        v = xg[tm, tg, :].to(torch.float32)
        scale = torch.amax(torch.abs(v), dim=-1).clamp(min=1e-10) / 448.0
        q[tm, tg, :] = (v / scale[:, :, None]).to(torch.float8_e4m3fn)
        scales[tm, tg] = scale
    return q.view(m, k), scales


@tc.kernel(static_shapes=True)
def fp8_gemm(
    a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
) -> torch.Tensor:
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.bfloat16, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = tc.dot(a[tm, tk], b[tk, tn], acc=acc)
        out[tm, tn] = (acc * scale_a[tm][:, None] * scale_b[tn][None, :]).to(torch.bfloat16)
    return out


KERNELS = {"quant_groups": quant_groups, "fp8_gemm": fp8_gemm}
DTYPES = [torch.bfloat16, torch.float32]  # the dtype of the data before quantization
BENCH_SHAPES = [(4096, 7168, 4096), (8192, 4096, 14336), (16384, 8192, 8192), (1000, 1536, 1000)]
TEST_SHAPES = [(37, 256, 40), (1, 128, 16)]
# fp8 values are exact; the GEMM's bf16 output rounds once
TOLERANCES = {torch.float32: (1e-2, 1e-2)}


def quantize_rows(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 values of ``x`` with one fp32 scale per slice along ``dim`` (absmax / 448)."""
    scale = x.float().abs().amax(dim=dim, keepdim=True).clamp(min=1e-10) / E4M3_MAX
    return (x.float() / scale).to(E4M3), scale.squeeze(dim)


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, ...]:
    """``(x, a, b, scale_a, scale_b)``: ``x [m, k]`` to quantize, and the fp8 GEMM's operands
    (``b`` column-major) quantized from random data of ``dtype``."""
    m, k, n = shape
    gen = torch.Generator().manual_seed(seed)
    x = randn((m, k), dtype, device, gen)
    a, scale_a = quantize_rows(randn((m, k), dtype, device, gen), dim=1)
    bt, scale_b = quantize_rows(randn((n, k), dtype, device, gen) / k**0.5, dim=1)
    return x, a, bt.t(), scale_a, scale_b


def reference(
    x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(q, scales, out)`` in fp32 math: the group quantization and the scaled fp8 GEMM."""
    m, k = x.shape
    v = x.float().view(m, k // GROUP, GROUP)
    scale = v.abs().amax(-1).clamp(min=1e-10) / E4M3_MAX
    q = (v / scale[..., None]).to(E4M3).view(m, k)
    out = (a.float() @ b.float()) * scale_a[:, None] * scale_b[None, :]
    return q, scale, out.to(torch.bfloat16)


def peer(
    x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What a PyTorch user runs: eager quantization and ``torch._scaled_mm`` (row-wise scales)
    where this PyTorch and GPU have it, else the fp32 reference GEMM."""
    q, scale, out = reference(x, a, b, scale_a, scale_b)
    if a.is_cuda and hasattr(torch, "_scaled_mm"):
        # without a row-wise fp8 GEMM here, the reference stands in
        with contextlib.suppress(RuntimeError):
            out = torch._scaled_mm(
                a,
                b,
                scale_a=scale_a[:, None].contiguous(),
                scale_b=scale_b[None, :].contiguous(),
                out_dtype=torch.bfloat16,
            )
    return q, scale, out


def flops(shape: tuple[int, ...]) -> int:
    m, k, n = shape
    return 2 * m * n * k


def run(
    inputs: tuple[torch.Tensor, ...], call: Call = default_call
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x, a, b, scale_a, scale_b = inputs
    q, scales = call(quant_groups, x)
    return q, scales, call(fp8_gemm, a, b, scale_a, scale_b)

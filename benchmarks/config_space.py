"""Proof that the config-space knobs reach hardware speed (issue "the full config space").

On the GPU: rms_norm (bf16, 8192 x 8192) against the measured copy bandwidth, and matmul (bf16,
4096^3 and 8192^3) against torch.mm, each with a few hand-picked configs; the best config of each
is reported. Run: ``python -m benchmarks.config_space``.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.common import bench_ms, copy_bandwidth_gbs, write_results


@tc.kernel
def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        inv = torch.rsqrt(torch.mean(xt * xt, dim=-1) + eps)
        out[tm, :] = (xt * inv[:, None] * w[None, :].to(torch.float32)).to(out.dtype)
    return out


@tc.kernel
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


RMS_CONFIGS = [
    tc.Config(block_sizes=[1], num_warps=8),
    tc.Config(block_sizes=[1], num_warps=16),
    tc.Config(block_sizes=[2], num_warps=16),
    tc.Config(block_sizes=[1], num_warps=8, pid_type="persistent_interleaved", num_sm_multiplier=4),
    tc.Config(block_sizes=[4], reduction_loops=[2048], num_warps=8, indexing="tensor_descriptor"),
    tc.Config(
        block_sizes=[2],
        reduction_loops=[4096],
        num_warps=16,
        load_eviction_policies=["last", "first"],
    ),
]
MM_CONFIGS = [
    tc.Config(
        block_sizes=[128, 256, 64],
        num_warps=8,
        num_stages=3,
        l2_groupings=[8],
        indexing="tensor_descriptor",
    ),
    tc.Config(block_sizes=[128, 256, 64], num_warps=8, num_stages=4, l2_groupings=[8]),
    tc.Config(
        block_sizes=[128, 128, 64],
        num_warps=8,
        num_stages=4,
        l2_groupings=[8],
        indexing="tensor_descriptor",
    ),
    tc.Config(
        block_sizes=[128, 256, 64],
        num_warps=8,
        num_stages=3,
        l2_groupings=[8],
        indexing="tensor_descriptor",
        pid_type="persistent_interleaved",
    ),
]


def _best(
    bound: tc.BoundKernel, configs: list[tc.Config], args: tuple[torch.Tensor, ...]
) -> tuple[float, tc.Config]:
    best = (float("inf"), configs[0])
    for config in configs:
        try:
            program = bound.compile_config(config)
            ms = bench_ms(lambda p=program: bound.run(p, *args))
        except Exception as exc:  # a config this GPU rejects is reported, not fatal
            print(f"  {config}: failed: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        print(f"  {ms:.4f} ms  {config}")
        best = min(best, (ms, config), key=lambda t: t[0])
    return best


def main() -> None:
    rows = []
    copy = copy_bandwidth_gbs()
    print(f"copy bandwidth: {copy:.0f} GB/s")
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
    ref = (
        x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()
    ).bfloat16()
    bound = rms_norm.bind((x, w))
    assert (rms_norm(x, w).float() - ref.float()).abs().max().item() < 0.1
    ms, config = _best(bound, RMS_CONFIGS, (x, w))
    gbs = (2 * x.numel() + w.numel()) * 2 / ms / 1e6
    rows.append(
        {
            "kernel": "rms_norm 8192x8192 bf16",
            "ms": ms,
            "achieved": f"{gbs:.0f} GB/s",
            "ratio": f"{gbs / copy:.1%} of copy",
            "config": repr(config),
        }
    )
    for n in (4096, 8192):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        mm_ms = bench_ms(lambda a=a, b=b: torch.mm(a, b))
        bound = matmul.bind((a, b))
        err = (matmul(a, b).float() - (a.float() @ b.float())).abs().max().item()
        ms, config = _best(bound, MM_CONFIGS, (a, b))
        tflops = 2 * n**3 / ms / 1e9
        rows.append(
            {
                "kernel": f"matmul {n}^3 bf16",
                "ms": ms,
                "achieved": f"{tflops:.0f} TFLOP/s",
                "ratio": f"{mm_ms / ms:.1%} of torch.mm ({2 * n**3 / mm_ms / 1e9:.0f} TFLOP/s)",
                "config": repr(config),
                "max_err_default": err,
            }
        )
    write_results(
        "config_space",
        rows,
        ["kernel", "ms", "achieved", "ratio", "config"],
        f"copy bandwidth measured: {copy:.0f} GB/s",
    )


if __name__ == "__main__":
    main()

"""Source variants behind benchmarks/results/heldout_s9b.md (python -m benchmarks.source_variants
benchmarks/experiments/heldout_s9b.py --name heldout_s9b): second round on the held-out kernels
that trailed torch.compile: the triangular matmul's new pointer-fed default, the int8-weight
GEMM at taller tiles (its in-loop dequantization is paid once per M tile), the long row sum at
other splits and chunks.
"""

from benchmarks.experiments._cases import DEFAULT, heldout


def cfg(blocks, warps, stages, extra=""):
    return f"tc.Config(block_sizes={blocks}, num_warps={warps}, num_stages={stages}{extra})"


EXPERIMENTS = [
    heldout(
        "trmm_lower",
        [
            DEFAULT,
            ("ptr 128x256x64 s3", cfg([128, 256, 64], 8, 3), []),
            ("ptr 128x256x64 s4", cfg([128, 256, 64], 8, 4), []),
            ("ptr 256x128x64 s3", cfg([256, 128, 64], 8, 3), []),
        ],
    ),
    heldout(
        "int8_weight_gemm",
        [
            DEFAULT,
            ("ptr 128x128x64 s3", cfg([128, 128, 64], 8, 3), []),
            ("ptr 256x128x64 s3", cfg([256, 128, 64], 8, 3), []),
            ("ptr 256x128x64 s4", cfg([256, 128, 64], 8, 4), []),
            ("ptr 256x128x32 s4", cfg([256, 128, 32], 8, 4), []),
            ("ptr 256x64x64 s4", cfg([256, 64, 64], 8, 4), []),
            ("ptr 128x128x128 s3", cfg([128, 128, 128], 8, 3), []),
            ("ptr 128x256x64 s3", cfg([128, 256, 64], 8, 3), []),
            ("ptr 128x128x64 s3 16w", cfg([128, 128, 64], 16, 3), []),
        ],
    ),
    heldout(
        "long_row_sum",
        [
            DEFAULT,
            ("split 64", "default.replace(split_reductions=[64])", []),
            ("split 128", "default.replace(split_reductions=[128])", []),
            ("split 16", "default.replace(split_reductions=[16])", []),
            (
                "chunk 4096 8w split 64",
                "default.replace(block_sizes=[1, 4096], num_warps=8, split_reductions=[64])",
                [],
            ),
            (
                "chunk 16384 split 32",
                "default.replace(block_sizes=[1, 16384], split_reductions=[32])",
                [],
            ),
        ],
    ),
]

"""Source variants behind benchmarks/results/heldout_dots_s9.md (python -m benchmarks.source_variants
benchmarks/experiments/heldout_dots_s9.py --name heldout_dots_s9): the held-out dot kernels whose
defaults trailed torch.compile (heldout_dots_s9 generalization rows): the triangular matmul
(whose TMA default computed a wrong result), the int8-weight GEMM, the fp32 GEMM and the GEMM
against a transposed weight, at other tiles, stages, pids and indexings.
"""

from benchmarks.experiments._cases import DEFAULT, heldout

TD = "'tensor_descriptor'"


def cfg(blocks, warps, stages, extra=""):
    return f"tc.Config(block_sizes={blocks}, num_warps={warps}, num_stages={stages}{extra})"


def tma(n, pid=""):
    return f", indexing=[{', '.join([TD] * n)}], l2_groupings=[8]" + (
        ", pid_type='persistent_interleaved'" if pid else ""
    )


EXPERIMENTS = [
    heldout(
        "trmm_lower",
        [
            DEFAULT,
            ("tma 128x256x64 s4", cfg([128, 256, 64], 8, 4, tma(3)), []),
            ("tma 128x256x64 s3", cfg([128, 256, 64], 8, 3, tma(3)), []),
            ("tma 128x128x64 s3", cfg([128, 128, 64], 8, 3, tma(3)), []),
            ("tma 128x128x64 s3 persistent", cfg([128, 128, 64], 8, 3, tma(3, "p")), []),
            ("tma 128x256x64 s4 l2 1", cfg([128, 256, 64], 8, 4, tma(3).replace("[8]", "[1]")), []),
            (
                "a ptr, b tma 128x256x64 s4",
                cfg([128, 256, 64], 8, 4, f", indexing=['pointer', {TD}, {TD}], l2_groupings=[8]"),
                [],
            ),
            ("ptr 128x128x64 s3", cfg([128, 128, 64], 8, 3), []),
            ("ptr 128x256x64 s3", cfg([128, 256, 64], 8, 3), []),
        ],
    ),
    heldout(
        "int8_weight_gemm",
        [
            DEFAULT,
            ("tma 128x128x64 s3", cfg([128, 128, 64], 8, 3, tma(4)), []),
            ("tma 128x128x64 s3 4w", cfg([128, 128, 64], 4, 3, tma(4)), []),
            ("tma 128x256x64 s3", cfg([128, 256, 64], 8, 3, tma(4)), []),
            ("tma 64x128x64 s4 4w", cfg([64, 128, 64], 4, 4, tma(4)), []),
            ("tma 128x128x128 s3", cfg([128, 128, 128], 8, 3, tma(4)), []),
            ("ptr 128x128x64 s3", cfg([128, 128, 64], 8, 3), []),
            ("ptr 64x128x64 s3 4w", cfg([64, 128, 64], 4, 3), []),
            ("ptr 128x64x64 s4 4w", cfg([128, 64, 64], 4, 4), []),
        ],
    ),
    heldout(
        "matmul_fp32",
        [
            DEFAULT,
            ("tma 128x128x32 s3", cfg([128, 128, 32], 8, 3, tma(3, "p")), []),
            ("tma 64x64x32 s3 4w", cfg([64, 64, 32], 4, 3, tma(3)), []),
            ("tma 128x64x32 s3 4w", cfg([128, 64, 32], 4, 3, tma(3)), []),
            ("tma 64x128x32 s3 4w", cfg([64, 128, 32], 4, 3, tma(3)), []),
            ("tma 128x128x16 s4", cfg([128, 128, 16], 8, 4, tma(3)), []),
            ("tma 64x128x64 s4 flat", cfg([64, 128, 64], 8, 4, tma(3)), []),
            ("ptr 64x64x32 s3 4w", cfg([64, 64, 32], 4, 3), []),
            ("ptr 128x128x32 s3", cfg([128, 128, 32], 8, 3), []),
        ],
    ),
    heldout(
        "matmul_weight_transposed",
        [
            DEFAULT,
            ("tma 128x256x64 s3 persistent", cfg([128, 256, 64], 8, 3, tma(3, "p")), []),
            ("ptr 128x128x64 s3 (the old default)", cfg([128, 128, 64], 8, 3), []),
        ],
    ),
]

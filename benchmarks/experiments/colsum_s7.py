"""Source variants behind benchmarks/results/colsum_s7.md (python -m benchmarks.source_variants benchmarks/experiments/colsum_s7.py --name colsum_s7)."""

from benchmarks.experiments._cases import bookended, column_sum_tall

NOMASK = [
    (r"mask_1 = indices_1 < 65536\n", ""),
    (r", mask_1\[:, None\], other=0\)", ")"),
    (r"tl\.where\(mask_1\[:, None\], v, 0\)", "v"),
]


def C(r, c, s, w=8):
    return (
        f"{r}x{c} s{s} {w}w",
        f"tc.Config(block_sizes=[{r}, {c}], num_warps={w}, num_stages=1, split_reductions=[{s}], deferred_sums=True)",
        [],
    )


EXPERIMENTS = [
    column_sum_tall(
        bookended(
            [
                ("default no mask", "default", NOMASK),
                C(128, 128, 16),
                C(128, 128, 32),
                C(64, 128, 32),
                C(64, 128, 64),
                C(256, 64, 16),
                C(256, 64, 32),
                C(128, 64, 32),
                C(128, 64, 32, 4),
                C(64, 256, 32),
                C(32, 256, 64),
                C(256, 32, 16),
                C(256, 32, 32),
            ]
        )
    ),
]

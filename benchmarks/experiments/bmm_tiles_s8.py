"""Source variants behind benchmarks/results/bmm_tiles_s8.md (python -m benchmarks.source_variants
benchmarks/experiments/bmm_tiles_s8.py --name bmm_tiles_s8): bmm 16x1024^3 warp-specialized at
other tiles and stage counts; 5+ stages computed NaN (led to warp_specialize.WS_MAX_STAGES_SM9X).
"""

from benchmarks.experiments._cases import PTR, bmm_16x1024, bookended


def tiles(blocks, stages):
    return f"default.replace(block_sizes={blocks}, num_stages={stages}, {PTR})"


EXPERIMENTS = [
    bmm_16x1024(
        bookended(
            [
                ("128x128x64 s3 m1", tiles([128, 128, 64], 3), []),
                ("128x128x64 s6 m1", tiles([128, 128, 64], 6), []),
                ("128x256x32 s8", tiles([128, 256, 32], 8), []),
                ("128x256x32 s6", tiles([128, 256, 32], 6), []),
                ("128x128x128 s3 m1", tiles([128, 128, 128], 3), []),
            ]
        )
    )
]

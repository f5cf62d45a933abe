"""Source variants behind benchmarks/results/bn_stats_s17.md (python -m benchmarks.source_variants
benchmarks/experiments/bn_stats_s17.py --name bn_stats_s17): BatchNorm statistics over NCHW as a
user wrote them (two passes over each channel's 200 KB: the mean, then squared deviations) with
L2 policies, warps, and the second pass walked backwards (its first reads are the first pass's
last, still in L2)."""

from benchmarks.experiments._cases import bookended, heldout

REVERSED = [
    (
        r"for offset_4 in tl\.range\(0, 3136, _BLOCK_4\):\n",
        "for back_4 in tl.range(0, 3136, _BLOCK_4):\n"
        "            offset_4 = (tl.cdiv(3136, _BLOCK_4) - 1) * _BLOCK_4 - back_4\n",
    )
]
KEEP = "load_eviction_policies=['last', 'first']"
# the default when this was measured (session 18 made it 16 warps: occupancy.small_grid_warps)
EIGHT = "default.replace(num_warps=8)"
EXPERIMENTS = [
    heldout(
        "batchnorm_stats_nchw",
        bookended(
            [
                ("last/first", f"default.replace(num_warps=8, {KEEP})", []),
                ("reversed 2nd pass", EIGHT, REVERSED),
                ("reversed + last/first", f"default.replace(num_warps=8, {KEEP})", REVERSED),
                ("16 warps", "default.replace(num_warps=16)", []),
                ("4 warps", "default.replace(num_warps=4)", []),
                (
                    "hw block 512",
                    "default.replace(num_warps=8, block_sizes=[1, 32, 512, 32, 512])",
                    [],
                ),
                (
                    "n block 8",
                    "default.replace(num_warps=8, block_sizes=[1, 8, 1024, 8, 1024])",
                    [],
                ),
            ]
        ),
    ),
]

"""Source variants behind benchmarks/results/stages_occupancy_s8.md (python -m
benchmarks.source_variants benchmarks/experiments/stages_occupancy_s8.py --name
stages_occupancy_s8): persistent attention at two programs per SM, causal attention longest
first, bmm with a pointer epilogue and a fourth stage.

Written against main at d5d4933 (see causal_order_s8.py for what REV does on today's code).
"""

from benchmarks.experiments._cases import PTR, REV, attention, bmm_16x1024, bookended

FLAT = "default.replace(pid_type='flat')"
M2 = "default.replace(num_sm_multiplier=2)"


def attn(d, call, extra=()):
    name = f"{'causal' if call else 'full'} attention 2x32x4096x{d}"
    return attention(name, (2, 32, 4096, d), bool(call), bookended(list(extra)))


BMM = bmm_16x1024(
    bookended(
        [
            ("ptr s4", f"default.replace(num_stages=4, {PTR})", []),
            (
                "256x128 ptr s4",
                f"default.replace(block_sizes=[256, 128, 64], num_stages=4, {PTR})",
                [],
            ),
            ("256x128 s3", "default.replace(block_sizes=[256, 128, 64])", []),
            (
                "ptr s4 8w plain",
                f"default.replace(num_stages=4, num_warps=8, range_warp_specializes=[], {PTR})",
                [],
            ),
            (
                "ptr s4 flat",
                f"default.replace(num_stages=4, pid_type='flat', num_sm_multiplier=None, {PTR})",
                [],
            ),
            ("ptr s4 g4", f"default.replace(num_stages=4, l2_groupings=[4], {PTR})", []),
            ("ptr s4 g1", f"default.replace(num_stages=4, l2_groupings=[1], {PTR})", []),
            ("ptr s4", f"default.replace(num_stages=4, {PTR})", []),
        ]
    )
)
EXPERIMENTS = [
    attn(64, 0, [("m2", M2, []), ("flat", FLAT, [])]),
    attn(128, 0, [("flat", FLAT, [])]),
    attn(64, 1, [("m2 rev", M2, REV), ("flat rev", FLAT, REV)]),
    attn(128, 1, [("m2 rev", M2, REV), ("flat rev", FLAT, REV)]),
    BMM,
]

"""Source variants behind benchmarks/results/attn_tiles_s8.md (python -m benchmarks.source_variants
benchmarks/experiments/attn_tiles_s8.py --name attn_tiles_s8): non-causal attention tiles,
stages and warps around the default; the column sum's load eviction policies.
"""

from benchmarks.experiments._cases import DEFAULT, attention, bookended, column_sum_tall


def attn(d, extra):
    return attention(f"full attention 2x32x4096x{d}", (2, 32, 4096, d), False, bookended(extra))


def R(blocks, stages, warps=8, pid="persistent_interleaved"):
    return (
        f"{blocks} s{stages} w{warps} {pid[:4]}",
        f"default.replace(block_sizes={blocks}, num_stages={stages}, num_warps={warps}, pid_type='{pid}')",
        [],
    )


EXPERIMENTS = [
    attn(
        128,
        [
            R([128, 128], 2),
            R([128, 128], 3),
            R([128, 64], 3),
            R([128, 64], 2),
            R([128, 128], 3, pid="flat"),
            R([64, 64], 4, 4),
            R([128, 64], 4, 4),
        ],
    ),
    attn(64, [R([128, 128], 3), R([128, 64], 5), R([256, 128], 2), R([128, 128], 4, pid="flat")]),
    column_sum_tall(
        [
            DEFAULT,
            ("evict first", "default.replace(load_eviction_policies=['first'])", []),
            ("evict last", "default.replace(load_eviction_policies=['last'])", []),
            DEFAULT,
            ("evict first", "default.replace(load_eviction_policies=['first'])", []),
        ]
    ),
]

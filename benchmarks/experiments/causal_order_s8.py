"""Source variants behind benchmarks/results/causal_order_s8.md (python -m benchmarks.source_variants
benchmarks/experiments/causal_order_s8.py --name causal_order_s8): bmm epilogue splits and
outer-loop warp specialization; causal attention walked longest first (REV) and on a flat grid.

Written against main at d5d4933, before the longest-first order landed in codegen/grid.py: on
today's code REV would reverse the query blocks a second time (back to ascending).
"""

from benchmarks.experiments._cases import PTR, REV, attention, bmm_16x1024, bookended

EPI = [
    (
        r"(out_desc = tl\.make_tensor_descriptor\(.*)\[_BLOCK_1, _BLOCK_2\]\)",
        r"\1[_BLOCK_1, _BLOCK_2 // 2])",
    ),
    (
        r"v = acc_1\.to\(tl\.bfloat16\)\n(\s+)out_desc\.store\(\[(.*), offset_2\], v\)",
        r"c_0, c_1 = tl.split(tl.permute(tl.reshape(acc_1, (_BLOCK_1, 2, _BLOCK_2 // 2)), (0, 2, 1)))\n"
        r"\1out_desc.store([\2, offset_2], c_0.to(tl.bfloat16))\n"
        r"\1out_desc.store([\2, offset_2 + _BLOCK_2 // 2], c_1.to(tl.bfloat16))",
    ),
]
INNER_OFF = [
    (r"tl\.range\(0, 1024, _BLOCK_3, warp_specialize=True\)", "tl.range(0, 1024, _BLOCK_3)")
]
OUTER = INNER_OFF + [
    (
        r"tl\.range\(tl\.program_id\(0\), total_tiles, num_programs\)",
        "tl.range(tl.program_id(0), total_tiles, num_programs, warp_specialize=True)",
    )
]
OUTER_FLAT = INNER_OFF + [
    (
        r"tl\.range\(tl\.program_id\(0\), total_tiles, num_programs\)",
        "tl.range(tl.program_id(0), total_tiles, num_programs, flatten=True, warp_specialize=True)",
    )
]
PTR_S3 = f"default.replace({PTR})"
PTR_S4 = f"default.replace(num_stages=4, {PTR})"
BMM = bmm_16x1024(
    bookended(
        [
            ("outer ws s3", "default", OUTER),
            ("ptr out s3", PTR_S3, []),
            ("ptr out s4", PTR_S4, []),
            ("ptr out s4 outer", PTR_S4, OUTER),
        ]
    )
)
FLAT = "default.replace(pid_type='flat')"


def causal(d, extra=()):
    variants = [("default rev", "default", REV), ("flat", FLAT, []), ("flat rev", FLAT, REV)]
    return attention(
        f"causal attention 2x32x4096x{d}", (2, 32, 4096, d), True, bookended([*variants, *extra])
    )


B256 = "default.replace(block_sizes=[256, 64, 64], pid_type='flat')"
EXPERIMENTS = [
    BMM,
    causal(128),
    causal(64, [("256 flat", B256, []), ("256 flat rev", B256, REV)]),
]

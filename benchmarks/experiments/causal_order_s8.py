"""Source variants behind benchmarks/results/causal_order_s8.md (python -m benchmarks.source_variants
benchmarks/experiments/causal_order_s8.py --name causal_order_s8): bmm epilogue splits and
outer-loop warp specialization; causal attention walked longest first (REV) and on a flat grid.

Written against main at d5d4933, before the longest-first order landed in codegen/grid.py: on
today's code REV would reverse the query blocks a second time (back to ascending).
"""

import torch

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
REV = [
    (r"offset_1 = pid_1 \* _BLOCK_1", "offset_1 = (tl.cdiv(4096, _BLOCK_1) - 1 - pid_1) * _BLOCK_1")
]


def sdpa_causal(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


S4 = "default.replace(num_stages=4)"
BMM = dict(
    name="bmm 16x1024^3",
    kernel="benchmarks.gen_kernels.dots:bmm_3d",
    shape=(16, 1024, 1024, 1024),
    inputs="gen:bmm_3d",
    reference="benchmarks.gen_kernels.dots:bmm_reference",
    variants=[
        ("default", "default", []),
        ("outer ws s3", "default", OUTER),
        (
            "ptr out s3",
            "default.replace(indexing=['tensor_descriptor', 'tensor_descriptor', 'pointer'])",
            [],
        ),
        (
            "ptr out s4",
            "default.replace(num_stages=4, indexing=['tensor_descriptor', 'tensor_descriptor', 'pointer'])",
            [],
        ),
        (
            "ptr out s4 outer",
            "default.replace(num_stages=4, indexing=['tensor_descriptor', 'tensor_descriptor', 'pointer'])",
            OUTER,
        ),
        ("default", "default", []),
    ],
)
FLAT = "default.replace(pid_type='flat')"


def causal(d, extra=()):
    return dict(
        name=f"causal attention 2x32x4096x{d}",
        kernel="examples.attention:attention",
        shape=(2, 32, 4096, d),
        inputs="example:attention:1",
        reference=sdpa_causal,
        variants=[
            ("default", "default", []),
            ("default rev", "default", REV),
            ("flat", FLAT, []),
            ("flat rev", FLAT, REV),
            *extra,
            ("default", "default", []),
        ],
    )


B256 = "default.replace(block_sizes=[256, 64, 64], pid_type='flat')"
EXPERIMENTS = [
    BMM,
    causal(128),
    causal(64, [("256 flat", B256, []), ("256 flat rev", B256, REV)]),
]

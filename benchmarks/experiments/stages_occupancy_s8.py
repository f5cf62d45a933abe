"""Source variants behind benchmarks/results/stages_occupancy_s8.md (python -m
benchmarks.source_variants benchmarks/experiments/stages_occupancy_s8.py --name
stages_occupancy_s8): persistent attention at two programs per SM, causal attention longest
first, bmm with a pointer epilogue and a fourth stage.

Written against main at d5d4933 (see causal_order_s8.py for what REV does on today's code).
"""

import torch

REV = [
    (r"offset_1 = pid_1 \* _BLOCK_1", "offset_1 = (tl.cdiv(4096, _BLOCK_1) - 1 - pid_1) * _BLOCK_1")
]


def sdpa(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


FLAT = "default.replace(pid_type='flat')"
M2 = "default.replace(num_sm_multiplier=2)"
PTR = "indexing=['tensor_descriptor', 'tensor_descriptor', 'pointer']"


def attn(d, call, extra=()):
    return dict(
        name=f"{'causal' if call else 'full'} attention 2x32x4096x{d}",
        kernel="examples.attention:attention",
        shape=(2, 32, 4096, d),
        inputs=f"example:attention:{call}",
        reference=sdpa,
        variants=[("default", "default", []), *extra, ("default", "default", [])],
    )


BMM = dict(
    name="bmm 16x1024^3",
    kernel="benchmarks.gen_kernels.dots:bmm_3d",
    shape=(16, 1024, 1024, 1024),
    inputs="gen:bmm_3d",
    reference="benchmarks.gen_kernels.dots:bmm_reference",
    variants=[
        ("default", "default", []),
        ("ptr s4", f"default.replace(num_stages=4, {PTR})", []),
        ("256x128 ptr s4", f"default.replace(block_sizes=[256, 128, 64], num_stages=4, {PTR})", []),
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
        ("default", "default", []),
    ],
)
EXPERIMENTS = [
    attn(64, 0, [("m2", M2, []), ("flat", FLAT, [])]),
    attn(128, 0, [("flat", FLAT, [])]),
    attn(64, 1, [("m2 rev", M2, REV), ("flat rev", FLAT, REV)]),
    attn(128, 1, [("m2 rev", M2, REV), ("flat rev", FLAT, REV)]),
    BMM,
]

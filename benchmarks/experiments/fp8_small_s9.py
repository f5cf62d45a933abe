"""Source variants behind benchmarks/results/fp8_small_s9.md (python -m benchmarks.source_variants
benchmarks/experiments/fp8_small_s9.py --name fp8_small_s9): the fp8 GEMM example (a K-major
weight, now loadable by a permuted tensor descriptor) at 1000x1536x1000, where the new TMA
pipeline default was 1.7x slower than the old pointer-fed one (default_change_s9.md), and at
4096x7168x4096 where it was faster: which part of the pipeline costs at the small shape.
"""

from benchmarks.experiments._cases import DEFAULT

TD = "'tensor_descriptor'"
PTR_SCALES = f"indexing=[{TD}, {TD}, 'pointer', 'pointer', {TD}]"


def fp8(shape, variants):
    return dict(
        name=f"fp8 gemm {'x'.join(map(str, shape))}",
        kernel="examples.fp8_quant:fp8_gemm",
        shape=shape,
        inputs="example:fp8_quant:1",
        variants=variants,
    )


SMALL = [
    DEFAULT,
    ("flat", "default.replace(pid_type='flat', num_sm_multiplier=None)", []),
    ("scales by pointer", f"default.replace({PTR_SCALES})", []),
    ("3 stages", "default.replace(num_stages=3)", []),
    ("64x64x64", "default.replace(block_sizes=[64, 64, 64])", []),
    (
        "64x64x64 flat",
        "default.replace(block_sizes=[64, 64, 64], pid_type='flat', num_sm_multiplier=None)",
        [],
    ),
    ("128x128x64 8w", "default.replace(block_sizes=[128, 128, 64], num_warps=8)", []),
    ("old default", "tc.Config(block_sizes=[64, 64, 64], num_warps=4, num_stages=3)", []),
    (
        "old + tma",
        f"tc.Config(block_sizes=[64, 64, 64], num_warps=4, num_stages=3, indexing=[{TD}, {TD}, 'pointer', 'pointer', {TD}])",
        [],
    ),
    ("64x128x128", "default.replace(block_sizes=[64, 128, 128], num_stages=3)", []),
]
EXPERIMENTS = [
    fp8((1000, 1536, 1000), SMALL),
    fp8(
        (4096, 7168, 4096),
        [
            DEFAULT,
            ("scales by pointer", f"default.replace({PTR_SCALES})", []),
            ("128x256x128 s3", "default.replace(block_sizes=[128, 256, 128], num_stages=3)", []),
            ("old default", "tc.Config(block_sizes=[128, 128, 64], num_warps=8, num_stages=3)", []),
        ],
    ),
]

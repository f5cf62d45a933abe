"""Source variants behind benchmarks/results/bmm_tiles_s8.md (python -m benchmarks.source_variants
benchmarks/experiments/bmm_tiles_s8.py --name bmm_tiles_s8): bmm 16x1024^3 warp-specialized at
other tiles and stage counts; 5+ stages computed NaN (led to pipelines.WS_MAX_STAGES_SM9X).
"""

PTR = "indexing=['tensor_descriptor', 'tensor_descriptor', 'pointer']"
BMM = dict(
    name="bmm 16x1024^3",
    kernel="benchmarks.gen_kernels.dots:bmm_3d",
    shape=(16, 1024, 1024, 1024),
    inputs="gen:bmm_3d",
    reference="benchmarks.gen_kernels.dots:bmm_reference",
    variants=[
        ("default", "default", []),
        (
            "128x128x64 s3 m1",
            f"default.replace(block_sizes=[128, 128, 64], num_stages=3, {PTR})",
            [],
        ),
        (
            "128x128x64 s6 m1",
            f"default.replace(block_sizes=[128, 128, 64], num_stages=6, {PTR})",
            [],
        ),
        ("128x256x32 s8", f"default.replace(block_sizes=[128, 256, 32], num_stages=8, {PTR})", []),
        ("128x256x32 s6", f"default.replace(block_sizes=[128, 256, 32], num_stages=6, {PTR})", []),
        (
            "128x128x128 s3 m1",
            f"default.replace(block_sizes=[128, 128, 128], num_stages=3, {PTR})",
            [],
        ),
        ("default", "default", []),
    ],
)
EXPERIMENTS = [BMM]

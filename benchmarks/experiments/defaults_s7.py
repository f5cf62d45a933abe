"""Source variants behind benchmarks/results/defaults_s7.md (python -m benchmarks.source_variants benchmarks/experiments/defaults_s7.py --name defaults_s7)."""

from benchmarks.experiments._cases import attention, column_sum_tall

ATT_C = "tc.Config(block_sizes=[%d, 64, 64], reduction_loops=[None], num_warps=8, num_stages=5, pid_type='persistent_interleaved', indexing=['tensor_descriptor'] * 6, l2_groupings=[8], num_sm_multiplier=1)"
EXPERIMENTS = [
    dict(
        name="kl 4096x32000",
        kernel="benchmarks.gen_kernels.reductions:kl_div_rows",
        shape=(4096, 32000),
        inputs="gen:kl_div_rows",
        reference="benchmarks.gen_kernels.reductions:kl_reference",
        variants=[
            (
                f"chunk {c} {w}w",
                f"tc.Config(block_sizes=[1], reduction_loops=[{c}], num_warps={w})",
                [],
            )
            for c in (4096, 8192)
            for w in (16, 32)
        ],
    ),
    dict(
        name="welford 4096x16384 (masks folded)",
        kernel="benchmarks.gen_kernels.norms:welford_layer_norm",
        shape=(4096, 16384),
        inputs="gen:welford_layer_norm",
        reference="benchmarks.gen_kernels.norms:layer_norm_reference",
        variants=[
            ("default", "default", []),
            ("8w", "default.replace(num_warps=8)", []),
            ("4w", "default.replace(num_warps=4)", []),
        ],
    ),
    attention(
        "attention causal 8x16x2048x64",
        (8, 16, 2048, 64),
        True,
        [
            ("128 rows", ATT_C % 128, []),
            ("256 rows", ATT_C % 256, []),
            ("128 rows again", ATT_C % 128, []),
        ],
        reference=None,
    ),
    dict(
        name="sum_first 32768x8192",
        kernel="examples.sum:sum_first",
        shape=(32768, 8192),
        inputs="example:sum:1",
        variants=[
            (
                f"split {s}",
                f"tc.Config(block_sizes=[32, 256], num_warps=8, num_stages=1, split_reductions=[{s}], deferred_sums=True)",
                [],
            )
            for s in (2, 4, 2)
        ],
    ),
    dict(
        name="sum_first 8192x32000",
        kernel="examples.sum:sum_first",
        shape=(8192, 32000),
        inputs="example:sum:1",
        variants=[
            (
                f"split {s}",
                f"tc.Config(block_sizes=[128, 64], num_warps=8, num_stages=1, split_reductions=[{s}], deferred_sums=True)",
                [],
            )
            for s in (2, 4, 2)
        ],
    ),
    column_sum_tall(
        [
            (
                f"split {s}",
                f"tc.Config(block_sizes=[512, 16], num_warps=8, num_stages=1, split_reductions=[{s}], deferred_sums=True)",
                [],
            )
            for s in (8, 16, 8)
        ]
    ),
]

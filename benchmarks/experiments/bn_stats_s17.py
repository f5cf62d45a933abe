"""Source variants behind benchmarks/results/bn_stats_s17.md (python -m benchmarks.source_variants
benchmarks/experiments/bn_stats_s17.py --name bn_stats_s17): BatchNorm statistics over NCHW as a
user wrote them (two passes over each channel's 200 KB: the mean, then squared deviations) with
L2 policies, warps, and the second pass walked backwards (its first reads are the first pass's
last, still in L2)."""

from benchmarks.experiments._cases import DEFAULT

REVERSED = [
    (
        r"for offset_4 in tl\.range\(0, 3136, _BLOCK_4\):\n",
        "for back_4 in tl.range(0, 3136, _BLOCK_4):\n"
        "            offset_4 = (tl.cdiv(3136, _BLOCK_4) - 1) * _BLOCK_4 - back_4\n",
    )
]
KEEP = "load_eviction_policies=['last', 'first']"
EXPERIMENTS = [
    dict(
        name="batchnorm stats 32x256x56x56",
        kernel="benchmarks.gen_kernels.heldout_s17:batchnorm_stats_nchw",
        shape=(32, 256, 56, 56),
        inputs="gen:batchnorm_stats_nchw",
        reference="benchmarks.gen_kernels.heldout_s17:batchnorm_stats_nchw_reference",
        variants=[
            DEFAULT,
            ("last/first", f"default.replace({KEEP})", []),
            ("reversed 2nd pass", "default", REVERSED),
            ("reversed + last/first", f"default.replace({KEEP})", REVERSED),
            ("16 warps", "default.replace(num_warps=16)", []),
            ("4 warps", "default.replace(num_warps=4)", []),
            ("hw block 512", "default.replace(block_sizes=[1, 32, 512, 32, 512])", []),
            ("n block 8", "default.replace(block_sizes=[1, 8, 1024, 8, 1024])", []),
            DEFAULT,
        ],
    ),
]

"""Source variants behind benchmarks/results/fastmax_s7.md (python -m benchmarks.source_variants benchmarks/experiments/fastmax_s7.py --name fastmax_s7).

Written against main at 2de35a9, before the changes it measured landed: the fast max helper
was then added by hand as ``max_nan_fast``; the edits no longer match the code generated now.
"""

from benchmarks.experiments._cases import bookended

IMP = (r"import max_nan as _tc_max_nan", "import max_nan_fast as _tc_max_nan")
FOLDK = [
    (r"k = tl\.sum\(v_1, 1\)", "k = tl.full([_BLOCK_0], _BLOCK_1, tl.float32)"),
    (r"v_2 = tl\.where\(valid, chunk, 0\.0\)", "v_2 = chunk"),
    (r"dev = tl\.where\(valid, v_5, 0\.0\)", "dev = v_5"),
]
WF = "benchmarks.gen_kernels.norms:welford_layer_norm"
SCALE = [
    (r"qk = \(v_2 \* qk_scale\)", "qk = v_2"),
    (r"v_3 = tl\.reduce\(qk, 1, _tc_max_nan\)", "v_3 = tl.reduce(qk, 1, _tc_max_nan) * qk_scale"),
    (r"v_5 = \(qk - v_4\)", "v_5 = qk * qk_scale - v_4"),
]
OSM_FOLD = [(r"chunk_1 = tl\.where\(v_1, chunk, float\('-inf'\)\)", "chunk_1 = chunk")]
QUICK = "tc.Config(block_sizes=[1, 16384, 8192], num_warps=8)"
EXPERIMENTS = [
    dict(
        name="welford 4096x16384",
        kernel=WF,
        shape=(4096, 16384),
        inputs="gen:welford_layer_norm",
        reference="benchmarks.gen_kernels.norms:layer_norm_reference",
        variants=bookended(
            [
                ("fold", "default", FOLDK),
                ("8w", "default.replace(num_warps=8)", []),
                ("8w fold", "default.replace(num_warps=8)", FOLDK),
                ("quick", QUICK, []),
                ("quick fold", QUICK, FOLDK),
            ]
        ),
    ),
    dict(
        name="attention 2x32x4096x128",
        kernel="examples.attention:attention",
        shape=(2, 32, 4096, 128),
        inputs="benchmarks.peak_dots:attention_inputs",
        variants=bookended(
            [
                ("fastmax", "default", [IMP]),
                ("fastmax+scale", "default", [IMP, *SCALE]),
                ("scale", "default", SCALE),
                (
                    "128x128 fastmax+scale",
                    "default.replace(block_sizes=[128, 128], num_stages=3)",
                    [IMP, *SCALE],
                ),
            ]
        ),
    ),
    dict(
        name="online softmax 8192x8192",
        kernel="benchmarks.gen_kernels.reductions:online_softmax",
        shape=(8192, 8192),
        inputs="gen:online_softmax_two_pass",
        reference="benchmarks.gen_kernels.reductions:softmax_reference",
        variants=bookended(
            [
                ("fastmax", "default", [IMP]),
                ("fold", "default", OSM_FOLD),
                ("fastmax fold", "default", [IMP, *OSM_FOLD]),
            ]
        ),
    ),
]

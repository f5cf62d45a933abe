"""Source variants behind benchmarks/results/fastmax_s7.md (python -m benchmarks.source_variants benchmarks/experiments/fastmax_s7.py --name fastmax_s7).

Written against main at 2de35a9, before the changes it measured landed: the fast max helper
was then added by hand as ``max_nan_fast``; the edits no longer match the code generated now.
"""

IMP = (r"import max_nan as _tc_max_nan", "import max_nan_fast as _tc_max_nan")
FOLDK = [
    (r"k = tl\.sum\(v_1, 1\)", "k = tl.full([_BLOCK_0], _BLOCK_1, tl.float32)"),
    (r"v_2 = tl\.where\(valid, chunk, 0\.0\)", "v_2 = chunk"),
    (r"dev = tl\.where\(valid, v_5, 0\.0\)", "dev = v_5"),
]
WF = "benchmarks.gen_kernels.norms:welford_layer_norm"

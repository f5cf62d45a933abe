"""Source variants behind benchmarks/results/row_warps_s12.md (python -m benchmarks.source_variants
benchmarks/experiments/row_warps_s12.py --name row_warps_s12): every generalization and held-out
case whose default walks rows in chunks, at its default's warps, half and twice as many, a
quarter, and half at two stages (same blocks and chunks): do loops with a cross-warp reduction
in every chunk step (Welford, online softmax, KL) want fewer warps per program than loops that
only accumulate lane-wise (RMSNorm)?
"""

from benchmarks.experiments._cases import DEFAULT, heldout

CASES = [
    "welford_layer_norm",
    "rms_norm_full_row",
    "online_softmax_two_pass",
    "kl_div_rows",
    "cross_entropy_chunks",
    "token_logprob",
    "softmax_bwd",
    "add_rms_norm",
    "layer_norm_bwd_dx",
    "long_row_sum",
    "logsumexp_3d",
]
VARIANTS = [
    DEFAULT,
    ("half warps", "default.replace(num_warps=max(default.num_warps // 2, 1))", []),
    ("twice warps", "default.replace(num_warps=min(default.num_warps * 2, 32))", []),
    ("quarter warps", "default.replace(num_warps=max(default.num_warps // 4, 1))", []),
    (
        "half warps 2 stages",
        "default.replace(num_warps=max(default.num_warps // 2, 1), num_stages=2)",
        [],
    ),
]
EXPERIMENTS = [heldout(case, VARIANTS) for case in CASES]

"""Source variants behind benchmarks/results/evict_default_s11.md (python -m
benchmarks.source_variants benchmarks/experiments/evict_default_s11.py --name
evict_default_s11): each generalization case whose default got L2 eviction policies
(config/eviction.py), timed with them and without (the hardware's policy on every load), the
default first and last.
"""

from benchmarks.experiments._cases import DEFAULT, heldout

NONE = ("no policies", "default.replace(load_eviction_policies=[])", [])
CASES = [
    "layer_norm_bwd_seed",
    "welford_layer_norm",
    "rms_norm_full_row",
    "online_softmax_two_pass",
    "kl_div_rows",
    "token_logprob",
    "logsumexp_middle",
    "column_softmax",
]
EXPERIMENTS = [heldout(name, [DEFAULT, NONE, DEFAULT]) for name in CASES]

"""Source variants behind benchmarks/results/welford_s10.md (python -m benchmarks.source_variants
benchmarks/experiments/welford_s10.py --name welford_s10): the Welford layer norm 4096x16384 at
warps x first-loop chunk x second-loop chunk, with and without descriptors and evict-last loads
(quick found [1, 16384, 8192] 8 warps, descriptors, evict-last: 0.0721 ms vs the default 0.0812).
"""

from benchmarks.experiments._cases import DEFAULT, heldout

TMA = (
    "indexing=['tensor_descriptor', 'tensor_descriptor', 'pointer', 'pointer', 'tensor_descriptor']"
)
LAST = "load_eviction_policies=['last', 'last', 'last', 'last']"


def cfg(c1, c2, warps, *extra):
    tail = "".join(f", {e}" for e in extra)
    return f"tc.Config(block_sizes=[1, {c1}, {c2}], num_warps={warps}, num_stages=1{tail})"


GRID = [
    (8192, 8192, 16),
    (8192, 8192, 8),
    (16384, 8192, 16),
    (16384, 8192, 8),
    (16384, 16384, 16),
    (16384, 4096, 8),
    (8192, 4096, 8),
    (4096, 4096, 8),
    (16384, 16384, 32),
]
VARIANTS = [
    DEFAULT,
    *((f"{a}/{b} {w}w", cfg(a, b, w), []) for a, b, w in GRID),
    *((f"{a}/{b} {w}w tma", cfg(a, b, w, TMA), []) for a, b, w in GRID[:4]),
    *((f"{a}/{b} {w}w last", cfg(a, b, w, LAST), []) for a, b, w in GRID[:4]),
    *((f"{a}/{b} {w}w tma last", cfg(a, b, w, TMA, LAST), []) for a, b, w in GRID[:4]),
    DEFAULT,
]
EXPERIMENTS = [heldout("welford_layer_norm", VARIANTS)]

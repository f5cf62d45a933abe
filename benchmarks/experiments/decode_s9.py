"""Source variants behind benchmarks/results/decode_s9.md (python -m benchmarks.source_variants
benchmarks/experiments/decode_s9.py --name decode_s9): the held-out decode attention (one query
per head, 256 heads, 8192 keys, online softmax over key chunks) at heads per program x key chunk.
"""

from benchmarks.experiments._cases import DEFAULT
from benchmarks.gen_kernels.heldout_more import decode_attention_reference


def cfg(blocks, warps):
    return (
        f"tc.Config(block_sizes={blocks}, reduction_loops=[None], num_warps={warps}, num_stages=1)"
    )


VARIANTS = [
    DEFAULT,
    *(
        (f"{b[0]}x{b[1]} {w}w", cfg(b, w), [])
        for b, w in [
            ([2, 32], 8),
            ([1, 64], 8),
            ([1, 64], 4),
            ([2, 64], 8),
            ([1, 128], 8),
            ([2, 128], 8),
            ([1, 256], 8),
            ([4, 32], 8),
        ]
    ),
]
EXPERIMENTS = [
    dict(
        name="decode attention 256x8192x128",
        kernel="benchmarks.gen_kernels.heldout_more:decode_attention",
        shape=(256, 8192, 128),
        inputs="benchmarks.gen_kernels.heldout_more:decode_attention_inputs",
        reference=decode_attention_reference,
        variants=VARIANTS,
    )
]

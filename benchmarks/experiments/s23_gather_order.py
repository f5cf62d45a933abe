"""Source variants behind benchmarks/results/s23_gather_order.md (python -m
benchmarks.source_variants benchmarks/experiments/s23_gather_order.py --name s23_gather_order):
a 2-D gather whose last dim's index is a computed value. Triton's coalescing pass orders a
load's lanes by the pointer's provable contiguity, and on a tie (no dim provable, as for every
computed index) puts dim 0 fastest: the bilinear upsample's [16, 128] gathers came out with
threadsPerWarp [16, 2], sixteen rows per warp instruction (cross-compiled TTGIR), and its time
grew with the rows of a tile ([2, 512] 0.527 ms, [16, 128] 1.31, [32, 128] 2.51;
tiles2d_up_s23). The edit builds each gather's pointer and mask transposed, so the tie puts the
tensor's contiguous dim fastest, and transposes the loaded tile back (``tl.trans``)."""

from benchmarks.experiments._cases import DEFAULT, heldout

GATHER = r"(v\d\d) = tl\.load\(maps \+ (\([^\n]*?\)), ([^\n]*), other=0\)"
TRANSPOSED = r"\1 = tl.trans(tl.load(tl.trans(maps + \2), tl.trans(\3), other=0))"
EDIT = [(GATHER, TRANSPOSED)]

VARIANTS = [
    DEFAULT,
    ("transposed gathers", "default", EDIT),
    ("[4, 512]", "default.replace(block_sizes=[4, 512])", []),
    ("[4, 512] transposed", "default.replace(block_sizes=[4, 512])", EDIT),
    ("[32, 128] 8 warps transposed", "default.replace(block_sizes=[32, 128], num_warps=8)", EDIT),
    ("[64, 64] 8 warps transposed", "default.replace(block_sizes=[64, 64], num_warps=8)", EDIT),
    DEFAULT,
]
EXPERIMENTS = [
    heldout("bilinear_upsample2x_fp32", VARIANTS),
    heldout("bilinear_upsample2x_bf16", VARIANTS),
]

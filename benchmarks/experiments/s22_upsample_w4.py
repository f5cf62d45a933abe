"""Source variants behind benchmarks/results/s22_upsample_w4.md (python -m benchmarks.source_variants
benchmarks/experiments/s22_upsample_w4.py --name s22_upsample_w4): the two short rows of
heldout_s22. A bilinear 2x upsample (0.35x torch.compile) under other grid orders and tiles
(the default walks column tiles, then maps, then row tiles: [[2, 0, 1]]); a w4a16 GEMM (0.7x)
with x's even and odd columns loaded as one [.., 2] tile and split, its per-group scale row
loaded once per K step instead of gathered per element, and other tiles / warps / stages.
"""

from benchmarks.experiments._cases import DEFAULT, heldout

X_EVEN = (
    r"x_even = tl\.load\(x_pairs \+ \(indices_0\[:, None\] \* 4096 \+ indices_2\[None, :\] \* 2\)\)"
)
X_PAIR = (
    "x_even, x_odd = tl.split(tl.load(x_pairs + (indices_0[:, None, None] * 4096"
    " + indices_2[None, :, None] * 2 + tl.arange(0, 2)[None, None, :])))"
)
X_ODD = r"x_odd = tl\.load\(x_pairs \+ \(indices_0\[:, None\] \* 4096 \+ indices_2\[None, :\] \* 2 \+ 1\)\)"
SCALE = r"load = tl\.load\(scales \+ \(v_1\[:, None\] \* 14336 \+ indices_1\[None, :\]\), [^\n]*"
SCALE_ROW = "load = tl.load(scales + ((offset_2 * 2 // 128) * 14336 + indices_1[None, :]))"
PAIR = [(X_EVEN, X_PAIR), (X_ODD, "pass")]

UPSAMPLE = [
    DEFAULT,
    ("rows then maps", "default.replace(loop_orders=[[2, 1, 0]])", []),
    ("identity order", "default.replace(loop_orders=[[0, 1, 2]])", []),
    (
        "[32, 128] rows then maps",
        "default.replace(block_sizes=[32, 128], loop_orders=[[2, 1, 0]])",
        [],
    ),
    (
        "[8, 256] rows then maps",
        "default.replace(block_sizes=[8, 256], loop_orders=[[2, 1, 0]])",
        [],
    ),
    (
        "[4, 512] 8 warps rows then maps",
        "default.replace(block_sizes=[4, 512], num_warps=8, loop_orders=[[2, 1, 0]])",
        [],
    ),
]
W4 = [
    DEFAULT,
    ("x pair split", "default", PAIR),
    ("scale row", "default", [(SCALE, SCALE_ROW)]),
    ("pair + scale row", "default", [*PAIR, (SCALE, SCALE_ROW)]),
    ("4 warps 3 stages", "default.replace(num_warps=4, num_stages=3)", []),
    (
        "[128, 256, 64] 8 warps 3 stages",
        "default.replace(block_sizes=[128, 256, 64], num_stages=3)",
        [],
    ),
    (
        "[64, 128, 64] 4 warps",
        "default.replace(block_sizes=[64, 128, 64], num_warps=4, num_stages=3)",
        [],
    ),
    ("[128, 128, 32]", "default.replace(block_sizes=[128, 128, 32], num_stages=3)", []),
]
EXPERIMENTS = [
    heldout("bilinear_upsample2x_fp32", UPSAMPLE),
    heldout("w4a16_gemm_prefill", W4),
]

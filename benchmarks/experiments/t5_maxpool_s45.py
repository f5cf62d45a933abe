"""Source variants behind benchmarks/results/t5_maxpool_s45_h100.md (python -m
benchmarks.source_variants benchmarks/experiments/t5_maxpool_s45.py --name t5_maxpool_s45):
two held-out rows short of torch.compile after session 44.

T5 relative bias, chunked (heldout_s43d, 0.514x): cross-compiled for sm_90 its default runs ~125
instructions per output element, most of them int64 (the user's position ids are int64: 13
ISETPs and 12 IMADs an element) and the gather's bounds check; the edits measure what int32
arithmetic, no bounds check and a multiply for the constant division would each buy, and
the configs what tile shapes do.

Max pool 3x3 / 2 with argmax (heldout_s38c, 0.28x): the default [32, 64] at 4 warps compiles to
145 registers (predicted 104): ptxas issues the nine taps' loads up front, so the loaded tiles
are live at once. Smaller tiles and warps measure what occupancy buys."""

from benchmarks.experiments._cases import DEFAULT, heldout

T5_NOMASK = [
    (
        r"tl\.load\(table \+ \(bucket_1 \* 32 \+ offset_0\), [^\n]*?, other=0\)",
        "tl.load(table + (bucket_1 * 32 + offset_0))",
    )
]
T5_INT32 = [
    (r"qp = tl\.load\(q_pos \+ \(indices_1\)\)", "qp = tl.load(q_pos + (indices_1)).to(tl.int32)"),
    (r"kp = tl\.load\(k_pos \+ \(indices_2\)\)", "kp = tl.load(k_pos + (indices_2)).to(tl.int32)"),
    (r"v_3 = v_2\.to\(tl\.int64\)", "v_3 = v_2.to(tl.int32)"),
    (r"v_9 = v_8\.to\(tl\.int64\)", "v_9 = v_8.to(tl.int32)"),
    (r"15, tl\.int64\)", "15, tl.int32)"),
]
T5_MULDIV = [(r"\(v_6 / 2\.772588722239781\)", "(v_6 * 0.36067376022224085)")]

T5_VARIANTS = [
    DEFAULT,
    ("no gather bounds check", "default", T5_NOMASK),
    ("int32 positions", "default", T5_INT32),
    ("multiply for the division", "default", T5_MULDIV),
    ("int32 + no check + multiply", "default", T5_INT32 + T5_NOMASK + T5_MULDIV),
    ("[8, 256]", "default.replace(block_sizes=[8, 256])", []),
    ("[16, 128]", "default.replace(block_sizes=[16, 128])", []),
    ("[8, 128] 8 warps", "default.replace(num_warps=8)", []),
    ("[32, 128] 8 warps", "default.replace(block_sizes=[32, 128], num_warps=8)", []),
    ("[8, 128] q outer", "default.replace(loop_orders=[[0, 1, 2]])", []),
    ("[2, 512] 4 warps", "default.replace(block_sizes=[2, 512])", []),
    DEFAULT,
]
POOL_VARIANTS = [
    DEFAULT,
    ("[4, 64] 2 warps", "default.replace(block_sizes=[4, 64], num_warps=2)", []),
    ("[8, 64] 2 warps", "default.replace(block_sizes=[8, 64], num_warps=2)", []),
    ("[8, 64] 4 warps", "default.replace(block_sizes=[8, 64], num_warps=4)", []),
    ("[16, 64] 4 warps", "default.replace(block_sizes=[16, 64], num_warps=4)", []),
    ("[4, 64] 4 warps", "default.replace(block_sizes=[4, 64], num_warps=4)", []),
    ("[2, 64] 2 warps", "default.replace(block_sizes=[2, 64], num_warps=2)", []),
    ("[32, 64] 8 warps", "default.replace(num_warps=8)", []),
    ("[16, 64] 8 warps", "default.replace(block_sizes=[16, 64], num_warps=8)", []),
    DEFAULT,
]
EXPERIMENTS = [
    heldout("t5_bias_chunked_s43d", T5_VARIANTS),
    heldout("maxpool3x3s2_argmax", POOL_VARIANTS),
]

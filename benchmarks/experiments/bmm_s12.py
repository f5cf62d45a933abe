"""Source variants behind benchmarks/results/bmm_s12.md (python -m benchmarks.source_variants
benchmarks/experiments/bmm_s12.py --name bmm_s12): bmm 16x1024^3 with the persistent tile loop
warp-specialized instead of the K loop (the loader runs ahead across tiles, so a tile's epilogue
overlaps the next tile's loads), with and without flattening, and with the output stored through
a TMA descriptor in two halves (a [128, 128] staging buffer fits beside four stages where a
[128, 256] one does not).
"""

from benchmarks.experiments._cases import PTR, bmm_16x1024, bookended

INNER_OFF = (
    r"tl\.range\(0, 1024, _BLOCK_3, warp_specialize=True\)",
    "tl.range(0, 1024, _BLOCK_3)",
)
OUTER = r"tl\.range\(tl\.program_id\(0\), total_tiles, num_programs\)"
OUTER_WS = (OUTER, "tl.range(tl.program_id(0), total_tiles, num_programs, warp_specialize=True)")
OUTER_WS_FLAT = (
    OUTER,
    "tl.range(tl.program_id(0), total_tiles, num_programs, flatten=True, warp_specialize=True)",
)
OUT_DESC = (
    r"^(\s*)(b_desc = tl\.make_tensor_descriptor\(b, .*\))$",
    r"\1\2\n\1out_desc = tl.make_tensor_descriptor(out, [16384, 1024], [1024, 1], "
    r"[_BLOCK_1, _BLOCK_2 // 2])",
)
SUBTILED_STORE = (
    r"^(\s*)tl\.store\(out \+ \(offset_0 \* 1048576 \+ indices_1\[:, None\] \* 1024 "
    r"\+ indices_2\[None, :\]\), v\)",
    r"\1o0, o1 = tl.split(tl.permute(tl.reshape(v, (_BLOCK_1, 2, _BLOCK_2 // 2)), (0, 2, 1)))\n"
    r"\1out_desc.store([offset_0 * 1024 + offset_1, offset_2], o0)\n"
    r"\1out_desc.store([offset_0 * 1024 + offset_1, offset_2 + _BLOCK_2 // 2], o1)",
)
TMA_HALVES = [OUT_DESC, SUBTILED_STORE]
NO_WS = f"default.replace(range_warp_specializes=[None, None], {PTR})"
W8 = f"default.replace(num_warps=8, {PTR})"

EXPERIMENTS = [
    bmm_16x1024(
        bookended(
            [
                ("outer ws", "default", [INNER_OFF, OUTER_WS]),
                ("outer ws flat", "default", [INNER_OFF, OUTER_WS_FLAT]),
                ("tma halves", "default", TMA_HALVES),
                ("outer ws tma halves", "default", [INNER_OFF, OUTER_WS, *TMA_HALVES]),
                ("outer ws flat tma halves", "default", [INNER_OFF, OUTER_WS_FLAT, *TMA_HALVES]),
                ("no ws tma halves", NO_WS, TMA_HALVES),
                ("w8 outer ws", W8, [OUTER_WS]),
                ("w8 outer ws flat tma halves", W8, [OUTER_WS_FLAT, *TMA_HALVES]),
                (
                    "s3 outer ws flat tma halves",
                    f"default.replace(num_stages=3, {PTR})",
                    [INNER_OFF, OUTER_WS_FLAT, *TMA_HALVES],
                ),
            ]
        )
    )
]

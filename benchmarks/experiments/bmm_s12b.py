"""Source variants behind benchmarks/results/bmm_s12b.md (python -m benchmarks.source_variants
benchmarks/experiments/bmm_s12b.py --name bmm_s12b): bmm 16x1024^3 at two consumer warpgroups
(8 warps, not warp-specialized) with the persistent tile loop flattened into the K loop (the
pipeline loads the next tile while this one's epilogue runs) and the output stored through a TMA
descriptor in halves or quarters (bmm_s12: 0.0551 ms against 0.061 with pointer stores), at other
stages, L2 groupings and tile shapes.
"""

from benchmarks.experiments._cases import bmm_16x1024, bookended, with_ptr_stores

OUT_DESC = r"^(\s*)(b_desc = tl\.make_tensor_descriptor\(b, .*\))$"
STORE = (
    r"^(\s*)tl\.store\(out \+ \(offset_0 \* 1048576 \+ indices_1\[:, None\] \* 1024 "
    r"\+ indices_2\[None, :\]\), v\)"
)
ROW = "offset_0 * 1024 + offset_1"


def out_desc(parts: int) -> tuple[str, str]:
    return (
        OUT_DESC,
        r"\1\2\n\1out_desc = tl.make_tensor_descriptor(out, [16384, 1024], [1024, 1], "
        rf"[_BLOCK_1, _BLOCK_2 // {parts}])",
    )


HALVES = [
    out_desc(2),
    (
        STORE,
        r"\1o0, o1 = tl.split(tl.permute(tl.reshape(v, (_BLOCK_1, 2, _BLOCK_2 // 2)), (0, 2, 1)))\n"
        rf"\1out_desc.store([{ROW}, offset_2], o0)\n"
        rf"\1out_desc.store([{ROW}, offset_2 + _BLOCK_2 // 2], o1)",
    ),
]
QUARTERS = [
    out_desc(4),
    (
        STORE,
        r"\1q0, q1 = tl.split(tl.permute(tl.reshape(v, (_BLOCK_1, 2, 2, _BLOCK_2 // 4)), "
        r"(0, 3, 1, 2)))\n"
        r"\1o0, o2 = tl.split(q0)\n"
        r"\1o1, o3 = tl.split(q1)\n"
        rf"\1out_desc.store([{ROW}, offset_2], o0)\n"
        rf"\1out_desc.store([{ROW}, offset_2 + _BLOCK_2 // 4], o1)\n"
        rf"\1out_desc.store([{ROW}, offset_2 + _BLOCK_2 // 2], o2)\n"
        rf"\1out_desc.store([{ROW}, offset_2 + 3 * _BLOCK_2 // 4], o3)",
    ),
]


def w8_flat(**fields: object) -> str:
    return with_ptr_stores("num_warps=8", "range_flattens=[True, None]", **fields)


EXPERIMENTS = [
    bmm_16x1024(
        bookended(
            [
                ("w8 flat", w8_flat(), []),
                ("w8 flat halves", w8_flat(), HALVES),
                ("w8 flat quarters", w8_flat(), QUARTERS),
                ("w8 flat halves s3", w8_flat(num_stages=3), HALVES),
                ("w8 flat quarters s3", w8_flat(num_stages=3), QUARTERS),
                ("w8 flat halves group 4", w8_flat(l2_groupings=[4]), HALVES),
                ("w8 flat halves group 16", w8_flat(l2_groupings=[16]), HALVES),
                ("w8 flat halves group 1", w8_flat(l2_groupings=[1]), HALVES),
                ("w8 flat 256x128 halves", w8_flat(block_sizes=[256, 128, 64]), HALVES),
                ("w8 flat halves order 2,1,0", w8_flat(loop_orders=[[2, 1, 0]]), HALVES),
                (
                    "w8 flat tma out s3",
                    "default.replace(num_warps=8, num_stages=3, range_flattens=[True, None], "
                    "indexing='tensor_descriptor')",
                    [],
                ),
            ]
        )
    )
]

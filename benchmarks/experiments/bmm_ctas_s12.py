"""Source variants behind benchmarks/results/bmm_ctas_s12.md (python -m benchmarks.source_variants
benchmarks/experiments/bmm_ctas_s12.py --name bmm_ctas_s12): bmm 16x1024^3 launched as clusters
of two CTAs (``num_ctas=2``: each program's tile split over two SMs of a cluster), with half as
many persistent programs so that the clusters fill the SMs once. Triton 3.6 compiles it only
without warp specialization (cross-compiled for sm_90: 4 warps 154 registers, 8 warps 91).
"""

from benchmarks.experiments._cases import bmm_16x1024, bookended, with_ptr_stores

CLUSTER = [
    (r"^(\s*)num_stages=(\d+),\n(\s*)\)", r"\1num_stages=\2,\n\1num_ctas=2,\n\3)"),
    (r"num_programs = sm_count\(env\['a'\]\) \* 1", "num_programs = sm_count(env['a']) // 2"),
]
NO_WS = "range_warp_specializes=[None, None]"


def cfg(**fields: object) -> str:
    return with_ptr_stores(NO_WS, **fields)


EXPERIMENTS = [
    bmm_16x1024(
        bookended(
            [
                ("ctas2 w4", cfg(), CLUSTER),
                ("ctas2 w8", cfg(num_warps=8), CLUSTER),
                ("ctas2 w8 group 4", cfg(num_warps=8, l2_groupings=[4]), CLUSTER),
                ("ctas2 w8 flat", cfg(num_warps=8, range_flattens=[True, None]), CLUSTER),
                ("ctas2 w4 s5", cfg(num_stages=5), CLUSTER),
            ]
        )
    )
]

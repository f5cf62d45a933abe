"""Source variants behind benchmarks/results/bmm_s11.md (python -m benchmarks.source_variants
benchmarks/experiments/bmm_s11.py --name bmm_s11): bmm 16x1024^3 at two consumer warpgroups
(8 warps), with and without warp specialization, other L2 groupings, launch orders, TMA
stores, flattened loops, a register cap and two programs per SM, looking
for a config ahead of cuBLAS (0.0537 ms; the default 128x256x64 at 4 warps: 0.054-0.055).
"""

from benchmarks.experiments._cases import bmm_16x1024, bookended, with_ptr_stores


def tweak(**fields: object) -> str:
    return with_ptr_stores(**fields)


NO_WS = {"range_warp_specializes": [None, None]}
EXPERIMENTS = [
    bmm_16x1024(
        bookended(
            [
                ("w8", tweak(num_warps=8), []),
                ("w8 s3", tweak(num_warps=8, num_stages=3), []),
                ("256x128 w8", tweak(num_warps=8, block_sizes=[256, 128, 64]), []),
                ("w8 no ws", tweak(num_warps=8, **NO_WS), []),
                ("w8 s3 no ws", tweak(num_warps=8, num_stages=3, **NO_WS), []),
                ("s3", tweak(num_stages=3), []),
                ("group 4", tweak(l2_groupings=[4]), []),
                ("group 16", tweak(l2_groupings=[16]), []),
                ("group 1", tweak(l2_groupings=[1]), []),
                ("w8 group 16", tweak(num_warps=8, l2_groupings=[16]), []),
                ("blocked", tweak(pid_type="persistent_blocked"), []),
                ("flat w8", tweak(pid_type="flat", num_warps=8, **NO_WS), []),
                ("tma out", "default.replace(indexing='tensor_descriptor')", []),
                ("flatten k", tweak(range_flattens=[None, True]), []),
                ("flatten outer", tweak(range_flattens=[True, None]), []),
                ("maxnreg 232", tweak(maxnreg=232), []),
                ("sm x2", tweak(num_sm_multiplier=2), []),
                ("order 2,1,0", tweak(loop_orders=[[2, 1, 0]]), []),
                ("order 0,1,2", tweak(loop_orders=[[0, 1, 2]]), []),
                (
                    "tma out group 4",
                    "default.replace(indexing='tensor_descriptor', l2_groupings=[4])",
                    [],
                ),
            ]
        )
    )
]

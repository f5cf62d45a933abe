"""Source variants behind benchmarks/results/row_warps_s22.md (python -m benchmarks.source_variants
benchmarks/experiments/row_warps_s22.py --name row_warps_s22): kernels whose default holds one
8192-wide row per program in registers (no row loop) at their default's warps, 16 and 32: the
PPO loss ran 0.119 ms at 8 warps and 0.108 at 32 (occ_ppo_s22). Is that a rule of wide rows?
"""

from benchmarks.experiments._cases import bookended, heldout

CASES = [
    "ppo_clipped_loss",
    "softmax_bwd",
    "layer_norm_bwd_dx",
    "int8_row_quant",
    "rms_norm_residual_bwd",
    "rms_norm_dynamic_fp8_quant",
]
VARIANTS = bookended(
    [
        ("16 warps", "default.replace(num_warps=16)", []),
        ("32 warps", "default.replace(num_warps=32)", []),
    ]
)


def _example(name: str, kernel: str, shape: tuple[int, ...]) -> dict[str, object]:
    return dict(
        name=f"{name} {'x'.join(map(str, shape))}",
        kernel=f"examples.{name}:{kernel}",
        shape=shape,
        inputs=f"example:{name}:0",
        variants=VARIANTS,
    )


EXPERIMENTS = [heldout(case, VARIANTS) for case in CASES] + [
    _example("softmax", "softmax", (32768, 8192)),
    _example("sum", "sum_last", (32768, 8192)),
    _example("rms_norm", "rms_norm_fwd", (8192, 8192)),
]

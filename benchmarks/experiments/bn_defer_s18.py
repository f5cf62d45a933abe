"""Source variants behind benchmarks/results/bn_defer_s18.md (python -m benchmarks.source_variants
benchmarks/experiments/bn_defer_s18.py --name bn_defer_s18): BatchNorm statistics over NCHW as a
user wrote them, each pass's ``sum(x, dim=[0, 2])`` over two nested loops either reduced across
the warps every step (the default: a barrier each step) or accumulated in a tile and reduced once
after both loops (deferred), at 8 and 16 warps."""

from benchmarks.experiments._cases import bookended, heldout
from benchmarks.experiments.bn_stats_s17 import EIGHT, KEEP


def _deferred(carry: str, value: str, first: str, last: str, blocks: str, mask: str) -> list:
    """Edits that keep pass ``carry``'s per-step tile sum in a tile accumulator."""
    return [
        (
            rf"(?s)(\n    {carry}_1 = {carry}\n)",
            rf"\1    acc_{carry} = tl.zeros([{blocks}], tl.float32)\n",
        ),
        (
            rf"(?s)            {first} = tl\.sum\(tl\.where\({mask}\[None, None, :\], {value}, 0\), 2\)\n"
            rf"            {last} = tl\.sum\({first}, 0\)\n"
            rf"            {carry}_3 = \({carry}_2 \+ {last}\)\n",
            rf"            acc_{carry} += tl.where({mask}[None, None, :], {value}, 0)\n"
            rf"            {carry}_3 = {carry}_2\n",
        ),
        (
            rf"(?s)(\n        {carry}_1 = {carry}_2\n)",
            rf"\1    {carry}_1 = {carry}_1 + tl.sum(tl.sum(acc_{carry}, 2), 0)\n",
        ),
    ]


DEFERRED = _deferred("total", "v", "v_1", "v_2", "_BLOCK_1, _BLOCK_0, _BLOCK_2", "mask_2") + (
    _deferred("sq", "v_5", "v_6", "v_7", "_BLOCK_3, _BLOCK_0, _BLOCK_4", "mask_4")
)
EXPERIMENTS = [
    heldout(
        "batchnorm_stats_nchw",
        bookended(
            [
                ("deferred", EIGHT, DEFERRED),
                ("16 warps", "default.replace(num_warps=16)", []),
                ("deferred, 16 warps", "default.replace(num_warps=16)", DEFERRED),
                ("deferred, last/first", f"default.replace(num_warps=8, {KEEP})", DEFERRED),
                ("deferred, 4 warps", "default.replace(num_warps=4)", DEFERRED),
                (
                    "deferred, n block 8",
                    "default.replace(num_warps=8, block_sizes=[1, 8, 1024, 8, 1024])",
                    DEFERRED,
                ),
            ]
        ),
    ),
]

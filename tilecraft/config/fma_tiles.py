"""Accumulator a thread owns in an fp32 dot on the FMA units (stage: config; in: a ConfigSpec
and the heuristic's config; out: the config with fewer warps where each thread would own too
few of the dots' outputs).

An FMA dot's thread computes an outer product of its rows and columns of the output per step of
K, reading its operands' values from shared memory: r x c multiply-adds for r + c reads. With 32
outputs a thread (4 x 8) the reads bound the dot; with 64 (8 x 8) they are a third fewer per
multiply-add. Measured on an H100 (session 44, ``benchmarks/results/fma_tiles_s44_h100.md``):
a cosine-similarity top-1 over [600, 64] x [577, 64] at [128, 64] went 0.390 -> 0.303 ms from 8
to 4 warps (64 outputs a thread), [128, 128] at 8 warps 0.271; a k-means assignment 3.31 ->
2.43 ms; ToMe's bipartite match [64, 128] at 4 warps 0.305 (its [128, 64] at 8: 0.408). Those
spill 100-200 bytes a thread, which costs less than the reads saved; a kernel whose other
values also fill the registers (the model predicting far past the limit: Mamba-2's SSD at 4
warps, 1.9 KB spilled) keeps its warps, and discovery skips a config that spills hard.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tilecraft.config.config import Config
from tilecraft.config.fp32_dots import fma_dot_nodes
from tilecraft.config.plan import sym_block
from tilecraft.config.resolve import predicted_registers
from tilecraft.ir.nodes import Op, Sym

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec

FMA_THREAD_OUTPUTS = 64  # accumulator elements each thread of an FMA dot should own
FMA_MIN_WARPS = 4
# fewer warps only while the model predicts at most this share of the register limit: the
# measured wins above were predicted at 1.0-1.6x; Mamba-2's SSD (4.1x) spilled 1.9 KB
FMA_SPILL_TOLERANCE = 1.7


def own_more_outputs(spec: ConfigSpec, config: Config) -> Config:
    """Halve the warps of a kernel whose dots all run on the FMA units while each thread owns
    fewer than ``FMA_THREAD_OUTPUTS`` of the largest dot's accumulator (module docstring)."""
    dots = [n for loop in spec.loops for n in loop.walk() if n.op is Op.DOT]
    if not dots or len(fma_dot_nodes(spec)) != len(dots):
        return config
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    outputs = max(
        math.prod(sym_block(d, blocks, chunks) if isinstance(d, Sym) else int(d) for d in n.shape)
        for n in dots
    )
    warps = config.num_warps or 4
    size = spec.target.warp_size
    while warps > FMA_MIN_WARPS and outputs // (warps * size) < FMA_THREAD_OUTPUTS:
        fewer = config.replace(num_warps=warps // 2)
        if predicted_registers(spec, fewer, warps // 2).spill_ratio > FMA_SPILL_TOLERANCE:
            break
        warps //= 2
        config = fewer
    return config


__all__ = ["FMA_THREAD_OUTPUTS", "own_more_outputs"]

"""Defaults for loops that reduce everything they read into one address (stage: config
heuristic; in: a ConfigSpec and the default's blocks after the tile budget; out: larger grid
blocks for such loops).

A device loop whose only output is ``tc.atomic_add(total, [0], torch.sum(tile))`` (a global
norm for gradient clipping, a loss summed over every element) pays per program a cross-warp
reduction, its barriers and one atomic on an address every program shares, whatever its tile
holds. With the tile the register budget gives (4096 elements), a 32000x4096 bf16 gradient is
32000 programs of 8 KB each, and the loop runs at a fraction of memory speed. Its programs take
``PROGRAM_BYTES`` each instead: the contiguous block first, up to ``ROW_BYTES`` of each row,
then the other grid dims, while the grid keeps ``MIN_WAVES`` programs per SM.
H200 (benchmarks/results/adam_atomics_s15.md), the held-out clipped lazy Adam 32000x4096 (norm
pass, then the update pass): norm tiles [32, 128] 1.177 ms, [64, 128] 1.034, [32, 512] 1.039,
[64, 512] 1.010; torch.compile 1.067. Long rows matter as much as the bytes: programs that
run at once share their column block (the grid's row dim varies fastest), so 1 KB of each
8 KB row keeps every resident program on the same eighth of each row. The held-out global
gradient norm of 32000x4096 bf16 (H200 graph replays, l2norm_s16): [64, 512] 0.162 ms at 16
warps, 0.115 at 8, [128, 1024] at 32 warps 0.117, whole rows [16, 4096] at 16 warps 0.0698;
torch.compile 0.143.
Loops that store anything else (a row's loss beside atomic totals) keep their tiles: their
programs do per-row work that larger tiles serialize (a focal loss at 4096 programs with two
atomic totals ran 0.041 ms at 8 rows a program, 0.067 at 32).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.config.eviction import bytes_per_program
from tilecraft.ir.nodes import DeviceLoop, Node, Op

if TYPE_CHECKING:
    from tilecraft.config.config import Config
    from tilecraft.config.spec import ConfigSpec

PROGRAM_BYTES = 64 * 1024  # bytes a program of a reduce-into-one-address loop reads at least
ROW_BYTES = 16 * 1024  # of each row, before the other grid dims grow
MIN_WAVES = 4  # programs per SM the grown grid keeps


def reduces_into_one_address(loop: DeviceLoop) -> bool:
    """Whether ``loop`` writes nothing but atomics at constant indices (no stores, no atomics
    indexed by tiles or values) and has no inner loops."""
    atomics = [n for n in loop.walk() if n.op is Op.ATOMIC]
    if not atomics or any(n.op in (Op.STORE, Op.LOOP) for n in loop.walk()):
        return False
    return all(all(item[0] == "int" for item in n.attrs["index"]) for n in atomics)


def _read_bytes(loop: DeviceLoop, config: Config) -> int:
    loads: list[Node] = [n for n in loop.walk() if n.op is Op.LOAD]
    return sum(bytes_per_program(n, config, loop.grid_syms) for n in loads)


def grow_shared_atomic_tiles(spec: ConfigSpec, config: Config) -> Config:
    """``config`` with the grid blocks of each loop that reduces into one address resized so
    that each program reads whole rows (up to ``ROW_BYTES`` of each) and ``PROGRAM_BYTES`` in
    all (see the module docstring)."""
    want = MIN_WAVES * spec.target.limits.num_sms
    for index, (loop, slots) in enumerate(zip(spec.loops, spec.grid_slots, strict=True)):
        if not reduces_into_one_address(loop):
            continue
        rows = _long_rows(spec, slots, config)
        if (spec.programs(index, rows) or 0) >= want:
            config = rows
        while _read_bytes(loop, config) < PROGRAM_BYTES:
            blocks = list(config.block_sizes)
            growable = [s for s in slots if blocks[s] < spec.blocks[s].hi]
            if not growable:
                break
            blocks[min(growable, key=lambda s: blocks[s])] *= 2
            grown = config.replace(block_sizes=blocks)
            programs = spec.programs(index, grown)
            if programs is None or programs < want:
                break
            config = grown
    return config


def _long_rows(spec: ConfigSpec, slots: list[int], config: Config) -> Config:
    """``config`` with its contiguous grid blocks widened to ``ROW_BYTES`` of each row (or the
    whole row) and its other grid blocks halved as much as that widened them."""
    blocks = list(config.block_sizes)
    for s in slots:
        b = spec.blocks[s]
        if not b.contiguous:
            continue
        while blocks[s] < b.hi and 2 * blocks[s] * max(b.load_itemsize, 1) <= ROW_BYTES:
            blocks[s] *= 2
            others = [o for o in slots if o != s and blocks[o] > spec.blocks[o].lo]
            if others:
                blocks[max(others, key=lambda o: blocks[o])] //= 2
    return config.replace(block_sizes=blocks)

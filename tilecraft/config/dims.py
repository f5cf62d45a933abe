"""The dims a config sizes (stage: config; in: what ConfigSpec collects from the IR; out: each
block's and reduction dim's legal range and the floors the default keeps).

``BlockSpec`` describes one entry of ``Config.block_sizes`` (its role, typical extent, whether it
feeds a dot or walks memory contiguously), ``ReductionSpec`` one of ``reduction_loops``,
``ValueShape`` one traced value's dims by config slot.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tilecraft.config.plan import next_pow2
from tilecraft.errors import SourceLoc
from tilecraft.ir.carried_homes import CarriedHome


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive ints (blocks of size ``b`` covering ``a``)."""
    return -(-a // b)


# bytes of each row a contiguous grid block keeps when the default shrinks it to fill the device:
# two 32-byte sectors (a 16-column bf16 tile reads one per row and per request)
MIN_SEGMENT_BYTES = 64
# the unit of a GPU's memory transactions (an L2 sector on NVIDIA and AMD)
SECTOR_BYTES = 32


def whole_sectors(block: int, run_bytes: int) -> int:
    """``block`` doubled until its indices' run of ``run_bytes`` each covers whole sectors: a
    run ending mid-sector shares that sector with the next program's run, and its stores are
    partial-sector writes the memory merges (a channels-last group norm's 20-byte groups at 4 a
    block, 80-byte runs: H100 normalize pass 89.9 us at [4 groups, 128 rows], 60.4 at [8, 64]:
    160 bytes, five whole sectors, group_layouts_s52_h100)."""
    while (block * run_bytes) % SECTOR_BYTES and block * run_bytes < SECTOR_BYTES * 8:
        block *= 2
    return block


@dataclasses.dataclass
class BlockSpec:
    slot: int
    extent: int  # a typical extent of the loops using it (for clamping and heuristics)
    role: str  # "grid", "loop" or "host"
    dot_role: str | None = None  # "mn" or "k" when the dim feeds tl.dot
    grid_rank: int = 1
    innermost: bool = False  # the last dim of a 2-D+ grid (usually the contiguous one)
    contiguous: bool = False  # indexes the last dim of a load or store (walks memory in order)
    dot_min: int = 16  # tl.dot's smallest size for the dim (K of 8-bit operands: 32)
    load_itemsize: int = 0  # bytes of the narrowest element loaded along it contiguously
    store_itemsize: int = 0  # bytes of the narrowest element stored along it contiguously
    # its loop has whole dims (``:`` slices, reduced or kept): not a pointwise loop
    whole_dims: bool = False
    # bytes each index of it covers in one memory run past a narrow whole stride-1 dim, where
    # those are under MIN_SEGMENT_BYTES (grid_order.narrow_run; 0: none)
    run_bytes: int = 0
    # a registered block's least (``tc.register_block_size(lo, hi)``: lo rounded up to a power
    # of two)
    least: int = 1

    @property
    def itemsize(self) -> int:
        """Bytes of the narrowest element read or written along it contiguously (0: none)."""
        return min((s for s in (self.load_itemsize, self.store_itemsize) if s), default=0)

    @property
    def row_floor(self) -> int | None:
        """The least block of a contiguous dim that keeps ``MIN_SEGMENT_BYTES`` of each row it
        reads or writes (None: not such a dim; dot tiles have rules of their own). A dim only
        stored along counts as well: a 2x2 max pool reading channels_last and writing NCHW had
        its width, contiguous in the outputs only, halved to 8 (16-byte rows stored) while the
        channels kept 32: 0.219 ms; [1, 16, 2, 64] 0.105 (H200, maxpool_tiles_s18)."""
        if self.contiguous and self.itemsize and not self.dot_role:
            return max(16, MIN_SEGMENT_BYTES // self.itemsize)
        if self.run_bytes and not self.dot_role:  # whole runs of a narrow inner dim
            return whole_sectors(next_pow2(cdiv(MIN_SEGMENT_BYTES, self.run_bytes)), self.run_bytes)
        return None

    @property
    def index_bytes(self) -> int:
        """Bytes of a memory run one index of it covers (0: it walks no run)."""
        return self.itemsize if self.contiguous and self.itemsize else self.run_bytes

    @property
    def segment_floor(self) -> int:
        """The least block the default halves this dim to while filling the device."""
        return self.row_floor or 16

    @property
    def lo(self) -> int:
        return max(self.dot_min if self.dot_role else 1, self.least)

    @property
    def hi(self) -> int:
        return max(next_pow2(self.extent), self.lo)


@dataclasses.dataclass
class ReductionSpec:
    slot: int
    extent: int
    loopable: bool
    reason: str = ""
    # loop-carried accumulators on the dim, kept in their output rows when it is looped
    homes: tuple[CarriedHome, ...] = ()
    chunk_outer: bool = False  # its homed row loops can run column chunks outer (chunk_outer)

    @property
    def full(self) -> int:
        return next_pow2(self.extent)


@dataclasses.dataclass
class ValueShape:
    dims: tuple[Any, ...]  # ("b", slot) | ("fixed", n) | ("r", slot)
    loc: SourceLoc | None


__all__ = ["MIN_SEGMENT_BYTES", "BlockSpec", "ReductionSpec", "ValueShape", "cdiv"]

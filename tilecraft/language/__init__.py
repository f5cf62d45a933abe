"""The DSL names users write in kernels (``import tilecraft.language as tl_``).

Each name also has an eager meaning, used by ref mode.
"""

from tilecraft.language.creation import arange, dot, full, zeros
from tilecraft.language.extern import triton_call
from tilecraft.language.fragments import (
    BooleanFragment,
    EnumFragment,
    Fragment,
    IntegerFragment,
    PowerOfTwoFragment,
)
from tilecraft.language.loops import RefTile, TileSpec, grid, static_range, tile
from tilecraft.language.memory_ops import (
    atomic_add,
    atomic_and,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_xchg,
    atomic_xor,
    load,
    store,
)
from tilecraft.language.random import rand
from tilecraft.language.scans import associative_scan, reduce
from tilecraft.language.shapes import join, split
from tilecraft.language.tile_ops import (
    Tile,
    barrier,
    device_print,
    subscript,
    tile_begin,
    tile_block_size,
    tile_count,
    tile_end,
    tile_id,
    tile_index,
)
from tilecraft.language.tunables import (
    BlockSize,
    Specialized,
    constexpr,
    register_block_size,
    register_tunable,
    specialize,
)

__all__ = [
    "BlockSize",
    "BooleanFragment",
    "EnumFragment",
    "Fragment",
    "IntegerFragment",
    "PowerOfTwoFragment",
    "RefTile",
    "Specialized",
    "Tile",
    "TileSpec",
    "arange",
    "associative_scan",
    "atomic_add",
    "atomic_and",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_xchg",
    "atomic_xor",
    "barrier",
    "constexpr",
    "device_print",
    "dot",
    "full",
    "grid",
    "load",
    "join",
    "rand",
    "reduce",
    "register_block_size",
    "register_tunable",
    "specialize",
    "split",
    "static_range",
    "store",
    "subscript",
    "tile",
    "tile_begin",
    "tile_block_size",
    "tile_count",
    "tile_end",
    "tile_id",
    "tile_index",
    "triton_call",
    "zeros",
]

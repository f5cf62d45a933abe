"""The DSL names users write in kernels (``import tilecraft.language as tl_``).

Each name also has an eager meaning, used by ref mode.
"""

from tilecraft.language.creation import (
    arange,
    atomic_add,
    atomic_max,
    atomic_min,
    atomic_xchg,
    dot,
    full,
    zeros,
)
from tilecraft.language.loops import RefTile, TileSpec, grid, static_range, tile
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
    "RefTile",
    "Specialized",
    "TileSpec",
    "arange",
    "atomic_add",
    "atomic_max",
    "atomic_min",
    "atomic_xchg",
    "constexpr",
    "dot",
    "full",
    "grid",
    "register_block_size",
    "register_tunable",
    "specialize",
    "static_range",
    "tile",
    "zeros",
]

"""Helion's function forms of tile attributes, and small device utilities (stage: language).

``tile_index(t)`` is ``t.index`` (also ``tile_begin/end/block_size/id/count``), ``subscript(x,
index)`` is ``x[index]`` for ``None`` / ``:`` views, ``device_print`` prints from device code (and
in ref mode), ``barrier()`` separates top-level device loops. ``Tile`` names the tile type in
annotations. Each works on device (tracer) and in ref mode (eager).
"""

from __future__ import annotations

from typing import Any

from tilecraft.errors import DeviceCodeError
from tilecraft.language import _context


class Tile:
    """The type of a ``tile``/``grid`` loop variable, for annotations (``def f(t: hl.Tile)``)."""


def tile_index(tile: Any) -> Any:
    """The indices of ``tile`` (``tile.index``)."""
    return tile.index


def tile_begin(tile: Any) -> Any:
    """The first index of ``tile`` (``tile.begin``)."""
    return tile.begin


def tile_end(tile: Any) -> Any:
    """One past the last valid index of ``tile`` (``tile.end``)."""
    return tile.end


def tile_block_size(tile: Any) -> Any:
    """The block size of ``tile``'s loop (``tile.block_size``)."""
    return tile.block_size


def tile_id(tile: Any) -> Any:
    """The number of ``tile`` within its loop (``tile.id``)."""
    return tile.id


def tile_count(tile: Any) -> Any:
    """How many tiles ``tile``'s loop has (``tile.count``)."""
    return tile.count


def subscript(tensor: Any, index: Any) -> Any:
    """``tensor[index]`` for a tile value and a list of ``None`` / ``:`` items."""
    return tensor[tuple(index) if isinstance(index, list) else index]


def device_print(prefix: str, *values: Any) -> None:
    """Print ``prefix`` and ``values`` from every program (``tl.device_print``); eager in ref
    mode."""
    tracer = _context.device()
    if tracer is not None:
        tracer.call("device_print", prefix, *values)
        return
    print(prefix, *values)


def barrier() -> None:
    """Between top-level device loops: every program of the loops before it finishes before any of
    the loops after it starts. Each top-level loop is its own launch on one stream, so this holds
    by construction and the call has nothing to add on the host."""
    if _context.device() is not None:
        raise DeviceCodeError(
            "tc.barrier() inside a device loop",
            hint="a barrier separates top-level device loops; call it in host code between them",
        )

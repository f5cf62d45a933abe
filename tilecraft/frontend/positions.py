"""Tile positions beside ints past int32 (stage: frontend; in: a pointwise op's operands while
device code is traced; out: the operands, positions widened to int64 where an int needs it).

Tile positions (``t.index``, ``t.begin``, ``t.end``) are int32 in the IR, int64 in torch and in
ref mode. Beside an int outside int32 (a window's start past 2**31, a constant or an int
argument) int32 positions wrapped it: ``t.index - a`` masked off every store, silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.frontend.values import TileProxy, TileValue
from tilecraft.ir.nodes import Op
from tilecraft.language.tunables import DynamicInt

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


def positions_widened(t: Tracer, operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """``operands`` with tile positions as int64 where another operand does not fit int32."""
    if not any(_past_int32(t, o) for o in operands):
        return operands
    return tuple(t.to_dtype(o, torch.int64) if _position_valued(o) else o for o in operands)


_POSITION_LEAVES = (Op.TILE_INDEX, Op.TILE_BEGIN, Op.TILE_END)


def _past_int32(t: Tracer, x: Any) -> bool:
    """A Python int, or an int argument (typed by its value), outside int32."""
    if isinstance(x, int) and not isinstance(x, (bool, DynamicInt)):
        return not -(2**31) <= x < 2**31
    if isinstance(x, (DynamicInt, TileValue)):  # (a DynamicInt's compare traces an op)
        node = t.value_node(x)
        return node.op is Op.ARG and node.dtype == torch.int64
    return False


def _position_valued(x: Any) -> bool:
    """An int32 tile or scalar computed from a tile's positions (``t.index``, ``t.begin``)."""
    if isinstance(x, TileProxy):
        return True
    if not isinstance(x, TileValue) or x.node.dtype != torch.int32:
        return False
    stack, seen = [x.node], set()
    while stack:
        node = stack.pop()
        if node.op in _POSITION_LEAVES:
            return True
        if id(node) in seen or node.op not in (Op.BINARY, Op.UNARY, Op.CAST, Op.VIEW):
            continue
        seen.add(id(node))
        stack.extend(n for n in node.inputs if not n.dtype.is_floating_point)
    return False

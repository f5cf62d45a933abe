"""Tile positions beside ints past int32 (stage: frontend; in: a pointwise op's operands while
device code is traced; out: the operands, positions widened to int64 where an int needs it).

Tile positions (``t.index``, ``t.begin``, ``t.end``) are int32 in the IR, int64 in torch and in
ref mode. Beside an int outside int32 (a window's start past 2**31, a constant or an int
argument) int32 positions wrapped it: ``t.index - a`` masked off every store, silently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.frontend.values import TileProxy, TileValue
from tilecraft.ir.int_ranges import abs_bound
from tilecraft.ir.nodes import Op
from tilecraft.language.tunables import DynamicInt

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


def positions_widened(t: Tracer, operands: tuple[Any, ...], op: str) -> tuple[Any, ...]:
    """``operands`` of pointwise ``op`` with tile positions as int64 where another operand does
    not fit int32, or where the result may not (a spatial hash ``t.index * 73856093``)."""
    if not any(_past_int32(t, o) for o in operands) and not _may_wrap(t, operands, op):
        return operands
    return tuple(t.to_dtype(o, torch.int64) if _position_valued(o) else o for o in operands)


# how each op's bound of |result| follows from its operands' (shifts: by a constant amount)
_GROWTH: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "lshift": lambda a, b: a << min(b, 64),
}


def _may_wrap(t: Tracer, operands: tuple[Any, ...], op: str) -> bool:
    """Whether ``op`` of int32 positions may leave int32, by the operands' known bounds (a
    position's from its loop's extent); unknown bounds (run-time extents) count as fitting."""
    grow = _GROWTH.get(op)
    if grow is None or len(operands) != 2 or not any(_position_valued(o) for o in operands):
        return False
    a, b = (_abs_bound(t, o) for o in operands)
    return a is not None and b is not None and grow(a, b) >= 2**31


def _abs_bound(t: Tracer, x: Any) -> int | None:
    if isinstance(x, bool) or not isinstance(x, (int, TileValue, TileProxy)):
        return None
    if isinstance(x, int):
        return None if isinstance(x, DynamicInt) else abs(x)
    node = t.value_node(x)
    if node.dtype != torch.int32:  # (an int64 operand already widens the result)
        return None
    bound = abs_bound(node, {})
    # int32's own bound: nothing known (a run-time extent's positions stay int32, as before)
    return None if bound is None or bound >= 2**31 else bound


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
        if node.op is Op.CAST and node.inputs[0].dtype.itemsize > node.dtype.itemsize:
            continue  # the user's narrowing (a hash's .to(torch.int32)): int32 in torch too
        seen.add(id(node))
        stack.extend(n for n in node.inputs if not n.dtype.is_floating_point)
    return False

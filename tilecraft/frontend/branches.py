"""``if`` on data in device code (stage: frontend; in: an ``if`` statement whose condition is a
traced scalar, e.g. a loaded flag or ``tile.begin < other.end``; out: an ``IF`` node).

Both branches are traced (the else branch from the same environment as the then branch). A name
that exists before the ``if`` and is assigned in a branch, or that both branches assign, becomes
a ``CARRY`` node of the ``IF``: its value after the statement, with each branch's final value (a
branch that does not assign it keeps the value from before). Branches keep a name's dtype, and its
shape up to broadcasting, as Triton's ``scf.if`` needs; a name that only one branch creates is not
visible after it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError, ShapeError
from tilecraft.frontend.values import TileValue
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.frontend.interpreter import Interpreter


def exec_if(interp: Interpreter, stmt: ast.If, test: Any) -> None:
    from tilecraft.frontend.interpreter import assigned_names
    from tilecraft.frontend.tracer import shape_str

    tracer = interp.tracer
    cond = tracer.value_node(test)
    if cond.ndim != 0:
        raise DeviceCodeError(
            f"`if` on a tile of shape {shape_str(cond.shape)}: a branch needs one scalar condition",
            hint="use torch.where(cond, a, b) for elementwise choices, or reduce the condition to "
            "a scalar first (e.g. `if mask.sum() > 0:`)",
        )
    node = tracer.emit(Op.IF, [tracer.cast(cond, torch.bool)], (), torch.int32)
    node.body, node.attrs["orelse"], node.attrs["carried"] = [], [], []
    names = assigned_names(stmt.body + stmt.orelse)
    before = dict(interp.env)
    ends = []
    for branch, block in ((stmt.body, node.body), (stmt.orelse, node.attrs["orelse"])):
        interp.env = dict(before)
        tracer.blocks.append(block)
        try:
            interp.run(branch)
        finally:
            tracer.blocks.pop()
        ends.append(interp.env)
    interp.env = dict(before)
    for name in names:
        init = _initial(tracer, name, before, ends)
        if init is None:
            continue  # assigned in one branch only, and new there: not visible after the if
        values = [tracer.value_node(env[name]) if name in env else init for env in ends]
        if all(v is init for v in values):
            continue
        carry = Node(Op.CARRY, [init], init.shape, init.dtype, {"name": name}, tracer.loc)
        carry.hint = name
        carry.attrs["then"], carry.attrs["else"] = (_fit(tracer, name, carry, v) for v in values)
        node.attrs["carried"].append(carry)
        interp.env[name] = tracer.wrap(carry)


def _initial(tracer: Any, name: str, before: dict[str, Any], ends: list[dict[str, Any]]) -> Any:
    """The value ``name`` has before the ``if``; for a name both branches assign first, a zero
    tile of their common shape (never read: it gives Triton the variable before the branch)."""
    if isinstance(before.get(name), (TileValue, int, float)):
        return tracer.value_node(before[name])
    new = [env.get(name) for env in ends]
    if not all(isinstance(v, TileValue) for v in new):
        return None
    a, b = (tracer.value_node(v) for v in new)
    shape = tracer.broadcast_shapes(a.shape, b.shape)
    return tracer.emit(Op.FULL, [], shape, a.dtype, value=0)


def _fit(tracer: Any, name: str, carry: Node, value: Node) -> Node:
    """A branch's value of ``name`` in the carried dtype and shape."""
    from tilecraft.frontend.tracer import shape_str
    from tilecraft.frontend.views import _broadcast

    if value.dtype != carry.dtype:
        raise DeviceCodeError(
            f"'{name}' changes dtype in an `if` branch: {carry.dtype} before, {value.dtype} after",
            carry.loc,
            hint=f"cast it back, e.g. {name} = (...).to({carry.dtype})",
        )
    try:
        shape = tracer.broadcast_shapes(value.shape, carry.shape)
    except ShapeError:
        shape = None
    if shape != carry.shape:
        raise ShapeError(
            f"'{name}' changes shape in an `if` branch: {shape_str(carry.shape)} before, "
            f"{shape_str(value.shape)} after",
            carry.loc,
        )
    return value if value.shape == carry.shape else _broadcast(tracer, value, carry.shape)

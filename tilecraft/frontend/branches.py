"""``if`` and ``while`` on data in device code (stage: frontend; in: an ``if`` statement whose
condition is a traced scalar, e.g. a loaded flag or ``tile.begin < other.end``, or a ``while``
loop whose condition reads what the loop changes; out: an ``IF`` or ``WHILE`` node).

Both branches are traced (the else branch from the same environment as the then branch). A name
that exists before the ``if`` and is assigned in a branch, or that both branches assign, becomes
a ``CARRY`` node of the ``IF``: its value after the statement, with each branch's final value (a
branch that does not assign it keeps the value from before). Branches keep a name's dtype, and its
shape up to broadcasting, as Triton's ``scf.if`` needs; a name that only one branch creates is not
visible after it.
"""

from __future__ import annotations

import ast
import functools
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError, ShapeError
from tilecraft.frontend import rdims
from tilecraft.frontend.assigned import assigned_names
from tilecraft.frontend.values import TileValue
from tilecraft.ir.nodes import Node, Op, Sym, SymKind, shape_str
from tilecraft.language.tunables import DynamicInt

if TYPE_CHECKING:
    from tilecraft.frontend.interpreter import Interpreter


def exec_if(interp: Interpreter, stmt: ast.If, test: Any) -> None:
    tracer = interp.tracer
    cond = tracer.value_node(test)
    if cond.ndim != 0:
        raise DeviceCodeError(
            f"`if` on a tile of shape {shape_str(cond.shape)}: a branch needs one scalar condition",
            hint="use torch.where(cond, a, b) for elementwise choices; a branch takes a scalar "
            "the config does not change: a loaded element (`if flags[tb.begin] > 0:`), a "
            "tile's `.begin`, or a reduction over a whole `:` dim",
        )
    _check_condition(cond, "if")
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
        values = [_branch_value(tracer, name, env, before, init) for env in ends]
        if all(v is init for v in values):
            continue
        carry = Node(Op.CARRY, [init], init.shape, init.dtype, {"name": name}, tracer.loc)
        carry.hint = name
        carry.attrs["then"], carry.attrs["else"] = (
            _fit(tracer, name, carry, v, weak=isinstance(env.get(name), (int, float)))
            for v, env in zip(values, ends, strict=True)
        )
        node.attrs["carried"].append(carry)
        interp.env[name] = tracer.wrap(carry)


def _check_condition(cond: Node, stmt: str) -> None:
    """A condition may not reduce over a tile dim: its value would depend on the block size
    (the config), so the kernel's meaning would too."""
    seen: set[int] = set()
    stack = [cond]
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if n.op in (Op.REDUCE, Op.SCAN):
            dim = n.inputs[0].shape[n.attrs["axis"]]
            if isinstance(dim, Sym) and dim.kind is SymKind.BLOCK:
                raise DeviceCodeError(
                    f"`{stmt}` on a value reduced over the tile dim {dim.name}: its meaning would "
                    "change with the block size",
                    hint="use torch.where(cond, a, b) for elementwise choices; a branch may test "
                    "scalars: a loaded element, tile.begin / tile.end / tile.id, or a reduction "
                    "over a whole `:` dim",
                )
        stack.extend(n.inputs)


def _is_value(value: Any) -> bool:
    """Whether ``value`` can be carried out of an ``if``: a traced value or a Python number."""
    return isinstance(value, (TileValue, int, float))


def _initial(tracer: Any, name: str, before: dict[str, Any], ends: list[dict[str, Any]]) -> Any:
    """The value ``name`` has before the ``if``; for a name both branches assign first, a zero
    of their common dtype and shape (never read: it gives Triton the variable before the
    branch). A Python number is weak, as in torch: ``if c: lo = 0 else: lo = tm.begin - w``
    and ``lo = 0; if c: lo = tm.begin - w`` carry an int32 like ``tm.begin``; where only
    numbers are assigned, the numbers' own dtype."""
    if _is_value(before.get(name)):
        tiles = [env[name].node for env in ends if isinstance(env.get(name), TileValue)]
        return _branch_node(tracer, before[name], tiles[0].dtype if tiles else None)
    new = [env.get(name) for env in ends]
    if not all(_is_value(v) for v in new):
        return None
    tiles = [tracer.value_node(v) for v in new if isinstance(v, TileValue)]
    if tiles:
        dtype = tiles[0].dtype  # a second tile of another dtype is refused by _fit
        shape = tracer.broadcast_shapes(*(t.shape for t in tiles))
    else:
        nodes = [tracer.value_node(v) for v in new]
        dtype = functools.reduce(torch.promote_types, (n.dtype for n in nodes))
        shape = ()
    return tracer.emit(Op.FULL, [], shape, dtype, value=0)


def _branch_value(
    tracer: Any, name: str, env: dict[str, Any], before: dict[str, Any], init: Node
) -> Node:
    """The value a branch leaves ``name`` with: ``init`` where the branch kept the value from
    before the ``if`` (a Python number too, which would otherwise be a new constant each time
    and be reassigned for nothing)."""
    if name not in env or (name in before and env[name] is before[name]):
        return init
    return _branch_node(tracer, env[name], init.dtype)


def _branch_node(tracer: Any, value: Any, dtype: torch.dtype | None) -> Node:
    """``value`` (a branch's, or the one before the ``if``) as a node; a Python number takes
    the carried ``dtype`` where torch would keep that dtype for it (an int into any number
    dtype, a float into a float dtype), so ``lo = 0`` keeps an int64 ``lo`` int64. Anything
    else keeps its own dtype, and ``_fit`` names a change."""
    node = tracer.value_node(value)
    weak = isinstance(value, (int, float)) and not isinstance(value, (bool, DynamicInt))
    if dtype is None or not weak or dtype == torch.bool:
        return node
    if isinstance(value, float) and not dtype.is_floating_point:
        return node
    return tracer.cast(node, dtype)


def _fit(
    tracer: Any,
    name: str,
    carry: Node,
    value: Node,
    where: str = "an `if` branch",
    weak: bool = False,
) -> Node:
    """A branch's (or loop body's) value of ``name`` in the carried dtype and shape. A traced
    value must have that shape: broadcast up to it, a row sum carried out of one branch and a
    row out of the other would turn the sum into a row of copies, and what follows
    (``torch.sum(s)``) would compute another thing than eager PyTorch does. A Python number
    (``weak``) fills the shape, as it would in any elementwise use."""
    from tilecraft.frontend.views import _broadcast

    if value.dtype != carry.dtype:
        raise DeviceCodeError(
            f"'{name}' changes dtype in {where}: {carry.dtype} before, {value.dtype} after",
            carry.loc,
            hint=f"cast it back, e.g. {name} = (...).to({carry.dtype})",
        )
    value = rdims.conform(tracer, value, carry.shape)
    try:
        shape = tracer.broadcast_shapes(value.shape, carry.shape)
    except ShapeError:
        shape = None
    if shape != carry.shape or (value.shape != carry.shape and not weak):
        raise ShapeError(
            f"'{name}' changes shape in {where}: {shape_str(carry.shape)} before, "
            f"{shape_str(value.shape)} after",
            carry.loc,
            hint=f"give '{name}' one shape on every path (e.g. broadcast it explicitly with "
            f"torch.broadcast_to or add [:, None]), or use another name for the other shape",
        )
    return value if value.shape == carry.shape else _broadcast(tracer, value, carry.shape)


def exec_while(interp: Interpreter, stmt: ast.While) -> None:
    """``while cond:`` where ``cond`` is traced (it reads values the body changes, or loaded
    data): a ``WHILE`` node whose carried values are the names the body assigns that exist
    before the loop; the condition is traced once on them (``cond_body``) and re-evaluated by
    codegen before each iteration."""

    if stmt.orelse:
        raise DeviceCodeError("while/else in device code", hint="move the else part after the loop")
    tracer = interp.tracer
    node = tracer.emit(Op.WHILE, [], (), torch.int32)
    node.body, node.attrs["cond_body"], node.attrs["carried"] = [], [], []
    names = [
        n
        for n in assigned_names(stmt.body)
        if isinstance(interp.env.get(n), (TileValue, int, float))
    ]
    created = [n for n in assigned_names(stmt.body) if n not in interp.env]
    carries: dict[str, Node] = {}
    for name in names:
        init = tracer.value_node(interp.env[name])
        carry = Node(Op.CARRY, [init], init.shape, init.dtype, {"name": name}, tracer.loc)
        carry.hint = name
        node.attrs["carried"].append(carry)
        carries[name] = carry
        interp.env[name] = tracer.wrap(carry)
    tracer.blocks.append(node.attrs["cond_body"])
    try:
        test = interp.eval(stmt.test)
        if not isinstance(test, TileValue):
            raise DeviceCodeError(
                "`while` on a compile-time condition in device code",
                hint="loop with tc.static_range(n) (unrolled) or a tile loop; a `while` condition "
                "must read values the loop changes or loaded data",
            )
        cond = tracer.value_node(test)
        if cond.ndim != 0:
            raise DeviceCodeError("`while` needs one scalar condition, got a tile")
        _check_condition(cond, "while")
        node.attrs["cond"] = tracer.cast(cond, torch.bool)
    finally:
        tracer.blocks.pop()
    tracer.blocks.append(node.body)
    try:
        interp.run(stmt.body)
    finally:
        tracer.blocks.pop()
    for name, carry in carries.items():
        value = interp.env[name]
        carry.attrs["next"] = _fit(
            tracer,
            name,
            carry,
            tracer.value_node(value),
            "a `while` loop",
            weak=isinstance(value, (int, float)),
        )
        interp.env[name] = tracer.wrap(carry)
    for name in created:
        interp.env.pop(name, None)

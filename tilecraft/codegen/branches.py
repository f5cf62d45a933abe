"""``if`` and ``while`` on data in Triton (stage: codegen; in: ``IF`` / ``WHILE`` nodes; out: a
Python ``if`` / ``else`` or ``while`` in the kernel, which Triton compiles to ``scf.if`` /
``scf.while``).

Each carried value gets one variable, assigned its value from before the statement and then
reassigned at the end of each branch that changes it: Triton needs a variable that an ``if``
changes to exist before it, with the same type in every branch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.emitter import Emitter


def emit_if(em: Emitter, node: Node) -> None:
    carried: list[Node] = node.attrs["carried"]
    cond = em.expr(node.inputs[0])
    names = _carry_vars(em, carried)
    for carry in carried:  # inside the branches a carried name still means its value before
        del em.scopes[-1][carry.id]
    em.w.src_comment(node.loc)
    for header, body, key in (
        (f"if {cond}:", node.body or [], "then"),
        ("else:", node.attrs["orelse"], "else"),
    ):
        em.w.line(header)
        with em.w.indented():
            em.scopes.append({})
            em.emit_block(body)
            for carry, name in zip(carried, names, strict=True):
                value = carry.attrs[key]
                if value is not carry.inputs[0]:
                    em.w.line(f"{name} = {em.expr(value)}")
            em.w.line("pass")  # a branch may have nothing else
            em.scopes.pop()
    for carry, name in zip(carried, names, strict=True):
        em.scopes[-1][carry.id] = name
    em.scopes[-1][node.id] = "None"  # emitted (an IF has no value of its own)


def _carry_vars(em: Emitter, carried: list[Node]) -> list[str]:
    """One variable per carried value, assigned its value from before the statement."""
    names = []
    for carry in carried:
        init = carry.inputs[0]
        text = em.expr(init)
        if init.ndim == 0 and init.op in (Op.CONST, Op.ARG):  # a typed scalar, not a literal
            text = f"tl.full([], {text}, {dtypes.triton_dtype(carry.dtype)})"
        name = em.w.fresh(carry.hint)
        em.w.line(f"{name} = {text}")
        em.scopes[-1][carry.id] = name
        names.append(name)
    return names


def _condition(em: Emitter, node: Node, flag: str) -> None:
    """``flag = <the loop's condition on the current carried values>`` (its temporaries in a
    scope of their own: they are recomputed for every test)."""
    em.scopes.append({})
    em.emit_block(node.attrs["cond_body"])
    em.w.line(f"{flag} = {em.expr(node.attrs['cond'])}")
    em.scopes.pop()


def emit_while(em: Emitter, node: Node) -> None:
    """``while`` on a flag recomputed at the end of each iteration: Triton's ``scf.while``
    carries the flag and every variable the body reassigns."""
    carried: list[Node] = node.attrs["carried"]
    names = _carry_vars(em, carried)
    em.w.src_comment(node.loc)
    flag = em.w.fresh("go")
    _condition(em, node, flag)
    em.w.line(f"while {flag}:")
    with em.w.indented():
        em.scopes.append({})
        em.emit_block(node.body or [])
        updates = [(n, em.expr(c.attrs["next"])) for c, n in zip(carried, names, strict=True)]
        for name, text in updates:
            if text != name:
                em.w.line(f"{name} = {text}")
        em.scopes.pop()
        _condition(em, node, flag)
    em.scopes[-1][node.id] = "None"  # emitted (a WHILE has no value of its own)

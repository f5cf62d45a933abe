"""``if`` and ``while`` on data in Triton (stage: codegen; in: ``IF`` / ``WHILE`` nodes; out: a
Python ``if`` / ``else`` or ``while`` in the kernel, which Triton compiles to ``scf.if`` /
``scf.while``).

Each carried value gets one variable, assigned its value from before the statement and then
reassigned at the end of each branch that changes it: Triton needs a variable that an ``if``
changes to exist before it, with the same type in every branch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.codegen.loops import init_carried
from tilecraft.codegen.registry import emits
from tilecraft.codegen.schedule import emit_block
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


@emits(Op.IF)
def emit_if(em: EmitContext, node: Node) -> None:
    carried: list[Node] = node.attrs["carried"]
    cond = em.expr(node.inputs[0])
    init_carried(em, node)
    names = [em.scopes[-1].pop(c.id) for c in carried]  # in the branches: the value before
    em.w.src_comment(node.loc)
    for header, body, key in (
        (f"if {cond}:", node.body or [], "then"),
        ("else:", node.attrs["orelse"], "else"),
    ):
        em.w.line(header)
        with em.w.indented():
            em.scopes.append({})
            emit_block(em, body)
            for carry, name in zip(carried, names, strict=True):
                value = carry.attrs[key]
                if value is not carry.inputs[0]:
                    em.w.line(f"{name} = {_typed(em, value, carry)}")
            em.w.line("pass")  # a branch may have nothing else
            em.scopes.pop()
    for carry, name in zip(carried, names, strict=True):
        em.scopes[-1][carry.id] = name
    em.scopes[-1][node.id] = "None"  # emitted (an IF has no value of its own)


def _typed(em: EmitContext, value: Node, carry: Node) -> str:
    """A branch's value of ``carry`` as Triton text of the carried type: a constant or scalar
    argument would be a Python number, which Triton makes an int32 / fp32 and then refuses
    against an int64 / fp16 variable from before the ``if``."""
    text = em.expr(value)
    if value.op in (Op.CONST, Op.ARG) and value.ndim == 0:
        text = em.full_expr("", text, carry.dtype)
    return text


def _condition(em: EmitContext, node: Node, flag: str) -> None:
    """``flag = <the loop's condition on the current carried values>`` (its temporaries in a
    scope of their own: they are recomputed for every test)."""
    em.scopes.append({})
    emit_block(em, node.attrs["cond_body"])
    em.w.line(f"{flag} = {em.expr(node.attrs['cond'])}")
    em.scopes.pop()


@emits(Op.WHILE)
def emit_while(em: EmitContext, node: Node) -> None:
    """``while`` on a flag recomputed at the end of each iteration: Triton's ``scf.while``
    carries the flag and every variable the body reassigns."""
    carried: list[Node] = node.attrs["carried"]
    init_carried(em, node)
    names = [em.scopes[-1][c.id] for c in carried]
    em.w.src_comment(node.loc)
    flag = em.w.fresh("go")
    _condition(em, node, flag)
    em.w.line(f"while {flag}:")
    with em.w.indented():
        em.scopes.append({})
        emit_block(em, node.body or [])
        updates = [(n, em.expr(c.attrs["next"])) for c, n in zip(carried, names, strict=True)]
        for name, text in updates:
            if text != name:
                em.w.line(f"{name} = {text}")
        em.scopes.pop()
        _condition(em, node, flag)
    em.scopes[-1][node.id] = "None"  # emitted (a WHILE has no value of its own)

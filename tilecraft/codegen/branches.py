"""``if`` on data in Triton (stage: codegen; in: an ``IF`` node; out: a Python ``if`` / ``else``
in the kernel, which Triton compiles to ``scf.if``).

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
    names = []
    for carry in carried:
        init = carry.inputs[0]
        text = em.expr(init)
        if init.ndim == 0 and init.op in (Op.CONST, Op.ARG):  # a typed scalar, not a literal
            text = f"tl.full([], {text}, {dtypes.triton_dtype(carry.dtype)})"
        name = em.w.fresh(carry.hint)
        em.w.line(f"{name} = {text}")
        names.append(name)
    cond = em.expr(node.inputs[0])
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

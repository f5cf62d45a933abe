"""Views of tiles in Triton (stage: codegen; in: a ``VIEW`` node; out: one Triton expression).

See :mod:`tilecraft.frontend.views` for the kinds of view. A permutation of two dims is
``tl.trans``, of more ``tl.permute``; ``expand`` is ``tl.broadcast_to``; ``join`` / ``split`` are
``tl.join`` / ``tl.split``; the rest index with ``None`` or reshape away size-1 dims.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node

if TYPE_CHECKING:
    from tilecraft.codegen.emitter import Emitter


def emit_view(em: Emitter, node: Node) -> None:
    src = node.inputs[0]
    text = em.expr(src)
    dims = ", ".join(em.dim_expr(d) for d in node.shape)
    perm = node.attrs.get("perm")
    if perm:
        em.bind(node, f"tl.trans({text})" if len(perm) == 2 else f"tl.permute({text}, {perm})")
        return
    if node.attrs.get("expand"):
        em.bind(node, f"tl.broadcast_to({text}, [{dims}])")
        return
    if node.attrs.get("join"):
        em.bind(node, f"tl.join({text}, {em.expr(node.inputs[1])})")
        return
    if "split" in node.attrs:
        em.bind(node, f"tl.split({text})[{node.attrs['split']}]")
        return
    spec = node.attrs["spec"]
    if src.ndim == 0:
        em.bind(node, f"tl.full([{dims}], {text}, {dtypes.triton_dtype(node.dtype)})")
    elif 0 in spec:
        em.bind(node, f"tl.reshape({text}, [{dims}])")
    elif all(s == ":" for s in spec):
        em.scopes[-1][node.id] = text if text.isidentifier() else em.bind(node, text)
    else:
        em.bind(node, f"{text}[{', '.join(':' if s == ':' else 'None' for s in spec)}]")

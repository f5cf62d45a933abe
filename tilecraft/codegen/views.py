"""Views of tiles in Triton (stage: codegen; in: a ``VIEW`` node; out: one Triton expression).

See :mod:`tilecraft.frontend.views` for the kinds of view. A permutation of two dims is
``tl.trans``, of more ``tl.permute``; ``expand`` is ``tl.broadcast_to``; ``join`` / ``split`` are
``tl.join`` / ``tl.split``; the rest index with ``None`` or reshape away size-1 dims.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.codegen.gather_memory import emit_through_memory
from tilecraft.codegen.registry import emits
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


@emits(Op.VIEW)
def emit_view(ctx: EmitContext, node: Node) -> None:
    src = node.inputs[0]
    text = ctx.expr(src)
    dims = ctx.shape_expr(node.shape)
    perm = node.attrs.get("perm")
    if perm:
        ctx.bind(node, f"tl.trans({text})" if len(perm) == 2 else f"tl.permute({text}, {perm})")
        return
    if node.attrs.get("expand"):
        if src.ndim == 0 and src.op is Op.CONST:  # a Python number has no type to broadcast
            text = ctx.full_expr(dims, text, node.dtype)
        else:
            text = f"tl.broadcast_to({text}, [{dims}])"
        ctx.bind(node, text)
        return
    if node.attrs.get("join"):
        ctx.bind(node, f"tl.join({text}, {ctx.expr(node.inputs[1])})")
        return
    if node.attrs.get("reshape"):  # merged / split whole dims (frontend/regroup.py)
        ctx.bind(node, f"tl.reshape({text}, [{dims}])")
        return
    if "split" in node.attrs:
        ctx.bind(node, f"tl.split({text})[{node.attrs['split']}]")
        return
    spec = node.attrs["spec"]
    if src.ndim == 0:
        ctx.bind(node, ctx.full_expr(dims, text, node.dtype))
    elif 0 in spec:
        ctx.bind(node, f"tl.reshape({text}, [{dims}])")
    elif all(s == ":" for s in spec):
        ctx.scopes[-1][node.id] = text if text.isidentifier() else ctx.bind(node, text)
    else:
        ctx.bind(node, f"{text}[{', '.join(':' if s == ':' else 'None' for s in spec)}]")


@emits(Op.GATHER)
def emit_gather(ctx: EmitContext, node: Node) -> None:
    """``torch.gather`` of a tile (frontend/tile_gather.py): a register gather, ``tl.gather``
    (warp shuffles within a warp, shared memory across warps), or along a long line of a
    computed tile a round trip through a scratch row (``gather_memory.py``)."""
    src, index = node.inputs
    if node.attrs.get("flip"):  # a flip along a whole power-of-two dim (frontend/tile_gather)
        ctx.bind(node, f"tl.flip({ctx.expr(src)}, {node.attrs['axis']})")
        return
    rows = ctx.homes.gathers.get(node.id)
    if rows is not None and ctx.split is None:  # a long line of a computed tile
        emit_through_memory(ctx, node, rows)
        return
    ctx.bind(node, f"tl.gather({ctx.expr(src)}, {ctx.expr(index)}, {node.attrs['axis']})")

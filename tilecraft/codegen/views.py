"""Views of tiles in Triton (stage: codegen; in: a ``VIEW`` node; out: one Triton expression).

See :mod:`tilecraft.frontend.views` for the kinds of view. A permutation of two dims is
``tl.trans``, of more ``tl.permute``; ``expand`` is ``tl.broadcast_to``; ``join`` / ``split`` are
``tl.join`` / ``tl.split``; the rest index with ``None`` or reshape away size-1 dims.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from tilecraft.codegen.gather_memory import emit_through_memory
from tilecraft.codegen.registry import emits
from tilecraft.ir import dtypes
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
    axis = node.attrs["axis"]
    if node.attrs.get("through_memory") and ctx.numel(node.shape[axis : axis + 1]) > ctx.numel(
        src.shape[axis : axis + 1]
    ):
        _emit_one_hot(ctx, node)  # a widening gather without a scratch row (see below)
        return
    ctx.bind(node, f"tl.gather({ctx.expr(src)}, {ctx.expr(index)}, {axis})")


def _emit_one_hot(ctx: EmitContext, node: Node) -> None:
    """A gather into more lanes than its source's, where no scratch row exists (a run-time
    grid, a split loop): each position compares with every source lane and keeps the one it
    names (a sum over the source's lanes with -0.0 elsewhere: exact, signs of zeros too).
    Triton 3.6 fails to compile such a ``tl.gather`` (TritonGPUOptimizeThreadLocality, sm_90
    and gfx942)."""
    src, index = node.inputs
    axis, rank = node.attrs["axis"], node.ndim
    lanes = ctx.dim_expr(src.shape[axis])

    def placed(text: str, at: int) -> str:  # a new dim of size 1 at ``at`` of rank + 1
        spec = [":"] * rank
        spec.insert(at, "None")
        return f"{text}[{', '.join(spec)}]"

    spec = ["None"] * (rank + 1)
    spec[axis + 1] = ":"
    positions = f"tl.arange(0, {lanes})[{', '.join(spec)}]"
    value = ctx.expr(src)
    boolean = node.dtype == torch.bool
    if boolean:
        value = f"({value}).to(tl.int8)"
    zero = "-0.0" if node.dtype.is_floating_point else "0"
    hit = f"{placed(ctx.expr(index), axis + 1)} == {positions}"
    picked = f"tl.sum(tl.where({hit}, {placed(value, axis)}, {zero}), {axis + 1})"
    dtype = "tl.int8" if boolean else dtypes.triton_dtype(node.dtype)
    picked = f"({picked}).to({dtype})"
    ctx.w.line("# a gather into more lanes than its source's: a one-hot select (codegen/views.py)")
    ctx.bind(node, f"({picked} != 0)" if boolean else picked)

"""Paired stride-2 slices as one contiguous access (stage: codegen; in: a LOAD/STORE node the plan
pairs, ``Plan.slice_pairs`` from ``ir/paired_slices.py``; out: the span's index and mask, the two
halves of a loaded span, the joined value of a stored one).

``x[t, a::2]`` and ``x[t, a+1::2]`` of length ``L`` (block ``B``) together cover ``x[t, a:a+2L]``:
the span's index is ``a + 2 * offset + tl.arange(0, 2B)`` (unit stride, so Triton vectorizes it),
masked at ``2L`` where ``L`` does not fill the block. Element ``2i`` of the span is the even
slice's element ``i`` and ``2i + 1`` the odd one's, so ``tl.reshape(span, [..., B, 2])`` +
``tl.split`` gives both halves and ``tl.join`` + ``tl.reshape`` interleaves them back. The pointer
text and the load/store lines themselves stay in ``memory.py``.

A lone stride-2 load (``x[t, 1::2]``, ``x[t, 2 * tj.index]``: no access reads the elements
between) loads the same span and keeps the even half: the same DRAM sectors as the stride-2
access (each 32-byte sector holds elements of both halves), in a quarter as many 16-byte vector
loads as bf16 scalar loads. Its span is masked at the tensor's end too, where the last element's
partner may lie past it.

An element pair (``x2[t, 0]`` and ``x2[t, 1]`` of a size-2 contiguous dim) is the same walk
with the two elements as a trailing dim of the access: its index there is ``tl.arange(0, 2)``,
``tl.split`` gives both values and ``tl.join`` interleaves them, with no reshape. A merged one
(``x2[t, tp, 0]``, the tile ``tp`` over a dim of stride 2) is a slice pair's span on the tile's
item, and its int item adds nothing; a merged group of 4 or 8 spans ``G B`` elements, split from
(joined to) ``[..., B, G]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Sym
from tilecraft.ir.paired_slices import SlicePair

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


class Span(NamedTuple):
    """What replaces a pair's index item in ``memory.access``."""

    item: int  # position of the replaced index item
    text: str  # its index text
    mask: str | None  # its mask text
    trailing: bool = False  # an element pair's: the index runs along a trailing dim of 2
    absorbed: int | None = None  # a merged pair's int item, spanned by ``item``


def _node(ctx: EmitContext, slot: int) -> Node:
    return next(n for n in ctx.loop.walk() if n.attrs.get("mem_slot") == slot)


def span(ctx: EmitContext, pair: SlicePair) -> Span:
    """The contiguous index (and mask) replacing the sliced item of both accesses (an element
    pair's: the index of its trailing dim of 2, which ``memory.access`` places last)."""
    if pair.kind == "element":
        return Span(pair.item, f"tl.arange(0, {len(pair.slots)})", None, trailing=True)
    even = _node(ctx, pair.even)
    item = even.attrs["index"][pair.item]
    sym, start = item[1], item[3] if item[0] == "rslice" else 0
    st = ctx.state(sym)
    width = _span_width(ctx, even, pair)
    base = "" if st.offset == "0" else f"{pair.width} * {ctx.index_cast(st.offset)} + "
    index = ctx.w.fresh(f"span_{sym.index}")
    ctx.w.line(f"{index} = {base}tl.arange(0, {width})")
    bounds = []
    if st.mask:  # the slice does not fill its block: the span ends at G L
        g = pair.width
        bounds.append(str(g * int(st.end)) if st.end.isdigit() else f"{g} * {st.end}")
    past = _past_the_end(ctx, even, item) if pair.kind == "lone" else None
    if past is not None and past not in bounds:
        bounds.append(past)
    mask = None
    if bounds:
        mask = ctx.w.fresh(f"span_mask_{sym.index}")
        compares = [f"{index} < {b}" for b in bounds]
        both = " & ".join(f"({c})" for c in compares)
        ctx.w.line(f"{mask} = {compares[0] if len(compares) == 1 else both}")
    text = f"({start} + {index})" if start else index
    return Span(pair.item, text, mask, absorbed=pair.item + 1 if pair.kind == "merged" else None)


def _past_the_end(ctx: EmitContext, node: Node, item: tuple[Any, ...]) -> str | None:
    """A lone slice's span bound where its last element's partner (``start + 2 L - 1``, read
    and dropped) may lie past the tensor: the dim's size less the start; None where it cannot."""
    sym, dim, start = item[1], item[2], item[3]
    size = ctx.size_expr(node.attrs["tensor"], dim)
    if size.isdigit() and isinstance(sym.extent, int) and start + 2 * sym.extent <= int(size):
        return None
    return str(int(size) - start) if size.isdigit() else f"{size} - {start}"


def _span_width(ctx: EmitContext, node: Node, pair: SlicePair) -> int:
    sym = node.shape[-1]
    assert isinstance(sym, Sym), node  # ir/paired_slices.py pairs only a slice in the last dim
    return pair.width * ctx.block_value(sym)


def bind_halves(ctx: EmitContext, node: Node, pair: SlicePair, load: str) -> None:
    """Bind all paired loads to the parts of ``load`` (the span), in the current scope."""
    value = ctx.w.fresh("span")
    ctx.w.line(f"{value} = {load}")
    nodes = [_node(ctx, slot) for slot in pair.slots]
    parts = [ctx.w.fresh(n.hint) for n in nodes]
    dims = [ctx.dim_expr(d) for d in node.shape]
    # an element group's access is [..., G] already; a merged group's [..., G B] splits as
    # [..., B, G // 2, 2] does
    if pair.kind == "element" or (pair.kind == "merged" and len(parts) > 2):
        _split_elements(ctx, value, dims, parts)
    else:  # a pair's span as [..., B, 2]; a lone slice keeps the even half only
        odd = parts[1] if len(parts) == 2 else "_"
        halves = ", ".join([*dims, "2"])
        ctx.w.line(f"{parts[0]}, {odd} = tl.split(tl.reshape({value}, [{halves}]))")
    for n, part in zip(nodes, parts, strict=True):
        ctx.scopes[-1][n.id] = part


def _split_elements(ctx: EmitContext, value: str, dims: list[str], names: list[str]) -> None:
    """Bind ``names`` to the elements of ``value``'s trailing dim, in order: ``tl.split`` of
    ``[..., G // 2, 2]`` gives the even elements and the odd ones, each split again."""
    if len(names) == 2:
        ctx.w.line(f"{names[0]}, {names[1]} = tl.split({value})")
        return
    even, odd = ctx.w.fresh("even"), ctx.w.fresh("odd")
    shape = ", ".join([*dims, str(len(names) // 2), "2"])
    ctx.w.line(f"{even}, {odd} = tl.split(tl.reshape({value}, [{shape}]))")
    _split_elements(ctx, even, dims, names[0::2])
    _split_elements(ctx, odd, dims, names[1::2])


def _joined_elements(values: list[str], dims: list[str], shape: list[str] | None = None) -> str:
    """``values`` as the trailing dim of one value, in order (the inverse of
    :func:`_split_elements`), reshaped to ``shape`` where given."""
    if len(values) == 2:
        joined = f"tl.join({values[0]}, {values[1]})"
        return joined if shape is None else f"tl.reshape({joined}, [{', '.join(shape)}])"
    even, odd = _joined_elements(values[0::2], dims), _joined_elements(values[1::2], dims)
    shape = shape or [*dims, str(len(values))]
    return f"tl.reshape(tl.join({even}, {odd}), [{', '.join(shape)}])"


def joined(ctx: EmitContext, node: Node, pair: SlicePair) -> str:
    """The span to store: all stores' values interleaved (each broadcast to the store's shape)."""
    dims, shape = [ctx.dim_expr(d) for d in node.shape], ctx.shape_expr(node.shape)
    dtype = node.attrs["tensor"].dtype
    values = []
    for slot in pair.slots:
        value = _node(ctx, slot).inputs[0]
        text = ctx.expr(value)
        if value.ndim == 0:  # a constant or scalar: a tile of it (tl.join takes tiles only)
            text = f"(tl.zeros([{shape}], {dtypes.triton_dtype(value.dtype)}) + ({text}))"
        elif tuple(value.shape) != tuple(node.shape):
            text = f"tl.broadcast_to({text}, [{shape}])"
        # tl.join takes one dtype: each value as the tensor holds it (a store would convert)
        values.append(ctx.cast_expr(text, value.dtype, dtype))
    if pair.kind == "element":  # [..., G], the access's trailing dim
        return _joined_elements(values, dims)
    return _joined_elements(values, dims, [*dims[:-1], str(_span_width(ctx, node, pair))])


def is_first_store(pair: SlicePair, node: Node) -> bool:
    """Whether ``node`` is the earlier store of its pair (the later one writes both values)."""
    return bool(node.attrs["mem_slot"] != pair.later)


__all__ = ["Span", "bind_halves", "is_first_store", "joined", "span"]

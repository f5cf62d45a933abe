"""Loads, stores and atomics: pointer offsets and masks from index items (stage: codegen).

An index item is ``("tile", sym, dim)``, ``("rdim", sym, dim)``, ``("rslice", sym, dim, start,
step)`` (a constant slice: element ``i`` at ``start + i * step``), ``("int", k, dim)``, ``("none",)``
or ``("value", input_position, dim)``; each contributes ``index * stride`` to the offset, placed at
its position in the result shape (left to right, or the node's ``positions`` when several
tensor-valued indices broadcast together), and its dims' masks to the access mask.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from tilecraft.codegen import lane_order, paired
from tilecraft.codegen.registry import emits
from tilecraft.codegen.uniform import uniform_quotient
from tilecraft.config.space import descriptor_order
from tilecraft.errors import UnsupportedOpError
from tilecraft.ir import dtypes
from tilecraft.ir.int_ranges import NARROWER_INTS, nonnegative
from tilecraft.ir.nodes import Node, Op, Sym, reads_memory
from tilecraft.ir.tile_affine import static_extent, tile_affine

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext


def _expand(text: str, pos: int, width: int, rank: int) -> str:
    if rank <= width or width == 0:
        return text
    spec = ["None"] * rank
    for i in range(pos, pos + width):
        spec[i] = ":"
    return f"{text}[{', '.join(spec)}]"


def _sliced(index: str, item: tuple[Any, ...]) -> str:
    """Element ``i`` of a constant slice ``start::step`` is at ``start + i * step``."""
    start, step = item[3], item[4]
    scaled = index if step == 1 else f"{index} * {step}"
    return f"({start} + {scaled})" if start else f"({scaled})"


def _inside(index: str, size: str) -> str | None:
    """``0 <= index < size`` (two compares: in the interpreter a loop's offset is a Python int,
    which has no bitcast to an unsigned type); None for a literal in range."""
    if index.lstrip("-").isdigit():
        return None if size.isdigit() and 0 <= int(index) < int(size) else "False"
    return f"(({index}) >= 0) & (({index}) < {size})"


def _data_bounds(sym: Any) -> bool:
    """Whether a tile loop's bounds are read from memory (``tc.tile(offsets[s], offsets[s +
    1])``): no launch check covers data, so its accesses check the tensor's extent. Bounds
    computed from tile positions (a causal loop's ``tc.tile(0, tm.end)``) are not checked."""
    return isinstance(sym, Sym) and any(
        isinstance(b, Node) and reads_memory(b) for b in (sym.begin, sym.extent)
    )


def _bounds_end_tile(index: Node, size: str) -> bool:
    """Whether the bounds check of ``index``, ``a * t.index + c``, leaves out every lane past
    the tile loop's end (``a * end + c >= size``): the tile's own mask is then implied, and
    dropping it lets Triton prove the check constant over a vector. (A transposed conv's
    ``x[tb, tch, tj.index]`` with tj over L + 1 output pairs and x of length L: the mask ``j <
    L + 1`` beside ``j < L`` made every load a 2-byte scalar.)"""
    affine = tile_affine(index)
    if affine is None or not size.isdigit():
        return False
    sym, scale, shift = affine
    end = static_extent(sym)
    return end is not None and scale * end + shift >= int(size)


class IndexPlace(NamedTuple):
    """Where one index item of an access lands in its tile: its number, the item, the first
    tile dim it spans and how many (an int item spans none), and its value node if it is a
    tensor-valued index."""

    k: int
    item: tuple[Any, ...]
    pos: int
    width: int
    value: Node | None


def index_places(node: Node, value_inputs: list[Node]) -> list[IndexPlace]:
    """Each index item of a LOAD/STORE/ATOMIC but ``None`` (a size-1 dim only) with its place
    in the tile, as :func:`access` builds the pointer."""
    places: list[IndexPlace] = []
    pos = 0
    positions = node.attrs.get("positions")  # set when advanced indices broadcast together
    for k, item in enumerate(node.attrs["index"]):
        if positions is not None:
            pos = positions[k]
        kind = item[0]
        if kind == "none":
            pos += 1
            continue
        value = value_inputs[item[1]] if kind == "value" else None
        if kind == "int":
            width = 0
        elif value is None:
            width = 0 if item[1].scalar else 1
        else:
            width = value.ndim
        places.append(IndexPlace(k, item, pos, width, value))
        pos += width
    return places


def access(
    ctx: EmitContext,
    node: Node,
    value_inputs: list[Node],
    span: paired.Span | None = None,
    uniform: dict[int, str] | None = None,
) -> tuple[str, str | None]:
    """(pointer expression, mask expression or None) for a LOAD/STORE/ATOMIC node; ``span``
    replaces one sliced item's index and mask (a paired slice's contiguous span), or an element
    pair's int item (its index then runs along a trailing dim of 2); ``uniform`` maps index
    items to the one scalar every lane's index value equals (``codegen/uniform.py``)."""
    tensor = node.attrs["tensor"]
    rank = node.ndim
    # an element pair's int item becomes a trailing dim of 2, after the value's own dims
    element = span is not None and span.trailing
    rank += element
    param = tensor.name
    ctx.tensors[param] = tensor
    terms: list[str] = []
    masks: list[str] = []
    places = index_places(node, value_inputs)
    for k, item, pos, width, vnode in places:
        kind = item[0]
        stride = ctx.stride_expr(tensor, item[2])
        widened = False
        if kind == "int":
            if element and span is not None and span.item == k:
                idx = _expand(span.text, rank - 1, 1, rank)
                terms.append(_term(ctx, idx, stride))
            elif item[1] and not (span is not None and span.absorbed == k):
                literal = stride.isdigit()
                terms.append(str(item[1] * int(stride)) if literal else _term(ctx, item[1], stride))
            continue
        if vnode is None:  # a tile, whole dim or slice
            sym = item[1]
            st = ctx.state(sym)
            idx = _expand(
                _sliced(st.index, item) if kind == "rslice" else st.index, pos, width, rank
            )
            mask = st.mask if width == 0 else ctx.mask_at(sym, pos, rank)
            if _data_bounds(sym) and (inside := _inside(idx, ctx.size_expr(tensor, item[2]))):
                masks.append(inside)  # bounds read from data (CSR offsets) may leave the tensor
            if span is not None and span.item == k:
                idx, mask = (
                    _expand(span.text, pos, 1, rank),
                    span.mask and _expand(span.mask, pos, 1, rank),
                )
                if span.absorbed is not None:  # a merged pair's span steps by the pair's dim
                    stride = ctx.stride_expr(tensor, node.attrs["index"][span.absorbed][2])
        elif uniform and k in uniform:  # one scalar for all lanes: the dim stays size 1
            idx, mask = uniform[k], None
            widened = ctx.int64  # (uniform_quotient widens it)
            inside = _inside(idx, ctx.size_expr(tensor, item[2]))
            if inside and inside not in masks:
                masks.append(inside)
        else:
            text = _offset_index(ctx, vnode)  # (int64 already in int64 offsets)
            widened = ctx.int64
            size = ctx.size_expr(tensor, item[2])
            if vnode.ndim == 0 and not nonnegative(vnode):  # x[r - 1, :]: Python's wrap
                text = f"tl.where({text} < 0, {text} + {size}, {text})"
            idx = _expand(text, pos, width, rank)
            # a computed index outside the tensor reads 0 and is not written (never an illegal
            # address that would end the caller's CUDA context; ref mode reports it)
            inside = _inside(text, size)
            mask = None if inside and _bounds_end_tile(vnode, size) else ctx.value_mask(vnode.shape)
            if mask and width:
                mask = _expand(f"({mask})", pos, width, rank)
            if inside and width:
                inside = _expand(f"({inside})", pos, width, rank)
            if inside and inside not in masks:  # apart from the dims' masks, which dedupe
                masks.append(inside)
        terms.append(_term(ctx, idx, stride, widened))
        if mask and mask not in masks:
            masks.append(mask)
    if (extra := node.attrs.get("extra_mask")) is not None:  # hl.load/store(extra_mask=...)
        masks.append(ctx.mask_expr(node.inputs[extra]))
    offset = " + ".join(terms) if terms else "0"
    if rank and not any(p.width for p in places):
        # every dim a size-1 one (scalar indices, kept unit dims): a [1, .., 1] access
        offset = f"({offset}) + tl.zeros([{', '.join(['1'] * rank)}], tl.int32)"
    return f"{param} + ({offset})", " & ".join(masks) if masks else None


def _term(ctx: EmitContext, index: Any, stride: str, widened: bool = False) -> str:
    """``index * stride``; in int64 offsets the product is int64: a whole dim's ``tl.arange``
    and a constant index are int32 (``x[:, t]`` of a view with a row stride of 2**29 wrapped at
    row 4 and read 2 GB before the tensor: a segfault on CPU, an illegal address on a GPU)."""
    if stride == "1":
        return str(index)
    if ctx.int64 and isinstance(index, int):  # (a Python int has no .to(); the stride has)
        return f"{index} * {ctx.index_cast(stride)}"
    if ctx.int64 and not widened:
        return f"{ctx.index_cast(str(index))} * {stride}"
    return f"{index} * {stride}"


def _offset_index(ctx: EmitContext, value: Node) -> str:
    """A computed index as the offsets take it: in int32 offsets, an int64 widened from a
    narrower integer (``ir/int_ranges.py`` leaves ``cumsum(k) - k`` so) is read before the
    widening; in int64 offsets a narrower index is widened (its product with a stride would
    overflow int32)."""
    if ctx.int64:
        text = ctx.expr(value)
        return text if value.dtype == torch.int64 else ctx.index_cast(text)
    if (
        value.op is Op.CAST
        and value.dtype == torch.int64
        and value.inputs[0].dtype in NARROWER_INTS
    ):
        value = value.inputs[0]
    if value.dtype in _SUB_INT32:
        # Triton keeps a tensor's int8 / int16 type when it is multiplied by a stride: the
        # offset wrapped (a uint8 row id times 64 read row id % 4; int8 ids wrote outside
        # the output)
        return f"({ctx.expr(value)}).to(tl.int32)"
    return ctx.expr(value)


_SUB_INT32 = (torch.int16, torch.int8, torch.uint8, torch.uint16, torch.bool)


def _block_geometry(
    ctx: EmitContext, node: Node
) -> tuple[list[str], list[str], list[str], list[str], list[int]]:
    """(sizes, strides, offsets, block shape, dims needing a bounds check) of a block access."""
    tensor = node.attrs["tensor"]
    sizes, strides, offsets, blocks, checks = [], [], [], [], []
    for item in node.attrs["index"]:
        sym, dim = item[1], item[2]
        st = ctx.state(sym)
        sizes.append(ctx.size_expr(tensor, dim))
        strides.append(ctx.stride_expr(tensor, dim))
        offsets.append(st.offset)
        blocks.append(st.block)
        if st.mask is not None:
            checks.append(dim)
    return sizes, strides, offsets, blocks, checks


def _block_ptr(ctx: EmitContext, node: Node) -> tuple[str, str]:
    tensor = node.attrs["tensor"]
    ctx.tensors[tensor.name] = tensor
    sizes, strides, offsets, blocks, checks = _block_geometry(ctx, node)
    order = ", ".join(str(d) for d in reversed(range(len(sizes))))
    ptr = (
        f"tl.make_block_ptr({tensor.name}, [{', '.join(sizes)}], [{', '.join(strides)}], "
        f"[{', '.join(offsets)}], [{', '.join(blocks)}], [{order}])"
    )
    return ptr, f", boundary_check=({', '.join(map(str, checks))},)" if checks else ""


@dataclasses.dataclass(frozen=True)
class DescriptorAccess:
    """A descriptor access as codegen writes it: the descriptor variable, the block's offsets
    (in the descriptor's dim order), the block shape in the tensor's dim order, that shape
    without the size-1 dims of scalar indices, and the descriptor's dim order (the tensor's
    unit-stride dim last: :func:`~tilecraft.config.space.descriptor_order`)."""

    name: str
    offsets: str
    blocks: list[str]
    kept: list[str]
    order: tuple[int, ...]

    @property
    def permuted(self) -> bool:
        """Whether the descriptor lists the tensor's dims in another order."""
        return self.order != tuple(range(len(self.order)))

    def loaded(self) -> str:
        """The load, permuted back to the tensor's dim order and without scalar dims."""
        value = f"{self.name}.load({self.offsets})"
        if self.permuted:
            back = [self.order.index(d) for d in range(len(self.order))]
            value = f"tl.permute({value}, {tuple(back)})"
        if len(self.kept) < len(self.blocks):
            value = f"{value}.reshape([{', '.join(self.kept)}])"
        return value

    def store(self, value: str) -> str:
        """The store of ``value`` (the tensor's dim order, scalar dims dropped)."""
        if len(self.kept) < len(self.blocks):  # back to the descriptor's blocks (size 1 at scalars)
            value = f"({value}).reshape([{', '.join(self.blocks)}])"
        if self.permuted:
            value = f"tl.permute({value}, {self.order})"
        return f"{self.name}.store({self.offsets}, {value})"


def _descriptor(ctx: EmitContext, node: Node) -> DescriptorAccess:
    """The descriptor of a block access, created once at the kernel's top. The plan's
    ``merged_dims`` leading scalar dims fold into the next dim instead (a 2-D descriptor over
    ``[batch * seq, d]``: row ``b * seq + offset``); a tensor whose unit-stride dim is not its
    last gets a descriptor over its dims in storage order."""
    tensor = node.attrs["tensor"]
    ctx.tensors[tensor.name] = tensor
    sizes, strides, offsets, blocks, _ = _block_geometry(ctx, node)
    index = node.attrs["index"]
    merged = ctx.plan.access(node.attrs.get("mem_slot", -1)).merged_dims
    if merged:
        rows = " + ".join(
            f"{offsets[i]} * {tensor.stride[i] // tensor.stride[merged]}" for i in range(merged)
        )
        sizes = [str(math.prod(tensor.shape[: merged + 1])), *sizes[merged + 1 :]]
        strides, blocks = strides[merged:], blocks[merged:]
        offsets = [f"{rows} + {offsets[merged]}", *offsets[merged + 1 :]]
        index = index[merged:]
    order = descriptor_order(tensor) if not merged else None
    order = order or tuple(range(len(blocks)))
    make = (
        f"tl.make_tensor_descriptor({tensor.name}, [{', '.join(sizes[d] for d in order)}], "
        f"[{', '.join(strides[d] for d in order)}], [{', '.join(blocks[d] for d in order)}])"
    )
    key = (*blocks, f"merged{merged}", f"order{order}")
    kept = [b for b, item in zip(blocks, index, strict=True) if not _scalar(item)]
    name = ctx.descriptor(tensor.name, key, make)
    return DescriptorAccess(name, f"[{', '.join(offsets[d] for d in order)}]", blocks, kept, order)


def _scalar(item: tuple[Any, ...]) -> bool:
    return item[0] == "tile" and item[1].scalar


def _eviction(ctx: EmitContext, node: Node) -> str:
    policy = ctx.plan.access(node.attrs.get("mem_slot", -1)).eviction
    return f", eviction_policy='evict_{policy}'" if policy else ""


def _indexing(ctx: EmitContext, node: Node) -> str:
    """The plan's indexing for this access (a fallback to pointers is noted in the code)."""
    access = ctx.plan.access(node.attrs.get("mem_slot", -1))
    if access.fallback_reason:
        ctx.w.line(f"# pointer indexing: {access.fallback_reason}")
    return access.indexing


@emits(Op.LOAD)
def emit_load(ctx: EmitContext, node: Node) -> None:
    if node.id in ctx.loads_after_stores:  # other threads' stores first (ir/read_after_write)
        ctx.w.line("tl.debug_barrier()")
    mode = _indexing(ctx, node)
    if mode == "tensor_descriptor":
        ctx.bind(node, _descriptor(ctx, node).loaded())
        return
    if mode == "block_ptr":
        ptr, check = _block_ptr(ctx, node)
        pad = ", padding_option='zero'" if check else ""
        load = f"tl.load({ptr}{check}{pad}{_eviction(ctx, node)})"
        # a block pointer to bool holds int8: back to bool (``~x`` of an int8 flips every bit)
        ctx.bind(node, f"({load} != 0)" if node.dtype == torch.bool else load)
        return
    pair = ctx.plan.slice_pair(node.attrs.get("mem_slot", -1))
    shared = {} if pair is not None else _uniform_items(ctx, node)
    span = paired.span(ctx, pair) if pair else None
    ptr, mask = access(ctx, node, node.inputs, span, shared)
    # a gather along the contiguous dim, or a tile continuing a short whole row: its lanes
    # laid along it (codegen/lane_order.py)
    first = (
        None
        if pair or shared
        else lane_order.lane_first_dim(ctx, node, index_places(node, node.inputs))
    )
    if first is not None:
        ptr = lane_order.permuted(ctx, node, ptr, first)
        mask = mask and lane_order.permuted(ctx, node, mask, first)
    # a float zero for fp8: Triton's interpreter cannot cast an int other= to fp8
    other = "0.0" if node.dtype in dtypes.FP8 else "0"
    args = f"{ptr}, {mask}, other={other}" if mask else ptr
    load = f"tl.load({args}{_eviction(ctx, node)})"
    if first is not None:
        ctx.bind(node, lane_order.restored(node, load, first))
    elif pair is not None:  # one load of both slices' span binds both nodes
        paired.bind_halves(ctx, node, pair, load)
    elif shared:  # the rows every lane shares, loaded once and broadcast to the value's shape
        dims = ctx.shape_expr(node.shape)
        ctx.bind(node, f"tl.broadcast_to({load}, [{dims}])")
    else:
        ctx.bind(node, load)


def _uniform_items(ctx: EmitContext, node: Node) -> dict[int, str]:
    """The load's tensor-valued index items whose value is one scalar for every lane."""
    if node.attrs.get("positions") is not None or not node.shape:
        return {}
    out: dict[int, str] = {}
    for k, item in enumerate(node.attrs["index"]):
        if item[0] == "value" and (text := uniform_quotient(ctx, node.inputs[item[1]])):
            out[k] = text
    return out


def _block_value(ctx: EmitContext, node: Node, value: Node) -> str:
    """A block store's value as the block it writes, in the tensor's element type: block
    pointers and descriptors neither broadcast a scalar (``out[tm, :] = 3.5``) nor convert
    (an int8 clamp computes in int32; a block pointer to bool holds int8)."""
    text = ctx.expr(value)
    dtype = node.attrs["tensor"].dtype
    tl_dtype = "tl.int8" if dtype == torch.bool else dtypes.triton_dtype(dtype)
    if tuple(value.shape) != tuple(node.shape):
        dims = ctx.shape_expr(node.shape)
        return f"(tl.zeros([{dims}], {tl_dtype}) + ({text})).to({tl_dtype})"
    # Triton computes narrow integers in int32 whatever the IR's dtype says
    narrow_int = not dtype.is_floating_point and dtype.itemsize < 4
    return f"({text}).to({tl_dtype})" if narrow_int or value.dtype != dtype else text


@emits(Op.STORE)
def emit_store(ctx: EmitContext, node: Node) -> None:
    value, *index_values = node.inputs
    mode = _indexing(ctx, node)
    if mode == "tensor_descriptor":
        ctx.w.line(_descriptor(ctx, node).store(_block_value(ctx, node, value)))
    elif mode == "block_ptr":
        ptr, check = _block_ptr(ctx, node)
        ctx.w.line(f"tl.store({ptr}, {_block_value(ctx, node, value)}{check})")
    elif (pair := ctx.plan.slice_pair(node.attrs.get("mem_slot", -1))) is not None:
        if not paired.is_first_store(pair, node):  # the later store writes both values
            ptr, mask = access(ctx, node, index_values, paired.span(ctx, pair))
            mask_arg = f", {mask}" if mask else ""
            ctx.w.line(f"tl.store({ptr}, {paired.joined(ctx, node, pair)}{mask_arg})")
    else:
        ptr, mask = access(ctx, node, index_values)
        text = ctx.expr(value)
        # a scatter along the contiguous dim (or a tile continuing a short whole row): its
        # lanes laid along it (codegen/lane_order.py)
        first = lane_order.lane_first_dim(ctx, node, index_places(node, index_values))
        if first is not None:
            ptr = lane_order.permuted(ctx, node, ptr, first)
            scalar = value.dtype if value.ndim == 0 else None
            text = lane_order.permuted(ctx, node, text, first, scalar)
            mask = mask and lane_order.permuted(ctx, node, mask, first)
        mask_arg = f", {mask}" if mask else ""
        ctx.w.line(f"tl.store({ptr}, {text}{mask_arg})")
    ctx.scopes[-1][node.id] = "None"


@emits(Op.ATOMIC)
def emit_atomic(ctx: EmitContext, node: Node) -> None:
    value, *index_values = node.inputs
    if ctx.interpret and node.dtype in (torch.bfloat16, torch.float16):
        raise UnsupportedOpError(
            f"tc.atomic_{node.attrs['kind']} into '{node.attrs['tensor'].name}' "
            f"({node.dtype}): Triton's interpreter (CPU tensors) has no half-precision atomics; "
            "the kernel compiles for GPUs",
            node.loc,
            hint="accumulate into a float32 tensor and cast it after the loop, or run on a GPU",
        )
    ptr, mask = access(ctx, node, index_values)
    if mask and ctx.interpret and node.shape:
        # Triton 3.6's interpreter drops lanes of an atomic whose mask is a broadcast view (a
        # 1-row tile's scatter-add added column 0 only): a fresh array of the full shape
        dims = ctx.shape_expr(node.shape)
        mask = f"(({mask}) & tl.full([{dims}], 1, tl.int1))"
    mask_arg = f", mask={mask}" if mask else ""
    fn = f"tl.atomic_{node.attrs['kind']}"  # add, max, min, xchg, and, or, xor
    sem = node.attrs.get("sem", "relaxed")
    text = ctx.expr(value)
    if (nan := _NAN_BITS.get(node.attrs["kind"], {}).get(node.dtype)) is not None:
        text = _nan_that_wins(ctx, nan, node.dtype, text)
    if ctx.interpret and node.attrs["kind"] == "xchg" and node.dtype.is_floating_point:
        # the interpreter's xchg takes integers alone ('Unsupported data type' for fp32):
        # the same bits through an int view of the tensor, the old value read back as floats
        bits = {torch.float32: "tl.int32", torch.float64: "tl.int64"}[node.dtype]
        ptr = f"({ptr}).to(tl.pointer_type({bits}))"
        old = f"{fn}({ptr}, {text}.to({bits}, bitcast=True){mask_arg}, sem='{sem}')"
        ctx.bind(node, f"{old}.to({dtypes.triton_dtype(node.dtype)}, bitcast=True)")
        return
    ctx.bind(node, f"{fn}({ptr}, {text}{mask_arg}, sem='{sem}')")


# a NaN whose bits win Triton's float atomic max / min, which take the signed integer max / min
# of non-negative values and the unsigned min / max of the others (by sign bit): a positive NaN
# is above every value for max but never the min, a negative one the reverse. torch's
# scatter_reduce amax / amin propagate NaN; a NaN of either sign was dropped by one of them
_NAN_BITS = {
    "max": {torch.float32: ("tl.int32", 0x7FC00000), torch.float64: ("tl.int64", 0x7FF8 << 48)},
    "min": {
        torch.float32: ("tl.int32", -0x400000),
        torch.float64: ("tl.int64", -(0x8 << 48)),
    },
}


def _nan_that_wins(ctx: EmitContext, nan: tuple[str, int], dtype: torch.dtype, text: str) -> str:
    """``text`` with its NaNs replaced by ``nan`` (an int type and the bits, :data:`_NAN_BITS`),
    the NaN the atomic keeps."""
    bits, value = nan
    v = ctx.w.fresh("nan_atomic")
    ctx.w.line(f"{v} = {text}")
    bitcast = f"tl.full([], {value}, {bits}).to({dtypes.triton_dtype(dtype)}, bitcast=True)"
    return f"tl.where({v} != {v}, {bitcast}, {v})"

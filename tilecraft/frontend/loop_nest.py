"""Tile and grid loops in device code (stage: frontend; in: a loop's bounds and block sizes, the
values its body reassigns; out: block syms, ``LOOP`` nodes with their bodies, ``CARRY`` nodes).

A top-level device loop's dims become the kernel's grid (``trace.py`` asks for them here); a
nested ``for tile in tc.tile(...)`` becomes one ``LOOP`` node per dim, whose body the tracer
fills. Values the body reassigns are *carried*: a ``CARRY`` node stands for the value inside the
loop, declared on the outermost loop of the nest, and names its next value after the body, which
must keep the carried value's dtype and shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError, ShapeError, SourceLoc
from tilecraft.frontend import rdims
from tilecraft.frontend.values import HostTensor, TileProxy, TileValue
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op, Sym, SymKind, is_weak, same_range, shape_str
from tilecraft.language.loops import BLOCK_SIZE_HINT, vector_bound_error
from tilecraft.language.tunables import BlockSize, DynamicInt

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer

_NO_DTYPE = torch.int32  # loops have no value; the dtype field is unused


def _single(dim: Any) -> bool:
    """A dim of one element: a literal 1, or a grid index's / block size 1's dim."""
    return dim == 1 or (isinstance(dim, Sym) and dim.scalar)


def block_sym(
    tr: Tracer, extent: Any, begin: Any, block: Any, scalar: bool = False, site: Any = None
) -> Sym:
    """The dim of one tile/grid loop: ``block`` is a literal size, a ``register_block_size``
    slot, or None (a new tunable block size). ``site`` names the source loop (and dim); a loop
    traced again from the same site (a ``tc.static_range`` body unrolled) over the same range
    shares its block size: the user wrote one loop, and sibling copies of it over one range
    can then be fused (``ir/fuse_loops.py``)."""
    # (a 0-d tensor argument is loaded: a count kept on the device)
    extent, begin = (
        tr.value_node(v) if isinstance(v, (TileValue, TileProxy, DynamicInt, HostTensor)) else v
        for v in (extent, begin)
    )
    for bound in (begin, extent):
        if isinstance(bound, Node) and any(not _single(d) for d in bound.shape):
            raise vector_bound_error("grid" if scalar else "tile", tr.loc)
        if isinstance(bound, Node) and not dtypes.is_integer(bound.dtype):
            origin = f"'{bound.attrs['tensor'].name}'" if bound.op is Op.LOAD else "a value"
            raise DeviceCodeError(
                f"a loop's bound read from {origin} is {bound.dtype}: loop bounds count elements",
                tr.loc,
                hint=f"pass {origin} as an int32 or int64 tensor (or convert the bound: "
                ".to(torch.int32))",
            )
    sym = Sym(SymKind.BLOCK, len(tr.syms), extent, begin, scalar=scalar)
    earlier = tr.site_syms.get(site) if site is not None else None
    if site is not None and earlier is None:
        tr.site_syms[site] = sym
    if not scalar and type(block) is int and block == 1:
        sym.scalar = scalar = True  # a tile dim of block size 1 indexes like an int
    if scalar:
        sym.fixed_block = 1
    elif isinstance(block, BlockSize):
        existing = tr.block_slot_syms.get(block.slot)
        sym.config_slot = block.slot
        if existing is None:
            tr.block_slot_syms[block.slot] = sym
    elif block is None and earlier is not None and same_range(earlier, sym):
        sym.config_slot = earlier.config_slot
        tr.config_blocks.add(id(sym))
    elif block is None:
        sym.config_slot = tr.next_block_slot
        tr.next_block_slot += 1
        tr.block_slot_syms[sym.config_slot] = sym
        tr.config_blocks.add(id(sym))
    else:
        value = int(block)
        if value < 1 or value & (value - 1):
            raise DeviceCodeError(
                f"block_size={value} must be a power of two", hint=BLOCK_SIZE_HINT
            )
        sym.fixed_block = value
    tr.syms.append(sym)
    return sym


def grid_bound(tr: Tracer, value: int, which: str, dim: int, varies: bool = False) -> Any:
    """A grid dim's begin/end: baked in, or with dynamic shapes (or bounds a host loop changes
    between launches, ``varies``) a launcher-passed argument."""
    if not (tr.dynamic or varies) or (which == "begin" and value == 0 and not varies):
        return value
    return tr.arg_node(f"_{which}_{dim}", value, ("spec", which, dim))


def bound_inputs(sym: Sym) -> list[Node]:
    """A loop's computed bounds (``sym.begin`` / ``sym.extent`` when they are nodes) as the
    ``LOOP`` node's inputs. ``block_sym`` has already turned traced bounds into nodes, so the
    inputs must be read off the sym: a bound that is only an attribute of the sym would be
    invisible to dead-code elimination and scheduling, and a scalar an ``if`` reassigns
    (``lo = ...; if lo < 0: lo = 0``) would lose the ``IF`` that gives it its value."""
    return [b for b in (sym.begin, sym.extent) if isinstance(b, Node)]


def open_nest(tr: Tracer, syms: list[Sym]) -> list[Node]:
    """One ``LOOP`` per dim, each nested in the previous; nodes traced next go in the innermost."""
    loops: list[Node] = []
    for sym in syms:
        loop = tr.emit(Op.LOOP, bound_inputs(sym), (), _NO_DTYPE, sym=sym)
        loop.body = []
        loop.attrs["carried"] = []
        loops.append(loop)
        tr.blocks.append(loop.body)
    return loops


class WidenCarry(Exception):
    """A loop-carried value started from a Python number took a wider dtype of its kind in the
    loop (a Python int is weakly typed in torch: ``far = 0`` then ``far = torch.argmax(...)``
    is an int64 index): the device loop is traced again with the carry in that dtype."""

    def __init__(self, key: tuple[str, SourceLoc | None], dtype: torch.dtype):
        super().__init__(key, dtype)
        self.key, self.dtype = key, dtype


def carry_in(tr: Tracer, outer: Node, name: str, value: Any) -> Node:
    """The ``CARRY`` node that stands for ``name`` inside the nest whose outermost loop is ``outer``."""
    init = tr.value_node(value)
    weak = type(value) in (int, float) or is_weak(init)
    widened = tr.carry_dtypes.get((name, tr.loc)) if weak else None
    if widened is None and is_weak(init) and init.dtype == torch.float64:
        widened = torch.float32  # a Python float starts at the default dtype, as a literal
    if widened is not None:
        init = tr.value_node(tr.to_dtype(tr.wrap(init), widened))
    carry = Node(Op.CARRY, [init], init.shape, init.dtype, {"name": name}, tr.loc, hint=name)
    carry.attrs["weak"] = weak
    outer.attrs["carried"].append(carry)
    return carry


def carry_out(tr: Tracer, carry: Node, value: Any) -> None:
    """Record ``value`` (after the body) as the carried value's next one."""
    name = carry.attrs["name"]
    new = rdims.conform(tr, tr.value_node(value), carry.shape)
    if carry.attrs.get("weak") and _widens(carry.dtype, new.dtype):
        raise WidenCarry((name, carry.loc), new.dtype)
    if new.dtype != carry.dtype:
        raise DeviceCodeError(
            f"loop-carried '{name}' changes dtype in the loop: {carry.dtype} before, {new.dtype} after",
            carry.loc,
            hint=f"cast the new value back, e.g. {name} = ({name} + ...).to({carry.dtype})",
        )
    if tr.broadcast_shapes(new.shape, carry.shape) != carry.shape or new.ndim > carry.ndim:
        raise ShapeError(
            f"loop-carried '{name}' changes shape in the loop: {shape_str(carry.shape)} before, "
            f"{shape_str(new.shape)} after",
            carry.loc,
            hint=f"start it with the shape it has after the loop: {name} = tc.zeros([...], "
            f"dtype=...) listing its {new.ndim} dim(s), each a tile (the loop variable) or a size"
            if carry.ndim == 0
            else None,
        )
    carry.attrs["next"] = tr.expand_rank(new, carry.ndim)


def _widens(old: torch.dtype, new: torch.dtype) -> bool:
    """Whether ``new`` is a wider dtype of ``old``'s kind (int32 -> int64, fp32 -> fp64)."""
    same_kind = old.is_floating_point == new.is_floating_point and torch.bool not in (old, new)
    return same_kind and new.itemsize > old.itemsize


def close_nest(tr: Tracer, loops: list[Node], carries: list[Node], values: list[Any]) -> None:
    """End the nest: each carried value's next is ``values[i]``; later nodes go after the nest."""
    loops[-1].attrs["carry_updates"] = list(carries)
    for carry, value in zip(carries, values, strict=True):
        carry_out(tr, carry, value)
    for _ in loops:
        tr.blocks.pop()

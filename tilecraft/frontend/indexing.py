"""Host-tensor accesses in device code (stage: frontend; in: a :class:`HostTensor`, the user's
index — tiles, ``:``, constant slices, ints, ``None``, index tiles — and for stores and atomics
the value; out: ``LOAD`` / ``STORE`` / ``ATOMIC`` nodes with their index items).

An index item is what codegen's ``memory.py`` turns into offsets and masks: ``("tile", sym, dim)``,
``("rdim", sym, dim)`` (a whole ``:`` extent, a reduction dim), ``("rslice", ...)``
(:mod:`~tilecraft.frontend.slices`), ``("int", k, dim)``, ``("none",)`` or ``("value",
input_position, dim)``; where advanced indices land is :mod:`~tilecraft.frontend.advanced_index`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError, ShapeError, UnsupportedOpError
from tilecraft.frontend import advanced_index, rdims, strided_tiles, views
from tilecraft.frontend.coverage import check_tile_covers, known_int, tile_covers
from tilecraft.frontend.slices import slice_item
from tilecraft.frontend.values import HostTensor, TileProxy, TileValue
from tilecraft.ir.nodes import Dim, Node, Op, Shape, Sym, SymKind, shape_str, sized_shape_str
from tilecraft.language.memory_ops import atomic_value_error
from tilecraft.language.tunables import DynamicInt

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


@dataclasses.dataclass
class _Items:
    """What resolving an index builds, item by item."""

    resolved: list[Any] = dataclasses.field(default_factory=list)
    inputs: list[Node] = dataclasses.field(default_factory=list)
    shape: list[Dim] = dataclasses.field(default_factory=list)
    used: list[Sym] = dataclasses.field(default_factory=list)  # reduction dims taken so far
    # an access with an extra_mask (tc.load / tc.store): a tile past the tensor's end is read
    # at its positions, bounds-checked as computed indices are (Helion's concatenate masks
    # each input's columns out of a loop over the output's)
    bounded: bool = False


def _whole_dim(tr: Tracer, t: HostTensor, dim: int, out: _Items) -> None:
    """``:`` over a dim: a reduction dim of its extent (a size-1 dim is index 0 kept as a new
    size-1 dim, as ``None`` adds one: every item places its dims in the value)."""
    extent = t.shape[dim]
    if extent == 1:
        out.resolved += [("int", 0, dim), ("none",)]
        out.shape.append(1)
        return
    occurrence = sum(1 for s in out.used if s.extent == extent)
    source = None
    if t.dynamic:
        source = tr.arg_node(f"{t.name}_size_{dim}", extent, ("size", t.name, dim))
    sym = tr.rdim_for(extent, occurrence, source)
    out.used.append(sym)
    out.resolved.append(("rdim", sym, dim))
    out.shape.append(sym)


def _item(tr: Tracer, t: HostTensor, dim: int, item: Any, out: _Items) -> None:
    """Resolve the index ``item`` at tensor dim ``dim`` (``None`` is handled by the caller)."""
    if isinstance(item, TileProxy) and out.bounded and not tile_covers(t.shape, dim, item.sym):
        item = tr.tile_leaf(item.sym, Op.TILE_INDEX)
    if isinstance(item, TileProxy):
        check_tile_covers(t.name, t.shape, dim, item.sym, tr.loc)
        out.resolved.append(("tile", item.sym, dim))
        if not item.sym.scalar:
            out.shape.append(item.sym)
    elif isinstance(item, slice):
        if any(b is not None for b in (item.start, item.stop, item.step)):
            sliced, out_dim = slice_item(tr, t, dim, item, out.used)
            out.resolved.append(sliced)
            if sliced[0] == "int":  # one element: its index, kept as a size-1 dim
                out.resolved.append(("none",))
            out.shape.append(out_dim)
        else:
            _whole_dim(tr, t, dim, out)
    elif isinstance(item, bool):
        raise UnsupportedOpError(f"bool index on '{t.name}'")
    elif isinstance(item, DynamicInt):
        out.resolved.append(("value", len(out.inputs), dim))
        out.inputs.append(tr.value_node(item))
    elif isinstance(item, int):
        if not -t.shape[dim] <= item < t.shape[dim]:
            raise ShapeError(
                f"index {item} is out of bounds for dim {dim} of '{t.name}' {list(t.shape)}"
            )
        out.resolved.append(("int", item % t.shape[dim], dim))
    elif isinstance(item, TileValue) and (sym := _scalar_tile_begin(item.node, t.shape[dim])):
        out.resolved.append(("tile", sym, dim))  # ``x[te.begin]`` of a one-wide tile: ``x[te]``
    elif isinstance(item, TileValue):
        node = item.node
        _check_index_dtype(tr, t, node)
        out.resolved.append(("value", len(out.inputs), dim))
        out.inputs.append(node)
        out.shape.extend(node.shape)
    else:
        raise UnsupportedOpError(f"index of type {type(item).__name__} on '{t.name}'")


def _check_index_dtype(tr: Tracer, t: HostTensor, node: Node) -> None:
    """A tensor-valued index holds positions: a float one is refused, and a bool one too (torch
    reads it as a mask that selects a data-dependent number of elements; taken as positions it
    gathered rows 0 and 1)."""
    origin = f"'{node.attrs['tensor'].name}'" if node.op is Op.LOAD else "a tile"
    if node.dtype == torch.bool:
        raise DeviceCodeError(
            f"indexing '{t.name}' with {origin}, a bool tile: torch takes a bool index as a "
            "mask, which selects a data-dependent number of elements",
            tr.loc,
            hint="index with positions (an int tile), or keep the shape and select with "
            "torch.where(mask, value, other)",
        )
    if node.dtype.is_floating_point or node.dtype.is_complex:
        raise DeviceCodeError(
            f"indexing '{t.name}' with {origin}, a {node.dtype} tile: an index holds positions",
            tr.loc,
            hint=f"pass {origin} as an int32 or int64 tensor (or convert it: .long())",
        )


def _scalar_tile_begin(node: Node, size: int) -> Sym | None:
    """The tile whose ``.begin`` ``node`` is, when that tile is one element wide (its index is
    its begin) and covers a dim of ``size``: indexing with it is indexing with the tile, which
    block pointers and tensor descriptors can take (an expert's weight ``w[te.begin, tk, tn]``
    in a grouped GEMM loads by TMA, as ``w[te, tk, tn]`` does). None otherwise."""
    sym = node.attrs.get("sym") if node.op is Op.TILE_BEGIN else None
    if not isinstance(sym, Sym) or not sym.scalar:
        return None
    end = known_int(sym.extent)
    return sym if end is not None and end <= size else None


def resolve_index(
    tr: Tracer, t: HostTensor, index: Any, bounded: bool = False
) -> tuple[tuple[Any, ...], list[Node], Shape, dict[str, Any]]:
    """Index items of a host tensor access -> (items, value inputs, result shape, extra node
    attrs: where advanced indices land, see :mod:`tilecraft.frontend.advanced_index`);
    ``bounded``: an access with an extra mask (:class:`_Items`)."""
    items = index if isinstance(index, tuple) else (index,)
    items = without_ellipsis(items, t.ndim, f"'{t.name}'", tr.loc)
    n_real = sum(1 for i in items if i is not None)
    if n_real > t.ndim:
        raise ShapeError(
            f"too many indices for '{t.name}': it is {t.ndim}-D {list(t.shape)}, indexed with {n_real}",
            tr.loc,
        )
    items = items + (slice(None),) * (t.ndim - n_real)
    out = _Items(bounded=bounded)
    dim = 0
    for item in items:
        if item is None:
            out.resolved.append(("none",))
            out.shape.append(1)
            continue
        _item(tr, t, dim, item, out)
        dim += 1
    placed = advanced_index.place(tr, t.name, tuple(out.resolved), out.inputs)
    if placed is not None:
        inputs, placed_shape, positions = placed
        return tuple(out.resolved), inputs, placed_shape, {"positions": positions}
    return tuple(out.resolved), out.inputs, tuple(out.shape), {}


def without_ellipsis(items: tuple[Any, ...], ndim: int, name: str, loc: Any) -> tuple[Any, ...]:
    """``items`` with a ``...`` replaced by the ``:`` slices it stands for (the dims no other
    item takes: ``x[t, ...]`` is ``x[t, :, :]`` of a 3-D x); ``name`` and ``loc`` for the error
    of a second one."""
    at = [k for k, item in enumerate(items) if item is Ellipsis]
    if not at:
        return items
    if len(at) > 1:
        raise ShapeError(f"an index of {name} can have only one ellipsis (...)", loc)
    taken = sum(1 for item in items if item is not None and item is not Ellipsis)
    fill = (slice(None),) * max(0, ndim - taken)
    return items[: at[0]] + fill + items[at[0] + 1 :]


def _resolve_strided(
    tr: Tracer, t: HostTensor, index: Any, bounded: bool = False
) -> tuple[tuple[Any, ...], list[Node], Shape, dict[str, Any]]:
    """:func:`resolve_index`, with computed indices that are a tile's scaled positions as slice
    items (``strided_tiles.py``; loads and stores, not atomics)."""
    items, inputs, shape, placed = resolve_index(tr, t, index, bounded)
    if (sliced := strided_tiles.as_tile_slices(t, items, inputs, shape)) is not None:
        return *sliced, shape, {}
    return items, inputs, shape, placed


def load(
    tr: Tracer, t: HostTensor, index: Any, extra_mask: Any = None, eviction_policy: str = ""
) -> TileValue:
    items, inputs, shape, placed = _resolve_strided(tr, t, index, extra_mask is not None)
    if extra_mask is not None:
        placed["extra_mask"] = len(inputs)
        inputs = [*inputs, advanced_index.extra_mask(tr, t.name, extra_mask, shape)]
    if eviction_policy:
        placed["eviction_policy"] = eviction_policy
    node = tr.emit(Op.LOAD, inputs, shape, t.dtype, tensor=t, index=items, **placed)
    node.hint = "load"
    return tr.wrap(node)


def store(tr: Tracer, t: HostTensor, index: Any, value: Any, extra_mask: Any = None) -> None:
    items, inputs, shape, placed = _resolve_strided(tr, t, index, extra_mask is not None)
    if extra_mask is not None:
        placed["extra_mask"] = len(inputs) + 1  # after the stored value
        inputs = [*inputs, advanced_index.extra_mask(tr, t.name, extra_mask, shape)]
    v = tr.value_node(value)
    extra = v.ndim - len(shape)
    if extra > 0 and all(d == 1 for d in v.shape[:extra]):  # torch drops leading 1s too
        v = tr.value_node(views.squeeze(tr, tr.wrap(v), list(range(extra))))
    v = rdims.conform(tr, v, tuple(shape))
    try:
        out = tr.broadcast_shapes(shape, v.shape)
    except ShapeError:
        out = None
    if out != tuple(shape) or v.ndim > len(shape):
        raise ShapeError(
            f"store into '{t.name}': value of shape {sized_shape_str(v.shape)} does not fit the "
            f"indexed shape {sized_shape_str(shape)}",
            tr.loc,
            hint=_whole_for_block_hint(v.shape, tuple(shape)),
        )
    v = tr.expand_rank(tr.cast(v, t.dtype), len(shape))
    tr.emit(Op.STORE, [v, *inputs], tuple(shape), t.dtype, tensor=t, index=items, **placed)


def _whole_for_block_hint(value: Shape, indexed: Shape) -> str | None:
    """Advice where a whole dim of the value stands where the index has a tile loop's block (a
    halo tile's ``h[1:-1]`` of an ``arange(B + 2)`` load beside the block B): they never line up,
    since the loop's last tile may be partial."""
    for v, i in zip(reversed(value), reversed(indexed)):
        if not (isinstance(v, Sym) and v.kind is SymKind.RDIM and isinstance(i, Sym)):
            continue
        if i.kind is SymKind.BLOCK and not i.scalar:
            n = v.extent
            return (
                f"a whole dim of {n} never lines up with a tile loop's block ({i.name}), even "
                "of that size (its last tile may be partial): store with computed indices, "
                f"tc.store(out, [t.begin + torch.arange({n})], value, "
                f"extra_mask=t.begin + torch.arange({n}) < t.end)"
            )
    return None


def atomic(
    tr: Tracer,
    kind: str,
    t: Any,
    index: Any,
    value: Any,
    sem: str = "relaxed",
    extra_mask: Any = None,
) -> TileValue:
    if not isinstance(t, HostTensor):
        raise DeviceCodeError("atomic ops need a host tensor as their target")
    _check_atomic_target(tr, kind, t)
    items, inputs, shape, placed = resolve_index(tr, t, index, extra_mask is not None)
    if extra_mask is not None:  # lanes where it is False update nothing (padding ids)
        placed["extra_mask"] = len(inputs) + 1  # after the value
        inputs = [*inputs, advanced_index.extra_mask(tr, t.name, extra_mask, shape)]
    v = rdims.conform(tr, tr.value_node(value), tuple(shape))
    _check_atomic_value(tr, kind, t, v)
    if tr.broadcast_shapes(shape, v.shape) != tuple(shape):
        raise ShapeError(
            f"atomic_{kind} into '{t.name}': value {shape_str(v.shape)} does not fit {shape_str(shape)}"
        )
    v = tr.expand_rank(tr.cast(v, t.dtype), len(shape))
    attrs = dict(tensor=t, index=items, kind=kind, sem=sem, **placed)
    return tr.wrap(tr.emit(Op.ATOMIC, [v, *inputs], tuple(shape), t.dtype, **attrs))


def _check_atomic_value(tr: Tracer, kind: str, t: HostTensor, v: Node) -> None:
    error = atomic_value_error(kind, t.name, t.dtype, v.dtype, tr.loc)
    if error is not None:
        raise error


def _check_atomic_target(tr: Tracer, kind: str, t: HostTensor) -> None:
    """GPUs have atomics of 32 and 64 bits, and a half-precision add (Triton refuses the rest:
    an int8 histogram or a bool flag failed every config with Triton's own message)."""
    dtype = t.dtype
    if dtype.itemsize >= 4 or (kind == "add" and dtype in (torch.float16, torch.bfloat16)):
        return
    wide = "torch.float32" if dtype.is_floating_point else "torch.int32"
    raise UnsupportedOpError(
        f"tc.atomic_{kind} into '{t.name}' ({dtype}): GPUs have no atomic_{kind} of "
        f"{'bool' if dtype == torch.bool else f'{dtype.itemsize * 8}-bit'} elements",
        tr.loc,
        hint=f"make '{t.name}' a {wide} tensor and cast it after the kernel (a bool flag: "
        "an int32 with atomic_max or atomic_or)",
    )

"""``torch.sort`` / ``torch.argsort`` / ``torch.topk`` of a tile along a whole dim (stage:
frontend; in: the tracer and the call's operands; out: ``EXTERN`` nodes calling
``runtime/triton_sort.py``).

``Tensor.median`` along a dim selects its middle element without sorting
(``frontend/median_select.py``).

The dim is sorted as the tile's last (``tl.sort`` sorts that one; another is transposed there and
back). Values and positions travel together in one 64-bit key, so the indices are exact and ties
keep their order (stable). Values up to 32 bits: half precision and fp32, ints to int32, bool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError, UnsupportedOpError
from tilecraft.frontend import views
from tilecraft.frontend.median_select import select_median
from tilecraft.frontend.rdims import along
from tilecraft.frontend.tile_gather import check_whole
from tilecraft.ir.int_ranges import NARROWER_INTS
from tilecraft.ir.nodes import Node, Op, Sym, shape_str, sized_shape_str, tile_block
from tilecraft.language.tunables import DynamicInt

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue

_WIDE = (torch.float64, torch.int64, torch.uint64, torch.uint32)


def _extern(
    t: Tracer, helper: str, args: str, inputs: list[Node], shape: Any, dtype: torch.dtype, what: str
) -> TileValue:
    """A call of ``runtime/triton_sort.py``'s ``helper`` (``args``: its arguments, the inputs
    as ``{0}``...), imported by every generated module as ``_tc_sort``."""
    call = f"_tc_sort.{helper}({args})"
    node = t.emit(Op.EXTERN, inputs, tuple(shape), dtype, call=call, what=what)
    node.hint = helper
    return t.wrap(node)


def _sorted(
    t: Tracer, x: Any, dim: int, ascending: bool, k: int | None, what: str
) -> tuple[Any, Any]:
    """(values, int64 indices) of ``x`` sorted along ``dim``; the first ``k`` when given."""
    src = t.value_node(x)
    if src.ndim == 0:
        raise DeviceCodeError(f"{what} of a scalar", t.loc, hint="sort a tile")
    if src.dtype == torch.int64 and _int32_valued(src):  # topk's indices, sorted: exact
        values, indices = _sorted(t, t.to_dtype(x, torch.int32), dim, ascending, k, what)
        return t.to_dtype(values, torch.int64), indices
    if src.dtype in _WIDE or src.dtype.is_complex:
        raise UnsupportedOpError(
            f"{what} of a {src.dtype} tile (keys hold values of up to 32 bits)",
            t.loc,
            hint="cast to torch.int32 first where the values fit (ids, expert numbers: "
            "`.to(torch.int32)` is exact there), else to torch.float32",
        )
    axis = t._axis(src, dim)
    check_whole(t, src, axis, what)
    last = src.ndim - 1
    if axis != last:
        values, indices = _sorted(t, views.transpose(t, x, axis, last), last, ascending, k, what)
        return views.transpose(t, values, axis, last), views.transpose(t, indices, axis, last)
    d = src.shape[last]
    extent = (
        d.extent if isinstance(d, Sym) and isinstance(d.extent, int) and not d.extent_args else d
    )
    if k is not None and (k < 1 or (isinstance(extent, int) and k > extent)):
        raise DeviceCodeError(
            f"{what}: k={k} is out of range for dim {axis} of {sized_shape_str(src.shape)}",
            t.loc,
            hint=f"k must lie in [1, {extent}]"
            + (" (k=0 gives empty results: skip the topk where k is 0)" if k == 0 else ""),
        )
    if not isinstance(d, Sym):  # a dim of 1: already sorted
        return x, t.full(list(src.shape), 0, torch.int64)
    pos = along(t, t.tile_leaf(d, Op.TILE_INDEX), src.shape, last)
    inputs = [src, pos.node, t.value_node(t.extent_value(d))]
    up = "True" if ascending else "False"
    if k is None:
        helper, args, shape = "sorted_keys", f"{{0}}, {{1}}, {{2}}, {up}", src.shape
    else:
        block = 1 << (k - 1).bit_length()
        helper, args = "top_keys", f"{{0}}, {{1}}, {{2}}, {up}, {block}"
        shape = (*src.shape[:last], t.size_dim(k, []))
    keys = _extern(t, helper, args, inputs, shape, torch.int64, what).node
    floats = src.dtype.is_floating_point
    value_dtype = torch.float32 if floats else torch.int32
    helper = "key_floats" if floats else "key_ints"
    values = _extern(t, helper, f"{{0}}, {up}", [keys], shape, value_dtype, what)
    indices = _extern(t, "key_positions", "{0}", [keys], shape, torch.int64, what)
    return t.to_dtype(values, src.dtype), indices


def _int32_valued(node: Node) -> bool:
    """Whether an int64 tile holds values that fit int32 by construction: positions a sort or
    topk returned (below its dim's length), or a widened narrower int."""
    if node.op is Op.CAST:
        return node.inputs[0].dtype in (*NARROWER_INTS, torch.bool)
    return node.op is Op.EXTERN and str(node.attrs.get("call", "")).startswith(
        "_tc_sort.key_positions("
    )


def sort(
    t: Tracer, x: Any, dim: int = -1, descending: bool = False, stable: bool = False, **kw: Any
) -> Any:
    """``(values, indices)`` along a whole ``dim`` (stable; NaN last ascending, first
    descending, as torch); values of up to 32 bits."""
    dim = kw.pop("dim", dim)
    values, indices = _sorted(t, x, dim, not kw.pop("descending", descending), None, "torch.sort")
    return torch.return_types.sort((values, indices))


def argsort(
    t: Tracer, x: Any, dim: int = -1, descending: bool = False, stable: bool = False
) -> TileValue:
    """The int64 indices that sort ``x`` along a whole ``dim`` (stable); values of up to 32
    bits."""
    return _sorted(t, x, dim, not descending, None, "torch.argsort")[1]


def topk(
    t: Tracer, x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
) -> Any:
    """``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) along a whole
    ``dim``, in order, ties by position; ``k`` a Python int; values of up to 32 bits."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise DeviceCodeError(
            f"torch.topk: k must be a Python int, got {type(k).__name__}",
            t.loc,
            hint="the result's size is part of the compiled kernel: pass k as an int",
        )
    if isinstance(k, DynamicInt):
        raise DeviceCodeError(
            f"torch.topk: k ({int(k)} at this call) is a run-time value: with "
            "static_shapes=False the kernel's int arguments, and sizes, change between calls",
            t.loc,
            hint="the result's size is part of the compiled kernel: wrap k in "
            "tc.specialize(k) in host code, or use static_shapes=True",
        )
    values, indices = _sorted(t, x, dim, not largest, k, "torch.topk")
    return torch.return_types.topk((values, indices))


def median(t: Tracer, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """``(values, indices)`` of the lower median along a whole ``dim`` (of an even count the
    smaller middle value, as torch), the stable sort's middle element, found by radix
    selection; values of up to 32 bits. A line holding NaN gives NaN at its first NaN's index
    (torch propagates NaN). Of tied values the index is one of theirs, not necessarily the first (torch promises no
    more). Without ``dim``: the median value of a 1-D tile."""
    if dim is None:
        return _median_of_all(t, x)
    src = t.value_node(x)
    if src.ndim == 0:
        raise DeviceCodeError(
            "Tensor.median of a scalar along a dim", t.loc, hint="a scalar is its own median"
        )
    axis = t._axis(src, dim)
    _check_median_dim(t, src, axis)
    if src.dtype in _WIDE or src.dtype.is_complex:
        raise UnsupportedOpError(
            f"Tensor.median of a {src.dtype} tile (values of up to 32 bits)",
            t.loc,
            hint="cast to torch.float32 or torch.int32 first",
        )
    check_whole(t, src, axis, "Tensor.median")
    values: Any
    indices: Any
    if isinstance(src.shape[axis], Sym):
        values, indices = select_median(t, src, axis)
    else:  # a dim of 1 is its own median
        values, indices = x, t.full(list(src.shape), 0, torch.int64)
    if not keepdim:
        values, indices = views.squeeze(t, values, axis), views.squeeze(t, indices, axis)
    return torch.return_types.median((values, indices))


def _median_of_all(t: Tracer, x: Any) -> Any:
    """``x.median()``: the median of every element, for a 1-D tile (its dim 0's)."""
    src = t.value_node(x)
    if src.ndim == 0:
        return x
    if src.ndim != 1:
        raise UnsupportedOpError(
            f"Tensor.median() without dim of a {src.ndim}-D tile {shape_str(src.shape)}: the "
            "median of all its elements",
            t.loc,
            hint="take the median along one whole dim (x.median(dim=-1).values), or of a "
            "1-D tile (x.flatten().median() where its whole dims can merge)",
        )
    return median(t, x, 0).values


def _check_median_dim(t: Tracer, src: Node, axis: int) -> None:
    """The median's dim must be whole in the tile (a tile loop's block holds part of a line)."""
    d = src.shape[axis]
    if isinstance(d, Sym) and tile_block(d):
        raise UnsupportedOpError(
            f"Tensor.median along dim {axis} of {shape_str(src.shape)}: {d.name} is a tile "
            "loop's block, which holds only part of each line",
            t.loc,
            hint="load the dim whole with `:` (x[tm, :]) and take the median along it",
        )

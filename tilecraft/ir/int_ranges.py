"""Integer sums and scans in 32 bits where their values cannot overflow (stage: ir transform; in:
traced device loops; out: the same loops, each such int64 ``SCAN`` / ``REDUCE`` computed in int32
and widened after).

PyTorch sums and cumsums every integer (and bool) tensor in int64: ``torch.cumsum(mask.int(),
1)``, ``mask.sum(1)``, ``(labels == c).long().sum()``. On a GPU an int64 scan costs twice the
registers and shuffles of an int32 one and emulates each add with two; a stream compaction of
16384x4096 rows by the exclusive cumsum of a keep mask ran in 0.744 ms with the int64 scan and
0.325 ms with the same kernel scanning int32 (H200, compact_cfg_s25 / compact32_cfg_s25).

An accumulation narrows when a bound on its input's magnitude (from dtypes and the ops that
made it: a bool is 0 or 1, an int8 load at most 128, a comparison 0 or 1, a sum of two bounded
values the sum of the bounds) times the elements it adds (the reduced dim's extent, rounded up
to a power of two like its block) stays below 2^31: every partial sum then fits int32, so the
int32 result widened to int64 is the int64 result, bit for bit. ``max`` / ``min`` narrow
whenever the input's bound fits. Dims whose extent is not a compile-time int (dynamic shapes)
never narrow.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, bodies

INT32_MAX = 2**31 - 1
# the integers narrower than int64 that an int64 may be widened from (a bool too, below)
NARROWER_INTS = (torch.int32, torch.int16, torch.int8, torch.uint8)
_DTYPE_BOUND = {
    torch.bool: 1,
    torch.int8: 128,
    torch.uint8: 255,
    torch.int16: 2**15,
    torch.int32: 2**31,
}
# (bound of a, bound of b) -> bound of the result
_BINARY_BOUND: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "maximum": max,
    "minimum": max,
    "mod_int": lambda a, b: max(b - 1, 0),  # |a mod b| < |b|
    "floordiv_int": lambda a, b: a,  # |a // b| <= |a| (b an int, b != 0)
}
_NARROWABLE = ("add", "sub", "mul", "maximum", "minimum")  # int64 ops narrowed to int32
_SIGN_KEEPING = ("neg", "abs")
_NARROW_KINDS = {Op.SCAN: ("sum",), Op.REDUCE: ("sum", "max", "min")}


def narrow_int_accumulations(loop: DeviceLoop) -> DeviceLoop:
    """Rewrite each int64 sum / max / min (a ``REDUCE``) and cumsum (a ``SCAN``) whose result
    provably fits int32 into an int32 one of its input narrowed, widened to int64 after: the
    node keeps its id and users and becomes the widening cast. An int64 add, sub, mul, max or
    min of such a widened result and other widened integers (``cumsum(k) - k``) then narrows
    the same way, so the widening moves down to where an int64 is needed (a store, an
    index). The widening casts it bypasses are left for dead-code elimination."""
    bounds: dict[int, int | None] = {}
    made: set[int] = set()  # the widening casts this pass left
    for body in bodies(loop.body):
        for node in list(body):
            if not (
                _narrowable_accumulation(node, bounds)
                or (any(i.id in made for i in node.inputs) and _narrowable_pointwise(node, bounds))
            ):
                continue
            inputs, created = [], []
            for i in node.inputs:
                narrow, new = _narrowed(i) if i.op is not Op.CONST else (i, False)
                inputs.append(narrow)
                created += [narrow] if new else []
            narrowed = Node(
                node.op, inputs, node.shape, torch.int32, dict(node.attrs), node.loc, node.hint
            )
            at = body.index(node)
            body[at:at] = [*created, narrowed]
            node.op, node.inputs, node.attrs = Op.CAST, [narrowed], {}
            made.add(node.id)
    return loop


def _narrowable_accumulation(node: Node, bounds: dict[int, int | None]) -> bool:
    kinds = _NARROW_KINDS.get(node.op)
    if kinds is None or node.dtype != torch.int64 or node.attrs.get("kind") not in kinds:
        return False
    if node.op is Op.SCAN and len(node.inputs) != 1:
        return False
    bound = _accumulated_bound(node, bounds)
    return bound is not None and bound <= INT32_MAX


def _accumulated_bound(node: Node, bounds: dict[int, int | None]) -> int | None:
    """A bound of a sum's / cumsum's / max's / min's result from its input's."""
    src = node.inputs[0]
    bound = abs_bound(src, bounds)
    if bound is None or node.attrs["kind"] != "sum":
        return bound
    count = _count(src.shape[node.attrs["axis"]])
    return None if count is None else bound * count


def _narrowable_pointwise(node: Node, bounds: dict[int, int | None]) -> bool:
    """An int64 add / sub / mul / max / min whose operands are all integers widened to int64
    (a constant after the first) and whose result fits int32."""
    if node.op is not Op.BINARY or node.attrs.get("fn") not in _NARROWABLE:
        return False
    if node.dtype != torch.int64 or not all(
        _widened_int(i) or (k > 0 and i.op is Op.CONST) for k, i in enumerate(node.inputs)
    ):
        return False
    bound = abs_bound(node, bounds)
    return bound is not None and bound <= INT32_MAX


def _widened_int(node: Node) -> bool:
    return node.op is Op.CAST and node.dtype == torch.int64 and node.inputs[0].dtype in _DTYPE_BOUND


def _count(dim: Sym | int) -> int | None:
    """How many elements a reduction along ``dim`` adds at most (None: not known at compile
    time)."""
    if isinstance(dim, int):
        return dim
    if not isinstance(dim.extent, int) or dim.extent_args:
        return None
    # a tile's padded lanes count too (a block is the extent rounded up to a power of two, or
    # the user's fixed block)
    return max(1 << max(0, (dim.extent - 1).bit_length()), dim.fixed_block or 0)


def _narrowed(src: Node) -> tuple[Node, bool]:
    """``src`` as int32, and whether that is a new node: the int32 value it was widened from,
    else a new cast of it (or of the narrower integer it was widened from)."""
    if src.op is Op.CAST and src.inputs[0].dtype == torch.int32:
        return src.inputs[0], False
    base = src.inputs[0] if src.op is Op.CAST and src.inputs[0].dtype in _DTYPE_BOUND else src
    return Node(Op.CAST, [base], src.shape, torch.int32, loc=src.loc, hint=src.hint), True


def abs_bound(node: Node, bounds: dict[int, int | None]) -> int | None:
    """An upper bound of ``|value|`` over every element of ``node`` (None: none known short of
    int64's range, or not an integer)."""
    if node.id not in bounds:
        bounds[node.id] = None  # a loop-carried cycle reads this: unknown
        bounds[node.id] = _bound(node, bounds)
    return bounds[node.id]


def _bound(node: Node, bounds: dict[int, int | None]) -> int | None:
    by_dtype = _DTYPE_BOUND.get(node.dtype)
    if node.dtype.is_floating_point or node.dtype.is_complex:
        return None
    found: int | None = None
    if node.op in (Op.CONST, Op.FULL) and isinstance(node.attrs.get("value"), int):
        found = abs(node.attrs["value"])
    elif node.op is Op.CAST:
        found = abs_bound(node.inputs[0], bounds)
    elif node.op is Op.WHERE:
        found = _combine(max, [abs_bound(i, bounds) for i in node.inputs[1:]])
    elif node.op is Op.UNARY and node.attrs.get("fn") in _SIGN_KEEPING:
        found = abs_bound(node.inputs[0], bounds)
    elif node.op is Op.BINARY and node.attrs.get("fn") in _BINARY_BOUND:
        found = _combine(
            _BINARY_BOUND[node.attrs["fn"]], [abs_bound(i, bounds) for i in node.inputs]
        )
    elif node.op is Op.VIEW:
        found = abs_bound(node.inputs[0], bounds)
    elif node.op is Op.TILE_INDEX:
        found = _index_bound(node.attrs["sym"])
    elif node.op is Op.BINARY and node.attrs.get("fn") == "bitwise_and":
        # with a non-negative constant c the result is in [0, c], whatever the other's sign
        masks = [i.attrs["value"] for i in node.inputs if _nonneg_constant(i)]
        found = min(masks) if masks else None
    elif node.op in _NARROW_KINDS and node.attrs.get("kind") in _NARROW_KINDS[node.op]:
        found = _accumulated_bound(node, bounds)
    if found is None:
        return by_dtype
    return found if by_dtype is None else min(found, by_dtype)


# no mul: a product of two int32 positions may wrap past 2^31 to a negative value
_NONNEG_BINARY = ("add", "maximum", "minimum", "floordiv_int", "mod_int")


def nonnegative(node: Node) -> bool:
    """Whether an integer value is provably >= 0: a non-negative constant, a tile's positions
    from a non-negative begin, a bool or unsigned load, and sums, extremes, floor divisions and
    moduli of such values (an int cast that keeps every value of its source)."""
    if node.dtype.is_floating_point or node.dtype.is_complex:
        return False
    if node.op is Op.CONST:
        value = node.attrs.get("value")
        return isinstance(value, (int, bool)) and value >= 0
    if node.op in (Op.TILE_INDEX, Op.TILE_BEGIN, Op.TILE_ID, Op.BLOCK_SIZE):
        begin = node.attrs["sym"].begin
        return isinstance(begin, int) and begin >= 0
    if node.op is Op.LOAD:
        return node.dtype in (torch.bool, torch.uint8)
    if node.op is Op.VIEW:
        return nonnegative(node.inputs[0])
    if node.op is Op.CAST:
        src = node.inputs[0]
        keeps = src.dtype == torch.bool or node.dtype.itemsize >= src.dtype.itemsize
        return keeps and nonnegative(src)
    if node.op is Op.BINARY and node.attrs["fn"] in _NONNEG_BINARY:
        return all(nonnegative(i) for i in node.inputs)
    if node.op is Op.BINARY and node.attrs["fn"] in ("bitwise_and", "mul"):
        # x & c (c >= 0) is in [0, c]; a product of non-negatives stays so where the bound
        # says it cannot wrap (a nibble's (idx % 8) * 4)
        if node.attrs["fn"] == "bitwise_and":
            return any(nonnegative(i) for i in node.inputs)
        bound = abs_bound(node, {})
        limit = 2 ** (node.dtype.itemsize * 8 - 1) - 1
        return all(nonnegative(i) for i in node.inputs) and bound is not None and bound <= limit
    return False


def _nonneg_constant(node: Node) -> bool:
    value = node.attrs.get("value") if node.op is Op.CONST else None
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _index_bound(sym: Sym) -> int | None:
    """The largest |position| a dim's index takes: an arange's length - 1 from 0, a tile's
    end - 1 where its begin and extent are ints."""
    begin, extent = sym.begin, sym.extent
    if not isinstance(begin, int) or not isinstance(extent, int):
        return None
    return max(abs(begin), abs(begin + extent - 1))


def _combine(fn: Callable[[int, int], int], values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    if not known or len(known) < len(values):
        return None
    out = known[0]
    for v in known[1:]:
        out = fn(out, v)
    return out

"""Scans and reductions with a user's combine function (stage: frontend; in: ``torch.cumsum`` /
``torch.cumprod``, ``tc.associative_scan(fn, x, dim)``, ``tc.reduce(fn, x, dim, other)`` on traced
tiles; out: ``SCAN`` nodes and ``REDUCE`` nodes of kind ``combine``).

A user's combine function is traced once on two scalar placeholders (``ARG`` nodes named ``lhs`` and
``rhs``) into a :class:`Combine` graph; codegen emits it as a ``@triton.jit`` helper for
``tl.associative_scan`` / ``tl.reduce``. Scans need no mask: a tile's padding is at the end of each
dim, after every valid element, so an inclusive scan's valid prefix never sees it. A custom reduction
does see padding, so it takes ``other``, the value padded elements hold (the combine's identity).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError, ShapeError, UnsupportedOpError
from tilecraft.frontend.grid_blocks import grid_block_at
from tilecraft.frontend.rdims import along
from tilecraft.frontend.tile_gather import flip
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op, Sym, SymKind, shape_str, tile_block

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue


@dataclasses.dataclass(eq=False)
class Combine:
    """A traced combine function over scalars: ``(lhs, rhs) -> value``, or for a scan of a tuple
    of tiles ``(lhs0, .., lhsK, rhs0, .., rhsK) -> (v0, .., vK)`` (``results`` in that order)."""

    name: str  # the user's function name (for the helper's name and messages)
    value_dtypes: tuple[torch.dtype, ...]  # of each side's values
    body: list[Node]
    results: tuple[Node, ...]

    @property
    def params(self) -> list[str]:
        """The helper's parameter names: ``lhs, rhs`` or ``lhs0, .., rhs0, ..`` for tuples."""
        if len(self.value_dtypes) == 1:
            return ["lhs", "rhs"]
        k = range(len(self.value_dtypes))
        return [f"lhs{i}" for i in k] + [f"rhs{i}" for i in k]

    def __repr__(self) -> str:
        return f"combine:{self.name}"


def call_combine(fn: Callable[..., Any], lhs: list[Any], rhs: list[Any]) -> Any:
    """``fn`` on one value per side, or for tuples in the convention ``fn`` is written in:
    Triton's flattened ``fn(lhs0, .., rhs0, ..)`` or torch's ``fn(lhs_tuple, rhs_tuple)``."""
    if len(lhs) == 1:
        return fn(lhs[0], rhs[0])
    try:
        params = inspect.signature(fn).parameters.values()
        pairwise = len(params) == 2 and all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
    except (TypeError, ValueError):
        pairwise = False
    return fn(tuple(lhs), tuple(rhs)) if pairwise else fn(*lhs, *rhs)


def trace_combine(t: Tracer, fn: Callable[..., Any], dtypes_: tuple[torch.dtype, ...]) -> Combine:
    """Trace ``fn`` once on scalar placeholders of ``dtypes_`` (one per tile combined)."""
    name = getattr(fn, "__name__", "combine")
    if not callable(fn):
        raise DeviceCodeError(f"the combine function must be callable, got {type(fn).__name__}")
    combine = Combine(name, dtypes_, [], ())
    names = combine.params
    # ``param``: the placeholder's position among the helper's parameters (ir/tuple_scans.py)
    sides = [
        [
            t.emit(Op.ARG, [], (), dt, name=names[k], param=k)
            for k, dt in enumerate(dtypes_, start=side * len(dtypes_))
        ]
        for side in range(2)
    ]
    t.blocks.append([])
    try:
        lhs, rhs = ([t.wrap(n) for n in side] for side in sides)
        out = call_combine(fn, lhs, rhs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(dtypes_):
            raise DeviceCodeError(
                f"combine function '{name}' returned {len(outs)} values for "
                f"{len(dtypes_)} combined tile(s)"
            )
        results = tuple(t.cast(t.value_node(o), dt) for o, dt in zip(outs, dtypes_, strict=True))
    finally:
        combine.body = t.blocks.pop()
    if any(r.ndim != 0 for r in results):
        raise ShapeError(f"combine function '{name}' must combine scalars elementwise")
    combine.results = results
    return combine


def _scan_node(t: Tracer, x: Any, dim: Any, kind: str) -> tuple[Node, int]:
    node = t.value_node(x)
    if node.ndim == 0:
        raise ShapeError(f"a scan needs a tile with dims, got a scalar ({kind})")
    axis = t._axis(node, dim)
    block = grid_block_at(t, node, axis % node.ndim)
    if block is not None:
        # each program would scan its own block, restarting where the config cuts the dim
        # (ref mode scans it whole); an inner loop's tiles may be scanned (a chunked scan
        # carries its total from tile to tile), and so may a block the host knows (a literal
        # or registered block_size: per-block ranks the host combines)
        raise ShapeError(
            f"{kind} along dim {axis} of {shape_str(node.shape)}: {block.name} is the device "
            "loop's block, one program each tile, so the scan would restart at every tile "
            "the config cuts",
            t.loc,
            hint="scan along a whole dim (`x[:, tn]` then dim 0, or `x[tm, :]` then dim 1), "
            "or loop over the dim in an inner `for tk in tc.tile(n)` carrying the running "
            "total",
        )
    return node, axis


def cumulative(t: Tracer, kind: str, x: Any, dim: Any, dtype: Any = None) -> TileValue:
    """``torch.cumsum`` / ``torch.cumprod``: integer inputs give int64 as in torch; half-precision
    inputs are scanned in fp32 and rounded once."""
    node, axis = _scan_node(t, x, dim, f"torch.cum{kind}")
    result = dtype or (torch.int64 if not node.dtype.is_floating_point else node.dtype)
    compute = dtypes.compute_dtype(result) if result.is_floating_point else torch.int64
    inp = t.cast(node, compute)
    scan = t.emit(Op.SCAN, [inp], inp.shape, compute, kind=kind, axis=axis, reverse=False)
    return t.wrap(t.cast(scan, result))


def cumulative_extreme(t: Tracer, kind: str, x: Any, dim: Any) -> Any:
    """``torch.cummax`` / ``torch.cummin``: ``(values, indices)`` along ``dim``, a scan of
    (value, position) pairs. As torch: a tie takes the later position, and a NaN, once met,
    is kept (with the position of the last NaN)."""
    node, axis = _scan_node(t, x, dim, f"torch.cum{kind}")
    d = node.shape[axis]
    pos = t.tile_leaf(d, Op.TILE_INDEX) if isinstance(d, Sym) else t.arange(int(d))
    if isinstance(d, Sym) and d.kind is SymKind.BLOCK:  # an inner loop's tile: from its start
        pos = t.pointwise("sub", pos, t.tile_leaf(d, Op.TILE_BEGIN))
    positions = along(t, t.to_dtype(pos, torch.int64), node.shape, axis)
    better = torch.ge if kind == "max" else torch.le

    def combine(lv: Any, li: Any, rv: Any, ri: Any) -> tuple[Any, Any]:
        take = better(rv, lv) | (rv != rv)
        return torch.where(take, rv, lv), torch.where(take, ri, li)

    pair: Any = associative_scan(t, combine, (x, positions), axis)
    result = torch.return_types.cummax if kind == "max" else torch.return_types.cummin
    return result(pair)


def log_cumulative_sum_exp(t: Tracer, x: Any, dim: Any) -> TileValue:
    """``torch.logcumsumexp``: a scan of ``log(exp(a) + exp(b))`` taken as ``m + log1p(exp(min
    - m))`` with ``m`` the larger (no overflow), in fp32 for half precision, rounded once. As
    torch: -inf where every element so far is -inf, inf once an inf is met, NaN once a NaN is."""
    node, axis = _scan_node(t, x, dim, "torch.logcumsumexp")
    if not node.dtype.is_floating_point:
        raise UnsupportedOpError(
            f"torch.logcumsumexp of a {node.dtype} tile: torch takes floats only",
            hint="cast first, e.g. x.float().logcumsumexp(dim)",
        )

    def combine(a: Any, b: Any) -> Any:
        m = torch.maximum(a, b)
        return torch.where(torch.isinf(m), m, m + torch.log1p(torch.exp(torch.minimum(a, b) - m)))

    return associative_scan(t, combine, x, axis)  # type: ignore[return-value]


def associative_scan(
    t: Tracer, fn: Callable[..., Any], x: Any, dim: Any, reverse: bool = False
) -> TileValue | tuple[TileValue, ...]:
    """``tc.associative_scan(fn, x, dim)``; ``x`` may be a tuple of same-shape tiles, combined
    together by ``fn(lhs0, .., rhs0, ..) -> (v0, ..)`` (a linear recurrence's (a, b) pairs)."""
    xs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    if not xs:
        raise DeviceCodeError("tc.associative_scan: no tiles to scan", t.loc)
    nodes = [t.value_node(v) for v in xs]
    node, axis = _scan_node(t, xs[0], dim, "tc.associative_scan")
    if any(n.shape != node.shape for n in nodes):
        shapes = ", ".join(str(list(n.shape)) for n in nodes)
        raise ShapeError(f"tc.associative_scan: the scanned tiles differ in shape ({shapes})")
    if reverse:
        return _reversed_scan(t, fn, xs, axis, many=isinstance(x, (tuple, list)))
    computes = tuple(dtypes.compute_dtype(n.dtype) for n in nodes)
    combine = trace_combine(t, fn, computes)
    inputs = [t.cast(n, c) for n, c in zip(nodes, computes, strict=True)]
    outs = tuple(
        t.wrap(
            t.cast(
                t.emit(
                    Op.SCAN, inputs, node.shape, c, kind="combine", axis=axis,
                    combine=combine, output=i,
                ),
                n.dtype,
            )
        )
        for i, (n, c) in enumerate(zip(nodes, computes, strict=True))
    )  # fmt: skip
    return outs if isinstance(x, (tuple, list)) else outs[0]


def _reversed_scan(
    t: Tracer, fn: Callable[..., Any], xs: tuple[Any, ...], axis: int, many: bool
) -> TileValue | tuple[TileValue, ...]:
    """A reverse scan along a whole dim: the tiles flipped (a tile's padding stays at the end,
    after every valid element), scanned forward, flipped back. ``fn`` takes the later elements'
    combination first, as the eager scan does."""
    d = t.value_node(xs[0]).shape[axis]
    if tile_block(d):
        raise DeviceCodeError(
            "tc.associative_scan(reverse=True) along a tile loop's block is not supported",
            t.loc,
            hint="scan along a whole dim (`x[t, :]`), or load the data with a reversed index, "
            "e.g. x[t, (n - 1) - tc.arange(n)], scan forward, and store with the same index",
        )
    scanned = associative_scan(t, fn, tuple(flip(t, v, axis) for v in xs), axis)
    outs = scanned if isinstance(scanned, tuple) else (scanned,)
    flipped = tuple(flip(t, v, axis) for v in outs)
    return flipped if many else flipped[0]


def reduce(
    t: Tracer,
    fn: Callable[..., Any],
    x: Any,
    dim: Any,
    other: Any = None,
    keep_dims: bool = False,
) -> TileValue:
    if isinstance(x, (tuple, list)):
        raise UnsupportedOpError(
            f"tc.reduce of a {type(x).__name__} of {len(x)} tiles: it reduces one tile",
            t.loc,
            hint="a value with its index is torch.max(x, dim) / torch.min(x, dim); several "
            "statistics are one reduction each (tc.associative_scan takes tuples)",
        )
    node = t.value_node(x)
    axis = t._axis(node, dim)
    if other is not None and not isinstance(other, (int, float, bool)):
        raise DeviceCodeError("tc.reduce: other= must be a Python number (the combine's identity)")
    compute = dtypes.compute_dtype(node.dtype)
    combine = trace_combine(t, fn, (compute,))
    inp = t.cast(node, compute)
    shape = list(inp.shape)
    if keep_dims:
        shape[axis] = 1
    else:
        del shape[axis]
    red = t.emit(
        Op.REDUCE,
        [inp],
        tuple(shape),
        compute,
        kind="combine",
        axis=axis,
        keepdim=keep_dims,
        combine=combine,
        other=other,
    )
    return t.wrap(t.cast(red, node.dtype))

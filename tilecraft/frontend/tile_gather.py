"""Gathers within a tile (stage: frontend; in: ``torch.gather`` / ``torch.take_along_dim`` /
``torch.roll`` / ``torch.flip`` on a traced tile; out: a ``GATHER`` node, ``tl.gather`` in
codegen).

``torch.gather(x, dim, index)`` on a tile reads ``x`` at the positions ``index`` holds along
``dim``, from registers: ``out[i][j] = x[index[i][j]][j]`` for ``dim=0``. This is how a
recurrence shifts its state without a trip through memory (CTC's ``alpha[s - 1]``,
``alpha[s - 2]``; a permutation of lanes). The gathered dim must be a whole dim of the tile (a
``:`` or ``tc.arange(n)``): its positions are then 0..n-1 whatever the config, and the dim is
kept whole, never looped in chunks (``ir/phases.rdim_loopable``). Every other dim of ``index``
must be ``x``'s (as in torch, where a shorter one is not a tile). Index values should lie in
``[0, n)``: compiled code reads 0 at a position outside (as a gather from memory does), ref mode
raises (as torch does).

A gather from a host tensor is a load with a tensor-valued index instead (``x[tm.index, idx]``;
the interpreter says so when torch rejects a host tensor operand).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.config.plan import next_pow2
from tilecraft.errors import DeviceCodeError, ShapeError
from tilecraft.frontend import rdims
from tilecraft.frontend.gather_loads import gather_load
from tilecraft.frontend.rdims import along
from tilecraft.frontend.recompute import recomputed
from tilecraft.ir import dtypes, int_ranges
from tilecraft.ir.nodes import Dim, Node, Op, Sym, SymKind, shape_str, tile_block, whole_length

# a roll, flip or shift of a loaded tile along a line of at most a warp's lanes permutes it in
# registers (a few shuffles an element); a longer one re-reads memory (long_line)
REGISTER_GATHER_LINE = 32
# a computed tile that can be neither re-read nor recomputed keeps its register gather up to
# this many positions in a line (memory_line): a warp-local gather costs each thread about
# (line / 32)^2 shuffles, a scratch row a store, a barrier and a load. H100, at 64 and 256
# positions the scratch row lost (a bitonic sort of [32, 64] rows: 2.98 ms vs 0.146 in
# registers; a DTW wavefront's [256] diagonals: 1.24 vs 0.705 ms); at 4096 the register gather
# did not finish compiling in 600 s
MEMORY_GATHER_LINE = 256

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue


def gather(
    t: Tracer,
    x: Any,
    dim: Any,
    index: Any,
    *,
    sparse_grad: bool = False,
    reread: bool = True,
    bound: int | None = None,
    checked: bool = False,
) -> TileValue:
    """``torch.gather(x, dim, index)`` of a tile: ``x`` at the positions ``index`` holds along
    ``dim`` (a whole dim of ``x``); the result has ``index``'s shape and ``x``'s dtype. A tile
    that is a plain load of a tensor is read from memory at the positions instead. ``bound``
    (slices, pads, windows): positions outside ``[0, bound)`` belong to lanes whose values are
    never used; a register gather reads them clamped, a read of memory takes them as they are
    (masked loads; ``x[t, j + 1]`` stays a slice Triton can vectorize). ``checked`` (the user's
    own positions): a position outside the dim reads 0, as a read of memory does."""
    # reread=False: a roll, flip or shift along a short line keeps its register gather (a few
    # shuffles; its loads stay 16-byte vectors where loads at computed positions are one
    # element each): long_line
    del sparse_grad  # a gradient option: device code has no autograd
    src, idx = t.value_node(x), t.value_node(index)
    if not dtypes.is_integer(idx.dtype):
        raise DeviceCodeError(
            f"torch.gather: index must be an integer tile, got {idx.dtype}",
            t.loc,
            hint="cast it with .to(torch.int32)",
        )
    if src.ndim == 0 or idx.ndim != src.ndim:
        raise ShapeError(
            f"torch.gather: index {shape_str(idx.shape)} needs the rank of the tile "
            f"{shape_str(src.shape)} (as in torch)",
            t.loc,
            hint="add the missing dims with [:, None] or unsqueeze",
        )
    axis = t._axis(src, dim)
    check_whole(t, src, axis)
    idx = rdims.conform(t, idx, src.shape)
    for d, (have, want) in enumerate(zip(idx.shape, src.shape, strict=True)):
        if d != axis and not same_dim(have, want):
            raise ShapeError(
                f"torch.gather along dim {axis}: index {shape_str(idx.shape)} differs from the "
                f"tile {shape_str(src.shape)} in dim {d}",
                t.loc,
                hint="index every other dim with the tile's own dims (expand the index first)",
            )
    raw = idx
    if bound is not None:
        idx = _clamped(t, idx, axis, bound)
    long = reread and (long_line(src.shape, axis) or long_line(idx.shape, axis))
    if long and (redone := recomputed(t, src, raw, axis)) is not None:
        return redone
    if (through := _through_pointwise(t, src, idx, axis, reread)) is not None:
        return through
    if (composed := _composed(t, src, idx, axis)) is not None:
        src, idx = composed
        raw = idx  # composed positions come clamped
    if reread and (loaded := gather_load(t, src, raw, axis)) is not None:
        return loaded
    valid = _valid_positions(t, idx, src.shape[axis]) if checked else None
    if valid is not None:
        idx = t.where(valid, t.wrap(idx), 0).node
    if idx.shape[axis] == 1 and src.shape[axis] != 1:
        picked = _pick_one(t, src, idx, axis)
    else:
        # along a very long line, a computed tile goes through memory (gather_memory.py); so
        # does a gather to a longer line than its source's (a repeat_interleave by 10 of 32
        # group means, a cat or pad of short rows): Triton 3.6's TritonGPUOptimizeThreadLocality
        # pass fails on such a tl.gather for sm_90 and gfx942 whatever the config
        memory = (long and (memory_line(src.shape, axis) or memory_line(idx.shape, axis))) or (
            widening(src.shape[axis], idx.shape[axis])
        )
        attrs = {"through_memory": True} if memory else {}
        node = t.emit(Op.GATHER, [src, idx], idx.shape, src.dtype, axis=axis, **attrs)
        picked = t.wrap(node)
    return picked if valid is None else t.where(valid, picked, t.full([], 0, src.dtype))


def user_gather(t: Tracer, x: Any, dim: Any, index: Any, *, sparse_grad: bool = False) -> TileValue:
    """``torch.gather(x, dim, index)`` of a tile: ``x`` at the positions ``index`` holds along
    ``dim`` (a whole dim of ``x``); the result has ``index``'s shape and ``x``'s dtype. A tile
    that is a plain load of a tensor is read from memory at the positions instead. A position
    outside the dim reads 0 (ref mode raises, as torch does)."""
    return gather(t, x, dim, index, sparse_grad=sparse_grad, checked=True)


def _valid_positions(t: Tracer, idx: Node, d: Dim) -> TileValue | None:
    """Where ``idx`` holds a position of the dim ``d`` (None: all of them, provably). A
    position outside it reached ``tl.gather`` unchecked: an IndexError in the interpreter, on a
    GPU a shuffle or shared-memory read outside the tile (eager raises, ref mode too)."""
    n = d if isinstance(d, int) else d.extent
    bound = int_ranges.abs_bound(idx, {})
    if isinstance(n, int) and int_ranges.nonnegative(idx) and bound is not None and bound < n:
        return None
    within = t.pointwise("lt", t.wrap(idx), t.extent_value(d))
    return t.pointwise("bitwise_and", t.pointwise("ge", t.wrap(idx), 0), within)


def _clamped(t: Tracer, idx: Node, axis: int, bound: int) -> Node:
    """``idx`` clamped into ``[0, bound)``, as its 1-D positions placed again where it is one
    (so that a later gather of it still composes)."""
    line = _positions(idx, axis) if idx.ndim > 1 else idx
    if line is None:
        line = idx
    clamped = clamp_positions(t, t.wrap(line), bound)
    if line is idx:
        return clamped.node
    return rdims.along(t, clamped, idx.shape, axis).node


def clamp_positions(t: Tracer, positions: TileValue, n: int) -> TileValue:
    """Positions moved into ``[0, n)``: the nearest end for those outside."""
    return t.pointwise("minimum", t.pointwise("maximum", positions, 0), n - 1)


def _composed(t: Tracer, src: Node, idx: Node, axis: int) -> tuple[Node, Node] | None:
    """A gather of a gather along one dim as one gather of the first one's source: positions
    ``J`` of a tile read at positions ``E(i)`` are ``E(J)`` of the source (a cat of slices, a
    slice of a shift), where both index tiles are positions along the dim computed from the
    dim's own positions (``tc.arange``-style: slices, pads, rolls, cat pieces). A gather of
    gathers beside a reduction failed Triton 3.6's OptimizeThreadLocality pass on sm_90 (its
    warp-local gather layout assertion); composed, it compiles and moves each element once."""
    if src.op is not Op.GATHER or src.attrs["axis"] != axis:
        return None
    inner, outer = _positions(src.inputs[1], axis), _positions(idx, axis)
    if inner is None or outer is None or outer.shape[0] is not idx.shape[axis]:
        return None
    positions = _substituted(t, inner, inner.shape[0], outer)
    if positions is None:
        return None
    placed = rdims.along(t, positions, idx.shape, axis) if idx.ndim > 1 else positions
    return src.inputs[0], placed.node


def _through_pointwise(
    t: Tracer, src: Node, idx: Node, axis: int, reread: bool
) -> TileValue | None:
    """``gather(f(g), J)`` as ``f(gather(g, J))`` where ``f`` is an elementwise op of one tile
    and constants and ``g`` is itself a gather along the dim (``torch.cat([r, q * 2.0])`` of
    slices): the gathers then compose (:func:`_composed`)."""
    if src.op not in (Op.UNARY, Op.BINARY):
        return None
    tiles = [i for i in src.inputs if i.op is not Op.CONST]
    if len(tiles) != 1 or tiles[0].shape != src.shape or tiles[0].dtype != src.dtype:
        return None
    inner = tiles[0]
    if inner.op is not Op.GATHER or inner.attrs["axis"] != axis:
        return None
    moved = gather(t, t.wrap(inner), axis, t.wrap(idx), reread=reread)
    operands = [moved if i is inner else t.wrap(i) for i in src.inputs]
    return t.pointwise(src.attrs["fn"], *operands)


def _positions(node: Node, axis: int) -> Node | None:
    """The 1-D tile an index tile places at ``axis`` and broadcasts (``rdims.along``'s views),
    or None for an index of other structure."""
    while node.op is Op.VIEW and node.ndim > 1:
        spec = node.attrs.get("spec")
        if not node.attrs.get("expand") and not (spec and set(spec) <= {":", None}):
            return None
        node = node.inputs[0]
    if node.ndim == 1:
        return node
    return None


def _substituted(t: Tracer, node: Node, dim: Any, positions: Node) -> TileValue | None:
    """``node`` (a pointwise expression of ``dim``'s positions and constants) with those
    positions replaced by ``positions``; None where it reads anything else."""
    if node.op is Op.TILE_INDEX and node.attrs.get("sym") is dim:
        return t.wrap(positions)
    if node.op is Op.CONST:
        return t.wrap(node)
    if node.op in (Op.UNARY, Op.BINARY) and not node.dtype.is_floating_point:
        operands = [_substituted(t, i, dim, positions) for i in node.inputs]
        if any(o is None for o in operands):
            return None
        return t.pointwise(node.attrs["fn"], *operands)
    return None


def _pick_one(t: Tracer, src: Node, idx: Node, axis: int) -> TileValue:
    """One element of each line along ``axis`` (an index of size 1 there: a target's logit out
    of a vocabulary row): the max over the line of the element whose position is the index,
    every other one at its dtype's lowest value, exact for every value (NaN, -0.0). Not
    ``tl.gather``: gathering from a whole row unrolls a shuffle per register of the row (ptxas
    ran past 20 GB on a [2, 32768] fp32 row, sm_90), and keeps the row whole where a reduction
    can run in chunks."""
    return pick_position(t, src, axis, t.wrap(idx))


def pick_position(t: Tracer, src: Node, axis: int, position: Any) -> TileValue:
    """The element at ``position`` (an int, or a tile of size 1 along ``axis``) of each line of
    ``src`` along ``axis``, keeping that dim as size 1 (see :func:`_pick_one`)."""
    d = src.shape[axis]
    assert isinstance(d, Sym)  # a size-1 dim has nothing to pick from
    positions = along(t, t.tile_leaf(d, Op.TILE_INDEX), src.shape, axis, broadcast=False)
    hit = t.pointwise("eq", positions, position)
    if src.dtype == torch.bool:
        lowest: Any = False
    elif src.dtype.is_floating_point:
        lowest = float("-inf")
    else:
        lowest = torch.iinfo(src.dtype).min
    picked = t.reduce("max", t.where(hit, t.wrap(src), lowest), axis, keepdim=True)
    return t.to_dtype(picked, src.dtype)


def pick_run_time(t: Tracer, src: Node, axis: int, index: Any) -> TileValue:
    """``src[..., i]`` along a whole dim at a run-time int ``i`` (a size under
    ``static_shapes=False``, a loaded count), negative from the end as in torch; the dim is
    dropped. Positions outside the dim read the dtype's lowest value (ref mode raises)."""
    check_whole(t, src, axis, "indexing a tile with a run-time int")
    d = src.shape[axis]
    if not isinstance(d, Sym):
        return t.wrap(src)  # a dim of one: the caller drops it
    if not isinstance(d.begin, int) or (d.extent_args and not isinstance(d.extent, int)):
        raise ShapeError(
            f"indexing a tile along dim {axis} with a run-time int: the dim's start is known "
            "only at run time",
            t.loc,
            hint="index with a compile-time int (tc.specialize(i)), or pick with a mask: "
            "torch.sum(torch.where(positions == i, v, 0), dim=d)",
        )
    at = t.wrap(t.value_node(index))
    extent: Any = d.extent
    if d.extent_args:  # a run-time size: the traced extent is one call's, its argument each's
        extent = t.wrap(d.extent_args[0])
    elif not isinstance(extent, int):
        extent = t.wrap(extent)
    length = t.pointwise("sub", extent, d.begin) if d.begin else extent
    at = t.where(t.pointwise("lt", at, 0), t.pointwise("add", at, length), at)
    return pick_position(t, src, axis, t.pointwise("add", at, d.begin) if d.begin else at)


def take_along_dim(t: Tracer, x: Any, indices: Any, dim: Any = None) -> TileValue:
    """``torch.take_along_dim(x, indices, dim)``: a gather, ``indices`` broadcast to ``x`` in
    the other dims (``dim`` is required: a flattened tile has no whole dim)."""
    if dim is None:
        raise DeviceCodeError(
            "torch.take_along_dim without dim flattens the tile", t.loc, hint="pass dim="
        )
    src, idx = t.value_node(x), t.value_node(indices)
    axis = t._axis(src, dim)
    idx = rdims.conform(t, t.expand_rank(idx, src.ndim), src.shape)
    wanted = tuple(idx.shape[d] if d == axis else src.shape[d] for d in range(src.ndim))
    if wanted != idx.shape:
        if any(have != 1 and not same_dim(have, want) for have, want in zip(idx.shape, wanted)):
            raise ShapeError(
                f"torch.take_along_dim: indices {shape_str(idx.shape)} do not broadcast to the "
                f"tile {shape_str(src.shape)} outside dim {axis}",
                t.loc,
            )
        idx = t.emit(Op.VIEW, [idx], wanted, idx.dtype, expand=True)
    return gather(t, x, axis, t.wrap(idx), checked=True)


def roll(t: Tracer, x: Any, shifts: Any, dims: Any = None) -> TileValue:
    """``torch.roll(x, shifts, dims)`` of a tile along whole dims: element ``i`` moves to
    ``(i + shift) mod n`` (a gather from ``(i - shift) mod n``)."""
    if dims is None:
        raise DeviceCodeError("torch.roll without dims flattens the tile", t.loc, hint="pass dims=")
    many = isinstance(shifts, (list, tuple))
    shift_list, dim_list = (list(shifts), list(dims)) if many else ([shifts], [dims])
    if len(shift_list) != len(dim_list):
        raise DeviceCodeError(
            f"torch.roll: {len(shift_list)} shifts for {len(dim_list)} dims", t.loc
        )
    out = x
    for shift, dim in zip(shift_list, dim_list, strict=True):
        out = _roll_dim(t, out, int(shift), dim)
    return out


def _roll_dim(t: Tracer, x: Any, shift: int, dim: Any) -> Any:
    src = t.value_node(x)
    axis = t._axis(src, dim)
    n = static_whole(t, src, axis, "torch.roll")
    if n == 0 or shift % n == 0:  # (an empty dim rolls to itself)
        return x
    d = src.shape[axis]
    assert isinstance(d, Sym)  # a size-1 dim returned above (every shift is 0 mod 1)
    pos = t.tile_leaf(d, Op.TILE_INDEX)
    source = t.pointwise("mod", t.pointwise("add", pos, n - shift % n), n)
    return gather(t, x, axis, along(t, source, src.shape, axis), reread=long_line(src.shape, axis))


def flip(t: Tracer, x: Any, dims: Any) -> TileValue:
    """``torch.flip(x, dims)`` of a tile along whole dims (a gather from ``n - 1 - i``; a
    padded position past the end keeps its own)."""
    out = x
    for dim in dims if isinstance(dims, (list, tuple)) else [dims]:
        src = t.value_node(out)
        axis = t._axis(src, dim)
        check_whole(t, src, axis, "torch.flip")
        d = src.shape[axis]
        if isinstance(d, Sym) and (scanned := _reverse_scan(t, src, axis)) is not None:
            out = t.wrap(scanned)
            continue
        if isinstance(d, Sym):
            pos, n = t.tile_leaf(d, Op.TILE_INDEX), t.extent_value(d)
            mirrored = t.where(pos < n, t.pointwise("sub", n - 1, pos), pos)
            whole = _whole_power_of_two(d) and src.dtype != torch.bool
            placed = along(t, mirrored, src.shape, axis)
            out = gather(t, out, axis, placed, reread=long_line(src.shape, axis) and not whole)
            if whole and out.node.op is Op.GATHER:
                out.node.attrs["flip"] = True  # codegen: tl.flip (see _whole_power_of_two)
    return out


def _reverse_scan(t: Tracer, src: Node, axis: int) -> Node | None:
    """``flip(cumsum(flip(x)))`` along one whole power-of-two dim as one reverse scan of ``x``
    (``tl.cumsum(x, axis, reverse=True)``): no butterfly of either flip (a suffix sum of 4096
    fp32 a row, one row at 4 warps: 1.18 ms flipped twice against torch.compile's 0.223 on an
    H200, heldout_s30b). Sums and products only, each maybe cast before or after the scan; a
    combine function keeps its flips (Triton's reverse order of combine arguments is not the
    eager scan's)."""
    after = src.inputs[0] if src.op is Op.CAST else src
    if after.op is not Op.SCAN or after.attrs["kind"] not in ("sum", "prod"):
        return None
    if after.attrs["axis"] != axis or after.attrs.get("reverse"):
        return None
    before = after.inputs[0].inputs[0] if after.inputs[0].op is Op.CAST else after.inputs[0]
    if before.op is not Op.GATHER or not before.attrs.get("flip") or before.attrs["axis"] != axis:
        return None
    x = t.cast(before.inputs[0], after.dtype)
    attrs = {**after.attrs, "reverse": True}
    scan = t.emit(Op.SCAN, [x], x.shape, after.dtype, **attrs)
    return t.cast(scan, src.dtype)


def _whole_power_of_two(d: Sym) -> bool:
    """Whether a flip along ``d`` is ``tl.flip`` of the tile: a static extent that is a power of
    two, so no padding lies past the valid positions (``tl.flip`` moves padding to the front).
    Its log2(n) butterfly steps cost a few shuffles where a gather costs shuffles per element
    per element (a [32, 128] bf16 block: 128 ``shfl`` a thread, cross-compiled for sm_90)."""
    n = _static_length(d) or 0
    return d.begin == 0 and n > 1 and n & (n - 1) == 0


def long_line(shape: tuple[Dim, ...], axis: int) -> bool:
    """Whether a roll, flip or shift along dim ``axis`` of a tile of ``shape`` re-reads a loaded
    tile from memory (or recomputes a computed one) rather than permuting its registers. A
    register gather is a few shuffles an element only where the line and the dims inside it
    fit a warp's lanes (``REGISTER_GATHER_LINE``). Along a longer line (or a run-time one) it
    costs shuffles per element for every element a thread holds (a roll of 4096-element bf16
    rows, 2 rows at 8 warps, compiled to 16384 ``shfl.sync.idx`` a thread and 123 registers on
    sm_90; re-read: 32 scalar loads, 42 registers; a take_along_dim's register gather of such
    rows ran 208 ms, its memory read 0.122, gather_loads_ab_s30). Along an outer dim of a
    tile whose inner dims fill the lanes (a block of columns) the line crosses warps: the
    gather goes through shared memory and ptxas keeps the tile on the stack (Mamba-2's
    ``cat([init[None, :], states[:, tp]])`` of [32, 128] fp32 rows: 10.5 KB of spills a
    thread, sm_90; 49 ms where torch.compile took 1.55 on an H100)."""
    positions = line_positions(shape, axis)
    return positions is None or positions > REGISTER_GATHER_LINE


def memory_line(shape: tuple[Dim, ...], axis: int) -> bool:
    """Whether a gather of a computed tile along dim ``axis`` goes through a scratch row in
    memory rather than registers (``MEMORY_GATHER_LINE``; run-time lines always do)."""
    positions = line_positions(shape, axis)
    return positions is None or positions > MEMORY_GATHER_LINE


def widening(src: Dim, index: Dim) -> bool:
    """Whether a gather reads a line of ``src``'s padded lanes into more lanes (``index``'s)."""
    lanes = [
        next_pow2(n) if (n := d if isinstance(d, int) else whole_length(d)) is not None else None
        for d in (src, index)
    ]
    return None not in lanes and lanes[1] > lanes[0]  # type: ignore[operator]


def line_positions(shape: tuple[Dim, ...], axis: int) -> int | None:
    """The positions a gather along dim ``axis`` of ``shape`` moves across: the line's length
    times the (padded) dims inside it (0 for a dim that is no whole dim: never long); ``None``
    where a length is known only at run time or from the config."""
    d = shape[axis]
    if not isinstance(d, Sym):
        return 0
    lanes = _static_length(d)
    for inner in shape[axis + 1 :]:
        if lanes is None:
            break
        size = inner if isinstance(inner, int) else None
        if isinstance(inner, Sym) and inner.kind is SymKind.RDIM:
            size = _static_length(inner)
        elif isinstance(inner, Sym):  # a tile loop's block: known only where the user fixed it
            size = 1 if inner.scalar else inner.fixed_block
        lanes = None if size is None else lanes * next_pow2(size)
    return lanes


def _static_length(d: Sym) -> int | None:
    """The positions a whole dim covers, where both its ends are known when tracing."""
    if not isinstance(d.extent, int) or d.extent_args:
        return None
    return d.extent - (d.begin if isinstance(d.begin, int) else 0)


def static_whole(t: Tracer, src: Node, axis: int, op: str) -> int:
    """The static length of ``src``'s dim ``axis``, a whole dim (an error otherwise)."""
    check_whole(t, src, axis, op)
    d = src.shape[axis]
    if not isinstance(d, Sym):
        return int(d)
    if not isinstance(d.extent, int) or d.extent_args:
        raise ShapeError(
            f"{op} along dim {axis}: the dim's size is known only at run time",
            t.loc,
            hint="use static_shapes=True, or load the dim with a compile-time size: "
            "n = tc.specialize(x.size(d)) in host code, then x[t, :n]; or gather with an "
            "index you compute (torch.gather(x, dim, index))",
        )
    return d.extent


def check_whole(t: Tracer, src: Node, axis: int, op: str = "torch.gather") -> None:
    d = src.shape[axis]
    if tile_block(d):
        why = (
            f"of block_size={d.fixed_block}, whose last tile may be partial"
            if d.fixed_block
            else "whose positions depend on the config"
        )
        raise ShapeError(
            f"{op} along dim {axis} of {shape_str(src.shape)}: {d.name} is a tile loop's "
            f"block {why}",
            t.loc,
            hint="gather along a whole dim (`x[tm, :]` or tc.arange(n)); to read other rows, "
            "load them with a tensor index; the tile's first and last elements are v[..., 0] "
            "and v[..., -1]",
        )


def same_dim(a: Any, b: Any) -> bool:
    """One dim: the same sym (a tile loop's block, a whole extent), or equal ints."""
    return a is b or (isinstance(a, int) and isinstance(b, int) and a == b)


def triangle(t: Tracer, x: Any, diagonal: int, lower: bool, op: str) -> TileValue:
    """``torch.tril`` / ``torch.triu`` of a tile over its last two dims, both whole (a tile
    loop's block would make the positions depend on the config): zeros above (below) the
    ``diagonal``-th diagonal."""
    src = t.value_node(x)
    if src.ndim < 2:
        raise ShapeError(f"{op} of a {src.ndim}-D tile: it needs two dims", t.loc)
    positions = []
    for axis in (src.ndim - 2, src.ndim - 1):
        check_whole(t, src, axis, op)
        d = src.shape[axis]
        index = t.tile_leaf(d, Op.TILE_INDEX) if isinstance(d, Sym) else t.full([1], 0, torch.int32)
        positions.append(along(t, index, src.shape, axis, broadcast=False))
    offset = t.pointwise("sub", positions[1], positions[0])  # column - row
    keep = t.pointwise("le" if lower else "ge", offset, diagonal)
    zero = False if src.dtype == torch.bool else 0
    return t.where(keep, x, t.to_dtype(zero, src.dtype))


def tril(t: Tracer, x: Any, diagonal: int = 0) -> TileValue:
    """Zeros above the ``diagonal``-th diagonal of the last two dims (both whole dims)."""
    return triangle(t, x, diagonal, True, "torch.tril")


def triu(t: Tracer, x: Any, diagonal: int = 0) -> TileValue:
    """Zeros below the ``diagonal``-th diagonal of the last two dims (both whole dims)."""
    return triangle(t, x, diagonal, False, "torch.triu")


LOWERINGS: list[tuple[tuple[Any, ...], Any]] = [
    ((torch.tril, torch.Tensor.tril), tril),
    ((torch.triu, torch.Tensor.triu), triu),
]

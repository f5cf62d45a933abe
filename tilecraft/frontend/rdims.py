"""Whole dims of equal extent are interchangeable (stage: frontend; in: traced nodes and the
shape an op needs; out: the node relabeled to that shape by a no-op view, or unchanged).

A ``:`` (or a slice) names its dim by extent and by its place among the dims of that extent in
one subscript (``Tracer.rdim_for``), so the same positions 0..n-1 can carry different names:
``h[:, :]`` of a square ``[d, d]`` matrix is ``[RDIM_0, RDIM_1]``, and ``x[tm, :] @ h[:, :]`` is
``[tm, RDIM_1]`` while ``out[tm, :]`` indexes ``[tm, RDIM_0]``. Torch's semantics are
positional, so such a value fits: it is relabeled by a reshape view that changes no data (a
reshape also keeps both dims whole, never looped in chunks: ``ir/phases.py``). Dims with a run-time
extent (``static_shapes=False``) interchange with each other only: the one that takes the other's
place also takes its size sources, so the launch checks that both sizes still agree
(``codegen/guards.py``).

:func:`along` places a 1-D index (a whole dim's positions) at one dim of a tile's shape, as the
gathers, shifts and scans over a whole dim need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.ir.nodes import Dim, Node, Op, Shape, Sym, SymKind, tile_block, whole_length

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue


def interchangeable(a: Dim, b: Dim) -> bool:
    """Two whole dims of one extent, both static or both run-time sizes (both cover positions
    0..n-1)."""
    return (
        isinstance(a, Sym)
        and isinstance(b, Sym)
        and a.kind is SymKind.RDIM
        and b.kind is SymKind.RDIM
        and a.extent == b.extent
        and bool(a.extent_args) == bool(b.extent_args)
    )


def _pinnable(static: Sym, run_time: Sym) -> bool:
    """A static whole dim (a slice ``x[t, 2:10]``, ``torch.arange(8)``) standing where a
    run-time whole dim of the same traced extent is wanted: it may, if the launch checks that the
    run-time extent still is that (``Sym.pinned``); a later call of another size is an error,
    as torch's broadcast would be, not a silent read of other positions."""
    return (
        static.kind is SymKind.RDIM
        and run_time.kind is SymKind.RDIM
        and isinstance(static.extent, int)
        and not static.extent_args
        and bool(run_time.extent_args)
        and static.extent == run_time.extent
    )


def _holds_literal(want: Dim, n: int) -> bool:
    """Whether a literal dim of ``n`` elements (a power of two: ``tc.join``, ``torch.stack``)
    fills the whole static dim ``want`` exactly (its block is ``n``, no padding)."""
    return (
        isinstance(want, Sym)
        and want.kind is SymKind.RDIM
        and not want.extent_args
        and want.begin == 0
        and want.extent == n
        and n & (n - 1) == 0  # (1 is 2 ** 0)
    )


def unify(keep: Sym, other: Sym) -> None:
    """``other`` is used as ``keep`` from here on: ``keep``'s launch check covers its sizes."""
    keep.extent_args.extend(a for a in other.extent_args if a not in keep.extent_args)


def conform(tr: Tracer, node: Node, shape: Shape) -> Node:
    """``node`` relabeled so that each of its dims interchangeable with ``shape``'s dim at the
    same place (aligned from the right, as broadcasting aligns) takes that dim's name."""
    offset = len(shape) - node.ndim
    if offset < 0:
        return node
    dims = list(node.shape)
    taken: list[tuple[Sym, Sym]] = []
    for i, d in enumerate(dims):
        want = shape[offset + i]
        if isinstance(d, Sym) and isinstance(want, Sym) and d is not want:
            if block_lanes(d, want):
                dims[i] = want  # a tile's lanes as a registered block size's dim
                continue
            if _pinnable(want, d):
                # a run-time dim where a static one of its traced extent is wanted (`v[tk, :]`
                # beside `tc.zeros([tq, d])` with d specialized): the launch checks d's extent
                d.pinned = True
                dims[i] = want
                continue
            if _pinnable(d, want):
                want.pinned = True  # the launch checks want's run-time extent (codegen/guards)
            elif not interchangeable(d, want):
                continue
            taken.append((want, d))
            dims[i] = want
        elif isinstance(d, int) and d > 1 and _holds_literal(want, d):
            dims[i] = want  # a join's or stack's dim of 2 (4, ...) as the whole dim it fills
        elif isinstance(want, int) and want == 1 and _holds_literal(d, 1):
            dims[i] = 1  # a whole dim of one position (tc.arange(1)) as a size-1 dim
    relabeled = relabel(tr, node, tuple(dims))
    if relabeled is not node:
        for keep, other in taken:
            unify(keep, other)
    return relabeled


def relabel(tr: Tracer, node: Node, dims: Shape) -> Node:
    """``node`` viewed with the dim names ``dims`` (same sizes): a no-op reshape."""
    if tuple(dims) == tuple(node.shape):
        return node
    if len({id(d) for d in dims if isinstance(d, Sym)}) < sum(isinstance(d, Sym) for d in dims):
        return node  # would name two of its dims alike: leave it to the caller's shape check
    return tr.emit(Op.VIEW, [node], tuple(dims), node.dtype, reshape=True)


def conform_all(tr: Tracer, nodes: list[Node]) -> list[Node]:
    """Operands of one pointwise op, each relabeled to one name a place (:func:`_common_shape`)."""
    shape = _common_shape(tr, nodes)
    return [conform(tr, n, shape) for n in nodes]


def _common_shape(tr: Tracer, nodes: list[Node]) -> Shape:
    """One name for each place of a broadcast (right-aligned), no name at two places: the
    widest operand's where it is free, else another operand's name for that place, else a
    fresh whole dim of that extent. Each operand relabeled to it then names its dims distinctly,
    whatever places its names held: ``pts[:, None, :] * rot[None, :, :]`` (``[BP, 3]`` points,
    a ``[3, 3]`` tile: the points' 3 is named like the rotation's first dim) and ``v[:, :, :,
    None] * u[:, None, :, :]`` (``v @ u`` written as a broadcast) broadcast as torch does."""
    widest = max(nodes, key=lambda n: n.ndim)
    ndim = widest.ndim
    shape: list[Dim] = []
    used: set[int] = set()
    for place in range(ndim):
        names = [
            d
            for n in nodes
            if place >= ndim - n.ndim and isinstance(d := n.shape[place - ndim + n.ndim], Sym)
        ]
        first = widest.shape[place]
        pick = next((d for d in (first, *names) if _fits_place(d, names, used)), None)
        if pick is None and names and interchangeable(names[0], names[0]):
            pick = _fresh(tr, names[0], used)
        chosen = pick if pick is not None else first
        if isinstance(chosen, Sym):
            used.add(id(chosen))
        shape.append(chosen)
    return tuple(shape)


def _fits_place(d: Dim, names: list[Sym], used: set[int]) -> bool:
    """Whether ``d`` can name a place whose operands name it ``names``: not taken by an earlier
    place, and each of ``names`` is ``d`` or can be relabeled to it."""
    return (
        isinstance(d, Sym)
        and id(d) not in used
        and all(o is d or interchangeable(o, d) or block_lanes(o, d) for o in names)
    )


def block_lanes(tile: Dim, lanes: Dim) -> bool:
    """Whether ``tile`` is a tile loop's block whose lanes a registered block size's dim
    ``lanes`` holds (both sized by ``Config.block_sizes[slot]``): masked lanes of the last tile
    are loaded as 0, as Helion's accumulators of that shape take them."""
    return (
        tile_block(tile)
        and isinstance(lanes, Sym)
        and lanes.block_slot is not None
        and tile.config_slot == lanes.block_slot
    )


def _fresh(tr: Tracer, like: Sym, used: set[int]) -> Sym:
    """The first whole dim of ``like``'s extent that no earlier place took; a run-time one
    checks ``like``'s sizes at launch (einsum's ``"ij,bjk->bik"`` of two run-time n x n tiles
    names each subscript's n once, however the operands named theirs)."""
    occurrence = 0
    while (
        id(sym := tr.rdim_for(int(like.extent), occurrence, dynamic=bool(like.extent_args))) in used
    ):
        occurrence += 1
    if like.extent_args and not sym.extent_args:
        unify(sym, like)
    return sym


def distinct(tr: Tracer, shape: Shape) -> Shape:
    """``shape`` with a dim that repeats an earlier one renamed to the next whole dim of its
    extent (``a[tb, :, :] @ b[tb, :, :]`` of ``[B, 32, 64] @ [B, 64, 32]`` names both output dims
    ``RDIM(32)``: the second becomes the subscript ``out[tb, :, :]``'s second 32-wide dim)."""
    out: list[Dim] = []
    for d in shape:
        occurrence, repeated = 0, d
        # (interchangeable(d, d): d is a whole dim, one that another name may stand for)
        while isinstance(d, Sym) and any(d is o for o in out) and interchangeable(d, d):
            d = tr.rdim_for(int(d.extent), occurrence, dynamic=bool(d.extent_args))
            occurrence += 1
        if d is not repeated and isinstance(d, Sym) and isinstance(repeated, Sym):
            unify(d, repeated)
        out.append(d)
    return tuple(out)


__all__ = ["conform", "conform_all", "distinct", "interchangeable", "relabel", "unify"]


def along(
    t: Tracer, index: TileValue, shape: Shape, axis: int, broadcast: bool = True
) -> TileValue:
    """A 1-D index (or mask) placed at dim ``axis`` of a tile of ``shape`` (whose dim ``axis``
    is the index's own), broadcast to ``shape`` unless ``broadcast`` is False (size-1 dims
    elsewhere, for an op that broadcasts itself)."""
    node = index.node
    if len(shape) == 1:
        return index
    spec = tuple(":" if i == axis else None for i in range(len(shape)))
    placed_shape = tuple(node.shape[0] if i == axis else 1 for i in range(len(shape)))
    placed = t.emit(Op.VIEW, [node], placed_shape, node.dtype, spec=spec)
    if not broadcast:
        return t.wrap(placed)
    return t.wrap(t.emit(Op.VIEW, [placed], tuple(shape), node.dtype, expand=True))


def broadcast_hint(a: Dim, b: Dim) -> str:
    """What to do about two dims that do not broadcast: whole dims of different sizes come
    from tensors whose sizes differ, of one size from a static and a run-time extent; others
    from different loops."""
    whole = [d for d in (a, b) if isinstance(d, Sym) and whole_length(d) is not None]
    if len(whole) == 2:
        sizes = [whole_length(d) for d in whole]
        if sizes[0] != sizes[1]:
            return (
                f"whole dims of {sizes[0]} and {sizes[1]} elements: the tensors' sizes differ "
                "there (check the arguments' shapes)"
            )
        if bool(whole[0].extent_args) != bool(whole[1].extent_args):
            return (
                "whole dims of one size, one known only at run time (static_shapes=False) and "
                "one when compiling (a constant, tc.specialize, a slice): make both static "
                "(static_shapes=True, or slice the run-time one with the specialized size: "
                "x[t, :n]) or both run-time"
            )
    return "tiles from different loops or extents need explicit [:, None] / [None, :]"

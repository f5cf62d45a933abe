"""Splitting a tile into pieces along a whole static dim (stage: frontend; in: ``torch.chunk`` /
``torch.split`` / ``torch.unbind`` of a traced tile; out: the pieces as traced values).

Equal power-of-two parts of a power-of-two dim (a GLU's halves) are a reshape into dims of 2 and
``tl.split`` (:func:`tilecraft.frontend.views.chunk`: a layout change). Any other parts, as torch
cuts them (``chunk``: parts of ``ceil(n / chunks)``, the last shorter; ``split``: a size each,
or a list of sizes), are constant slices of the dim (:func:`~tilecraft.frontend.tile_shifts.
slice_dim`: a register gather each, an aligned power-of-two block still a split, one element a
masked max). The dim must be a whole static dim: a tile loop's block holds a config-dependent
part of it. Registered in :mod:`~tilecraft.frontend.lowerings`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilecraft.errors import UnsupportedOpError
from tilecraft.frontend import views
from tilecraft.frontend.concat import static_length
from tilecraft.frontend.regroup import pow2
from tilecraft.frontend.tile_shifts import slice_dim

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue

_LOAD_PARTS = "load each part with sliced indices instead (x[t, :h] and x[t, h:])"


def chunk(t: Tracer, x: Any, chunks: int, dim: int = 0) -> tuple[TileValue, ...]:
    """``torch.chunk`` into ``chunks`` parts of ``ceil(n / chunks)`` along a whole static dim
    (fewer where torch gives fewer, the last shorter): equal power-of-two parts are
    ``tl.split``, others slices."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise UnsupportedOpError(
            f"torch.chunk of a tile into chunks={chunks!r}: chunks must be a Python int >= 1",
            t.loc,
            hint="the number of parts is fixed when the kernel compiles: " + _LOAD_PARTS,
        )
    node = t.value_node(x)
    axis = t._axis(node, dim)
    n = static_length(t, "torch.chunk", node, axis, _LOAD_PARTS)
    part = -(-n // chunks)
    return _cut(t, x, axis, n, [min(part, n - s) for s in range(0, n, part)] or [0])


def split(
    t: Tracer, x: Any, split_size: Any = None, dim: int = 0, **kwargs: Any
) -> tuple[TileValue, ...]:
    """``torch.split`` / ``Tensor.split`` along a whole static dim into parts of an int size
    (the last shorter) or a list of sizes summing to the dim: equal power-of-two parts are
    ``tl.split``, others slices."""
    split_size = kwargs.pop("split_size_or_sections", split_size)
    node = t.value_node(x)
    axis = t._axis(node, kwargs.pop("dim", dim))
    n = static_length(t, "torch.split", node, axis, _LOAD_PARTS)
    if isinstance(split_size, int) and not isinstance(split_size, bool) and split_size >= 1:
        sizes = [min(split_size, n - s) for s in range(0, n, split_size)] or [0]
    elif isinstance(split_size, (list, tuple)) and all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in split_size
    ):
        sizes = list(split_size)
    else:
        sizes = []
    if not sizes or sum(sizes) != n:
        raise UnsupportedOpError(
            f"torch.split of a tile's dim {axis} of {n} elements by {split_size!r}: give a "
            f"Python int >= 1 or a list of ints that sum to {n} (as torch does)",
            t.loc,
            hint="sizes are fixed when the kernel compiles: " + _LOAD_PARTS,
        )
    return _cut(t, x, axis, n, sizes)


def unbind(t: Tracer, x: Any, dim: int = 0) -> tuple[TileValue, ...]:
    """``torch.unbind`` along a whole static dim: each element, that dim dropped."""
    node = t.value_node(x)
    axis = t._axis(node, dim)
    n = static_length(t, "torch.unbind", node, axis, "index each element with an int instead")
    return tuple(views.squeeze(t, p, axis) for p in _cut(t, x, axis, n, [1] * n))


def _cut(t: Tracer, x: Any, axis: int, n: int, sizes: list[int]) -> tuple[TileValue, ...]:
    """``x``'s parts of ``sizes`` along ``axis`` (a dim of ``n``): ``tl.split`` where they are
    2, 4, 8... equal power-of-two parts of all ``n``, else a slice each."""
    if n == 0 or any(s == 0 for s in sizes):
        raise UnsupportedOpError(
            f"a part of 0 elements of a tile's dim {axis}: a tile cannot be empty", t.loc
        )
    if len(sizes) == 1:
        return (t.wrap(t.value_node(x)),)
    if pow2(len(sizes)) and len(set(sizes)) == 1 and pow2(sizes[0]) and pow2(n):
        return views.chunk(t, x, len(sizes), axis)
    out: list[TileValue] = []
    start = 0
    for size in sizes:
        out.append(slice_dim(t, t.wrap(t.value_node(x)), axis, slice(start, start + size)))
        start += size
    return tuple(out)

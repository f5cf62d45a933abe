"""Constant-bound slices of host-tensor dims in loads and stores (stage: frontend; in: a Python
``slice`` on one dim of a :class:`HostTensor` access; out: an index item and the dim it adds).

``x[t, :half]``, ``x[t, half:]``, ``x[t, a:b]`` and strided ``x[t, 0::2]`` select a fixed set of
elements of a dim: the access gets a reduction dim (``RDIM``) of ``len(range(start, stop, step))``
elements and the index item ``("rslice", sym, dim, start, step)``, whose element ``i`` is at
``start + i * step``. Two slices of equal length share one reduction dim (as two ``:`` of equal
extent do), so ``x[t, :half] * c - x[t, half:] * s`` broadcasts as users expect. The bounds must be
compile-time ints (literals, shapes or ``tc.specialize`` values): a slice is a tile shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilecraft.errors import ShapeError, UnsupportedOpError
from tilecraft.ir.nodes import Dim, Sym, SymKind
from tilecraft.language.tunables import DynamicInt

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import HostTensor


def _bound(t: HostTensor, item: slice, name: str) -> int | None:
    value = getattr(item, name)
    if value is None:
        return None
    if isinstance(value, DynamicInt) or not isinstance(value, int) or isinstance(value, bool):
        text = f"slice {_text(item)} on '{t.name}'"
        if isinstance(value, DynamicInt):
            raise UnsupportedOpError(
                f"{text}: the {name} bound is a run-time int",
                hint="slice bounds must be compile-time ints; wrap a size in tc.specialize(...)",
            )
        if not hasattr(value, "node"):
            raise UnsupportedOpError(f"{text}: the {name} bound is a {type(value).__name__}")
        raise UnsupportedOpError(
            f"{text}: the {name} bound is computed in device code (a length read from memory); "
            "a slice has a size fixed at compile time",
            hint="loop up to it (for ts in tc.tile(n): acc = acc + x[r, ts].sum()), or read the "
            "whole dim and mask past it (torch.where(tc.arange(size) < n, x[r, :], 0))",
        )
    return int(value)


def _text(item: slice) -> str:
    """``item`` as written, a bound computed in device code as ``n``."""
    parts = [_bound_text(v) for v in (item.start, item.stop)]
    return ":".join(parts) + (f":{_bound_text(item.step)}" if item.step is not None else "")


def _bound_text(value: Any) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, (int, DynamicInt)) else "n"


def slice_item(
    tracer: Tracer, t: HostTensor, dim: int, item: slice, used: list[Sym]
) -> tuple[tuple[Any, ...], Dim]:
    """The index item and result dim of ``t[..., item, ...]`` at tensor dim ``dim``."""
    start, stop, step = (_bound(t, item, name) for name in ("start", "stop", "step"))
    extent = t.shape[dim]
    if step is not None and step < 1:
        raise UnsupportedOpError(
            f"slice {_text(item)} on '{t.name}': step {step} (only positive steps are supported)"
        )
    if t.dynamic and (
        stop is None or stop < 0 or (start or 0) < 0 or not isinstance(item.stop, int)
    ):
        open_end = stop is None and isinstance(start, int) and start >= 0
        hint = (
            "the slice ends at the dim's size, known only at run time: give the end as an "
            f"int too ({start}:{start} + n, n a tc.specialize'd int), tc.specialize the size "
            "itself, or use static_shapes=True"
            if open_end
            else "give both bounds as ints (tc.specialize the size) or use static_shapes=True"
        )
        raise UnsupportedOpError(
            f"slice {_text(item)} on '{t.name}' depends on its size, which is a run-time value "
            "(static_shapes=False)",
            hint=hint,
        )
    if t.dynamic and stop is not None and stop > extent:
        raise ShapeError(f"slice {_text(item)} on '{t.name}' ends past its dim {dim} ({extent})")
    first, last, stride = slice(start, stop, step).indices(extent)
    n = len(range(first, last, stride))
    if n == 0:
        raise ShapeError(
            f"slice {_text(item)} on '{t.name}' selects no elements of dim {dim} (size {extent})"
        )
    if n == 1:
        return ("int", first, dim), 1
    occurrence = sum(1 for s in used if s.kind is SymKind.RDIM and s.extent == n)
    sym = tracer.rdim_for(n, occurrence)
    used.append(sym)
    if first == 0 and stride == 1 and n == extent and not t.dynamic:
        return ("rdim", sym, dim), sym
    return ("rslice", sym, dim, first, stride), sym

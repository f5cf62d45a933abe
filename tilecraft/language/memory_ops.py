"""Explicit memory ops: ``load``, ``store`` and the ``atomic_*`` family (stage: language).

They take Helion's argument forms: the index is a list (or tuple) of per-dim items (tiles, ints,
``:``, ``None``, index tensors), ``load``/``store`` take an ``extra_mask`` that is and-ed with the
bounds masks, ``load`` an ``eviction_policy``, atomics a memory-order ``sem``. Inside a traced
device loop each call is handed to the tracer; in ref mode it has its eager torch meaning, where an
atomic applies every element once, duplicates included (an embedding backward scattering rows).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from typing import Any

import torch

from tilecraft.errors import DeviceCodeError
from tilecraft.language import _context, ref_access, ref_views
from tilecraft.language.loops import RefTile

SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
EVICTION_POLICIES = ("first", "last")  # also accepted with Triton's "evict_" prefix


def _items(index: Any) -> tuple[Any, ...]:
    """Helion passes the index as a list of per-dim items; a subscript passes a tuple."""
    if isinstance(index, list):
        return tuple(index)
    return index if isinstance(index, tuple) else (index,)


def _check_sem(op: str, sem: str) -> None:
    if sem not in SEMANTICS:
        raise DeviceCodeError(
            f"{op}(sem={sem!r}) is not a memory order",
            ref_access.user_loc(),
            hint="use one of " + ", ".join(repr(s) for s in SEMANTICS),
        )


def _check_eviction(policy: str | None) -> str:
    if policy is None or policy == "":
        return ""
    bare = policy.removeprefix("evict_")
    if bare not in EVICTION_POLICIES:
        raise DeviceCodeError(
            f"load(eviction_policy={policy!r}) is not an eviction policy",
            ref_access.user_loc(),
            hint="use 'evict_first', 'evict_last' or None",
        )
    return bare


def _ref_items(items: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(i.as_index() if isinstance(i, RefTile) else i for i in items)


def load(
    tensor: Any, index: Any, extra_mask: Any = None, eviction_policy: str | None = None
) -> Any:
    """``tensor[index]``, masked by ``extra_mask`` too (masked-off elements read 0). ``index``
    is a list of what a subscript takes (tiles, ints, index tensors); a whole dim is
    ``slice(None)`` (``:`` is not Python inside a list): ``tc.load(q, [tb, slice(None)])``.

    A masked-off element's index may lie outside the tensor (a shifted window's columns -1 and
    ``w``): it is never read, in ref mode either (``ref_access``)."""
    items = _items(index)
    policy = _check_eviction(eviction_policy)
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("load", tensor, items, extra_mask=extra_mask, eviction_policy=policy)
    return ref_access.load("tc.load", tensor, _ref_items(items), extra_mask)


def store(tensor: Any, index: Any, value: Any, extra_mask: Any = None) -> None:
    """``tensor[index] = value`` where ``extra_mask`` holds (everywhere when it is None);
    ``index`` as :func:`load`'s (``slice(None)`` for a whole dim).

    A masked-off element is not written, in ref mode either, and its index may lie outside the
    tensor."""
    items = _items(index)
    tracer = _context.device()
    if tracer is not None:
        tracer.call("store", tensor, items, value, extra_mask=extra_mask)
        return
    ref_access.store("tc.store", tensor, _ref_items(items), value, extra_mask)


def atomic_value_error(
    kind: str, name: str, target: torch.dtype, value: torch.dtype, loc: Any = None
) -> DeviceCodeError | None:
    """Float values into an integer target are refused, as torch refuses ``index_add_`` and
    ``out[idx] += w`` of them: cast silently, a weighted bincount of 0.6, 0.7, 0.8 added 0."""
    if target.is_floating_point or not value.is_floating_point:
        return None
    return DeviceCodeError(
        f"tc.atomic_{kind} of {value} values into '{name}' ({target}): each value would be "
        "truncated to an integer first (torch refuses this update too)",
        loc,
        hint=f"make '{name}' a float tensor, or convert the values as you mean them "
        f"(`torch.round(w).to({target})`)",
    )


def _ref_atomic(
    kind: str, target: torch.Tensor, items: tuple[Any, ...], value: Any, mask: Any = None
) -> Any:
    """Every indexed element once, in order, duplicates included, where ``mask`` holds; returns
    the previous values (0 where masked off)."""
    error = atomic_value_error(kind, "target", target.dtype, torch.as_tensor(value).dtype)
    if error is not None:
        raise error
    idx, keep = ref_access.checked_access(f"tc.atomic_{kind}", target, _ref_items(items), mask)
    ref_views.before_write(target)
    flat_index = ref_access.element_positions(target, idx)
    vals = torch.as_tensor(value, device=target.device).to(target.dtype)
    vals = vals.expand(flat_index.shape)
    if keep is None:  # (no boolean selection: meta tensors, shapes only, cannot take one)
        lin, vals = flat_index.reshape(-1), vals.reshape(-1)
    else:
        keep = keep.expand(flat_index.shape)
        lin, vals = flat_index[keep], vals[keep]
    previous = target.reshape(-1)[lin]
    work = target.contiguous().view(-1)
    if kind == "add":
        previous = (previous + _lane_ordered_adds(lin, vals)).to(target.dtype)
        work.index_add_(0, lin, vals)
    elif kind in ("max", "min"):
        work.scatter_reduce_(0, lin, vals, reduce="a" + kind, include_self=True)
    elif kind == "xchg":
        work[lin] = vals
    else:  # and / or / xor: no scatter form, apply one element at a time
        fn = {"and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor}[kind]
        for k in range(lin.numel()):
            work[lin[k]] = fn(work[lin[k]], vals[k])
    if work.data_ptr() != target.data_ptr():
        target.copy_(work.view(target.shape))
    if keep is None:
        return previous.view(flat_index.shape)
    old = torch.zeros(flat_index.shape, dtype=target.dtype, device=target.device)
    old[keep] = previous
    return old


@dataclasses.dataclass
class LaneOrder:
    """Whether ref mode marks the previous values an atomic add returns that depend on the order
    of its lanes on one address (a GPU picks its own: another lane's add comes before or after),
    and whether any call returned such values: the accuracy baseline runs ref mode again marking
    them and compares only what the marks do not reach (``autotune/baseline.py``)."""

    mark: bool = False
    dependent: bool = False


_LANE_ORDER: contextvars.ContextVar[LaneOrder | None] = contextvars.ContextVar(
    "tc_lane_order", default=None
)


@contextlib.contextmanager
def lane_order(mark: bool) -> Iterator[LaneOrder]:
    """Ref-mode atomic adds inside note order-dependent returns, and mark them when ``mark``
    (NaN for floats, one more for ints)."""
    order = LaneOrder(mark)
    token = _LANE_ORDER.set(order)
    try:
        yield order
    finally:
        _LANE_ORDER.reset(token)


def _lane_ordered_adds(lin: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
    """:func:`_earlier_adds`, with the lanes whose value another lane's nonzero add to their
    address could change noted (and marked) under :func:`lane_order`."""
    adds = _earlier_adds(lin, vals)
    order = _LANE_ORDER.get()
    if order is None or lin.numel() < 2:
        return adds
    size = vals.abs().to(torch.float64)
    others = torch.zeros(int(lin.max()) + 1, dtype=torch.float64, device=lin.device)
    dependent = (others.index_add_(0, lin, size)[lin] - size) > 0
    if not bool(dependent.any()):
        return adds
    order.dependent = True
    if not order.mark:
        return adds
    if adds.is_floating_point():
        return torch.where(dependent, float("nan"), adds)
    return adds + dependent.to(adds.dtype)


def _earlier_adds(lin: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
    """Per element, the sum of the values earlier elements (in order) add to its address: what
    it finds there beyond the old value, as lanes of one atomic applied in order find (a slot
    allocator's ``tc.atomic_add(count, [bucket], 1)`` gives a bucket's elements 0, 1, 2...)."""
    order = torch.argsort(lin, stable=True)
    grouped, added = lin[order], vals[order]
    before = torch.cumsum(added, 0) - added  # exclusive, over all addresses
    first = torch.ones_like(grouped, dtype=torch.bool)
    first[1:] = grouped[1:] != grouped[:-1]
    starts = torch.where(first, torch.arange(len(grouped), device=lin.device), 0)
    starts = torch.cummax(starts, 0).values  # each element's group start
    out = torch.empty_like(before)
    out[order] = before - before[starts]
    return out


def _atomic(kind: str, target: Any, index: Any, value: Any, sem: str, extra_mask: Any) -> Any:
    _check_sem(f"atomic_{kind}", sem)
    items = _items(index)
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("atomic", kind, target, items, value, sem=sem, extra_mask=extra_mask)
    return _ref_atomic(kind, target, items, value, extra_mask)


def atomic_add(
    target: Any, index: Any, value: Any, sem: str = "relaxed", extra_mask: Any = None
) -> Any:
    """``target[index] += value`` atomically where ``extra_mask`` holds (everywhere when it is
    None); returns the previous values (0 where masked off)."""
    return _atomic("add", target, index, value, sem, extra_mask)


def atomic_max(
    target: Any, index: Any, value: Any, sem: str = "relaxed", extra_mask: Any = None
) -> Any:
    """``target[index] = max(target[index], value)`` atomically; returns the previous values."""
    return _atomic("max", target, index, value, sem, extra_mask)


def atomic_min(
    target: Any, index: Any, value: Any, sem: str = "relaxed", extra_mask: Any = None
) -> Any:
    """``target[index] = min(target[index], value)`` atomically; returns the previous values."""
    return _atomic("min", target, index, value, sem, extra_mask)


def atomic_xchg(
    target: Any, index: Any, value: Any, sem: str = "relaxed", extra_mask: Any = None
) -> Any:
    """``target[index] = value`` atomically; returns the previous values."""
    return _atomic("xchg", target, index, value, sem, extra_mask)


def atomic_and(
    target: Any, index: Any, value: Any, sem: str = "relaxed", extra_mask: Any = None
) -> Any:
    """``target[index] &= value`` atomically (int32 or int64 targets)."""
    return _atomic("and", target, index, value, sem, extra_mask)


def atomic_or(
    target: Any, index: Any, value: Any, sem: str = "relaxed", extra_mask: Any = None
) -> Any:
    """``target[index] |= value`` atomically (int32 or int64 targets)."""
    return _atomic("or", target, index, value, sem, extra_mask)


def atomic_xor(
    target: Any, index: Any, value: Any, sem: str = "relaxed", extra_mask: Any = None
) -> Any:
    """``target[index] ^= value`` atomically (int32 or int64 targets)."""
    return _atomic("xor", target, index, value, sem, extra_mask)

"""The containers a kernel's arguments may hold tensors in (shared by runtime, frontend and
autotune): lists, tuples, named tuples, dicts, SimpleNamespaces and dataclass instances.

One walk for what reads them (the specialization key, the checks of written and grad-requiring
arguments) and one for what copies them (the trace's meta copies, the tuner's clones), so the
kinds of container each stage knows cannot drift apart.
"""

from __future__ import annotations

import copy
import dataclasses
import types
from collections.abc import Callable
from typing import Any

import torch


def fields(value: Any) -> list[tuple[Any, Any]] | None:
    """The (key, item) pairs of a dict, a SimpleNamespace or a dataclass instance; None for
    anything else."""
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, types.SimpleNamespace):
        return list(vars(value).items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
    return None


def items(value: Any) -> list[Any]:
    """The items of a list or tuple, or the values of :func:`fields`; [] for anything else."""
    if isinstance(value, (list, tuple)):
        return list(value)
    return [item for _, item in fields(value) or []]


def copied(value: Any, leaf: Callable[[torch.Tensor], torch.Tensor], memo: dict[int, Any]) -> Any:
    """``value`` with each tensor replaced by ``leaf(tensor)``, containers copied (not the
    caller's: host code may update a state dict), anything else as it is. ``memo`` maps the
    ``id`` of each value copied to its copy: one tensor met twice (a parameter in a list and as
    a state dict's key) gets one copy, so ``state[p]`` finds it; a leaf's ``.grad`` is copied
    with it (host code reads ``p.grad``)."""
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, torch.Tensor):
        out = memo[id(value)] = leaf(value)
        if value.is_leaf and value.grad is not None and out is not value:
            out.grad = copied(value.grad, leaf, memo)
        return out
    out = _rebuilt(value, lambda v: copied(v, leaf, memo))
    if out is not value:
        memo[id(value)] = out
    return out


def _rebuilt(value: Any, each: Callable[[Any], Any]) -> Any:
    """A copy of a container with ``each`` applied to its items (a dict's tensor keys too);
    ``value`` itself for anything else."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(each(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(each(v) for v in value)
    if isinstance(value, dict):
        out = copy.copy(value)  # (a defaultdict keeps its factory)
        out.clear()
        for k, v in value.items():
            out[each(k) if isinstance(k, torch.Tensor) else k] = each(v)
        return out
    if isinstance(value, types.SimpleNamespace):
        return types.SimpleNamespace(**{k: each(v) for k, v in vars(value).items()})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        record = copy.copy(value)
        for field in dataclasses.fields(value):  # (object.__setattr__: frozen ones too)
            object.__setattr__(record, field.name, each(getattr(value, field.name)))
        return record
    return value


def tensors(value: Any, seen: set[int] | None = None) -> list[torch.Tensor]:
    """Every tensor ``value`` holds, at any depth (a dict's tensor keys too), each once."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    keys = list(value.keys()) if isinstance(value, dict) else []
    return [t for v in (*keys, *items(value)) for t in tensors(v, seen)]

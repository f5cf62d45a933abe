"""Specializations that keep coming (stage: runtime; in: a kernel's specialization keys and a
call's values; out: one warning naming the arguments whose values keep making new ones).

Each new key traces and compiles the kernel again (on a GPU about a second). An optimizer
kernel taking its step count as an int (``static_shapes=True`` compiles ints in) or its
hyperparameters in a dict (a container's numbers are compiled in) traced again every step,
silently: at the :data:`WARN_AT`-th specialization (and at 4x, 16x... as many) the kernel
says which arguments keep changing and how to pass them at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

WARN_AT = 8  # specializations of one kernel before it warns (and at 4x as many again)


def retrace_warning(
    kernel: str,
    keys: Sequence[tuple[Any, ...]],
    names: Sequence[str],
    values: Sequence[Any],
    static_shapes: bool = True,
) -> str | None:
    """The warning for ``kernel`` with these specialization ``keys`` (one per traced
    specialization, the newest last; each holds one entry per parameter first), when there
    are :data:`WARN_AT` of them, or 4, 16... times as many; ``values``: the newest call's
    arguments. It names the arguments that keep bringing values the first half of the keys
    never had: an optimizer kernel called for each of 4 parameter shapes with an int step
    has 4 shapes and 2 steps at the 8th, and the step is what keeps coming. None before
    that, or when no argument keeps changing (new targets, say; a fixed set of shapes; with
    dynamic shapes, tensors of new size buckets: nothing to change)."""
    count = len(keys)
    if not _warns_at(count):
        return None
    half = count // 2
    changing = [
        i
        for i in range(len(names))
        if {repr(k[i]) for k in keys[half:]} - {repr(k[i]) for k in keys[:half]}
        and (static_shapes or not isinstance(values[i], torch.Tensor))
    ]
    if not changing:
        return None
    parts = [f"'{names[i]}' ({_why(values[i])})" for i in changing]
    return (
        f"tilecraft: {kernel}: {count} specializations traced and compiled so far, for new "
        f"values of {', '.join(parts)}; each new value compiles the kernel again"
    )


def _warns_at(count: int) -> bool:
    """At :data:`WARN_AT` specializations, then 4x, 16x... as many (new ones keep costing)."""
    at = WARN_AT
    while at < count:
        at *= 4
    return at == count


def _why(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return (
            "tensors of new shapes: @tc.kernel(static_shapes=False) compiles one specialization "
            "per power-of-two size bucket"
        )
    if isinstance(value, bool):
        return "a bool, compiled in: one specialization each"
    if isinstance(value, int):
        return (
            "an int, compiled in with static_shapes=True: a step count or a seed that is no "
            "size can be passed as a float or a 0-d tensor, which are run-time values, or use "
            "static_shapes=False"
        )
    return (
        f"a {type(value).__name__} whose numbers are compiled in: pass the ones that change "
        "(a learning rate, a step) as float arguments or 0-d tensors, which are run-time values"
    )

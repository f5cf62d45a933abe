"""Which host path a compiled variant serves (stage: runtime; in: a launch's loop index and grid
bounds; out: nothing, or the signal to trace another variant, or a located error).

A specialization keys on tensor shapes and int/bool values, not on floats; host code that derives
a grid bound or a branch from a float (``k = int(n * frac)``, ``if a > 0:``) reaches other device
loops, or gives one other bounds, than the call the variant was traced on; an int or bool it
derives and device code reads (``flag = a > 0``; with dynamic shapes ``big = n > 12``) was baked
in. A tensor the host code takes from elsewhere than an argument (a module's weight, a global)
has its layout baked in. Baked bounds, baked ints and bools, those tensors' layouts (and a loop
the trace never reached) are checked at each launch: before any launch of the call another
variant is traced for these arguments (as ``tc.specialize`` does); after one, the call cannot be
re-run without repeating its side effects, and it stops with a located error.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NoReturn

import torch

from tilecraft.errors import DeviceCodeError


class Respecialize(Exception):
    """Host code took another path than the traced one (``tc.specialize`` saw another value, a
    device loop got other bounds, or one the trace never reached): trace another variant."""


def same_bounds(traced: tuple[tuple[int, int] | None, ...], spec: Any) -> bool:
    """Whether a launch's grid bounds are the ones baked in when its loop was traced."""
    return all(
        want is None or want == (b, e)
        for want, b, e in zip(traced, spec.begins, spec.ends, strict=False)
    )


def same_scalars(traced: tuple[tuple[str, int], ...], env: dict[str, Any]) -> bool:
    """Whether the host ints and bools a loop baked in have their traced values (``a > 0`` of
    a float argument may not: floats are in no specialization key)."""
    for name, value in traced:
        now = env.get(name)
        if now != value or type(now) is not type(value):
            return False
    return True


@dataclasses.dataclass(frozen=True)
class Layout:
    """What a loop's generated code assumes of one tensor: its dtype, and with static shapes
    its shape and strides (literals), with dynamic ones the dims whose stride of 1 it keeps
    literal (``HostTensor.unit_stride``)."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...] | None
    stride: tuple[int, ...] | None
    unit_dims: tuple[int, ...] = ()

    def holds(self, now: Any) -> bool:
        if not isinstance(now, torch.Tensor) or now.dtype != self.dtype:
            return False
        if self.shape is not None and (tuple(now.shape) != self.shape or now.stride() != self.stride):
            return False
        return all(now.stride(d) == 1 or now.shape[d] == 1 for d in self.unit_dims)


def host_layouts(tensors: dict[str, Any]) -> tuple[Layout, ...]:
    """The layouts a loop assumes of each tensor the host code made or took from elsewhere
    than an argument (a module's weight, a global, a dict's item). The key covers only
    arguments: ``model.to(memory_format=torch.channels_last)`` or a rebound global kept the
    first call's strides (silently wrong values) or shape (a read past the end)."""
    return tuple(
        Layout(t.name, t.dtype, None, None, tuple(d for d in range(t.ndim) if t.unit_stride(d)))
        if t.dynamic
        else Layout(t.name, t.dtype, tuple(t.shape), tuple(t.stride))
        for t in tensors.values()
        if not t.argument
    )


def same_layouts(traced: tuple[Layout, ...], env: dict[str, Any]) -> bool:
    """Whether each tensor of ``traced`` has the layout its loop was traced with."""
    return all(layout.holds(env.get(layout.name)) for layout in traced)


def host_path_changed(kernel: Any, index: int, launched: int) -> NoReturn:
    """Device loop ``index`` was reached with other bounds (or host tensors of other layouts), or
    at all, where the traced call did not: another variant if no loop of this call has launched yet, else a located error."""
    if launched == 0:
        raise Respecialize(("loop", index))
    raise DeviceCodeError(
        f"{kernel.__name__}(): device loop {index} got other bounds or host ints/bools, or was "
        "reached, where the traced call did not, after this call had launched other loops: the "
        "host code derives them from a value the compiled kernel does not key on (a float "
        "argument)",
        kernel.source.loops[index].loc,
        hint="compute the bound from ints (pass it as an int argument) or mark the float with "
        "tc.specialize(...), so each value gets its own compiled variant",
    )

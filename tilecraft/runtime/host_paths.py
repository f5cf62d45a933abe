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


class HostLayouts:
    """The layouts a loop's code assumes of each tensor the host code made or took from
    elsewhere than an argument (a module's weight, a global, a dict's item): its dtype, with
    static shapes its shape and strides (literals in the code), with dynamic ones the dims
    whose stride of 1 the code keeps literal (``HostTensor.unit_stride``). The key covers
    only arguments: ``model.to(memory_format=torch.channels_last)`` or a rebound global kept
    the first call's strides (silently wrong values) or shape (a read past the end).

    Dtypes, shapes and strides are the first launch's: the trace runs the host code on meta
    tensors, which autocast leaves in fp32 where the call's own ``x @ w`` is bf16."""

    def __init__(self, tensors: dict[str, Any]):
        made = [t for t in tensors.values() if not t.argument]
        self.names = tuple(t.name for t in made)
        self.dynamic = tuple(t.dynamic for t in made)
        self.unit_dims = tuple(
            tuple(d for d in range(t.ndim) if t.dynamic and t.unit_stride(d)) for t in made
        )
        self.first: list[Any] | None = None

    def hold(self, env: dict[str, Any]) -> bool:
        """Whether ``env``'s tensors have the layouts of the first launch (kept on the first)."""
        if not self.names:
            return True
        now = [self._layout(env.get(n), dynamic) for n, dynamic in zip(self.names, self.dynamic)]
        if self.first is None:
            self.first = now
        elif now != self.first:
            return False
        for name, dims in zip(self.names, self.unit_dims, strict=True):
            t = env[name]
            if any(t.stride(d) != 1 and t.shape[d] != 1 for d in dims):
                return False
        return True

    @staticmethod
    def _layout(t: Any, dynamic: bool) -> Any:
        if not isinstance(t, torch.Tensor):
            return None
        return t.dtype if dynamic else (t.dtype, t.shape, t.stride())


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

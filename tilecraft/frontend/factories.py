"""torch's tensor factories in device code (stage: frontend; in: a ``torch.arange`` /
``torch.zeros`` / ``torch.ones`` / ``torch.full`` call the user's device code makes; out: the tile
the ``tc`` form builds).

A factory given only Python numbers reaches no tile's ``__torch_function__``, so eagerly it would
build a CPU tensor that device code cannot use ("cannot use a Tensor as a device value"). While
device code is evaluated, :class:`DeviceFactories` catches these calls and builds the tiles
``tc.arange`` / ``tc.full`` would, with torch's dtypes (``torch.arange(n)`` is int64, float
bounds give float32); ``device=`` is ignored (a tile lives on the kernel's device). Other
factories of Python numbers alone (``torch.tril_indices``, ``torch.eye``,
``torch.linspace``) are an error naming them, at the user's line."""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from tilecraft.errors import UnsupportedOpError
from tilecraft.language import creation


class DeviceFactories(TorchFunctionMode):
    """Routes torch's factories to the ``tc`` forms; every other call goes on unchanged."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        build = _FACTORIES.get(func)
        if build is None:
            if func in _CPU_FACTORIES and not _any_tensor((args, kwargs)):
                _unsupported(func)
            return func(*args, **kwargs)
        kwargs.pop("device", None)
        kwargs.pop("requires_grad", None)
        return build(*args, **kwargs)


def _any_tensor(value: Any) -> bool:
    """Whether a tensor or a tile is among the call's operands (nested in lists too)."""
    if isinstance(value, dict):
        return any(_any_tensor(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_any_tensor(v) for v in value)
    return isinstance(value, torch.Tensor) or hasattr(value, "__torch_function__")


def _unsupported(func: Any) -> None:
    """A tensor built in device code from numbers alone is a CPU tensor no kernel can read."""
    from tilecraft.frontend.catalog import torch_name
    from tilecraft.language import _context

    tracer = _context.device()
    raise UnsupportedOpError(
        f"torch op '{torch_name(func)}' is not supported in device code",
        getattr(tracer, "loc", None),
        hint="build it with tc.arange / torch.where on tiles, or make it in host code (before "
        "the loop) and index it there",
    )


def _arange(*bounds: Any, dtype: torch.dtype | None = None) -> Any:
    if dtype is None:
        dtype = torch.float32 if any(isinstance(b, float) for b in bounds) else torch.int64
    return creation.arange(*bounds, dtype=dtype)


def _filled(value: float) -> Any:
    def build(*size: Any, dtype: torch.dtype | None = None) -> Any:
        shape = size[0] if len(size) == 1 and isinstance(size[0], (list, tuple)) else size
        return creation.full(list(shape), value, dtype or torch.float32)

    return build


def _full(size: Any, fill_value: Any, dtype: torch.dtype | None = None) -> Any:
    if dtype is None:
        dtype = (
            torch.bool
            if isinstance(fill_value, bool)
            else (torch.int64 if isinstance(fill_value, int) else torch.float32)
        )
    return creation.full(list(size), fill_value, dtype)


# factories of numbers alone that device code may reach for; built eagerly they are CPU tensors
# ("index of type Tensor on 'z'" named neither the op nor a fix). (Not torch.empty or
# torch.tensor: tilecraft's own rules build such tensors while device code is evaluated.)
_CPU_FACTORIES = frozenset(
    {
        torch.tril_indices,
        torch.triu_indices,
        torch.eye,
        torch.linspace,
        torch.logspace,
        torch.randperm,
    }
)
_FACTORIES = {
    torch.arange: _arange,
    torch.zeros: _filled(0.0),
    torch.ones: _filled(1.0),
    torch.full: _full,
}

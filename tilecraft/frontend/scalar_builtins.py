"""Python's ``max`` and ``min`` on scalar device values (stage: frontend; in: the arguments of a
``max(...)`` / ``min(...)`` call in device code; out: a ``maximum`` / ``minimum`` node).

Users clamp a loop bound the way they would in Python, ``lo = max(tm.begin - window + 1, 0)``.
The builtins compare with ``>``, whose traced result is a device value that has no Python truth
value, so device code gets these versions instead: on scalars they lower to ``tl.maximum`` /
``tl.minimum`` (torch's promotion, Python numbers weak), on plain Python values they are the
builtins. A tile is refused with the elementwise and reducing torch forms to use instead.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from tilecraft.errors import DeviceCodeError
from tilecraft.frontend.values import TileProxy, TileValue
from tilecraft.ir.nodes import shape_str

_POINTWISE = {"max": "maximum", "min": "minimum"}


def _is_device(value: Any) -> bool:
    return isinstance(value, (TileValue, TileProxy))


def _extreme(name: str) -> Callable[..., Any]:
    fallback = getattr(builtins, name)

    def device_extreme(*args: Any, **kwargs: Any) -> Any:
        values = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
        if not any(_is_device(v) for v in values):
            return fallback(*args, **kwargs)
        if kwargs:
            raise DeviceCodeError(
                f"{name}(..., {', '.join(f'{k}=' for k in kwargs)}) on device values",
                hint=f"{name}() of scalar device values takes only the values to compare",
            )
        tracer = next(v for v in values if _is_device(v)).tracer
        for v in values:
            node = tracer.value_node(v) if _is_device(v) else None
            if node is not None and node.ndim != 0:
                raise DeviceCodeError(
                    f"{name}() of a tile of shape {shape_str(node.shape)}: Python's {name} "
                    "compares whole values, a tile has one per element",
                    hint=f"use torch.{_POINTWISE[name]}(a, b) elementwise, or torch.a{name}"
                    f"(x, dim) to reduce a tile; {name}() takes scalars (tile.begin, a loaded "
                    "element)",
                )
        if len(values) < 2:
            raise DeviceCodeError(
                f"{name}() of one scalar device value: there is nothing to compare"
            )
        result = values[0]
        for v in values[1:]:
            result = tracer.pointwise(_POINTWISE[name], result, v)
        return result

    device_extreme.__name__ = name
    device_extreme.__doc__ = (
        f"Python's {name} in device code: ``tl.{_POINTWISE[name]}`` on scalars."
    )
    return device_extreme


DEVICE_BUILTINS: dict[str, Callable[..., Any]] = {name: _extreme(name) for name in _POINTWISE}


def with_device_builtins(scope: dict[str, Any]) -> dict[str, Any]:
    """``scope`` with the device ``max`` / ``min``, unless the user's module defines its own."""
    for name, fn in DEVICE_BUILTINS.items():
        scope.setdefault(name, fn)
    return scope

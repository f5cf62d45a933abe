"""Python's ``max``, ``min`` and ``math`` functions on scalar device values (stage: frontend; in:
the arguments of a ``max(...)`` / ``min(...)`` / ``math.sqrt(...)`` call in device code; out: a
``maximum`` / ``minimum`` node, or the torch function's).

Users clamp a loop bound the way they would in Python, ``lo = max(tm.begin - window + 1, 0)``.
The builtins compare with ``>``, whose traced result is a device value that has no Python truth
value, so device code gets these versions instead: on scalars they lower to ``tl.maximum`` /
``tl.minimum`` (torch's promotion, Python numbers weak), on plain Python values they are the
builtins. A tile is refused with the elementwise and reducing torch forms to use instead.
"""

from __future__ import annotations

import builtins
import math
import types
from collections.abc import Callable
from typing import Any

import torch

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


# Python's math functions on a scalar device value (a float argument is one at run time): the
# torch function of the same meaning; math.floor / ceil / trunc give Python ints, so int64
_MATH_AS_TORCH: dict[str, Callable[..., Any]] = {
    **{
        name: getattr(torch, name)
        for name in (
            "sqrt", "exp", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan", "tanh",
            "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc",
            "isnan", "isinf", "isfinite", "atan2", "hypot", "copysign",
        )
    },
    "fabs": torch.abs,
    "pow": torch.pow,
    "log": lambda x, base=None: torch.log(x) if base is None else torch.log(x) / math.log(base),
    **{
        name: (lambda fn: lambda x: fn(x).to(torch.int64))(getattr(torch, name))
        for name in ("floor", "ceil", "trunc")
    },
}  # fmt: skip


_TORCH_NAMES = {"fabs": "abs"}  # math functions whose torch counterpart is named apart


def _device_math(name: str) -> Callable[..., Any]:
    fallback, torch_fn = getattr(math, name), _MATH_AS_TORCH[name]

    def device_math(*args: Any) -> Any:
        if not any(_is_device(v) for v in args):
            return fallback(*args)
        for v in args:
            node = v.tracer.value_node(v) if _is_device(v) else None
            if node is not None and node.ndim != 0:  # as Python's math refuses it in ref mode
                raise DeviceCodeError(
                    f"math.{name}() of a tile of shape {shape_str(node.shape)}: Python's math "
                    "takes one number, a tile has one per element",
                    hint=f"use torch.{_TORCH_NAMES.get(name, name)}(x) elementwise; "
                    f"math.{name}() takes scalars (a loaded element, a reduced value)",
                )
        return torch_fn(*args)

    device_math.__name__ = name
    device_math.__doc__ = f"math.{name} in device code: torch's on a scalar device value."
    return device_math


_DEVICE_MATH = {name: _device_math(name) for name in _MATH_AS_TORCH}
_MATH_MODULE = types.SimpleNamespace(
    **{**{k: v for k, v in vars(math).items() if not k.startswith("_")}, **_DEVICE_MATH}
)


def with_device_builtins(
    scope: dict[str, Any], helpers: dict[int, Any] | None = None
) -> dict[str, Any]:
    """``scope`` with the device ``max`` / ``min``, unless the user's module defines its own,
    and ``math`` (the module or its functions imported by name) taking scalar device values.
    The user's helper functions it names get the same in their own globals (``def flux(v, a):
    return math.sqrt(a) * v`` called from device code); ``helpers``: those rebuilt so far."""
    helpers = {} if helpers is None else helpers
    for name, fn in DEVICE_BUILTINS.items():
        scope.setdefault(name, fn)
    for name, value in scope.items():
        if value is math:
            scope[name] = _MATH_MODULE
        elif isinstance(value, types.BuiltinFunctionType) and value.__self__ is math:
            scope[name] = _DEVICE_MATH.get(value.__name__, value)
        elif _helper(value):
            scope[name] = _device_helper(value, helpers)
    return scope


_LIBRARIES = ("torch", "tilecraft", "triton", "numpy", "builtins", "math", "functools")


def _helper(value: Any) -> bool:
    """A plain Python function of the user's (not a library's) that names ``max``, ``min`` or
    ``math``: called from device code, it may meet device values."""
    if not isinstance(value, types.FunctionType):
        return False
    if (value.__module__ or "").split(".")[0] in _LIBRARIES:
        return False
    return bool({"max", "min", "math", *_DEVICE_MATH} & set(value.__code__.co_names))


def _device_helper(fn: types.FunctionType, helpers: dict[int, Any]) -> types.FunctionType:
    """``fn`` over a copy of its globals with the device builtins (its own module's names
    read as they are now; a ``global`` it assigns lands in the copy, as for the kernel)."""
    if id(fn) in helpers:
        return helpers[id(fn)]
    scope = dict(fn.__globals__)
    made = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    made.__kwdefaults__ = fn.__kwdefaults__
    helpers[id(fn)] = made
    with_device_builtins(scope, helpers)  # (after the memo: recursive helpers end)
    return made

"""Helion's ``helion.exc`` under tilecraft's name (stage: the user-facing surface; in: a name a
ported kernel reads from ``helion.exc``; out: tilecraft's error of that role, or a warning
category).

tilecraft raises the errors of :mod:`tilecraft.errors` (each with the user's file:line); they are
here too. Helion's kernels also name its warning categories, chiefly in
``@helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])``; tilecraft never issues
them, so any other capitalized name here is a warning category of that name (the decorator of
Helion's cross_entropy example failed at import with "module 'tilecraft' has no attribute
'exc'").
"""

from __future__ import annotations

from tilecraft.errors import (
    ArgumentError,
    ConfigError,
    DeviceCodeError,
    ShapeError,
    TilecraftError,
    UnsupportedOpError,
)

__all__ = [
    "ArgumentError",
    "ConfigError",
    "DeviceCodeError",
    "HelionWarning",
    "ShapeError",
    "TilecraftError",
    "UnsupportedOpError",
]


class HelionWarning(UserWarning):
    """The base of Helion's warning categories, which tilecraft never issues."""


def __getattr__(name: str) -> type[HelionWarning]:
    if not name[:1].isupper():
        raise AttributeError(f"module 'tilecraft.exc' has no attribute {name!r}")
    category = type(name, (HelionWarning,), {"__module__": __name__})
    globals()[name] = category
    return category

"""Tunable value sets for ``register_tunable`` in Helion's fragment form (stage: language).

``register_tunable(name, PowerOfTwoFragment(16, 256, 64))`` is the same as
``register_tunable(name, [64, 16, 32, 128, 256])``: a fragment is a finite set of choices whose
first entry is its default. Helion users import these from ``helion.autotuner``; here they are
in ``tilecraft.language``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tilecraft.errors import DeviceCodeError


class Fragment:
    """A finite set of tunable values; ``choices()`` lists them, the default first."""

    def choices(self) -> tuple[Any, ...]:
        raise NotImplementedError


def _default_first(values: list[Any], default: Any) -> tuple[Any, ...]:
    if default not in values:
        raise DeviceCodeError(f"default {default!r} is not one of the choices {values}")
    return (default, *[v for v in values if v != default])


@dataclasses.dataclass(frozen=True)
class EnumFragment(Fragment):
    """One of ``choices`` (the first is the default)."""

    choices_: tuple[Any, ...]

    def __init__(self, choices: Any) -> None:
        values = tuple(choices)
        if not values:
            raise DeviceCodeError("EnumFragment needs at least one choice")
        object.__setattr__(self, "choices_", values)

    def choices(self) -> tuple[Any, ...]:
        return self.choices_


@dataclasses.dataclass(frozen=True)
class IntegerFragment(Fragment):
    """An int in ``[low, high]``; the default is ``default_val`` or ``low``."""

    low: int
    high: int
    default_val: int | None = None

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise DeviceCodeError(f"{type(self).__name__}: low {self.low} > high {self.high}")

    def values(self) -> list[int]:
        return list(range(self.low, self.high + 1))

    def choices(self) -> tuple[Any, ...]:
        default = self.low if self.default_val is None else self.default_val
        return _default_first(self.values(), default)


@dataclasses.dataclass(frozen=True)
class PowerOfTwoFragment(IntegerFragment):
    """A power of two in ``[low, high]`` (both powers of two)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for v in (self.low, self.high):
            if v < 1 or v & (v - 1):
                raise DeviceCodeError(f"PowerOfTwoFragment: {v} is not a power of two")

    def values(self) -> list[int]:
        out, v = [], self.low
        while v <= self.high:
            out.append(v)
            v *= 2
        return out


@dataclasses.dataclass(frozen=True)
class BooleanFragment(Fragment):
    """``False`` (the default) or ``True``."""

    def choices(self) -> tuple[Any, ...]:
        return (False, True)

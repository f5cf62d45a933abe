"""``@tc.kernel``'s option values, checked where the kernel is defined (stage: config; in: the
decorator's arguments; out: nothing, or a ConfigError at the kernel's ``def`` line).

A wrong type surfaced at the first call as an internal error naming neither the option nor the
user's file (``config={"block_sizes": ...}``: "'dict' object has no attribute 'key'";
``autotune_budget_s="30s"``: a float conversion deep in the search).
"""

from __future__ import annotations

import difflib
import math
import os
from typing import Any

import torch

from tilecraft.config.config import Config
from tilecraft.errors import ConfigError, SourceLoc


def check_option_values(
    config: Any,
    configs: Any,
    budget_s: Any,
    tolerances: Any,
    loc: SourceLoc | None,
    baseline: Any = None,
) -> None:
    """Raise a ConfigError at ``loc`` for an option value of the wrong kind."""
    if baseline is not None and not callable(baseline):
        raise ConfigError(
            f"baseline={baseline!r}: expected a function taking the kernel's arguments and "
            "returning what the kernel returns (eager PyTorch)",
            loc,
        )
    if config is not None and not isinstance(config, Config):
        raise ConfigError(
            f"config={config!r}: expected a tc.Config",
            loc,
            hint="write config=tc.Config(block_sizes=[...], ...), or "
            "tc.Config.from_dict({...}) for a dict",
        )
    if configs is not None:
        items = list(configs) if isinstance(configs, (list, tuple)) else None
        if items is None or not all(isinstance(c, Config) for c in items):
            raise ConfigError(f"configs={configs!r}: expected a list of tc.Config", loc)
    check_budget(budget_s, "autotune_budget_s", loc)
    if tolerances is not None and not _tolerances(tolerances):
        raise ConfigError(
            f"autotune_tolerances={tolerances!r}: expected {{dtype: (rtol, atol)}} with "
            "torch dtypes and non-negative numbers",
            loc,
            hint="e.g. autotune_tolerances={torch.float32: (1e-3, 1e-5)}",
        )


def check_option_kinds(
    static_shapes: Any, hoist_operands: Any, config_table: Any, loc: SourceLoc | None
) -> None:
    """The flags are bools (``static_shapes="no"`` is truthy: it was silently static) and a
    config table is a path."""
    for name, value in (("static_shapes", static_shapes), ("hoist_operands", hoist_operands)):
        if not isinstance(value, bool):
            raise ConfigError(f"{name}={value!r}: expected True or False", loc)
    if config_table is not None and not isinstance(config_table, (str, os.PathLike)):
        raise ConfigError(
            f"config_table={config_table!r}: expected the path of a table `tilecraft tune` wrote",
            loc,
        )


def check_choice(name: str, value: Any, choices: tuple[str, ...], loc: SourceLoc | None) -> None:
    """Raise a ConfigError at ``loc`` for a string option outside ``choices`` (None is left
    alone: the option's default), with the closest choice as a hint."""
    if value is None or value in choices:
        return
    close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else None
    if name == "dot_precision" and hint is None:
        hint = "or leave it out to follow torch.set_float32_matmul_precision()"
    expected = ", ".join(repr(c) for c in choices)
    raise ConfigError(f"{name}={value!r}: expected one of {expected}", loc, hint=hint)


def check_budget(budget_s: Any, what: str, loc: SourceLoc | None = None) -> None:
    """A tuning budget is a finite number of seconds > 0 (None: the default)."""
    if budget_s is not None and not _positive_number(budget_s):
        raise ConfigError(
            f"{what}={budget_s!r}: expected a number of seconds > 0",
            loc,
            hint=f"e.g. {what}=30",
        )


def _positive_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _tolerances(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    for dtype, pair in value.items():
        if not isinstance(dtype, torch.dtype) or not isinstance(pair, (tuple, list)):
            return False
        if len(pair) != 2 or not all(_positive_number(t) or t == 0 for t in pair):
            return False
    return True

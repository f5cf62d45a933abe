"""Hooks the package wires into the runtime (stage: runtime; in: callables from higher stages;
out: what ``BoundKernel`` calls).

The runtime compiles and launches; choosing a config for a first call is the autotuner's job, and
the autotuner drives the runtime (it compiles and runs candidates). So that data and imports flow
one way, the runtime never imports the autotuner: ``tilecraft/__init__.py`` installs the
autotuner's ``select_config`` here, and the runtime calls whatever is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilecraft.config.config import Config
    from tilecraft.runtime.kernel import BoundKernel

ConfigSelector = Callable[["BoundKernel", tuple[Any, ...], dict[str, Any]], "Config"]
# (bound, args, kwargs, effort, budget_s) -> the tuned config
Tuner = Callable[["BoundKernel", tuple[Any, ...], dict[str, Any], str, "float | None"], "Config"]
_selector: ConfigSelector | None = None
_tuner: Tuner | None = None


def install_config_selector(selector: ConfigSelector) -> None:
    """Install the function that picks a config for a first call on new arguments."""
    global _selector
    _selector = selector


def select_config(
    bound: BoundKernel, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Config | None:
    """The installed selector's config, or ``None`` when none is installed (the runtime then
    uses the heuristic default)."""
    return None if _selector is None else _selector(bound, args, kwargs)


def install_tuner(tuner: Tuner) -> None:
    """Install the function behind ``Kernel.autotune``."""
    global _tuner
    _tuner = tuner


def tune(
    bound: BoundKernel,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    effort: str,
    budget_s: float | None,
) -> Config:
    """Tune ``bound`` with the installed tuner (``import tilecraft`` installs it)."""
    if _tuner is None:
        raise RuntimeError("no tuner installed: import tilecraft (not only tilecraft.runtime)")
    return _tuner(bound, args, kwargs, effort, budget_s)

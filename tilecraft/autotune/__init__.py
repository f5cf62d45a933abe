"""The autotuner that always works (docs/architecture.md, "autotune/"; seed 000).

* :func:`discover_default` finds a working default config: ranked candidates, static checks,
  compile and run in isolated worker processes with hard timeouts, accuracy against a baseline
  that never depends on a config (the user's ``baseline=`` or ref mode).
* :func:`tune` searches from there for the fastest config within a time budget.
* Both cache their result on disk (:mod:`tilecraft.autotune.cache`) and raise only
  :class:`NoWorkingConfigError`, with a table of reasons and a standalone repro script.

Module map: ``compare`` (tolerances), ``baseline``, ``classify`` (error table), ``candidates``
(ranked configs, neighbours, static checks), ``evaluate`` (compile/run/check/time one config),
``child`` (the worker process), ``isolate`` (workers with timeouts), ``runner`` (the runner
interface, in-process fallback), ``discover``, ``search``, ``cache``, ``repro``, ``progress``,
``select`` (the runtime's config hook: table, listed configs, tuning), ``table`` (shipped
config tables), ``plan`` (``tilecraft tune PLAN``).
"""

from tilecraft.autotune.classify import Attempt, Category, NoWorkingConfigError
from tilecraft.autotune.compare import DEFAULT_TOLERANCES, CompareResult
from tilecraft.autotune.discover import Discovery, discover_default, run_discovery
from tilecraft.autotune.search import EFFORTS, TuneResult, run_tune, tune
from tilecraft.autotune.select import select_config, tune_for_kernel
from tilecraft.autotune.table import ConfigTable

# (no function here shares a submodule's name: `tilecraft.autotune.compare` stays the module)
__all__ = [
    "DEFAULT_TOLERANCES",
    "EFFORTS",
    "Attempt",
    "Category",
    "ConfigTable",
    "CompareResult",
    "Discovery",
    "NoWorkingConfigError",
    "TuneResult",
    "discover_default",
    "run_discovery",
    "run_tune",
    "select_config",
    "tune",
    "tune_for_kernel",
]

"""The config of a specialization's first call (stage: autotune; the runtime's config hook).

In order: an entry of the kernel's shipped config table (:mod:`tilecraft.autotune.table`);
with ``TILECRAFT_NO_AUTOTUNE=1`` the cache and then the heuristic default, starting no process;
the fastest of the kernel's listed ``configs=``; else discovery / tuning (``autotune_effort``).
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tilecraft import settings
from tilecraft.autotune import cache
from tilecraft.autotune.candidates import check, static_check
from tilecraft.autotune.classify import Attempt
from tilecraft.autotune.discover import (
    DEFAULT_TIMEOUT_S,
    baseline_or_none,
    cached_config,
    default_workers,
    kernel_tolerances,
)
from tilecraft.autotune.lock import tuning_lock
from tilecraft.autotune.runners import open_runner
from tilecraft.autotune.search import EFFORTS, tune
from tilecraft.autotune.table import lookup
from tilecraft.config.config import Config
from tilecraft.errors import ConfigError, user_stacklevel
from tilecraft.runtime.kernel import BoundKernel, Kernel

_warned: weakref.WeakSet[Kernel] = weakref.WeakSet()  # kernels told about a fallback once


class CalledWhileImported(Exception):
    """A kernel called by a module's top-level code while a tuning worker imports the module
    to find the kernel (a script without ``if __name__ == "__main__":``): the worker stops the
    import there (``autotune/child.py``). Tuning that call would wait on the lock the parent
    holds for the same key, and the worker never started (180 s, then in-process tuning)."""


_importing: list[bool] = []  # set while a worker imports the kernel's module


@contextlib.contextmanager
def stop_kernel_calls() -> Iterator[None]:
    """While the body runs, a kernel call that needs a config raises
    :class:`CalledWhileImported` instead of tuning."""
    _importing.append(True)
    try:
        yield
    finally:
        _importing.pop()


def select_config(
    bound: BoundKernel, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None
) -> Config:
    """The config for a specialization's first call when its kernel has no ``config=``.
    Workers isolate GPU compiles and runs; Triton's CPU interpreter has no compiler to hang,
    so interpreter runs stay in-process (no worker start-up per kernel)."""
    if _importing:
        raise CalledWhileImported(bound.kernel.__name__)
    kwargs = dict(kwargs or {})
    found = lookup(bound)
    if found is not None:
        return found.config
    if settings.no_autotune():
        return without_tuning(bound)
    if bound.traced.host_writes:
        return _untuned_for_host_writes(bound)
    isolate = bound.target.backend != "interpret"
    if bound.kernel.configs:
        listed = fastest_listed(bound, args, kwargs, isolate=isolate)
        if listed is not None:
            return listed
    effort = bound.kernel.autotune_effort
    with tuning_lock(bound):  # another process tuning this key: wait, then reuse its result
        return tune(bound, args, kwargs, effort=effort, isolate=isolate, verbose=effort != "none")


def tune_for_kernel(
    bound: BoundKernel,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    effort: str,
    budget_s: float | None,
) -> Config:
    """``Kernel.autotune``: a search on ``args`` (a cached tuned config returns at once)."""
    isolate = bound.target.backend != "interpret"
    return tune(bound, args, kwargs, effort=effort, budget_s=budget_s, isolate=isolate)


def _untuned_for_host_writes(bound: BoundKernel) -> Config:
    """Host code that updates a tensor it does not get as an argument (``OPT.step_t += 1`` of a
    global) would update it once per candidate and baseline run (every candidate then
    'differed'): the kernel runs its heuristic default, and says why."""
    kernel = bound.kernel
    if kernel not in _warned:
        _warned.add(kernel)
        ops = ", ".join(bound.traced.host_writes)
        warnings.warn(
            f"tilecraft: {kernel.__name__}: its host code updates state tuning cannot copy "
            f"({ops}: a global's or an object's tensor updated in place, an argument object's "
            "attribute set): tuning would run the host code once per candidate and apply the "
            "update each time, so the kernel runs its heuristic default untuned. Pass the "
            "state as tensors or in a dict (tuning runs on copies of those), or pass config=",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    spec = bound.config_spec
    return spec.resolve(spec.default(), warn=False).config


def without_tuning(bound: BoundKernel) -> Config:
    """``TILECRAFT_NO_AUTOTUNE=1``: a cached config, else the heuristic default (one warning
    per kernel). Compiling a config here only generates and loads its source: no process."""
    for kind in ("best", "default"):
        hit = cached_config(bound, kind)
        if hit is not None:
            return hit
    kernel = bound.kernel
    if kernel not in _warned:
        _warned.add(kernel)
        warnings.warn(
            f"tilecraft: {kernel.__name__}: TILECRAFT_NO_AUTOTUNE=1 and no config table entry or "
            f"cached config for arguments {cache.short_arguments(cache.specialization_key(bound))}: "
            "using the heuristic "
            f"default. Tune these shapes with `tilecraft tune PLAN` and ship the table",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    spec = bound.config_spec
    config = spec.resolve(spec.default(), warn=False).config
    # a config no compile gets further with (too much shared memory, too large a tile): say
    # why now, not as Triton's error (elements per thread only make a compile slow)
    reason = static_check(spec, config, max_per_thread=1 << 62)
    if reason is not None:
        raise ConfigError(
            f"{kernel.__name__}: the heuristic default {config!r} cannot run on "
            f"{bound.target.key}: {reason}"
        )
    return config


def _listed_kind(configs: Sequence[Config]) -> str:
    """The cache kind of a list's winner: changes when the list does."""
    digest = hashlib.sha256(",".join(c.key() for c in configs).encode()).hexdigest()[:12]
    return f"listed-{digest}"


def fastest_listed(
    bound: BoundKernel,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    isolate: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    use_cache: bool = True,
) -> Config | None:
    """The fastest of ``@tc.kernel(configs=[...])`` on these arguments: each is normalized,
    statically checked, compiled, run and checked for accuracy (in workers when ``isolate``),
    then timed. None (with a warning) when none works: the caller discovers one."""
    listed = bound.kernel.configs
    kind = _listed_kind(listed)
    if use_cache:
        hit = cached_config(bound, kind)
        if hit is not None:
            return hit
    name = bound.kernel.__name__
    fresh: list[Config] = []
    failed: list[Attempt] = []
    for config in listed:
        normalized, why = check(bound.config_spec, config, bound.target.warp_size)
        if normalized is None:
            assert why is not None
            failed.append(why)
        elif normalized not in fresh:
            fresh.append(normalized)
    timed: list[Attempt] = []
    if fresh:
        baseline = baseline_or_none(bound, args, kwargs)
        tolerances = kernel_tolerances(bound, args)
        workers = default_workers(len(fresh), args=args)
        with open_runner(
            bound, args, kwargs, baseline, isolate=isolate, workers=workers, tolerances=tolerances
        ) as runner:
            results = runner.check(fresh, timeout_s=timeout_s, bench_rep_ms=EFFORTS["quick"].rep_ms)
        done = [r for r in results if r is not None]
        timed = [r for r in done if r.ok and r.ms is not None]
        failed += [r for r in done if not r.ok]
    if not timed:
        reasons = "; ".join(f"{a.config!r}: {a.category} {a.reason[:80]}" for a in failed)
        warnings.warn(
            f"tilecraft: {name}: none of the {len(listed)} configs listed in @tc.kernel(configs=...) "
            f"works for arguments {cache.specialization_key(bound)} ({reasons}); discovering one",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
        return None
    best = min(timed, key=lambda a: a.ms or 0.0)
    if use_cache:
        cache.store(bound, kind, best.config, ms=best.ms, listed=len(listed))
    return best.config

"""Direct launches of compiled Triton kernels (stage: runtime; in: a generated module's
``@triton.jit`` kernels; out: the same kernels, launched without Triton's per-call binder).

``kernel[grid](*args, **constexprs)`` costs Triton about 10 µs of CPU per call: it binds the
arguments to the signature, specializes each one (dtype, 16-byte alignment, integer width, the
value 1), builds a cache key string and a launch-metadata object. A generated module launches
one kernel from one call site with the same constexprs and options every time, so most of that
work only repeats itself. :class:`DirectKernel` keeps, per kernel, the compiled kernels it has
launched keyed by a cheap tuple that determines Triton's specialization exactly (checked against
Triton's own ``native_specialize_impl`` in ``tests/test_direct_launch.py``), and on a hit calls
the compiled kernel's launcher itself. A miss, an argument it does not model, or a launch hook
set (profilers) goes through Triton's ordinary path, which compiles and is then remembered.

Only NVIDIA targets use it: the AMD backend adds a buffer-range flag to its tensor
specialization (``knobs.amd.use_buffer_ops``) that this key does not model.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import torch
from triton import knobs
from triton.knobs import HookChain
from triton.runtime import driver

from tilecraft import settings

_I32_MIN, _I32_END, _U64_START = -(2**31), 2**31, 2**63


def _hooked(hook: Any) -> bool:
    """Whether a launch hook (a profiler's) would run: Triton keeps them in a HookChain."""
    return hook is not None and not (isinstance(hook, HookChain) and not hook.calls)


def arg_key(value: Any) -> Any:
    """What Triton's specialization of one non-constexpr argument depends on, or ``...`` when
    this module does not model the argument's type (the call then takes Triton's path)."""
    kind = type(value)
    if kind is int:
        if value == 1:
            return 1  # Triton passes the value 1 as a constexpr
        width = 0 if _I32_MIN <= value < _I32_END else (2 if value >= _U64_START else 1)
        return (width, value % 16 == 0)
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        return (value.dtype, value.data_ptr() % 16 == 0)
    if kind is float or kind is bool or value is None:
        return kind
    return ...


class DirectKernel:
    """A ``@triton.jit`` kernel whose repeated launches skip Triton's binder (see the module
    docstring). ``kernel[grid](*args, **kwargs)`` behaves like the wrapped kernel's."""

    def __init__(self, jit: Any):
        self.jit = jit
        self.compiled: dict[tuple[Any, ...], Any] = {}
        self.param_names = list(jit.arg_names)

    def __getattr__(self, name: str) -> Any:  # device_caches, fn, ... of the wrapped kernel
        return getattr(self.jit, name)

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def launch(self, grid: tuple[int, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        device = driver.active.get_current_device()
        keys = tuple(map(arg_key, args))
        key: tuple[Any, ...] | None = (device, keys, tuple(kwargs.items()))
        compiled = None
        try:
            if key is not None and ... not in keys:
                compiled = self.compiled.get(key)
        except TypeError:  # an unhashable constexpr: Triton's path every time
            key = None
        runtime = knobs.runtime
        if (
            compiled is None
            or _hooked(runtime.launch_enter_hook)
            or _hooked(runtime.launch_exit_hook)
        ):
            compiled = self.jit[grid](*args, **kwargs)
            if key is not None and ... not in keys and not hasattr(compiled, "result"):
                self.compiled[key] = compiled  # (``result``: an async compile's future)
            return compiled
        # the launcher takes every parameter in order, constexprs included (it skips them); a
        # parameter missing here was missing at the first launch too, which raised there
        params = args + tuple(kwargs[name] for name in self.param_names[len(args) :])
        g1 = grid[1] if len(grid) > 1 else 1
        g2 = grid[2] if len(grid) > 2 else 1
        compiled.run(
            grid[0], g1, g2, driver.active.get_current_stream(device), compiled.function,
            compiled.packed_metadata, None, None, None, *params,
        )  # fmt: skip
        return compiled


def wrap_for_target(module: Any, names: list[str], backend: str) -> None:
    """Direct launches for the module's kernels ``names`` where they apply: NVIDIA targets, not
    the interpreter, unless ``TILECRAFT_DIRECT_LAUNCH=0``. Under the interpreter, launches
    that take one lock (:class:`SerializedKernel`)."""
    if settings.triton_interpret():
        for name in names:
            kernel = getattr(module, name)
            if not isinstance(kernel, SerializedKernel):
                setattr(module, name, SerializedKernel(kernel))
    elif backend == "cuda" and settings.direct_launch():
        wrap_module_kernels(module, names)


_INTERPRETER_LOCK = threading.RLock()


def _new_lock_in_child() -> None:
    """A forked child (a DataLoader worker) starts with the lock free: it inherited it held
    by another thread's launch, a thread that does not exist in the child (its first launch
    waited forever)."""
    global _INTERPRETER_LOCK
    _INTERPRETER_LOCK = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


class SerializedKernel:
    """A kernel run by Triton's interpreter, one launch at a time in this process: the
    interpreter swaps ``triton.language``'s functions while it runs a kernel, so two threads'
    launches broke each other (raw InterpreterErrors, which the autotuner took for failing
    configs and cached)."""

    def __init__(self, jit: Any):
        self.jit = jit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.jit, name)

    def __getitem__(self, grid: Any) -> Any:
        launch = self.jit[grid]

        def serialized(*args: Any, **kwargs: Any) -> Any:
            with _INTERPRETER_LOCK:
                return launch(*args, **kwargs)

        return serialized


def wrap_module_kernels(module: Any, names: list[str]) -> None:
    """Replace the module's kernels ``names`` with direct-launch wrappers (in place)."""
    for name in names:
        kernel = getattr(module, name)
        if not isinstance(kernel, DirectKernel):  # a module is shared by identical programs
            setattr(module, name, DirectKernel(kernel))

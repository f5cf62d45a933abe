"""Which context DSL calls run in (stage: language).

DSL functions mean different things in three places: in host code of a compiled run (block sizes
come from the config), while tracing a device loop (they build IR), and in ref mode (eager torch).
The runtime and frontend install a handler here; the language functions ask it what to do.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, Protocol


class HostContext(Protocol):
    """Answers host-side DSL calls for one run of a kernel's host code."""

    mode: str  # "run", "trace" or "ref"

    def block_size(self, lo: int, hi: int | None) -> int: ...

    def tunable(self, name: str, choices: tuple[Any, ...]) -> Any: ...

    def specialized(self, value: int) -> None: ...


class DeviceTracer(Protocol):
    """Builds IR for DSL calls made inside a device loop being traced."""

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any: ...


_host: contextvars.ContextVar[HostContext | None] = contextvars.ContextVar("tc_host", default=None)
_device: contextvars.ContextVar[DeviceTracer | None] = contextvars.ContextVar(
    "tc_dev", default=None
)


def host() -> HostContext | None:
    return _host.get()


def device() -> DeviceTracer | None:
    return _device.get()


def enter_host(ctx: HostContext) -> contextvars.Token[HostContext | None]:
    """``host_context`` without the context manager (the runtime's per-call fast path)."""
    return _host.set(ctx)


def exit_host(token: contextvars.Token[HostContext | None]) -> None:
    _host.reset(token)


@contextlib.contextmanager
def host_context(ctx: HostContext) -> Iterator[None]:
    token = _host.set(ctx)
    try:
        yield
    finally:
        _host.reset(token)


@contextlib.contextmanager
def device_context(tracer: DeviceTracer | None) -> Iterator[None]:
    token = _device.set(tracer)
    try:
        yield
    finally:
        _device.reset(token)

"""The per-call fast path (stage: runtime; in: a call's positional arguments; out: the prebuilt
launcher of the specialization they fit, or None).

After a specialization has run once, a plain positional call is: build a guard key from the
arguments (dtype, shape, strides and device of each tensor, the value of each int/bool), look the
launcher up, install the run's host context and call the host code, whose device loops call the
compiled Triton kernels directly. Everything else — binding keyword arguments, dynamic-shape
buckets, autograd, ``torch.compile``, ref mode — takes the ordinary path in ``Kernel.__call__``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tilecraft import settings
from tilecraft.language import _context

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_STRIDED = torch.strided


def guard_key(args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """What a prebuilt launcher is valid for; None when the call must take the ordinary path."""
    key: list[Any] = [settings.target_override()]
    for v in args:
        t = type(v)
        if t is _Tensor or t is _Parameter:
            if v.requires_grad or v.layout is not _STRIDED:
                return None  # autograd decides (an op with a backward, or an error); a sparse
                # tensor has no strides: the ordinary path refuses it by name
            try:
                on_boundary = v.data_ptr() % 16 == 0
                key.append((v.dtype, v.shape, v.stride(), v.device, on_boundary))
            except RuntimeError:  # no storage (a vmap wrapper): the ordinary path runs it as an
                return None  # op; no sizes (a nested tensor): it names the argument
        elif t is int or t is bool:
            key.append((t, v))
        elif t is float:
            key.append(float)
        else:  # incl. tensor subclasses (a tracer's fake tensors): the ordinary path decides
            return None
    return tuple(key)


class Launcher:
    """One specialization's compiled program, ready to run: the host code under its context."""

    __slots__ = ("host_fn", "make_host")

    def __init__(self, host_fn: Callable[..., Any], make_host: Callable[[], Any] | None):
        """``make_host``: a fresh host context per call (it counts block-size calls); None when
        the host code makes no DSL call that needs one (only ``tile``/``grid``)."""
        self.host_fn = host_fn
        self.make_host = make_host

    def __call__(self, args: tuple[Any, ...]) -> Any:
        if self.make_host is None:
            return self.host_fn(*args)
        token = _context.enter_host(self.make_host())
        try:
            return self.host_fn(*args)
        finally:
            _context.exit_host(token)

"""Host code's own tensors beside the trace's meta arguments (stage: frontend; in: the torch calls
host code makes while it is traced on meta tensors; out: the same calls, with the host's own
tensors of the kernel's device standing in as meta tensors of their shape).

Tracing runs the host code on meta copies of the arguments. A tensor the host code did not derive
from them (a module global, a closure's, ``torch.tensor([...])`` made without ``device=``) is a
real tensor, and an op mixing it with a meta one raised "Tensor on device cpu is not on the
expected device meta!" where eager PyTorch, on one device, runs. While tracing, such a tensor on
the kernel's device meets the meta ones as a meta tensor of its shape (a trace needs shapes, not
values); one on another device is left for torch to refuse, as eager refuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


def as_meta(value: Any) -> Any:
    """``value`` with each tensor (also in lists and tuples) a meta tensor of its layout."""
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(
            tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta"
        )
    if isinstance(value, (list, tuple)):
        return type(value)(as_meta(v) for v in value)
    return value


class MetaHostTensors(TorchFunctionMode):
    """Active while host code is traced: an op that gets a meta tensor gets the host's own
    tensors of ``device_type`` as meta tensors too."""

    def __init__(self, device_type: str):
        super().__init__()
        self.device_type = device_type

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if _any_meta(args) or _any_meta(kwargs.values()):
            args = tuple(self._stand_in(a) for a in args)
            kwargs = {k: self._stand_in(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)

    def _stand_in(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.device.type == self.device_type and value.dim() > 0:
                return as_meta(value)
            return value
        if isinstance(value, (list, tuple)):
            return type(value)(self._stand_in(v) for v in value)
        return value


def _any_meta(values: Iterable[Any]) -> bool:
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_meta:
            return True
        if isinstance(v, (list, tuple)) and _any_meta(v):
            return True
    return False

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

import types
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from tilecraft import containers


def as_meta(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """``value`` with each tensor a meta tensor of its layout, containers copied
    (``containers.copied``: host code that updates a state dict while it is traced,
    ``state["step"] += 1`` or ``state["buf"] = torch.zeros_like(p)``, updated the caller's, and
    the real call did it again, or left a meta tensor there)."""
    return containers.copied(value, _meta_of, {} if memo is None else memo)


def _meta_of(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")


def meta_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], list[tuple[torch.Tensor, torch.Tensor]]]:
    """Meta copies of a call's arguments (:func:`as_meta`), with each (copy, tensor) pair of
    the tensors they hold, containers' too."""
    memo: dict[int, Any] = {}
    meta_args = tuple(as_meta(a, memo) for a in args)
    meta_kwargs = {k: as_meta(v, memo) for k, v in kwargs.items()}
    reals = containers.tensors((*args, *kwargs.values()))
    return meta_args, meta_kwargs, [(memo[id(t)], t) for t in reals if id(t) in memo]


class MetaHostTensors(TorchFunctionMode):
    """Active while host code is traced: an op that gets a meta tensor gets the host's own
    tensors of ``device_type`` as meta tensors too."""

    def __init__(self, device_type: str):
        super().__init__()
        self.device_type = device_type
        # in-place updates of real tensors that existed before the trace (a global's, a
        # module's: ``OPT.step_t += 1``), skipped: the call itself makes them (they ran twice)
        self.host_writes: list[str] = []
        self._made: list[torch.Tensor] = []  # real tensors the host code made while traced

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if args and _in_place(name) and self._outside_tensor(args[0]):
            self.host_writes.append(name)
            return None if name == "__setitem__" else args[0]
        if _any_meta(args) or _any_meta(kwargs.values()):
            args = tuple(self._stand_in(a) for a in args)
            kwargs = {k: self._stand_in(v) for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor) and not out.is_meta:
            self._made.append(out)
        return out

    def _outside_tensor(self, value: Any) -> bool:
        """A real tensor the host code did not make while traced (a global's, a module's)."""
        if not isinstance(value, torch.Tensor) or value.is_meta:
            return False
        root = value
        while root._base is not None:  # a view's writes land in what it views
            root = root._base
        return not any(root is m for m in self._made)

    def _stand_in(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.device.type == self.device_type and value.dim() > 0:
                return as_meta(value)
            return value
        if isinstance(value, (list, tuple)):
            return type(value)(self._stand_in(v) for v in value)
        return value


_IN_PLACE_DUNDERS = frozenset(
    {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
     "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__",
     "__setitem__"}
)  # fmt: skip


def _in_place(name: str) -> bool:
    """Whether a torch function of this name writes its first argument (``add_``, ``+=``,
    ``t[i] = v``)."""
    return name in _IN_PLACE_DUNDERS or (name.endswith("_") and not name.startswith("_"))


def _any_meta(values: Iterable[Any]) -> bool:
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_meta:
            return True
        if isinstance(v, (list, tuple)) and _any_meta(v):
            return True
    return False


_PLAIN = (int, float, bool, str, type(None))


class ObjectAttributes:
    """The plain attributes (numbers, strings, None) of the arguments that are objects of their
    own, not tensors or containers (an ``nn.Module``, a config object). The trace runs host
    code on them as they are (only tensors and containers have meta copies): ``m.steps += 1``
    bumped the caller's module once while traced and again by the call. :meth:`restore` puts
    them back after a trace and names those the host code changed: such a kernel runs untuned
    (each candidate would change them again), as for tensors it updates in place."""

    def __init__(self, values: Iterable[Any]):
        self.saved = [(obj, _plain_attributes(obj)) for obj in values if _own_object(obj)]

    def restore(self) -> list[str]:
        changed: list[str] = []
        for obj, attributes in self.saved:
            now = vars(obj)
            for name, value in attributes.items():
                if now.get(name, value) is not value and now.get(name) != value:
                    changed.append(f"{type(obj).__name__}.{name} =")
                now[name] = value
        return changed


def _own_object(value: Any) -> bool:
    return (
        hasattr(value, "__dict__")
        and not isinstance(value, (torch.Tensor, type, types.ModuleType, types.FunctionType))
        and containers.fields(value) is None
    )


def _plain_attributes(obj: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(obj).items() if isinstance(v, _PLAIN)}

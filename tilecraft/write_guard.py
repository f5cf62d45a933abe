"""Writes a tuning run makes into tensors that are not its arguments (shared by language, runtime
and autotune: ref mode's stores and compiled launches report them, the tuner undoes them).

The tuner runs a kernel on clones of its arguments (the accuracy baseline, each candidate's
check, each timing). A tensor the host code takes from elsewhere (a module's buffer through a
module argument, a global) is the caller's own: every run wrote it again, so a BatchNorm-style
running mean was updated three times by a first call (and once by a cached one), and a
candidate read what the runs before it had written. While a run is guarded, the first write
into such a tensor (one a trace captured from elsewhere: ``note_foreign``) saves its storage,
and the run's end copies it back; an output that is such a tensor is handed back as a copy
first.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch

from tilecraft import containers

# the tensors traces found host code taking from elsewhere than the arguments (real, not meta,
# while traced): only their storages are saved (a run's own outputs are not copied). Keyed by
# id: a WeakSet compares two references to one tensor with ==, elementwise (it raised when a
# second trace noted a module's weight again)
_FOREIGN: weakref.WeakValueDictionary[int, torch.Tensor] = weakref.WeakValueDictionary()


def note_foreign(tensor: torch.Tensor) -> None:
    """A tensor a trace captured from elsewhere than the arguments (``HostTensor.foreign``)."""
    _FOREIGN[id(tensor)] = tensor


class WriteGuard:
    """The storages one run wrote that its arguments do not hold, with their values before."""

    def __init__(self, arguments: Any) -> None:
        own = {_key(t) for t in containers.tensors(arguments)}
        self._foreign = {_key(t) for t in list(_FOREIGN.values())} - own
        self._saved: dict[int, tuple[torch.UntypedStorage, torch.UntypedStorage]] = {}

    def before_write(self, tensor: torch.Tensor) -> None:
        key = _key(tensor)
        if key in self._foreign and key not in self._saved:
            storage = tensor.untyped_storage()
            self._saved[key] = (storage, storage.clone())

    def handed_back(self, outputs: Any) -> Any:
        """``outputs`` with each tensor of a saved storage copied (restoring it would change
        what the run returned)."""
        if not self._saved:
            return outputs
        return containers.copied(outputs, self._copy_if_saved, {})

    def _copy_if_saved(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.clone() if _key(tensor) in self._saved else tensor

    def restore(self) -> None:
        for storage, before in self._saved.values():
            storage.copy_(before)
        self._saved.clear()


_ACTIVE: list[WriteGuard] = []


def active() -> WriteGuard | None:
    """The guard of the run in progress (None outside the tuner's runs)."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def undone(arguments: Any) -> Iterator[WriteGuard]:
    """Guard a run on ``arguments`` (the tuner's clones): writes into other tensors that
    existed before it are undone when it ends."""
    guard = WriteGuard(arguments)
    _ACTIVE.append(guard)
    try:
        yield guard
    finally:
        _ACTIVE.pop()
        guard.restore()


def _key(tensor: torch.Tensor) -> int:
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # no storage (a meta or fake tensor)
        return 0

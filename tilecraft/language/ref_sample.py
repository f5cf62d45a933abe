"""Ref mode over a sample of a large grid's programs (stage: language; used by the autotuner's
baseline, ``autotune/baseline.py``).

Ref mode runs a device loop's programs one after another as eager PyTorch: a grid of one program
per row of a million-row sparse matrix took ~95 us a row on the CPU, minutes on a GPU (a launch
per op), and the autotuner's first call waited for it. Inside :func:`sampling` the top-level loop
of a grid with more than ``limit`` programs runs only a sample of them (the first and last
quarter of the limit, the rest spread evenly between), and every store records which elements it
wrote, so the comparison can look at exactly those (:meth:`ProgramSample.written`).

Only valid where programs do not depend on each other's results; the caller decides that (one
device loop, no atomics).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import torch

T = TypeVar("T")


@dataclasses.dataclass
class ProgramSample:
    """The sampling state of one ref-mode run."""

    limit: int  # programs a top-level loop runs at most
    depth: int = 0  # device loops entered (0: the next loop is a top-level one)
    ran: int = 0  # programs run by sampled top-level loops
    of: int = 0  # programs those loops have
    _masks: dict[tuple[int, int, torch.device], tuple[torch.Tensor, torch.Tensor]] = (
        dataclasses.field(default_factory=dict)
    )

    @property
    def sampled(self) -> bool:
        return self.of > self.ran

    def pick(self, programs: Sequence[T]) -> Sequence[T]:
        """The programs a top-level loop runs: all of them, or ``limit`` spread over them."""
        n = len(programs)
        if n <= self.limit:
            return programs
        edge = self.limit // 4
        middle = self.limit - 2 * edge
        step = (n - 2 * edge) / middle
        chosen = [
            *range(edge),
            *(edge + int(i * step) for i in range(middle)),
            *range(n - edge, n),
        ]
        self.ran, self.of = self.ran + len(chosen), self.of + n
        return [programs[i] for i in chosen]

    def mark(self, tensor: torch.Tensor, write: Callable[[torch.Tensor], None]) -> None:
        """Record a store into ``tensor``: ``write(mask)`` sets the stored elements of a bool
        view laid out as ``tensor`` over its storage, indexed as the store indexed ``tensor``
        (so a store through a view marks the elements of every tensor sharing them)."""
        write(self._mask(tensor))

    def written(self, value: Any) -> Any:
        """``value`` (a tensor or nested tuples/lists/dicts) with each tensor replaced by the
        mask of its elements the sampled programs wrote (none for a tensor they never wrote)."""
        if isinstance(value, torch.Tensor):
            return self._mask(value).clone()
        if isinstance(value, (tuple, list)):
            return type(value)(self.written(v) for v in value)
        if isinstance(value, dict):
            return {k: self.written(v) for k, v in value.items()}
        return None

    def _mask(self, tensor: torch.Tensor) -> torch.Tensor:
        """A bool view with ``tensor``'s shape, strides and offset over a mask of its storage
        (one per storage and element size; the storage is kept, so its address stays its own)."""
        storage = tensor.untyped_storage()
        key = (storage.data_ptr(), tensor.element_size(), tensor.device)
        entry = self._masks.get(key)
        if entry is None:
            elements = storage.nbytes() // tensor.element_size()
            entry = (tensor, torch.zeros(elements, dtype=torch.bool, device=tensor.device))
            self._masks[key] = entry
        return torch.as_strided(entry[1], tensor.shape, tensor.stride(), tensor.storage_offset())


_active: contextvars.ContextVar[ProgramSample | None] = contextvars.ContextVar(
    "tc_ref_sample", default=None
)


def active() -> ProgramSample | None:
    return _active.get()


@contextlib.contextmanager
def sampling(limit: int) -> Iterator[ProgramSample]:
    """Ref-mode runs inside sample large grids (see the module docstring)."""
    sample = ProgramSample(limit)
    token = _active.set(sample)
    try:
        yield sample
    finally:
        _active.reset(token)

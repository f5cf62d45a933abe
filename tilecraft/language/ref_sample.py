"""Ref mode over a sample of a large grid's programs (stage: language; used by the autotuner's
baseline, ``autotune/baseline.py``).

Ref mode runs a device loop's programs one after another as eager PyTorch: a grid of one program
per row of a million-row sparse matrix took ~95 us a row on the CPU, minutes on a GPU (a launch
per op), and the autotuner's first call waited for it. Inside :func:`sampling` the top-level loop
of a grid with more than ``limit`` programs runs only a sample of them (the first and last
quarter of the limit, the rest spread evenly between), and every store records which elements it
wrote, so the comparison can look at exactly those (:meth:`ProgramSample.written`).

Few programs can be slow too: a paged decode attention over 512 (sequence, KV head) programs
walks 256 pages in each, ~80 ms a program in ref mode on an H200, 42 s before the first config
ran. So the sample also stops once ``budget_s`` has passed (after at least ``min_programs``),
and runs its programs in an order whose every prefix is spread over the grid: both ends first,
then the midpoints of ever smaller gaps (:func:`spread_order`).

Only valid where programs do not depend on each other's results; the caller decides that (one
device loop, no atomics).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import torch

T = TypeVar("T")


@dataclasses.dataclass
class ProgramSample:
    """The sampling state of one ref-mode run."""

    limit: int  # programs a top-level loop runs at most
    budget_s: float | None = None  # no program starts after this long (None: no time limit)
    min_programs: int = 16  # programs each top-level loop runs whatever the time
    depth: int = 0  # device loops entered (0: the next loop is a top-level one)
    ran: int = 0  # programs run by top-level loops
    of: int = 0  # programs those loops have
    started: float = dataclasses.field(default_factory=time.monotonic)
    _masks: dict[tuple[int, int, torch.device], tuple[torch.Tensor, torch.Tensor]] = (
        dataclasses.field(default_factory=dict)
    )

    @property
    def sampled(self) -> bool:
        return self.of > self.ran

    def pick(self, programs: Sequence[T]) -> Sequence[T]:
        """The programs a top-level loop may run, in grid order: all of them, or ``limit``
        spread over them."""
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
        return [programs[i] for i in chosen]

    def run(self, programs: Sequence[T]) -> Iterator[T]:
        """The programs a top-level loop runs: :meth:`pick`'s, in :func:`spread_order`, none
        started once the budget has passed (after ``min_programs``)."""
        chosen = self.pick(programs)
        self.of += len(programs)
        for count, i in enumerate(spread_order(len(chosen))):
            if count >= self.min_programs and self._spent():
                return
            self.ran += 1
            yield chosen[i]

    def _spent(self) -> bool:
        return self.budget_s is not None and time.monotonic() - self.started > self.budget_s

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


def spread_order(n: int) -> list[int]:
    """``range(n)`` reordered so that every prefix is spread over it: both ends, then the
    midpoint of each gap, breadth first (0, n - 1, n // 2, n // 4, 3n // 4, ...)."""
    if n <= 2:
        return list(range(n))
    order = [0, n - 1]
    gaps = collections.deque([(0, n - 1)])
    while gaps:
        lo, hi = gaps.popleft()
        if hi - lo > 1:
            mid = (lo + hi) // 2
            order.append(mid)
            gaps.extend(((lo, mid), (mid, hi)))
    return order


_active: contextvars.ContextVar[ProgramSample | None] = contextvars.ContextVar(
    "tc_ref_sample", default=None
)


def active() -> ProgramSample | None:
    return _active.get()


@contextlib.contextmanager
def sampling(limit: int, budget_s: float | None = None) -> Iterator[ProgramSample]:
    """Ref-mode runs inside sample large or slow grids (see the module docstring)."""
    sample = ProgramSample(limit, budget_s)
    token = _active.set(sample)
    try:
        yield sample
    finally:
        _active.reset(token)

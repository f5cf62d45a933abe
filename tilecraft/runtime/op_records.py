"""The ops a kernel's backward defines, remembered across processes (stage: runtime; in: the
custom ops ``runtime/torch_op.py`` defines while a backward runs; out: a record per forward op in
the cache folder, read back when that forward op is defined again).

``torch.compile``'s on-disk caches (AOT autograd's, inductor's FX graph cache) hand a later
process a compiled backward that calls the backward kernels' custom ops by name. That process
never traced the backward, so the ops, defined while a backward first runs, do not exist there:
the first ``.backward()`` failed with ``'_OpNamespace' 'tilecraft' object has no attribute
'<kernel>_bwd_<digest>_0'``. While a backward runs, each op it defines is recorded under the
forward op's name (``<cache>/ops/<forward op>.json``: the kernel's key and its argument kinds);
defining a forward op that has a backward defines the recorded ops too.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from collections.abc import Iterator
from typing import Any

from tilecraft.runtime.cache_dir import writable_subdir

_FORWARD: contextvars.ContextVar[str | None] = contextvars.ContextVar("forward_op", default=None)
Record = tuple[str, tuple[tuple[Any, ...], ...], str]  # (kernel key, argument kinds, autocast)


@contextlib.contextmanager
def backward_of(forward_op: str) -> Iterator[None]:
    """Ops defined inside belong to ``forward_op``'s backward."""
    token = _FORWARD.set(forward_op)
    try:
        yield
    finally:
        _FORWARD.reset(token)


def record(kernel_key: str, kinds: tuple[tuple[Any, ...], ...], amp: str = "") -> None:
    """Remember an op just defined, if a backward is running (else nothing); ``amp``: the
    autocast it runs under (``torch_op.autocast_state``)."""
    forward = _FORWARD.get()
    if forward is None:
        return
    entries = recorded(forward)
    if (kernel_key, kinds, amp) in entries:
        return
    folder = writable_subdir("ops")
    if folder is None:  # no cache: the ops are simply defined again by tracing
        return
    data = [[key, [list(k) for k in ks], a] for key, ks, a in [*entries, (kernel_key, kinds, amp)]]
    tmp = folder / f"{forward}.json.{os.getpid()}"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, folder / f"{forward}.json")


def recorded(forward_op: str) -> list[Record]:
    """The ops ``forward_op``'s backward defined in earlier runs ([] when none or unreadable)."""
    folder = writable_subdir("ops")
    if folder is None:
        return []
    try:
        data = json.loads((folder / f"{forward_op}.json").read_text())
        return [
            (str(e[0]), tuple(tuple(k) for k in e[1]), str(e[2]) if len(e) > 2 else "")
            for e in data
        ]
    except (OSError, ValueError, TypeError):
        return []

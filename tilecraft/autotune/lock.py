"""One tuner per cache key across processes (stage: autotune; in: a bound kernel; out: a held
file lock for the duration of its discovery/tuning).

Two processes that reach the same uncached specialization would both tune it (and the last writer
would win). The second now waits on ``<cache>/autotune/<key>.lock`` and then finds the first's
result in the cache. No lock (tuning goes on unguarded) where the cache is not writable, where
the platform has no ``fcntl``, where the lock file cannot be opened or locked (a folder in its
place, another user's file), or after waiting ``WAIT_S``: the lock is an economy, never a
reason for a call to fail or hang.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from tilecraft.autotune import cache
from tilecraft.runtime.cache_dir import writable_subdir
from tilecraft.runtime.kernel import BoundKernel

WAIT_S = 3600.0  # longer than any tuning budget; past it, tune anyway
POLL_S = 0.05


def lock_path(bound: BoundKernel) -> Path | None:
    folder = writable_subdir("autotune")
    if folder is None:
        return None
    key = cache.key_for(bound)
    return folder / f"{key.kernel}-{key.digest()}.lock"


@contextlib.contextmanager
def tuning_lock(bound: BoundKernel, wait_s: float = WAIT_S) -> Iterator[bool]:
    """Hold the key's lock while the body runs; yields whether it is held."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield False
        return
    path = lock_path(bound)
    if path is None:
        yield False
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a folder in its place, another user's read-only file: no lock
        yield False
        return
    try:
        deadline = time.monotonic() + wait_s
        held = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(POLL_S)
            except OSError:  # a file system without locks (ENOLCK): tune unguarded
                break
        try:
            yield held
        finally:
            if held:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)

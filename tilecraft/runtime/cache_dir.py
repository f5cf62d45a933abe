"""Cache folders that never fail a call (stage: runtime; in: ``settings.cache_dir()`` and a
subfolder name; out: a writable folder, or ``None`` with one warning).

An unwritable cache (a read-only home, ``TILECRAFT_CACHE_DIR`` naming a file) costs caching, not
the call: generated code then goes to a temporary folder of this process (removed at exit), and
configs are simply not stored.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import warnings
from pathlib import Path

from tilecraft import settings
from tilecraft.errors import user_stacklevel

_warned: set[str] = set()
_scratch: list[Path] = []


def writable_subdir(name: str) -> Path | None:
    """``<cache>/<name>``, created and checked writable, else None (warned once per folder)."""
    path = settings.cache_dir() / name
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
        return path
    except OSError as exc:
        if str(path) not in _warned:
            _warned.add(str(path))
            warnings.warn(
                f"tilecraft: the cache folder {path} is not writable ({type(exc).__name__}: "
                f"{exc.strerror or exc}); running without caching it. Set TILECRAFT_CACHE_DIR to "
                "a writable folder to cache",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        return None


def scratch_dir() -> Path:
    """This process's temporary folder (removed at exit) for files that must exist somewhere."""
    if not _scratch:
        _scratch.append(Path(tempfile.mkdtemp(prefix="tilecraft-")))
        atexit.register(shutil.rmtree, _scratch[0], ignore_errors=True)
    return _scratch[0]


def writable_or_scratch(name: str) -> Path:
    found = writable_subdir(name)
    if found is not None:
        return found
    path = scratch_dir() / name
    path.mkdir(exist_ok=True)
    return path

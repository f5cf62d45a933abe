"""Load generated source as a Python module (stage: runtime).

Triton needs a real file for ``@triton.jit`` functions (it reads their source), so generated code is
written to ``<cache>/code/<hash>.py`` and imported from there (registered in ``sys.modules``); the
same source is loaded only once. A cached file that is not exactly the source (damaged, edited)
is written again before it is imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from tilecraft.runtime.cache_dir import scratch_dir, writable_or_scratch

_loaded: dict[str, ModuleType] = {}


def code_dir() -> Path:
    """``<cache>/code``, or a temporary folder of this process when the cache is not writable."""
    return writable_or_scratch("code")


def load_source(source: str) -> ModuleType:
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    cached = _loaded.get(digest)
    if cached is not None:
        return cached
    path = code_dir() / f"tc_{digest}.py"
    if _text(path) != source:  # missing, or damaged (truncated, edited): imported forever else
        try:
            _write(path, source)
        except OSError:  # an unwritable entry: this process's own copy
            path = scratch_dir() / path.name
            _write(path, source)
    name = f"tilecraft_generated_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # registered before running, as an import would: pickling, inspect and torch.compile look
    # generated functions up by their module name
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    _loaded[digest] = module
    return module


def _text(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _write(path: Path, source: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".py")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)  # atomic: concurrent writers never see a partial file
    except BaseException:
        with contextlib.suppress(OSError):  # (a folder in the file's place left one per run)
            os.unlink(tmp)
        raise

"""Environment settings: the one place tilecraft reads environment variables.

Every ``TILECRAFT_*`` (and the relevant ``TRITON_*``) variable is read here, when asked for, so tests
can change the environment between calls.
"""

from __future__ import annotations

import os
from pathlib import Path


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def ref_mode() -> bool:
    """``TILECRAFT_REF=1``: run kernels eagerly with torch ops, no Triton."""
    return _flag("TILECRAFT_REF")


def strict() -> bool:
    """``TILECRAFT_STRICT=1``: reject configs that would otherwise be repaired with a warning."""
    return _flag("TILECRAFT_STRICT")


def debug() -> bool:
    """``TILECRAFT_DEBUG=1``: print generated Triton code when it is compiled."""
    return _flag("TILECRAFT_DEBUG")


def triton_interpret() -> bool:
    """``TRITON_INTERPRET=1``: Triton runs kernels on the CPU with numpy."""
    return _flag("TRITON_INTERPRET")


def cache_dir() -> Path:
    """Root of tilecraft's caches (``TILECRAFT_CACHE_DIR`` or the user cache folder)."""
    override = os.environ.get("TILECRAFT_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("tilecraft"))


def target_override() -> str | None:
    """``TILECRAFT_TARGET``: generate code for a named target instead of the active device."""
    return os.environ.get("TILECRAFT_TARGET") or None

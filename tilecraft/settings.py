"""Environment settings: the one place tilecraft reads environment variables.

Every ``TILECRAFT_*`` (and the relevant ``TRITON_*``) variable is read here, when asked for, so tests
can change the environment between calls.
"""

from __future__ import annotations

import os
from pathlib import Path

from tilecraft.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _flag(name: str, default: bool = False) -> bool:
    """A yes/no variable; another value is named (``TILECRAFT_NO_AUTOTUNE=2`` read as unset let
    a production server tune)."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    if not name.startswith("TILECRAFT_"):  # (Triton's own: read as Triton reads it)
        return False
    raise ConfigError(f"{name}={os.environ[name]!r}: expected 1 or 0 (true/false, yes/no, on/off)")


def ref_mode() -> bool:
    """``TILECRAFT_REF=1``: run kernels eagerly with torch ops, no Triton."""
    return _flag("TILECRAFT_REF")


def strict() -> bool:
    """``TILECRAFT_STRICT=1``: reject configs that would otherwise be repaired with a warning."""
    return _flag("TILECRAFT_STRICT")


def debug() -> bool:
    """``TILECRAFT_DEBUG=1``: print generated Triton code when it is compiled."""
    return _flag("TILECRAFT_DEBUG")


def full_tracebacks() -> bool:
    """``TILECRAFT_FULL_TRACEBACK=1``: errors a kernel call raises keep tilecraft's own frames
    (by default the traceback ends at the call: the message already names the kernel's line)."""
    return _flag("TILECRAFT_FULL_TRACEBACK")


def fuse_glue() -> bool:
    """``TILECRAFT_GLUE=0``: host statements between device loops run as written, never as one
    glue program (``frontend/glue.py``; to compare the two, or to rule glue out)."""
    return _flag("TILECRAFT_GLUE", default=True)


def triton_interpret() -> bool:
    """``TRITON_INTERPRET=1``: Triton runs kernels on the CPU with numpy."""
    return _flag("TRITON_INTERPRET")


def compile_memory_bytes() -> int:
    """``TILECRAFT_COMPILE_MEMORY_GB``: the address space a cross-compile worker, and each
    compiler it runs (ptxas), may map; 0: no cap. Default: half the machine's memory, at least
    8 GB (a ptxas run past 20 GB on a tile it could not fit)."""
    given = os.environ.get("TILECRAFT_COMPILE_MEMORY_GB", "").strip()
    if given:
        try:
            gigabytes = float(given)
        except ValueError:
            gigabytes = -1.0
        if not gigabytes >= 0:
            raise ConfigError(
                f"TILECRAFT_COMPILE_MEMORY_GB={given!r}: expected gigabytes, a number >= 0 "
                "(0: no cap)"
            )
        return int(gigabytes * (1 << 30))
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0
    return max(8 << 30, physical // 2)


def cache_dir() -> Path:
    """Root of tilecraft's caches (``TILECRAFT_CACHE_DIR`` or the user cache folder)."""
    override = os.environ.get("TILECRAFT_CACHE_DIR")
    if override:  # (a Dockerfile ENV or an .env file leaves "~" to the program)
        return Path(override).expanduser()
    try:
        import platformdirs
    except ImportError:  # a machine without it (e.g. a bare GPU box): the XDG default
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tilecraft"
    return Path(platformdirs.user_cache_dir("tilecraft"))


def target_override() -> str | None:
    """``TILECRAFT_TARGET``: generate code for a named target instead of the active device."""
    return os.environ.get("TILECRAFT_TARGET") or None


# -- autotuner ----------------------------------------------------------------------------
FAULT_KINDS = ("hang", "hang_run", "crash", "compile_error", "fault", "wrong")
WORKER_ENV = "TILECRAFT_AUTOTUNE_WORKER"  # set by the parent in its worker processes


def in_worker() -> bool:
    """Whether this process is an autotune worker (it must not start workers of its own)."""
    return os.environ.get(WORKER_ENV) == "1"


def autotune_log_path() -> Path | None:
    """``TILECRAFT_AUTOTUNE_LOG=path``: append a CSV row for every config the tuner tries."""
    value = os.environ.get("TILECRAFT_AUTOTUNE_LOG", "").strip()
    return Path(value) if value else None


def force_autotune() -> bool:
    """``TILECRAFT_FORCE_AUTOTUNE=1``: ignore cached configs (they are re-discovered/re-tuned)."""
    return _flag("TILECRAFT_FORCE_AUTOTUNE")


def no_autotune() -> bool:
    """``TILECRAFT_NO_AUTOTUNE=1`` (production): never start autotune workers; configs come from a
    shipped config table, then the cache, then the heuristic default."""
    return _flag("TILECRAFT_NO_AUTOTUNE")


def test_faults() -> dict[str, str]:
    """``TILECRAFT_TEST_FAULT="hang:KEY1,KEY2;crash:KEY3"`` (test only): config key -> fault kind,
    applied by the isolated worker (never in-process). ``KEY`` is ``Config.key()`` of the config as
    given or normalized, or ``*`` for every config. Kinds: ``hang`` (sleep in the compile phase),
    ``hang_run`` (sleep in the run phase), ``crash`` (``os.abort()`` while running),
    ``compile_error``, ``fault`` (a fake illegal-memory-access error) and ``wrong`` (perturbed
    outputs)."""
    out: dict[str, str] = {}
    for part in os.environ.get("TILECRAFT_TEST_FAULT", "").split(";"):
        kind, _, keys = part.partition(":")
        kind = kind.strip()
        if kind not in FAULT_KINDS:
            continue
        for key in keys.split(","):
            if key.strip():
                out[key.strip()] = kind
    return out


def direct_launch() -> bool:
    """``TILECRAFT_DIRECT_LAUNCH=0`` launches every kernel through Triton's own ``kernel[grid]``
    path (default: repeated launches skip its binder, see ``runtime/direct_launch.py``)."""
    return _flag("TILECRAFT_DIRECT_LAUNCH", default=True)

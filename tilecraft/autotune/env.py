"""Environment variables the autotuner reads (to move into :mod:`tilecraft.settings`).

Kept in this one small module so the settings owner can move them verbatim.
"""

from __future__ import annotations

import os
from pathlib import Path

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
    return os.environ.get("TILECRAFT_FORCE_AUTOTUNE", "").strip().lower() in {
        "1",
        "true",
        "yes",
        "on",
    }


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

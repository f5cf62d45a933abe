"""Lint, format and type checks of the repository, as tests (ruff, mypy)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = [p for p in ("tilecraft", "tests", "examples", "benchmarks") if (ROOT / p).exists()]


def _run(module: str, *args: str) -> None:
    # a missing tool is a broken setup (scripts/setup.sh installs both), not a reason to skip
    assert importlib.util.find_spec(module) is not None, (
        f"{module} is not installed: run `bash scripts/setup.sh` (it installs the dev extras)"
    )
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        print(proc.stdout)
        print(proc.stderr, file=sys.stderr)
    assert proc.returncode == 0, (
        f"`python -m {module} {' '.join(args)}` exited {proc.returncode}:\n"
        f"{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    )


def test_ruff_check() -> None:
    _run("ruff", "check", *PATHS)


def test_ruff_format() -> None:
    _run("ruff", "format", "--check", *PATHS)


def test_mypy() -> None:
    _run("mypy", "tilecraft")

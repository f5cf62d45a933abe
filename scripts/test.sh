#!/usr/bin/env bash
# Install everything, then lint, type-check and run the test suite (CPU: Triton interpreter).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k rms_norm`.
# Tests run on TEST_WORKERS processes (pytest-xdist, default 2: CI machines have two cores); pass
# `-n 0` (or set TEST_WORKERS=0) for one process, e.g. to use --pdb.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY="${PYTHON:-python}"

bash scripts/setup.sh

"$PY" -m ruff check tilecraft tests examples benchmarks
"$PY" -m ruff format --check tilecraft tests examples benchmarks
"$PY" -m mypy tilecraft
TRITON_INTERPRET=1 "$PY" -m pytest -q -n "${TEST_WORKERS:-2}" "$@"

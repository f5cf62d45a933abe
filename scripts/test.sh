#!/usr/bin/env bash
# Install everything, then lint, type-check and run the test suite (CPU: Triton interpreter).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k rms_norm`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY="${PYTHON:-python}"

bash scripts/setup.sh

"$PY" -m ruff check tilecraft tests examples benchmarks
"$PY" -m ruff format --check tilecraft tests examples benchmarks
"$PY" -m mypy tilecraft
TRITON_INTERPRET=1 "$PY" -m pytest -q "$@"

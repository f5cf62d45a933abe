#!/usr/bin/env bash
# Install, then compile a kernel, discover a working config and run it
# (on the GPU if there is one, else through the Triton interpreter).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY="${PYTHON:-python}"

bash scripts/setup.sh

"$PY" -m examples.demo "$@"

#!/usr/bin/env bash
# Idempotent install of tilecraft and its dev tools on a fresh (CPU) machine.
# Safe to run repeatedly and from any working directory.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY="${PYTHON:-python}"

# torch must come first, and pinned: on CPU machines `torch==2.13.0` resolves to a CPU wheel on
# local disk, while a bare `torch` requirement (e.g. the `torch>=2.9` in pyproject.toml, with torch
# absent) would make pip download a multi-GB CUDA build. Once torch is importable, the requirement
# in pyproject.toml is already satisfied and pip leaves it alone (this also keeps an existing GPU
# build of torch untouched on GPU machines).
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    "$PY" -m pip install -q "torch==2.13.0"
fi

# triton 3.6.0 runs kernels on the CPU with TRITON_INTERPRET=1; its interpreter needs numpy<2.3
# (newer numpy breaks its scalar handling). Only machines that run the interpreter get the pin: on a
# GPU machine kernels run compiled and the installed numpy stays as it is.
"$PY" -m pip install -q "triton==3.6.0"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
    "$PY" -m pip install -q "numpy<2.3"
fi

# the ray extra: `tilecraft tune --ray` is tested against a local Ray instance on CPU
"$PY" -m pip install -q -e ".[dev,ray]"

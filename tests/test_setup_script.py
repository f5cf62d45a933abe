"""``scripts/setup.sh`` pins ``numpy<2.3`` (the Triton interpreter's need) only on machines without
a GPU: run with a fake Python that records the pip commands and answers the GPU probe."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAKE = """#!/usr/bin/env bash
echo "$*" >> "{log}"
case "$*" in
  *cuda.is_available*) exit {gpu_exit} ;;
esac
exit 0
"""


@pytest.mark.parametrize("has_gpu", [True, False])
def test_numpy_pin_only_without_gpu(tmp_path: Path, has_gpu: bool) -> None:
    log = tmp_path / "calls.log"
    fake = tmp_path / "python"
    fake.write_text(FAKE.format(log=log, gpu_exit=0 if has_gpu else 1))
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake)}
    subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env=env, check=True)
    installs = [line for line in log.read_text().splitlines() if "pip install" in line]
    assert any("triton==3.6.0" in line for line in installs)
    pinned = any("numpy<2.3" in line for line in installs)
    assert pinned is not has_gpu

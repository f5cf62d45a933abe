"""Test setup: CPU runs use Triton's interpreter, which must be chosen before triton is imported."""

from __future__ import annotations

import os

import pytest


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch missing is a setup error reported elsewhere
        return False


HAS_CUDA = _has_cuda()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
# One cache folder per pytest-xdist worker (``-n 2`` in scripts/test.sh): workers never see each
# other's half-written tuning, "cached"/"fresh" checks hold per process and a test clearing the cache
# cannot pull it from under another worker's test. The xdist controller imports this file first and
# its workers inherit its environment, so a worker replaces the controller's default (but keeps a
# TILECRAFT_CACHE_DIR the caller chose).
_DEFAULT_CACHE = os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "tilecraft")
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if os.environ.get("TILECRAFT_CACHE_DIR", _DEFAULT_CACHE) == _DEFAULT_CACHE:
    os.environ["TILECRAFT_CACHE_DIR"] = f"{_DEFAULT_CACHE}-{_WORKER}" if _WORKER else _DEFAULT_CACHE


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="run long sweeps (marker: slow)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    skip_slow = pytest.mark.skip(reason="long sweep: run with --run-slow")
    skip_interpreter = pytest.mark.skip(reason="tests Triton's interpreter: the GPU runs these")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)
        if "interpreter" in item.keywords and HAS_CUDA:
            item.add_marker(skip_interpreter)
        if "slow" in item.keywords and not config.getoption("--run-slow"):
            item.add_marker(skip_slow)


@pytest.fixture
def device() -> str:
    """Where end-to-end tests run: the GPU if there is one, else the CPU interpreter."""
    return "cuda" if HAS_CUDA else "cpu"

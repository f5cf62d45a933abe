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
os.environ.setdefault(
    "TILECRAFT_CACHE_DIR",
    os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "tilecraft"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="run long sweeps (marker: slow)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    skip_slow = pytest.mark.skip(reason="long sweep: run with --run-slow")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)
        if "slow" in item.keywords and not config.getoption("--run-slow"):
            item.add_marker(skip_slow)


@pytest.fixture
def device() -> str:
    """Where end-to-end tests run: the GPU if there is one, else the CPU interpreter."""
    return "cuda" if HAS_CUDA else "cpu"

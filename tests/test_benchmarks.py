"""The benchmark runner's accounting, checked on CPU (timing itself needs a GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.common import write_results
from benchmarks.run import max_error, min_bytes


def test_min_bytes_counts_inputs_and_outputs() -> None:
    x = torch.randn(4, 8)  # 128 bytes
    w = torch.randn(8, dtype=torch.bfloat16)  # 16 bytes
    out = (torch.empty(4, 8), torch.empty(4))  # 128 + 16 bytes
    assert min_bytes((x, w, 1e-5), out) == 128 + 16 + 128 + 16


def test_max_error_over_nested_outputs() -> None:
    a, b = torch.zeros(3), torch.ones(2)
    assert max_error((a, b), (a + 0.5, b)) == 0.5


def test_results_written_as_markdown_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OUT", str(tmp_path))
    text = write_results("suite_test", [{"kernel": "k", "ms": 0.123456}], ["kernel", "ms"], "note")
    assert "| k | 0.123 |" in text
    data = json.loads((tmp_path / "suite_test.json").read_text())
    assert data["rows"] == [{"kernel": "k", "ms": 0.123456}] and "torch" in data["env"]

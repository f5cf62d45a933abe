"""benchmarks/launch_cost.py runs end to end (tiny counts) and writes its JSON (no timing asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import launch_cost


def test_launch_cost_writes_rows(tmp_path: Path) -> None:
    out = tmp_path / "launch.json"
    launch_cost.main([str(out), "--calls", "3", "--repeats", "1", "--device", "cpu"])
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"] for r in rows] == ["tilecraft", "plain triton", "eager F.rms_norm"]
    assert all(r["us_per_call"] > 0 for r in rows)

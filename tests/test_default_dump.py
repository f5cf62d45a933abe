"""``benchmarks/default_dump.py``: the defaults and code hashes of the example and case calls,
and the calls two dumps disagree on (the check behind every "no behaviour change" claim)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import default_dump
from tilecraft.targets.target import Target


def test_a_dump_records_each_calls_default_and_a_stable_code_hash() -> None:
    first = default_dump.dump(Target.parse("cuda:90"), ["quaternion_normalize"])
    assert list(first) == ["quaternion_normalize|16777216|0|quaternion_normalize"]
    (entry,) = first.values()
    assert "block_sizes=[256]" in entry["config"] and len(entry["code"]) == 12
    assert default_dump.dump(Target.parse("cuda:90"), ["quaternion_normalize"]) == first


def test_differences_name_config_and_code_changes() -> None:
    before = {
        "a|1|0|k": {"config": "A", "code": "1"},
        "b|1|0|k": {"config": "B", "code": "2"},
        "c|1|0|k": {"config": "C", "code": "3"},
    }
    after = {
        "a|1|0|k": {"config": "A", "code": "1"},
        "b|1|0|k": {"config": "B", "code": "9"},
        "c|1|0|k": {"config": "D", "code": "3"},
        "d|1|0|k": {"config": "E", "code": "4"},
    }
    assert default_dump.differences(before, after) == [
        "b|1|0|k: code only (B)",
        "c|1|0|k: C -> D",
        "d|1|0|k: None -> E",
    ]
    assert default_dump.differences(before, before) == []


def test_main_writes_and_diffs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "d.json"
    assert default_dump.main([str(out), "--only", "nhwc3_to_nchw"]) == 0
    entries = json.loads(out.read_text())
    assert len(entries) == 1
    changed = tmp_path / "e.json"
    key = next(iter(entries))
    changed.write_text(json.dumps({key: {**entries[key], "code": "other"}}))
    assert default_dump.main(["--diff", str(out), str(changed)]) == 0
    printed = capsys.readouterr().out
    assert f"{key}: code only" in printed and "1 of 1 calls differ" in printed


def test_show_prints_the_default_and_its_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert default_dump.main(["--show", "--only", "bbox_iou_pairs"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# bbox_iou_pairs|16777216|0|bbox_iou_pairs\n# tc.Config(")
    assert "def _tc_bbox_iou_pairs_0(" in printed and "4 * offset_0 + tl.arange(0, " in printed

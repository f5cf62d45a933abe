"""``tilecraft tune PLAN``: plan files, jobs spread over per-device worker processes, the config
table it writes, resume after SIGINT (tilecraft.autotune.plan).

Two "devices" are two worker processes (CUDA_VISIBLE_DEVICES 0 and 1) that run the jobs through
Triton's interpreter on any machine: these tests are about scheduling, table and resume.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tilecraft.autotune.plan import Job, pending_jobs, read_plan, run_plan, tune_plan
from tilecraft.autotune.table import ConfigTable
from tilecraft.config.config import Config
from tilecraft.errors import ConfigError

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def write_plan(
    path: Path, effort: str = "none", budget_s: float | None = None, more_rows: int = 0
) -> Path:
    """Four jobs (two shapes of each kernel), plus ``more_rows`` row_sum shapes."""
    rows = [[{"shape": [10, 30]}], [{"shape": [7, 100], "fill": "rand"}]]
    rows += [[{"shape": [5 + i, 40 + 3 * i]}] for i in range(more_rows)]
    plan: dict[str, Any] = {
        "effort": effort,
        "device": "cpu",
        "kernels": [
            {"kernel": "deploy_kernels:add", "args": [[{"shape": [n]}, {"shape": [n]}] for n in (100, 1000)]},
            {"kernel": "deploy_kernels:row_sum", "args": rows},
        ],
    }  # fmt: skip
    if budget_s is not None:
        plan["budget_s"] = budget_s
    path.write_text(json.dumps(plan))
    return path


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(TESTS))  # spawned device workers import deploy_kernels
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(TESTS)]))
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read by the spawned workers' triton import


def test_read_plan_jobs_and_errors(tmp_path: Path) -> None:
    jobs = read_plan(write_plan(tmp_path / "plan.json"))
    assert [j.describe() for j in jobs] == [
        "add(100:float32, 100:float32)", "add(1000:float32, 1000:float32)",
        "row_sum(10x30:float32)", "row_sum(7x100:float32)",
    ]  # fmt: skip
    assert len({j.id for j in jobs}) == 4 and all(j.device == "cpu" for j in jobs)
    bad = tmp_path / "bad.json"
    for item, message in [
        ({"kernel": "no_colon", "args": [[1]]}, "MODULE:NAME"),
        ({"kernel": "m:k", "args": [[{"shape": [4], "dtype": "float33"}]]}, "unknown dtype"),
        ({"kernel": "m:k", "effort": "max", "args": [[1]]}, "effort 'max'"),
        ({"kernel": "m:k", "args": [[{"dtype": "float32"}]]}, "'shape' list"),
    ]:
        bad.write_text(json.dumps({"kernels": [item]}))
        with pytest.raises(ConfigError, match=message):
            read_plan(bad)


def _run(jobs: list[Job], path: Path, devices: list[str]) -> ConfigTable:
    table = ConfigTable(path)
    seen: list[tuple[str, str | None]] = []

    def on_result(job: Job, entry: dict[str, Any] | None, error: str | None) -> None:
        assert error is None, error
        assert entry is not None
        seen.append((job.id, entry["worker_device"]))

    run_plan(jobs, table, devices, on_result)
    assert sorted(i for i, _ in seen) == sorted(j.id for j in jobs)
    return ConfigTable.read(path)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ([], "a tuning plan is an object"),
        ({"kernels": {"kernel": "m:k"}}, "a tuning plan is an object"),
        ({"kernels": [3]}, r"kernels\[0\]: each entry is an object"),
        ({"kernels": [{"kernel": "m:k", "args": {"x": 1}}]}, "each entry is an object"),
        ({"kernels": [{"kernel": "m:k", "args": [{"shape": [4]}]}]}, r"write \[\[\.\.\.\]\]"),
        ({"kernels": [{"kernel": "m:k", "args": [[{"shape": [37, -5]}]]}]}, "non-negative"),
        ({"kernels": [{"kernel": "m:k", "args": [[{"shape": [4.5]}]]}]}, "non-negative integers"),
        ({"budget_s": -5, "kernels": [{"kernel": "m:k", "args": [[]]}]}, "budget_s -5"),
        ({"kernels": [{"kernel": "m:k", "budget_s": "abc", "args": [[]]}]}, "budget_s 'abc'"),
    ],
)
def test_a_plan_of_the_wrong_shape_is_a_config_error(
    tmp_path: Path, plan: Any, message: str
) -> None:
    """A list at the top, or an object where a list belongs, ended in AttributeError."""
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(ConfigError, match=message):
        read_plan(path, "cpu")


def test_jobs_spread_over_devices_with_the_same_winners(tmp_path: Path) -> None:
    jobs = read_plan(write_plan(tmp_path / "plan.json"))
    two = _run(jobs, tmp_path / "two.json", ["0", "1"])
    one = _run(jobs, tmp_path / "one.json", ["0"])
    assert {e["worker_device"] for e in two.entries} == {"0", "1"}  # both workers took jobs
    assert {e["worker_device"] for e in one.entries} == {"0"}

    def winners(table: ConfigTable) -> dict[str, Config]:
        return {e["job"]: Config.from_json(e["config"]) for e in table.entries}

    assert winners(two) == winners(one) and len(winners(one)) == 4
    entry = one.entries[0]
    for field in ("kernel", "specialization", "args", "target", "gpu", "versions", "ms"):
        assert field in entry
    assert pending_jobs(jobs, one) == []


def test_tune_plan_resumes_after_sigint(tmp_path: Path) -> None:
    # twelve jobs: a loaded machine that polls late still interrupts before the last one
    plan = write_plan(tmp_path / "plan.json", effort="quick", budget_s=2, more_rows=8)
    out = tmp_path / "table.json"
    cmd = [sys.executable, "-m", "tilecraft.cli", "tune", str(plan), "-o", str(out)]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert out.exists(), "no job finished"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Run the same command to resume" in err
    first = ConfigTable.read(out).entries
    assert 1 <= len(first) < 12
    assert all(e["ms"] is not None and e["effort"] == "quick" for e in first)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    final = ConfigTable.read(out).entries
    assert len(final) == 12
    assert final[: len(first)] == first  # finished jobs were kept, not tuned again
    assert f"[{len(first) + 1}/12]" in done.stderr and "wrote" in done.stderr


def test_tune_plan_reports_a_failing_job(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "effort": "none",
                "device": "cpu",
                "kernels": [
                    {"kernel": "deploy_kernels:add", "args": [[{"shape": [64]}, {"shape": [64]}]]},
                    {"kernel": "deploy_kernels:missing", "args": [[{"shape": [64]}]]},
                ],
            }
        )
    )
    out = tmp_path / "t.json"
    assert tune_plan(plan, out, devices=1) == 1
    entries = ConfigTable.read(out).entries
    assert [e["name"] for e in entries] == ["add"]


def test_tune_plan_where_every_job_fails_says_nothing_was_written(tmp_path: Path) -> None:
    """It printed 'wrote <table>' and no table existed."""
    plan = tmp_path / "plan.json"
    job = {"kernel": "deploy_kernels:missing", "args": [[{"shape": [64]}]]}
    plan.write_text(json.dumps({"effort": "none", "device": "cpu", "kernels": [job]}))
    out, stream = tmp_path / "t.json", io.StringIO()
    assert tune_plan(plan, out, devices=1, stream=stream) == 1
    assert not out.exists()
    text = stream.getvalue()
    assert "no job succeeded" in text and "wrote" not in text, text


@pytest.mark.gpu
def test_plan_on_the_gpu_then_shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU: tune a plan (quick) on every visible GPU, then serve from the table with
    TILECRAFT_NO_AUTOTUNE=1 (the exact entry; no tuning, no warning)."""
    import warnings

    import deploy_kernels as D
    import torch

    monkeypatch.delenv("TRITON_INTERPRET")
    plan = tmp_path / "plan.json"
    args = [[{"shape": [n]}, {"shape": [n]}] for n in (1 << 20, 3_000_001)]
    kernels = [{"kernel": "deploy_kernels:add", "args": args}]
    plan.write_text(
        json.dumps({"effort": "quick", "budget_s": 5, "device": "cuda", "kernels": kernels})
    )
    out = tmp_path / "table.json"
    assert tune_plan(plan, out) == 0
    entries = ConfigTable.read(out).entries
    assert len(entries) == 2 and all(e["ms"] and e["gpu"] != e["target"] for e in entries)
    D.add.reset()
    D.add.config_table = out
    monkeypatch.setenv("TILECRAFT_NO_AUTOTUNE", "1")
    try:
        x = torch.randn(1 << 20, device="cuda")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.testing.assert_close(D.add(x, x), x + x)
        entry = next(e for e in entries if e["args"][0]["shape"] == [1 << 20])
        want = Config.from_json(entry["config"])
        got = D.add.bind((x, x)).default_program().config
        assert got.block_sizes == want.block_sizes and got.num_warps == want.num_warps
    finally:
        D.add.config_table = None
        D.add.reset()


def test_a_job_whose_kernel_changed_is_pending_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job in the table was skipped after its kernel's source changed: the table kept an
    entry whose config no longer fits and the kernel ran its heuristic default (fuzz 55c)."""
    import deploy_kernels

    from tilecraft.autotune.table import source_digest

    jobs = read_plan(write_plan(tmp_path / "plan.json"))
    now = {name: source_digest(getattr(deploy_kernels, name)) for name in ("add", "row_sum")}
    entries = [{"job": j.id, "source": now[j.kernel.partition(":")[2]]} for j in jobs]
    assert pending_jobs(jobs, ConfigTable(tmp_path / "t.json", entries)) == []
    entries[0]["source"] = "tuned-for-other-code"
    assert pending_jobs(jobs, ConfigTable(tmp_path / "t.json", entries)) == [jobs[0]]
    del entries[0]["source"]  # a table written before sources were recorded: kept
    assert pending_jobs(jobs, ConfigTable(tmp_path / "t.json", entries)) == []


def test_an_unwritable_table_is_refused_before_any_job(tmp_path: Path) -> None:
    """-o into a folder that cannot take files tuned the first job, then ended in a raw
    traceback from table.write (fuzz round 55c)."""
    plan = write_plan(tmp_path / "plan.json")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot write the table"):
        tune_plan(plan, blocker / "t.json", runner=lambda *a: pytest.fail("a job ran"))

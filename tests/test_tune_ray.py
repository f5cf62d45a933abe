"""``tilecraft tune PLAN --ray``: jobs as Ray tasks on a local Ray instance (CPU, interpreter,
tiny shapes). Ray is installed by scripts/setup.sh (the ``ray`` extra); a local instance and
one task take about 15 s on two cores."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tilecraft.autotune.plan import read_plan, run_job, tune_plan
from tilecraft.autotune.plan_ray import ray_runner
from tilecraft.autotune.table import ConfigTable
from tilecraft.config.config import Config

TESTS = Path(__file__).parent


def test_plan_runs_as_ray_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray", reason="install the ray extra: pip install -e '.[ray]'")
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS.parent), str(TESTS)]))
    monkeypatch.syspath_prepend(str(TESTS))
    plan = tmp_path / "plan.json"
    args = [[{"shape": [n]}, {"shape": [n]}] for n in (64, 500, 3000)]
    kernels = [{"kernel": "deploy_kernels:add", "args": args}]
    plan.write_text(json.dumps({"effort": "none", "device": "cpu", "kernels": kernels}))
    out = tmp_path / "table.json"
    runner = ray_runner(None, num_cpus=2)
    assert tune_plan(plan, out, runner=runner) == 0
    entries = ConfigTable.read(out).entries
    jobs = read_plan(plan)
    assert sorted(e["job"] for e in entries) == sorted(j.id for j in jobs)
    assert {e["worker_host"] for e in entries} == {socket.gethostname()}
    local = run_job(jobs[1])  # the same job in this process finds the same config
    by_job = {e["job"]: e for e in entries}
    assert Config.from_json(by_job[jobs[1].id]["config"]) == Config.from_json(local["config"])

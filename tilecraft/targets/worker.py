"""Run compile jobs in a child process with a hard timeout (stage: targets).

The child gets a fresh environment without ``TRITON_INTERPRET`` and its own process group, so a
compiler hang is killed as a group at the timeout and a compiler crash is a report, not a crash
of the caller.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys

from tilecraft.targets.crosscompile import CompileJob, CompileReport, compile_job


def run_compile_job(job: CompileJob, timeout_s: float) -> CompileReport:
    return run_compile_jobs([job], timeout_s)[0]


def run_compile_jobs(jobs: list[CompileJob], timeout_s: float) -> list[CompileReport]:
    """Compile ``jobs`` in one worker process (one interpreter start-up for the batch); on a
    timeout or crash every job of the batch gets that report."""
    if not jobs:
        return []
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tilecraft.targets.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(pickle.dumps(jobs), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        msg = f"compile timed out after {timeout_s:.0f}s"
        return [
            CompileReport(j.target, ok=False, error=msg, error_class="compile_timeout")
            for j in jobs
        ]
    if proc.returncode != 0:
        msg = (
            f"compile worker died (exit {proc.returncode}): {err.decode(errors='replace')[-2000:]}"
        )
        return [
            CompileReport(j.target, ok=False, error=msg, error_class="compile_crash") for j in jobs
        ]
    reports: list[CompileReport] = pickle.loads(out)
    return reports


def main() -> None:
    jobs: list[CompileJob] = pickle.loads(sys.stdin.buffer.read())
    reports = [compile_job(job) for job in jobs]
    sys.stdout.buffer.write(pickle.dumps(reports))


if __name__ == "__main__":
    main()

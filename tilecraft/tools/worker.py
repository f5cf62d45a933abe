"""Run compile jobs in child processes with a hard timeout per job (stage: tools).

A worker gets a fresh environment without ``TRITON_INTERPRET`` and its own process group. It
reads a batch of jobs and writes one report per job as soon as it is done, so the parent can give
each job its own deadline: a compiler hang is killed as a group when *its* job overruns (that job
is reported as a timeout, the rest of the batch goes to a fresh worker), and a compiler crash is a
report, not a crash of the caller. The worker caps its address space, which the compilers it
runs inherit, so a compiler that would take the machine's memory dies instead (a crash report).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from typing import IO

try:
    import resource
except ImportError:  # not on Windows: no cap there
    resource = None  # type: ignore[assignment]

from tilecraft import settings
from tilecraft.tools.crosscompile import CompileJob, CompileReport, compile_job

_HEADER = struct.Struct("<Q")  # length prefix of each pickled report


def run_compile_job(job: CompileJob, timeout_s: float) -> CompileReport:
    return run_compile_jobs([job], timeout_s)[0]


def run_compile_jobs(jobs: list[CompileJob], timeout_s: float) -> list[CompileReport]:
    """Compile ``jobs`` in as few worker processes as possible; each job may take ``timeout_s``."""
    settings.compile_memory_bytes()  # a bad value named here, not as every worker's crash
    reports: list[CompileReport] = []
    while len(reports) < len(jobs):
        reports.extend(_run_batch(jobs[len(reports) :], timeout_s))
    return reports


def _spawn(stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    # stderr goes to a file: a chatty compiler must not block on a full pipe
    return subprocess.Popen(
        [sys.executable, "-m", "tilecraft.tools.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=env,
        start_new_session=True,
    )


def _kill(proc: subprocess.Popen[bytes], stderr: IO[bytes]) -> str:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    stderr.seek(0)
    return stderr.read().decode(errors="replace")[-2000:]


def _run_batch(jobs: list[CompileJob], timeout_s: float) -> list[CompileReport]:
    """Reports for a prefix of ``jobs`` (at least one): stops at the first timeout or crash."""
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed below, after the worker is gone
    proc = _spawn(stderr)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(pickle.dumps(jobs))
    proc.stdin.close()
    reports: list[CompileReport] = []
    startup = 60.0  # importing torch + triton in the worker
    for job in jobs:
        data = _read_report(proc, timeout_s + (startup if not reports else 0.0))
        if data is None:
            try:  # exited by itself (stdout closed at its exit): a crash, not a timeout
                died = proc.wait(timeout=1.0) is not None
            except subprocess.TimeoutExpired:
                died = False
            tail = _kill(proc, stderr)
            if died or (proc.returncode not in (None, -signal.SIGKILL) and "Traceback" in tail):
                msg = f"compile worker died (exit {proc.returncode}): {tail}"
                reports.append(
                    CompileReport(job.target, ok=False, error=msg, error_class="compile_crash")
                )
            else:
                msg = f"compile timed out after {timeout_s:.0f}s"
                reports.append(
                    CompileReport(job.target, ok=False, error=msg, error_class="compile_timeout")
                )
            stderr.close()
            return reports
        reports.append(pickle.loads(data))
    _kill(proc, stderr)
    stderr.close()
    return reports


def _read_report(proc: subprocess.Popen[bytes], timeout_s: float) -> bytes | None:
    """One length-prefixed report, or None on timeout / EOF (the worker hung or died)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    buffer = b""
    need = _HEADER.size
    length = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, need - len(buffer))
        if not chunk:
            return None
        buffer += chunk
        if len(buffer) < need:
            continue
        if length is None:
            length = _HEADER.unpack(buffer)[0]
            buffer, need = b"", length
            if need == 0:
                return b""
            continue
        return buffer


def _cap_memory() -> None:
    """Cap this worker's address space, which the compilers it runs inherit: a compile that
    would take the machine's memory dies as a crash report (``settings.compile_memory_bytes``)."""
    limit = settings.compile_memory_bytes()
    if not limit or resource is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def main() -> None:
    _cap_memory()
    jobs: list[CompileJob] = pickle.loads(sys.stdin.buffer.read())
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # anything the compiler prints must not corrupt the reports
    for job in jobs:
        data = pickle.dumps(compile_job(job))
        out.write(_HEADER.pack(len(data)) + data)
        out.flush()


if __name__ == "__main__":
    main()

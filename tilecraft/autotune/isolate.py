"""Run configs in isolated worker processes with hard timeouts (stage: autotune; see docs/architecture.md).

A :class:`Worker` is one child process (:mod:`tilecraft.autotune.child`) in its own process group
that serves many requests; after a timeout the group is killed, and after a crash or a sticky
device error the process is gone: either way the next request starts a fresh one. An
:class:`IsolatedRunner` keeps several workers (checks run in parallel, benchmarks one at a time
under a lock) and shares the arguments and the baseline with them through files
(``torch.save``), so the caller's process and device context are never at risk.

Isolation needs a module-level kernel: the worker re-imports ``kernel.fn``'s module and takes the
attribute named ``kernel.__name__``. Kernels defined inside functions (or otherwise not reachable
that way) and arguments that cannot be saved run in-process instead (:class:`InProcessRunner`,
with a warning): same checks, but no timeout and no protection from crashes.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import torch

from tilecraft.autotune.baseline import Baseline
from tilecraft.autotune.classify import Attempt, classify, classify_exit, one_line
from tilecraft.autotune.compare import Tolerances
from tilecraft.autotune.runner import (
    BenchIf,
    IsolationUnavailable,
    OnResult,
    Runner,
    attempt_from,
    prefix_has_ok,
)
from tilecraft.config.config import Config
from tilecraft.runtime.kernel import BoundKernel, Kernel
from tilecraft.runtime.op_kinds import autocast_state
from tilecraft.settings import WORKER_ENV

STARTUP_TIMEOUT_S = 180.0


def kernel_location(kernel: Kernel) -> dict[str, str]:
    """Where a worker finds ``kernel``: module name, file and attribute name (found by identity,
    so ``fast = tc.kernel(fn)`` works); raises IsolationUnavailable for kernels that are not
    module-level attributes."""
    fn = kernel.fn
    if "<locals>" in getattr(fn, "__qualname__", ""):
        raise IsolationUnavailable(f"{kernel.__name__} is defined inside a function")
    module = sys.modules.get(fn.__module__)
    names = [kernel.__name__] + sorted(vars(module)) if module is not None else []
    attr = next((n for n in names if getattr(module, n, None) is kernel), None)
    if attr is None:
        raise IsolationUnavailable(f"{kernel.__name__} is not an attribute of {fn.__module__}")
    file = inspect.getsourcefile(fn)
    if file is None:
        raise IsolationUnavailable(f"the source file of {kernel.__name__} is unknown")
    return {"module": fn.__module__, "file": os.path.abspath(file), "attr": attr}


class Worker:
    """One worker process, restarted on demand. Not thread-safe: one request at a time."""

    def __init__(self, jobdir: Path, index: int, startup_timeout_s: float = STARTUP_TIMEOUT_S):
        self.jobdir = jobdir
        self.index = index
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.ready = False
        self.busy = False
        self.cancelled = False
        self.phase = "startup"
        self.err_path = jobdir / f"worker{index}.err"
        self.err_mark = 0  # stderr offset at the start of the current request

    def start(self) -> None:
        root = str(Path(__file__).resolve().parents[2])  # where `tilecraft` is importable from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        env[WORKER_ENV] = "1"  # a module that tunes at import time does so in-process there
        with open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tilecraft.autotune.child", str(self.jobdir)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                start_new_session=True,  # its own process group: killed as a group
            )
        self.messages = queue.Queue()
        self.ready = False
        threading.Thread(target=_reader, args=(self.proc, self.messages), daemon=True).start()

    @property
    def live(self) -> bool:
        """Started, ready and not killed: a request needs no start-up."""
        return (
            self.ready and not self.cancelled and self.proc is not None and self.proc.poll() is None
        )

    def _next(self, deadline: float) -> dict[str, Any] | None | str:
        try:
            return self.messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return "timeout"

    def _ensure_ready(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not self.ready:
            message = self._next(deadline)
            if message == "timeout":
                self.kill()
                raise IsolationUnavailable(
                    f"worker did not start within {self.startup_timeout_s:.0f}s"
                )
            if not isinstance(message, dict):
                self._reap()
                raise IsolationUnavailable(f"worker died on start-up: {self.stderr_tail()}")
            if "fatal" in message:
                self._reap()
                raise IsolationUnavailable(f"worker could not load the kernel: {message['fatal']}")
            self.ready = bool(message.get("ready"))

    def request(self, op: str, config: Config, timeout_s: float, **extra: Any) -> dict[str, Any]:
        """Send one request; a timeout kills the worker's process group."""
        if self.cancelled:
            # a cancel after its last request, or one that raced its start-up (the process did
            # not exist yet, so nothing was killed): kill it (if alive) and reap it. Reaping
            # alone waited forever on a live worker idle on its stdin (a CI run hung here).
            self.kill()
        self.busy, self.cancelled = True, False
        try:
            try:
                self._ensure_ready()
            except IsolationUnavailable:
                if self.cancelled:
                    return {"cancelled": True}
                raise
            assert self.proc is not None and self.proc.stdin is not None
            self.phase = "compile" if op == "check" else "run"
            self.err_mark = self._err_size()
            start = time.monotonic()
            deadline = start + timeout_s
            try:
                line = json.dumps({"op": op, "config": config.to_dict(), **extra}) + "\n"
                self.proc.stdin.write(line.encode())
                self.proc.stdin.flush()
            except OSError:
                pass  # it died: the reader reports EOF below
            while True:
                message = self._next(deadline)
                if isinstance(message, dict) and "phase" in message:
                    self.phase = message["phase"]
                elif isinstance(message, dict) and "result" in message:
                    if message.get("exiting"):  # after a sticky device error: gone for good
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            self._reap(timeout=30)
                    return dict(message["result"])
                elif message == "timeout":
                    self.kill()
                    category, _ = classify("", self.phase, timed_out=True)
                    return {
                        "ok": False,
                        "category": category.value,
                        "reason": f"{self.phase} did not finish in {timeout_s:.1f}s; worker killed",
                        "elapsed_s": time.monotonic() - start,
                    }
                elif message is None:
                    code = self._reap()
                    if self.cancelled:
                        return {"cancelled": True}
                    tail = self.stderr_tail()
                    category, detail = classify_exit(code, self.phase, tail)
                    return {
                        "ok": False,
                        "category": category.value,
                        "reason": f"{detail} while in the {self.phase} phase: {one_line(tail, 160)}",
                        "detail": tail,
                        "elapsed_s": time.monotonic() - start,
                    }
        finally:
            self.busy = False

    def _reap(self, timeout: float | None = None) -> int:
        proc, self.proc, self.ready = self.proc, None, False
        if proc is None:
            return 0
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait()

    def _err_size(self) -> int:
        try:
            return self.err_path.stat().st_size
        except OSError:
            return 0

    def kill(self, cancelled: bool = False) -> None:
        self.cancelled = cancelled
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if not cancelled:
            self._reap()

    def close(self) -> None:
        proc = self.proc
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.write(b'{"op": "exit"}\n')
            proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired, AssertionError):
            pass
        self.kill()

    def stderr_tail(self, limit: int = 4000) -> str:
        """The end of what the worker wrote to stderr since the current request began."""
        try:
            data = self.err_path.read_bytes()[self.err_mark :][-limit:]
        except OSError:
            return ""
        return data.decode(errors="replace")


def _reader(proc: subprocess.Popen[bytes], messages: queue.Queue[dict[str, Any] | None]) -> None:
    assert proc.stdout is not None
    for raw in proc.stdout:
        try:
            messages.put(json.loads(raw))
        except ValueError:
            continue
    messages.put(None)


class IsolatedRunner(Runner):
    isolated = True

    def __init__(
        self,
        bound: BoundKernel,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        baseline: Baseline | None,
        *,
        workers: int,
        tolerances: Tolerances | None = None,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
    ):
        location = kernel_location(bound.kernel)
        self.jobdir = Path(tempfile.mkdtemp(prefix="tc_autotune_"))
        try:
            job = {
                **location,
                # the host code runs under the call's autocast there too (a host matmul's dtype)
                "autocast": autocast_state((*args, *kwargs.values())),
                "sys_path": [p for p in sys.path if p],
                "tolerances": {_dtype_name(k): v for k, v in (tolerances or {}).items()},
            }
            (self.jobdir / "job.json").write_text(json.dumps(job))
            inputs = {"args": list(args), "kwargs": dict(kwargs)}
            inputs["constants"] = bound.kernel.constants_snapshot()
            torch.save(inputs, self.jobdir / "inputs.pt")
            if baseline is not None:
                torch.save(vars(baseline), self.jobdir / "baseline.pt")
        except Exception as exc:
            shutil.rmtree(self.jobdir, ignore_errors=True)
            raise IsolationUnavailable(f"cannot save the arguments: {exc}") from exc
        self.workers = [Worker(self.jobdir, i, startup_timeout_s) for i in range(max(1, workers))]
        for w in self.workers:
            w.start()  # start-up (imports, tracing) overlaps across workers
        self.idle: queue.Queue[Worker] = queue.Queue()
        for w in self.workers:
            self.idle.put(w)
        self.pool = ThreadPoolExecutor(len(self.workers), thread_name_prefix="tc-autotune")
        self.bench_lock = threading.Lock()

    def _run(
        self,
        config: Config,
        timeout_s: float,
        bench_rep_ms: float | None,
        bench_if: BenchIf | None,
        cancel: threading.Event,
    ) -> Attempt | None:
        worker = self.idle.get()
        try:
            if cancel.is_set():
                return None
            result = worker.request("check", config, timeout_s)
            if result.get("cancelled"):
                return None
            attempt = attempt_from(config, result)
            if attempt.ok and bench_rep_ms is not None and (bench_if is None or bench_if(attempt)):
                with self.bench_lock:  # one benchmark at a time on the device
                    timed = worker.request("bench", attempt.config, timeout_s, rep_ms=bench_rep_ms)
                if timed.get("cancelled"):
                    return None
                if timed.get("ok"):
                    attempt.ms = float(timed["ms"])
                else:
                    attempt = attempt_from(attempt.config, timed)
            return attempt
        finally:
            self.idle.put(worker)

    def check(
        self,
        configs: Sequence[Config],
        *,
        timeout_s: float,
        first_ok: bool = False,
        lean: bool = False,
        bench_rep_ms: float | None = None,
        bench_if: BenchIf | None = None,
        on_result: OnResult | None = None,
        deadline: float | None = None,
    ) -> list[Attempt | None]:
        results: list[Attempt | None] = [None] * len(configs)
        cancel = threading.Event()

        def task(i: int) -> None:
            if not cancel.is_set():
                results[i] = self._run(configs[i], timeout_s, bench_rep_ms, bench_if, cancel)

        futures = {self.pool.submit(task, i): i for i in range(len(configs))}
        pending = set(futures)
        error: BaseException | None = None
        while pending:
            wait_s = None
            if deadline is not None and not cancel.is_set():
                wait_s = max(0.0, deadline - time.monotonic())
            done, pending = wait(pending, timeout=wait_s, return_when=FIRST_COMPLETED)
            if not done:  # the deadline passed
                self.cancel(cancel)
            for future in done:
                try:
                    future.result()
                except IsolationUnavailable as exc:
                    error = error or exc
                finished = results[futures[future]]
                if finished is not None and on_result is not None and not cancel.is_set():
                    on_result(finished)
            if error is not None or (first_ok and prefix_has_ok(results, lean)):
                self.cancel(cancel)
        if error is not None:
            raise error
        return results

    def cancel(self, event: threading.Event | None = None) -> None:
        """Stop the requests in flight (their workers are killed and restarted on demand)."""
        if event is not None:
            event.set()
        for w in self.workers:
            if w.busy:
                w.kill(cancelled=True)

    def warm(self) -> bool:
        return any(w.live for w in self.workers)

    def _idle_worker(self) -> Worker:
        """An idle worker, a running one where there is one (a killed one restarts first)."""
        waiting = [self.idle.get()]
        while not waiting[-1].live and not self.idle.empty():
            waiting.append(self.idle.get_nowait())
        chosen = waiting.pop() if waiting[-1].live else waiting.pop(0)
        for w in waiting:
            self.idle.put(w)
        return chosen

    def bench(self, config: Config, *, timeout_s: float, rep_ms: float = 100.0) -> Attempt:
        worker = self._idle_worker()
        try:
            with self.bench_lock:
                result = worker.request("bench", config, timeout_s, rep_ms=rep_ms)
            return attempt_from(config, result)
        finally:
            self.idle.put(worker)

    def close(self) -> None:
        self.cancel()
        self.pool.shutdown(wait=True)
        for w in self.workers:
            w.close()
        shutil.rmtree(self.jobdir, ignore_errors=True)


def _dtype_name(key: Any) -> str:
    return str(key).removeprefix("torch.")

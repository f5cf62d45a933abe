"""Tuning plans: many kernels at many shapes, tuned once into one config table (stage: autotune;
in: a plan file; out: a config table, :mod:`tilecraft.autotune.table`).

A plan is JSON::

    {"effort": "quick", "budget_s": 60, "device": "cuda",
     "kernels": [{"kernel": "examples.rms_norm:rms_norm_fwd", "effort": "full",
                  "args": [[{"shape": [4096, 8192], "dtype": "bfloat16"},
                            {"shape": [8192], "dtype": "bfloat16"}, 1e-5],
                           ...]}]}

Each argument list of each kernel is one job. A tensor argument is ``{"shape", "dtype"}`` (and
optionally ``"fill"``: randn | rand | zeros | ones); anything else is passed as it is. Jobs run
on every visible GPU at once: one process per GPU, pinned with ``CUDA_VISIBLE_DEVICES``, each
compiling on its share of the CPU cores (:func:`run_plan`); or as Ray tasks
(:mod:`tilecraft.autotune.plan_ray`). The table is written atomically after every job and a
job already in it is skipped, so an interrupted plan resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import multiprocessing
import os
import signal
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from tilecraft.autotune.search import EFFORTS, run_tune
from tilecraft.autotune.table import ConfigTable, make_entry, source_digest
from tilecraft.config.config import Config
from tilecraft.errors import ConfigError

FILLS = ("randn", "rand", "zeros", "ones")


@dataclasses.dataclass(frozen=True)
class Job:
    """One kernel at one argument list."""

    kernel: str  # "module:name"
    args: tuple[Any, ...]  # argument specs, as in the plan
    effort: str
    budget_s: float | None
    device: str

    @property
    def id(self) -> str:
        text = json.dumps([self.kernel, list(self.args), self.effort, self.device], default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        shapes = ", ".join(
            "x".join(map(str, a["shape"])) + f":{a.get('dtype', 'float32')}"
            if isinstance(a, dict)
            else repr(a)
            for a in self.args
        )
        return f"{self.kernel.split(':')[-1]}({shapes})"


def read_plan(path: str | os.PathLike[str], device: str | None = None) -> list[Job]:
    """The jobs of a plan file, checked (unknown efforts, dtypes and fills are errors that name
    the plan entry)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read tuning plan {str(path)!r}: {exc}") from None
    entry = "{'kernel': 'MODULE:NAME', 'args': [[...]]}"
    if not isinstance(data, dict) or not isinstance(data.get("kernels") or [], list):
        raise ConfigError(f"{path}: a tuning plan is an object {{'kernels': [{entry}]}}")
    default_device = device or data.get("device") or _default_device()
    jobs: list[Job] = []
    for n, item in enumerate(data.get("kernels") or []):
        where = f"{path}: kernels[{n}]"
        if not isinstance(item, dict) or not isinstance(item.get("args") or [], list):
            raise ConfigError(f"{where}: each entry is an object {entry}")
        ref = item.get("kernel", "")
        if ":" not in ref:
            raise ConfigError(f"{where}: 'kernel' must be MODULE:NAME, got {ref!r}")
        effort = item.get("effort", data.get("effort", "quick"))
        if effort not in ("none", *EFFORTS):
            raise ConfigError(f"{where}: effort {effort!r}: expected none, quick or full")
        budget = item.get("budget_s", data.get("budget_s"))
        number = isinstance(budget, (int, float)) and not isinstance(budget, bool)
        if budget is not None and not (number and budget > 0):
            raise ConfigError(f"{where}: budget_s {budget!r}: seconds, a number above 0")
        for arglist in item.get("args") or []:
            if not isinstance(arglist, list):
                raise ConfigError(
                    f"{where}: 'args' is a list of argument lists (one per job), got an item "
                    f"{arglist!r}: write [[...]] for one job"
                )
            for spec in arglist:
                _check_arg(spec, where)
            jobs.append(Job(ref, tuple(arglist), effort, budget, default_device))
    if not jobs:
        raise ConfigError(f"{path}: the plan has no jobs ('kernels': [{{'kernel', 'args'}}])")
    return jobs


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _check_arg(spec: Any, where: str) -> None:
    if not isinstance(spec, dict):
        return
    shape = spec.get("shape")
    if not isinstance(shape, list):
        raise ConfigError(f"{where}: tensor argument {spec!r} needs a 'shape' list")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ConfigError(f"{where}: shape {shape!r}: sizes are non-negative integers")
    if not isinstance(getattr(torch, str(spec.get("dtype", "float32")), None), torch.dtype):
        raise ConfigError(f"{where}: unknown dtype {spec.get('dtype')!r}")
    if spec.get("fill", "randn") not in FILLS:
        raise ConfigError(f"{where}: fill {spec.get('fill')!r}: expected one of {FILLS}")


def make_args(job: Job, seed: int = 0) -> tuple[Any, ...]:
    """The job's arguments: tensors from their specs (seeded), other values as given."""
    gen = torch.Generator().manual_seed(seed)
    out: list[Any] = []
    for spec in job.args:
        if not isinstance(spec, dict):
            out.append(spec)
            continue
        dtype = getattr(torch, spec.get("dtype", "float32"))
        shape, fill = tuple(spec["shape"]), spec.get("fill", "randn")
        if fill in ("zeros", "ones"):
            t = (torch.zeros if fill == "zeros" else torch.ones)(shape, dtype=dtype)
        else:
            t = (torch.randn if fill == "randn" else torch.rand)(shape, generator=gen).to(dtype)
        out.append(t.to(job.device))
    return tuple(out)


def load_kernel(ref: str) -> Any:
    module_name, _, name = ref.partition(":")
    kernel = getattr(importlib.import_module(module_name), name, None)
    if kernel is None or not hasattr(kernel, "bind"):
        raise ConfigError(f"{ref}: no tilecraft kernel named {name!r} in module {module_name}")
    return kernel


def run_job(job: Job, compile_workers: int | None = None) -> dict[str, Any]:
    """Tune one job in this process; its table entry (JSON-ready)."""
    kernel = load_kernel(job.kernel)
    args = make_args(job)
    bound = kernel.bind(args)
    result = run_tune(
        bound, args, effort=job.effort, budget_s=job.budget_s, use_cache=False,
        isolate=bound.target.backend != "interpret", workers=compile_workers, verbose=False,
    )  # fmt: skip
    second = result.runner_up
    return make_entry(
        bound, result.config, ms=result.ms,
        runner_up=second.to_json() if second is not None else None,
        runner_up_ms=result.runner_up_ms, effort=job.effort, job=job.id,
        tried=result.tried, seconds=result.seconds,
        worker_device=os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    )  # fmt: skip


def _device_worker(device: str, jobs: Any, results: Any, compile_workers: int) -> None:
    """A process pinned to one GPU (set before CUDA initializes): runs the jobs it is sent."""
    os.environ["CUDA_VISIBLE_DEVICES"] = device
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            results.put((device, job, run_job(job, compile_workers), None))
        except Exception as exc:  # reported for this job; the plan goes on
            results.put((device, job, None, f"{type(exc).__name__}: {exc}"))


def visible_devices(n: int | None = None) -> list[str]:
    """The GPUs a plan spreads over: ``CUDA_VISIBLE_DEVICES``'s (or all) GPUs, at most ``n``;
    on a machine without a GPU, ``n`` (default 1) CPU workers labelled 0..n-1."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count:
        ids = listed.split(",") if listed else [str(i) for i in range(count)]
        return ids[: n or len(ids)]
    return [str(i) for i in range(n or 1)]


# (job, its table entry or None, the error text or None)
OnResult = Callable[[Job, "dict[str, Any] | None", "str | None"], None]


def _check_writable(out: Path) -> None:
    """The table's folder takes files, before any job runs (a table it could not write ended
    the first finished job in a raw traceback, the tuning lost)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=".tilecraft-probe-"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"cannot write the table {str(out)!r} ({exc.strerror or exc}): give -o a path in a "
            "folder you can write"
        ) from None


def pending_jobs(jobs: Sequence[Job], table: ConfigTable) -> list[Job]:
    """The jobs whose entry is not in the table yet (resume), or was tuned for other code
    (the kernel's source changed since: its config may not fit it)."""
    sources = {e.get("job"): e.get("source") for e in table.entries}
    current: dict[str, str | None] = {}
    todo = []
    for job in jobs:
        if job.id not in sources:
            todo.append(job)
            continue
        if job.kernel not in current:
            current[job.kernel] = _current_source(job.kernel)
        if sources[job.id] not in (None, current[job.kernel]):  # (older tables keep theirs)
            todo.append(job)
    return todo


def _current_source(ref: str) -> str | None:
    """The kernel's :func:`~tilecraft.autotune.table.source_digest` now (None where it cannot
    be imported here: its job reports why)."""
    try:
        return source_digest(load_kernel(ref))
    except Exception:  # noqa: BLE001  (an import error is the job's to report)
        return None


def run_plan(
    jobs: Sequence[Job], table: ConfigTable, devices: Sequence[str], on_result: OnResult
) -> None:
    """Run ``jobs``, one at a time per device, in processes pinned to ``devices``; each entry is
    put in ``table`` and the table written at once (an interrupt keeps every finished job).
    The processes are stopped on the way out, also on KeyboardInterrupt."""
    todo = list(jobs)
    compile_workers = max(1, min(8, (os.cpu_count() or 1) // max(1, len(devices))))
    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    results = ctx.Queue()
    queues = {d: ctx.Queue() for d in devices}
    procs = [
        ctx.Process(target=_device_worker, args=(d, queues[d], results, compile_workers))
        for d in devices
    ]
    busy = 0
    try:
        for p in procs:
            p.start()
        for device in devices:
            if todo:
                queues[device].put(todo.pop(0))
                busy += 1
        while busy:
            device, job, entry, error = results.get()
            busy -= 1
            if entry is not None:
                table.put(entry)
                table.write()
            on_result(job, entry, error)
            if todo:
                queues[device].put(todo.pop(0))
                busy += 1
    finally:
        for q in queues.values():
            q.put(None)
        for p in procs:
            p.join(timeout=0 if busy else 5)
            if p.is_alive():
                p.terminate()
                p.join()


def default_output(plan_path: str | os.PathLike[str]) -> Path:
    path = Path(plan_path)
    return path.with_name(path.stem + ".tilecraft.json")


def tune_plan(
    plan_path: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    devices: int | None = None,
    device: str | None = None,
    runner: Callable[[Sequence[Job], ConfigTable, OnResult], None] | None = None,
    stream: Any = None,
) -> int:
    """``tilecraft tune PLAN``: run the plan's pending jobs into the table at ``output``
    (default: ``<plan>.tilecraft.json`` beside the plan). ``runner`` replaces the per-GPU
    processes (the Ray runner). Returns the exit status: 0, 1 if a job failed, 130 when
    interrupted (the finished jobs are kept: the same command resumes)."""
    from tilecraft.autotune.progress import JobsProgress

    jobs = read_plan(plan_path, device)
    out = Path(output) if output else default_output(plan_path)
    _check_writable(out)
    table = ConfigTable.read(out)
    todo = pending_jobs(jobs, table)
    progress = JobsProgress(len(jobs), len(jobs) - len(todo), stream)
    errors: list[str] = []

    def on_result(job: Job, entry: dict[str, Any] | None, error: str | None) -> None:
        if error:
            errors.append(f"{job.describe()}: {error}")
        where = str((entry or {}).get("worker_device", "")) or "-"
        progress.result(job.describe(), (entry or {}).get("ms"), where, error)

    try:
        if runner is not None:
            runner(todo, table, on_result)
        else:
            run_plan(todo, table, visible_devices(devices), on_result)
    except KeyboardInterrupt:
        progress.close()
        done = len(pending_jobs(jobs, ConfigTable.read(out)))
        print(
            f"tilecraft tune: interrupted; {len(jobs) - done} of {len(jobs)} jobs are in {out}. "
            "Run the same command to resume",
            file=progress.stream,
        )
        return 130
    progress.summary(summary_rows(jobs, table))
    if out.exists():
        print(f"tilecraft tune: wrote {out}", file=progress.stream)
    else:
        print(f"tilecraft tune: no job succeeded; {out} was not written", file=progress.stream)
    return 1 if errors else 0


def summary_rows(jobs: Sequence[Job], table: ConfigTable) -> list[tuple[str, str, str, str]]:
    by_job = {e.get("job"): e for e in table.entries}
    rows = []
    for job in jobs:
        entry = by_job.get(job.id)
        if entry is None:
            rows.append((job.describe(), "failed", "", ""))
            continue
        ms, second = entry.get("ms"), entry.get("runner_up_ms")
        config = Config.from_json(entry["config"])
        rows.append(
            (
                job.describe(),
                "" if ms is None else f"{ms:.4g}",
                "" if second is None else f"{second:.4g}",
                repr(config),
            )
        )
    return rows

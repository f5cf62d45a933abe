"""Tuning plans on a Ray cluster (stage: autotune; in: a plan's jobs; out: table entries gathered
on the driver). ``tilecraft tune PLAN --ray [ADDRESS]``; needs ``pip install tilecraft[ray]``.

Each job is one Ray task asking for one GPU (Ray pins it with ``CUDA_VISIBLE_DEVICES``), or
none on a cluster without GPUs (CPU runs through Triton's interpreter). The kernels' modules
must be importable on every node (installed there, or shipped with a Ray runtime env). The
driver puts each finished entry in the table and writes it at once, as the local runner does.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import Any

from tilecraft.autotune.plan import Job, OnResult, run_job
from tilecraft.autotune.table import ConfigTable
from tilecraft.errors import ConfigError

RayRunner = Callable[[Sequence[Job], ConfigTable, OnResult], None]


def _ray_job(job: Job) -> dict[str, Any]:
    """The task body: tune one job on the node that runs it."""
    entry = run_job(job)
    entry["worker_host"] = socket.gethostname()
    return entry


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "tilecraft tune --ray: Ray is not installed",
            hint="pip install 'tilecraft[ray]' (on the driver and on every node)",
        ) from None
    return ray


def ray_runner(address: str | None = None, **init_options: Any) -> RayRunner:
    """A plan runner that sends each job to the Ray cluster at ``address`` (None: the cluster
    that ``RAY_ADDRESS`` names, else a local instance started for the run and stopped after)."""

    def run(jobs: Sequence[Job], table: ConfigTable, on_result: OnResult) -> None:
        ray = _import_ray()
        started = not ray.is_initialized()
        if started:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, **init_options)
        pending: dict[Any, Job] = {}
        try:
            gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
            task = ray.remote(num_gpus=gpus, max_retries=0)(_ray_job)
            pending.update({task.remote(job): job for job in jobs})
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                job = pending.pop(done[0])
                entry: dict[str, Any] | None = None
                error: str | None = None
                try:
                    entry = ray.get(done[0])
                except Exception as exc:  # this job failed on its node; the plan goes on
                    error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"
                if entry is not None:
                    table.put(entry)
                    table.write()
                on_result(job, entry, error)
        finally:
            for ref in pending:  # interrupted: stop what the cluster still runs for us
                ray.cancel(ref, force=True)
            if started:
                ray.shutdown()

    return run

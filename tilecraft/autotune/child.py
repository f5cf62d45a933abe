"""The isolated worker process: ``python -m tilecraft.autotune.child JOBDIR`` (stage: autotune).

It re-imports the kernel's module (by module name with the parent's ``sys.path``, else by file
path), loads the arguments and the baseline that the parent saved with ``torch.save``, specializes
the kernel, says ``ready``, then serves requests, one JSON line each on stdin:
``{"op": "check"|"bench"|"exit", "config": {...}}``. Replies are JSON lines on the original
stdout (the protocol channel; anything the kernel prints goes to stderr): ``{"phase": ...}`` while
working, then ``{"result": {...}}``. After a sticky device error (illegal address...) the worker
exits, so the parent replaces it with a fresh process and a fresh CUDA context.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

STICKY_EXIT = 4
FATAL_EXIT = 3


def load_kernel(job: dict[str, Any]) -> Any:
    """The Kernel object named by ``job`` (module, file, attr)."""
    for path in reversed(job.get("sys_path", [])):
        if path not in sys.path:
            sys.path.insert(0, path)
    module = None
    if job["module"] != "__main__":
        try:
            module = importlib.import_module(job["module"])
        except ImportError:
            module = None
    if module is None:
        # a script run as __main__ (or a module not on sys.path): import by file path under
        # another name, so its `if __name__ == "__main__":` block does not run again
        name = "__tilecraft_autotune_main__"
        spec = importlib.util.spec_from_file_location(name, job["file"])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {job['file']}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        from tilecraft.autotune.select import CalledWhileImported, stop_kernel_calls

        try:
            with stop_kernel_calls():
                spec.loader.exec_module(module)
        except CalledWhileImported:
            # a script without a main guard calls its kernel at top level: the import stops
            # there (none of its work runs here), the kernel is defined above the call
            if not hasattr(module, job["attr"]):
                raise ImportError(
                    f"{job['file']} calls a kernel at import time, before it defines "
                    f"{job['attr']}: put the script's work under `if __name__ == '__main__':`"
                ) from None
    return getattr(module, job["attr"])


def _send(proto: TextIO, message: dict[str, Any]) -> None:
    proto.write(json.dumps(message, default=str) + "\n")
    proto.flush()


def _exit_with_parent() -> None:
    """A daemon thread: when the parent dies (even by SIGKILL), kill this worker's process group
    (a hung compile included) instead of running on as an orphan."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str]) -> int:
    _exit_with_parent()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints of the kernel's module go to stderr, not into the protocol
    sys.stdout = sys.stderr
    from tilecraft.autotune.evaluate import error_text
    from tilecraft.runtime.op_kinds import autocast_context

    jobdir = Path(argv[1])
    try:
        job = json.loads((jobdir / "job.json").read_text())
    except Exception as exc:  # reported to the parent, which falls back to in-process runs
        _send(proto, {"fatal": error_text(exc)})
        return FATAL_EXIT
    # the host code runs under the call's autocast, as in the caller (a host matmul's dtype)
    with autocast_context(job.get("autocast", "")):
        return _serve(proto, jobdir, job)


def _serve(proto: TextIO, jobdir: Path, job: dict[str, Any]) -> int:
    """Bind the job's kernel to its arguments, then check and time configs until told to stop."""
    import torch

    from tilecraft.autotune.baseline import Baseline
    from tilecraft.autotune.evaluate import check_config, error_text, failure, time_config
    from tilecraft.config.config import Config
    from tilecraft.settings import test_faults

    try:
        kernel = load_kernel(job)
        data = torch.load(jobdir / "inputs.pt", weights_only=False)
        args, kwargs = tuple(data["args"]), dict(data["kwargs"])
        kernel.restore_constants(data.get("constants", []))  # the caller's, not the source's
        baseline = None
        if (jobdir / "baseline.pt").exists():
            saved = torch.load(jobdir / "baseline.pt", weights_only=False)
            baseline = Baseline(**saved)
        bound = kernel.bind(args, kwargs)
    except Exception as exc:  # reported to the parent, which falls back to in-process runs
        _send(proto, {"fatal": error_text(exc)})
        return FATAL_EXIT
    tolerances = {k: tuple(v) for k, v in job.get("tolerances", {}).items()}
    faults = test_faults()
    _send(proto, {"ready": True, "pid": os.getpid()})
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        request = json.loads(line)
        if request["op"] == "exit":
            return 0
        config = Config.from_dict(request["config"])
        fault = _fault_for(faults, bound, config)
        start = time.perf_counter()
        if request["op"] == "check":
            result = check_config(
                bound,
                config,
                args,
                kwargs,
                baseline,
                tolerances=tolerances,
                on_phase=lambda p: _send(proto, {"phase": p}),
                fault=fault,
            )
        else:
            try:
                program = bound.compile_config(config)
                ms = time_config(bound, program, args, kwargs, rep_ms=request.get("rep_ms", 100))
                result = {"ok": True, "ms": ms, "elapsed_s": time.perf_counter() - start}
            except Exception as exc:
                result = failure(exc, "run", start)
        exiting = bool(result.get("sticky"))  # (also on CPU, so the path is tested there)
        _send(proto, {"result": result, "exiting": exiting})
        if exiting:
            return STICKY_EXIT  # the device context cannot be trusted any more


def _fault_for(faults: dict[str, str], bound: Any, config: Any) -> str | None:
    from tilecraft.autotune.candidates import quiet_normalize

    if not faults:
        return None
    keys = [config.key(), "*"]
    with contextlib.suppress(Exception):
        keys.insert(1, quiet_normalize(bound.config_spec, config).key())
    return next((faults[k] for k in keys if k in faults), None)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

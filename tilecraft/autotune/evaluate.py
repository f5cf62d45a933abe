"""Compile, run, check and time one config (stage: autotune).

Used by the isolated worker process (:mod:`tilecraft.autotune.child`) and by the in-process
fallback. Never raises for a bad config: every failure becomes a classified result.
"""

from __future__ import annotations

import os
import statistics
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import torch

from tilecraft import write_guard
from tilecraft.autotune.baseline import Baseline, clone_args, restrict, widened
from tilecraft.autotune.classify import STICKY, Category, classify, one_line
from tilecraft.autotune.compare import Tolerances, compare, digest
from tilecraft.autotune.decisions import float_decisions, rounds_floats
from tilecraft.config.config import Config
from tilecraft.errors import ConfigError
from tilecraft.runtime.kernel import BoundKernel, CompiledProgram

PhaseCallback = Callable[[str], None]


def error_text(exc: BaseException) -> str:
    """``Type: message`` of an exception and of its causes (no traceback frames)."""
    parts: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        parts.append("".join(traceback.format_exception_only(type(cur), cur)).strip())
        cur = cur.__cause__ or cur.__context__
    return "\n".join(parts)


def failure(exc: BaseException, phase: str, start: float) -> dict[str, Any]:
    text = error_text(exc)
    category, detail = classify(text, phase)
    if isinstance(exc, ConfigError) and category is Category.COMPILE_ERROR:
        detail = "invalid config"
    return {
        "ok": False,
        "category": category.value,
        "reason": one_line(text),
        "detail": text + "\n" + traceback.format_exc(limit=-8),
        "phase": phase,
        "sticky": detail in STICKY,
        "elapsed_s": time.perf_counter() - start,
    }


class CompileWatcher:
    """Reports Triton's lazy compiles (at first launch) as a "compile" phase and collects the
    compiled kernels' resource usage (registers, spills, shared memory) where Triton reports it."""

    def __init__(self, on_phase: PhaseCallback | None):
        self.on_phase = on_phase
        self.kernels: list[Any] = []
        self._saved: tuple[Any, Any] | None = None

    def __enter__(self) -> CompileWatcher:
        try:
            from triton import knobs

            self._saved = (knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook)
            knobs.runtime.jit_cache_hook = self._before
            knobs.runtime.jit_post_compile_hook = self._after
        except (ImportError, AttributeError):
            self._saved = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            from triton import knobs

            knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook = self._saved

    def _before(self, *args: Any, **kwargs: Any) -> bool:
        if self.on_phase:
            self.on_phase("compile")
        return False

    def _after(self, *args: Any, **kwargs: Any) -> bool:
        try:
            jit = kwargs["fn"].jit_function
            device = kwargs["compile"]["device"]
            self.kernels.append(jit.device_caches[device][0][kwargs["key"]])
        except Exception:  # resource usage is best-effort
            pass
        if self.on_phase:
            self.on_phase("run")
        return False

    def resources(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for k in self.kernels:
            for name, value in (
                ("registers", getattr(k, "n_regs", None)),
                ("spills", getattr(k, "n_spills", None)),
                ("shared", getattr(getattr(k, "metadata", None), "shared", None)),
            ):
                if isinstance(value, int):
                    out[name] = max(out.get(name, 0), value)
        return out


def synchronize(device_type: str) -> None:
    if device_type == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize()


def check_config(
    bound: BoundKernel,
    config: Config,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    baseline: Baseline | None,
    *,
    tolerances: Tolerances | None = None,
    on_phase: PhaseCallback | None = None,
    fault: str | None = None,
) -> dict[str, Any]:
    """Compile ``config``, run it on clones of the arguments, compare with ``baseline``.
    Returns a JSON-friendly result: ``ok``, ``category``, ``reason``, ``elapsed_s``..."""
    start = time.perf_counter()
    phase = "compile"

    def enter(p: str) -> None:
        nonlocal phase
        phase = p
        if on_phase:
            on_phase(p)

    try:
        enter("compile")
        _inject(fault, "compile")
        program = bound.compile_config(config)
        compile_s = time.perf_counter() - start
        enter("run")
        _inject(fault, "run")
        a, kw = clone_args(args, dict(kwargs))
        with CompileWatcher(enter) as watcher, write_guard.undone((a, kw)) as guard:
            out = guard.handed_back(bound.run(program, *a, **kw))
            synchronize(bound.device_type)
        if fault == "wrong":
            out = _perturb(out, a)
    except Exception as exc:  # classified, never raised: a bad config is skipped
        return failure(exc, phase, start)
    result: dict[str, Any] = {
        "ok": True,
        "category": None,
        "reason": "",
        "phase": "run",
        "elapsed_s": time.perf_counter() - start,
        "compile_s": compile_s,
        "config": program.config.to_dict(),
        "resources": watcher.resources(),
    }
    if baseline is not None:
        names = [s.name for s in bound.arg_signatures]
        got = (out, (*a, *kw.values()))
        want = (baseline.outputs, (*baseline.args_after, *baseline.kwargs_after.values()))
        if baseline.written is not None:  # a sampled ref mode: the elements it wrote
            masks, arg_masks, kwarg_masks = baseline.written
            got, want = restrict(got, want, (masks, (*arg_masks, *kwarg_masks.values())))
        decides, rounds = (
            bool(float_decisions(bound.traced.loops)),
            rounds_floats(bound.traced.loops),
        )

        def check(precise: Any = None) -> Any:
            return compare(
                got[0],
                want[0],
                actual_args=got[1],
                expected_args=want[1],
                arg_names=names[: len(a)] + list(kw),
                tolerances=tolerances,
                decides_on_floats=decides,
                rounds_floats=rounds,
                precise=precise,
            )

        cmp = check()
        if not cmp.ok and (precise := widened(baseline, bound.kernel, args, dict(kwargs))):
            cmp = check(precise)
        if cmp.boundary_cases:
            result["reason"] = cmp.summary()[:400]
        if not cmp.ok:
            result.update(
                ok=False,
                category=Category.WRONG_RESULT.value,
                reason=f"differs from {baseline.source}: {cmp.summary()}"[:400],
            )
            if rounds and cmp.codes_one_off:  # other configs may agree (discover.agreed_ties)
                result["digest"] = digest(got)
    return result


def time_config(
    bound: BoundKernel,
    program: CompiledProgram,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    *,
    rep_ms: float = 100.0,
) -> float:
    """Milliseconds per call of the compiled ``program`` (host code included).

    On a GPU: ``triton.testing.do_bench`` median (it flushes L2 between runs). In Triton's CPU
    interpreter the time is wall-clock of a few calls and says nothing about GPU speed; it only
    keeps the search logic exercised on CPU.
    """
    a, kw = clone_args(args, dict(kwargs))

    def call() -> None:
        bound.run(program, *a, **kw)

    with write_guard.undone((a, kw)):  # (the caller's buffers are saved once, at the first call)
        if bound.device_type == "cpu" or bound.target.backend == "interpret":
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                call()
                times.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(times)
        import triton.testing

        warmup = max(5.0, rep_ms / 4)
        return float(triton.testing.do_bench(call, warmup=warmup, rep=rep_ms, return_mode="median"))


def _inject(fault: str | None, phase: str) -> None:
    """Test-only faults (``TILECRAFT_TEST_FAULT``), applied by the isolated worker only."""
    if fault is None:
        return
    if phase == "compile" and fault == "hang" or phase == "run" and fault == "hang_run":
        time.sleep(1000)
    if phase == "compile" and fault == "compile_error":
        raise RuntimeError("CompilationError: injected compile error (TILECRAFT_TEST_FAULT)")
    if phase == "run" and fault == "crash":
        os.abort()
    if phase == "run" and fault == "fault":
        raise RuntimeError("CUDA error: an illegal memory access was encountered (injected)")


def _perturb(out: Any, args: tuple[Any, ...]) -> Any:
    """Test-only wrong results: the first float output changes, else the first float argument."""
    if isinstance(out, torch.Tensor) and out.is_floating_point():
        return out + 1
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return type(out)([out[0] + 1, *out[1:]])
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.is_floating_point():
            arg.add_(1)
            break
    return out

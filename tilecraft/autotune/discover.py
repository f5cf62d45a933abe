"""Discover a working default config (stage: autotune; seed 000; see docs/architecture.md).

Candidates (the heuristic default first, then safer variants) -> static checks -> compile and run
on the real inputs in isolated workers with a hard timeout -> accuracy against the baseline (never
a config's output) -> the first survivor in rank order. It is cached on disk, so the next call
(also in a new process) pays only a cache read and a ``normalize``.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from tilecraft.autotune import cache
from tilecraft.autotune.alarm import CandidateTimeout, time_limit
from tilecraft.autotune.baseline import Baseline, compute_baseline
from tilecraft.autotune.candidates import candidates, quiet_normalize
from tilecraft.autotune.classify import (
    Attempt,
    Category,
    NoWorkingConfigError,
    is_argument_error,
    racy_updates,
    shared_argument_error,
    shared_error,
    shifted_updates,
)
from tilecraft.autotune.compare import DEFAULT_TOLERANCES, Tolerances, tolerance_for
from tilecraft.autotune.evaluate import error_text
from tilecraft.autotune.progress import Reporter
from tilecraft.autotune.repro import write_repro
from tilecraft.autotune.runner import Runner
from tilecraft.autotune.runners import open_runner
from tilecraft.config.config import Config
from tilecraft.config.unfit import unfit_values
from tilecraft.errors import ConfigError, TilecraftError, innermost_frame, user_stacklevel
from tilecraft.ir.nodes import Op
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.settings import force_autotune

DEFAULT_TIMEOUT_S = 60.0
# the ref-mode baseline's limit: eager PyTorch stepping a big grid tile by tile can take a while
BASELINE_TIMEOUT_S = 300.0
MAX_UNKNOWN_REPROS = 2
# ref mode runs at most this many programs of a grid for the baseline (one Python iteration per
# program: a CSR SpMV over 1M rows took ~95 s on the CPU; 2048 programs ~0.2 s)
SAMPLE_PROGRAMS = 2048
# ... and starts none after this long (a paged decode attention's 512 programs of 256 pages
# each took 42 s on an H200)
SAMPLE_BUDGET_S = 3.0


WORKER_CONTEXT_BYTES = 1 << 30  # a worker's CUDA context, Triton and torch allocator slack


def default_workers(n_jobs: int, cap: int = 4, args: Sequence[Any] = ()) -> int:
    """Worker processes for ``n_jobs`` configs: at most the cores, ``cap``, and as many as half
    the device's free memory holds when each keeps the arguments four times (its copy, a
    clone per run, the outputs and the baseline) plus its context; large inputs (a 2 GB logits
    tensor) would otherwise run the device out of memory."""
    n = max(1, min(os.cpu_count() or 1, cap, n_jobs))
    arg_bytes = sum(
        a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor) and a.is_cuda
    )
    if arg_bytes and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info()
        n = max(1, min(n, free // 2 // (4 * arg_bytes + WORKER_CONTEXT_BYTES)))
    return n


def baseline_or_none(
    bound: BoundKernel,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    timeout_s: float | None = None,
) -> Baseline | None:
    """The baseline, or None (with a warning) when it cannot run: configs are then only checked
    for running, not for accuracy. Ref mode runs the kernel body in this process, so it runs
    under a time limit (``BASELINE_TIMEOUT_S``, where ``alarm.time_limit`` can set one): a
    ``while`` on data that never ends would otherwise hold the caller's first call forever."""
    limit = BASELINE_TIMEOUT_S if timeout_s is None else timeout_s
    fired: list[bool] = []
    try:
        with time_limit(limit) as fired:
            sample = _sample_programs(bound)
            return compute_baseline(bound.kernel, args, dict(kwargs), sample, SAMPLE_BUDGET_S)
    except Exception as exc:  # a broken ref mode / baseline must not stop tuning
        if fired or isinstance(exc, CandidateTimeout):
            message = (
                f"tilecraft autotune: {bound.kernel.__name__}: the accuracy baseline (the kernel "
                f"run in ref mode) ran past {limit:g}s and was stopped: a `while` whose condition "
                "never turns false, or a grid of many programs (ref mode runs them one at a "
                "time, all of them where the kernel has several device loops or atomics)? "
                "Configs are checked for running only (each under its own time limit); pass "
                "@tc.kernel(baseline=...) (eager PyTorch) to check accuracy"
            )
        else:
            message = _baseline_failure(bound, exc)
        warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())
        return None


def _sample_programs(bound: BoundKernel) -> int | None:
    """How many programs of a grid ref mode runs for the baseline (``language/ref_sample.py``):
    ``SAMPLE_PROGRAMS`` where programs cannot see each other's results (one device loop, no
    atomics), else all (None)."""
    loops = bound.traced.loops
    if len(loops) != 1 or any(n.op is Op.ATOMIC for n in loops[0].walk()):
        return None
    return SAMPLE_PROGRAMS


def user_baseline(bound: BoundKernel) -> str:
    """Where every config disagreed with a ``baseline=`` the user wrote: name it first (the
    hint would otherwise suspect the compiled code); "" without one."""
    baseline = bound.kernel.baseline
    if baseline is None:
        return ""
    name = getattr(baseline, "__qualname__", repr(baseline))
    code = getattr(baseline, "__code__", None)
    where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    return (
        f"every config disagrees with baseline={name}{where}: check it against what the kernel "
        f"computes as written, {bound.kernel.__name__}.run_ref(...)"
    )


def unsteady_baseline(bound: BoundKernel, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    """Why every config disagreed with the baseline where the baseline disagrees with itself:
    run twice, eagerly, it gave other outputs (an output from ``torch.empty`` the device loops
    do not write everywhere, or random numbers drawn in host code); "" otherwise."""
    first = baseline_or_none(bound, args, kwargs)
    second = baseline_or_none(bound, args, kwargs)
    if first is None or second is None or _same_tensors(first.outputs, second.outputs):
        return ""
    return (
        f"{bound.kernel.__name__} gives other outputs each time it runs eagerly (ref mode, twice "
        "on the same inputs), so no compiled config can match it: an output allocated with "
        "torch.empty that the device loops do not write everywhere, or random numbers drawn in "
        "host code; allocate with torch.zeros (or write every element), or pass the random "
        "values in as arguments"
    )


def _same_tensors(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(
            (a == b).all()
            if not a.is_floating_point()
            else ((a == b) | (a.isnan() & b.isnan())).all()
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return all(_same_tensors(x, y) for x, y in zip(a, b, strict=True))
    return not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor)


def _baseline_failure(bound: BoundKernel, exc: Exception) -> str:
    """Why the accuracy check is off: the error, and where ref mode ran the kernel body as
    eager PyTorch, the line of the kernel that eager PyTorch rejected (code that compiles may
    still not be eager PyTorch: ``m = float("-inf")`` then ``torch.maximum(m, x)``)."""
    kernel = bound.kernel
    if isinstance(exc, TilecraftError) and not isinstance(exc, ConfigError):
        # a mistake in the kernel that ref mode found (an index out of range, a mask that does
        # not fit): the compiled kernel has it too, so say what to fix, not how to skip the check
        hint_line = f"\n  hint: {exc.hint}" if exc.hint else ""
        at = f"{exc.loc}: " if exc.loc is not None else ""
        return (
            f"tilecraft autotune: {kernel.__name__}: the accuracy baseline (the kernel run in ref "
            f"mode) failed: {type(exc).__name__}: {at}{exc.message}{hint_line}\n"
            "Configs are checked for running only; the compiled kernel has the same mistake (it "
            "never touches memory outside a tensor, but an index out of range reads 0 there), "
            "so fix the kernel rather than passing a baseline"
        )
    text = f"({error_text(exc).splitlines()[0]})"
    if kernel.baseline is not None:
        name = getattr(kernel.baseline, "__qualname__", repr(kernel.baseline))
        return (
            f"tilecraft autotune: {kernel.__name__}: your baseline= function {name} failed on "
            f"the call's arguments {text}; configs are checked for running only. Fix it (it "
            "takes the kernel's arguments and returns what the kernel returns), or leave "
            "baseline= out to compare with the kernel run in ref mode"
        )
    where = innermost_frame(exc, kernel.def_loc.filename)
    hint = ""
    if where is not None:
        text = f"at {where.short} `{where.source_line().strip()}` {text}"
        if "must be Tensor, not" in str(exc):
            hint = "start such a value as a tensor (tc.full([], value, dtype=...)) or "
    if isinstance(exc, IndexError):  # torch's bounds checks (F.cross_entropy's labels)
        return (
            f"tilecraft autotune: {kernel.__name__}: the accuracy baseline (the kernel run as "
            f"eager PyTorch) found an index out of range {text}: the call's data (a label, an "
            "id) lies outside its tensor. Configs are checked for running only; compiled code "
            "reads 0 there (a loss of such a label is the row's logsumexp), so check the "
            "inputs, or mask those elements in the kernel"
        )
    return (
        f"tilecraft autotune: {kernel.__name__}: the accuracy baseline (the kernel run as eager "
        f"PyTorch) failed {text}; configs are checked for running only. To check accuracy, "
        f"{hint}pass @tc.kernel(baseline=...)"
    )


def kernel_tolerances(bound: BoundKernel, args: Sequence[Any] = ()) -> Tolerances | None:
    """Per-kernel tolerance overrides: ``@tc.kernel(autotune_tolerances={dtype: (rtol, atol)})``.

    Without them, outputs more precise than the least precise float the kernel computes in (its
    float arguments and every IR value) get that precision's tolerance: fp32 outputs of a kernel
    with half-precision inputs differ from the reference by an ulp of intermediate roundings
    (Triton's interpreter even truncates where torch rounds to nearest); fp64 outputs of fp32
    math differ by fp32 roundings."""
    value = bound.kernel.options.get("autotune_tolerances")
    if value:
        return dict(value)
    floats = {a.dtype for a in args if isinstance(a, torch.Tensor) and a.dtype.is_floating_point}
    # the precision the kernel computes in: fp64 inputs with fp32 math inside (the README's
    # rms_norm) are as exact as fp32, not fp64
    floats |= {
        n.dtype for loop in bound.traced.loops for n in loop.walk() if n.dtype.is_floating_point
    }
    if not floats:
        return None
    loosest = max(floats, key=lambda d: tolerance_for(d))
    tolerance = tolerance_for(loosest)
    tighter = [d for d in DEFAULT_TOLERANCES if tolerance_for(d) < tolerance]
    return {d: tolerance for d in tighter} or None


def cached_config(bound: BoundKernel, kind: str) -> Config | None:
    """A cached config that still normalizes and generates code (its program is kept for the
    first call); a stale one is dropped with a warning, so the caller discovers or tunes again."""
    if force_autotune():
        return None
    config = cache.load(bound, kind)
    if config is None:
        return None
    try:
        config = quiet_normalize(bound.config_spec, config)
        bound.compile_config(config)
        return config
    except Exception as exc:  # any failure means: not usable any more, find another
        cache.remove(bound, kind)
        warnings.warn(
            f"tilecraft: {bound.kernel.__name__}: the cached {kind} config {config!r} no longer "
            f"works ({type(exc).__name__}: {str(exc)[:200]}); it was removed and is searched again",
            stacklevel=user_stacklevel(),
        )
        return None


class UnknownRepros:
    """Writes a repro for the first few configs that fail with an unknown error."""

    def __init__(self, bound: BoundKernel, args: Sequence[Any], kwargs: Mapping[str, Any]):
        self.bound, self.args, self.kwargs = bound, args, kwargs
        self.written = 0

    def __call__(self, attempt: Attempt, reporter: Reporter) -> None:
        if attempt.category is not Category.UNKNOWN or self.written >= MAX_UNKNOWN_REPROS:
            return
        if is_argument_error(attempt):  # the call's arguments: raised after the candidates
            return
        self.written += 1
        path = write_repro(self.bound, self.args, self.kwargs, [attempt], "an unknown error")
        reporter.line(
            f"{self.bound.kernel.__name__}: unknown error: {attempt.reason} (repro: {path})"
        )


@dataclasses.dataclass
class Discovery:
    config: Config
    attempts: list[Attempt]  # every config tried or rejected, in order (empty on a cache hit)
    rank: int = 0  # the winner's place among the candidates that were run
    heuristic_ok: bool = True  # the spec's heuristic default worked
    cached: bool = False


def discover_default(
    bound: BoundKernel,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> Config:
    """The first candidate config that compiles, runs and matches the baseline on ``args``
    (see :func:`run_discovery` for the options). Raises only :class:`NoWorkingConfigError`."""
    return run_discovery(bound, args, kwargs, **options).config


def run_discovery(
    bound: BoundKernel,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    isolate: bool = True,
    workers: int | None = None,
    tolerances: Tolerances | None = None,
    use_cache: bool = True,
    max_candidates: int = 16,
    runner: Runner | None = None,
    reporter: Reporter | None = None,
) -> Discovery:
    """Discover a working default and say how (:class:`Discovery`).

    Raises only :class:`NoWorkingConfigError` (with the table of reasons and a repro script).
    ``timeout_s`` bounds each config's compile + run in a worker; ``runner`` lets a caller share
    its workers (and baseline); ``isolate=False`` runs in-process; ``max_candidates`` caps how
    many configs are tried.
    """
    kwargs = dict(kwargs or {})
    name = bound.kernel.__name__
    if use_cache:
        hit = cached_config(bound, "default")
        if hit is not None:
            return Discovery(hit, [], cached=True)
    reporter = reporter or Reporter(name)  # no bar; lines only when something failed
    tolerances = tolerances if tolerances is not None else kernel_tolerances(bound, args)
    reporter.stage = "discover"
    warp_size = bound.target.warp_size
    configs, rejected = candidates(
        bound.config_spec, warp_size=warp_size, first=bound.kernel.configs, limit=max_candidates
    )
    attempts: list[Attempt] = list(rejected)
    for a in rejected:
        reporter.attempt(a)
    results: list[Attempt | None] = []
    if configs:
        unknown = UnknownRepros(bound, args, kwargs)

        def on_result(attempt: Attempt) -> None:
            reporter.attempt(attempt)
            unknown(attempt, reporter)

        own = runner is None
        if runner is None:
            baseline = baseline_or_none(bound, args, kwargs)
            runner = open_runner(
                bound,
                args,
                kwargs,
                baseline,
                isolate=isolate,
                workers=workers or default_workers(len(configs), args=args),
                tolerances=tolerances,
            )
        try:
            results = runner.check(
                configs, timeout_s=timeout_s, first_ok=True, lean=True, on_result=on_result
            )
        finally:
            if own:
                runner.close()
    attempts += [r for r in results if r is not None]
    winner = _first_working(results)
    if winner is None and (winner := agreed_ties(attempts)) is not None:
        warnings.warn(
            f"tilecraft: {name}: every config differs from the baseline by one integer code "
            f"in the same elements, and {winner.config!r} and others agree bit for bit: rounding "
            f"ties (a table rounded once, then gathered), taken as its result ({winner.reason})",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    if winner is None:
        if (argument_error := shared_argument_error(attempts)) is not None:
            raise argument_error
        repro = write_repro(bound, args, kwargs, attempts, "no candidate config worked")
        cause = unfit_values(bound.config_spec)
        refusal = "" if cause else shared_error(attempts)
        if all(a.category is Category.WRONG_RESULT for a in attempts if not a.ok):
            cause = cause or user_baseline(bound) or unsteady_baseline(bound, args, kwargs)
        loops = bound.traced.loops
        shifted = shifted_updates(loops)
        raise NoWorkingConfigError(
            name, attempts, repro, cause, racy_updates(loops), refusal, shifted
        )
    rank = results.index(winner)
    heuristic_ok = winner.config.key() == _default_key(bound)
    if not heuristic_ok:
        failed = [a for a in attempts if not a.ok]
        spilled = [a for a in attempts if a.ok and not a.lean]
        why = []
        if failed:
            kinds = ", ".join(sorted({str(a.category) for a in failed}))
            why.append(f"{len(failed)} failures ({kinds})")
        if spilled:
            words = spilled[0].resources["spills"]
            why.append(f"{len(spilled)} spilling hard ({words * 4} bytes a thread)")
        reporter.line(
            f"{name}: the heuristic default did not work or spilled; using candidate {rank} "
            f"after {' and '.join(why)}"
        )
    if use_cache:
        cache.store(bound, "default", winner.config, rank=rank, heuristic_ok=heuristic_ok)
    return Discovery(winner.config, attempts, rank, heuristic_ok)


def _first_working(results: list[Attempt | None]) -> Attempt | None:
    """The first candidate that works without spilling hard (``Attempt.lean``: a config whose
    registers spill to local memory runs many times slower than one that fits, and the
    resource model cannot always tell), else the first that works."""
    done = [r for r in results if r is not None]
    return next((r for r in done if r.lean), None) or next((r for r in done if r.ok), None)


def agreed_ties(attempts: list[Attempt]) -> Attempt | None:
    """The first of the configs whose results are the same bytes, where each differs from the
    baseline only in integer codes one off (``Attempt.digest``) and at least two agree: a
    rounding kernel whose rounded table is gathered into its output (an image's gamma LUT:
    one entry on the other side of .5 puts every pixel of that gray level one off, 0.5% of
    the image, past the share of lone ties ``compare`` accepts), not a wrong config, which
    others would not reproduce bit for bit. None otherwise."""
    tied = [a for a in attempts if a.digest]
    counts = collections.Counter(a.digest for a in tied)
    if not counts:
        return None
    common, n = counts.most_common(1)[0]
    return next(a for a in tied if a.digest == common) if n >= 2 else None


def _default_key(bound: BoundKernel) -> str | None:
    try:
        return quiet_normalize(bound.config_spec, bound.config_spec.default()).key()
    except ConfigError:
        return None

"""Why a config failed: the error table of the autotuner (stage: autotune; see docs/architecture.md).

Every failure is classified into one category of :class:`Category` and the config is skipped;
only "no candidate survived" raises (:class:`NoWorkingConfigError`, with the table of reasons and
the path of a standalone repro script).
"""

from __future__ import annotations

import dataclasses
import enum
import re
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tilecraft.config.config import Config
from tilecraft.errors import ArgumentError, TilecraftError
from tilecraft.ir.nodes import DeviceLoop, Node, Op, reads_memory, value_indexed
from tilecraft.runtime.launch_overlaps import read_elsewhere


class Category(str, enum.Enum):
    RESOURCE = "resource"  # shared memory / registers / numel (static or from the compiler)
    COMPILE_ERROR = "compile error"
    COMPILE_TIMEOUT = "compile timeout"
    RUNTIME_FAULT = "runtime fault"  # illegal memory access, misaligned address, launch failure
    RUNTIME_TIMEOUT = "runtime timeout"
    WRONG_RESULT = "wrong result"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


# (pattern, category, one-word detail), first match wins; matched on the lower-cased text
_PATTERNS: list[tuple[str, Category, str]] = [
    (
        r"numel .*exceeds|exceeds triton maximum tensor numel|tile of \d+ elements",
        Category.RESOURCE,
        "numel",
    ),  # fmt: skip
    (r"elements per thread", Category.RESOURCE, "registers"),
    (r"out of resource: shared|shared memory", Category.RESOURCE, "shared memory"),
    (
        r"out of resource: (registers|threads)|too many resources requested|\bregisters\b",
        Category.RESOURCE,
        "registers",
    ),  # fmt: skip
    (r"outofresources|out of resource", Category.RESOURCE, "resource"),
    (r"outofmemoryerror|out of memory", Category.RESOURCE, "device memory"),
    (r"illegal memory access|illegal address", Category.RUNTIME_FAULT, "illegal memory access"),
    (r"misaligned address", Category.RUNTIME_FAULT, "misaligned address"),
    (
        r"unspecified launch failure|launch failure|launch timed out",
        Category.RUNTIME_FAULT,
        "launch failure",
    ),  # fmt: skip
    (
        r"illegal instruction|device-side assert|hiperror|cuda error|hip error",
        Category.RUNTIME_FAULT,
        "device error",
    ),  # fmt: skip
    (
        r"compilationerror|compileerror|ptxas|passmanager::run failed|llvm error",
        Category.COMPILE_ERROR,
        "compiler",
    ),  # fmt: skip
]
# Errors after which a CUDA/HIP context cannot be trusted: the worker process is replaced.
STICKY = ("illegal memory access", "misaligned address", "launch failure", "device error")


def classify(text: str, phase: str = "run", timed_out: bool = False) -> tuple[Category, str]:
    """The category of an error message (``"Type: message"``, a traceback or a worker's stderr),
    and a short detail. ``phase`` is where it happened: "static", "compile" or "run"."""
    if timed_out:
        return (
            Category.COMPILE_TIMEOUT if phase == "compile" else Category.RUNTIME_TIMEOUT,
            "timeout",
        )
    lowered = text.lower()
    for pattern, category, detail in _PATTERNS:
        if re.search(pattern, lowered):
            return category, detail
    if phase in ("compile", "static"):
        return Category.COMPILE_ERROR, "compile"
    return Category.UNKNOWN, "unknown"


def classify_exit(returncode: int, phase: str, stderr_tail: str) -> tuple[Category, str]:
    """A worker process that died (a signal or an exit code) while in ``phase``."""
    category, detail = classify(stderr_tail, phase)
    if category not in (Category.UNKNOWN, Category.COMPILE_ERROR):
        return category, detail
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if phase == "compile":
            return Category.COMPILE_ERROR, f"compiler crashed ({name})"
        return Category.RUNTIME_FAULT, f"worker crashed ({name})"
    return category, f"worker exited with code {returncode}"


def one_line(text: str, limit: int = 200) -> str:
    """The most telling line of an error text, shortened."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    # Triton's CompilationError puts the cause (e.g. ValueError('numel ...')) on its last line
    best = lines[-1]
    for ln in lines:
        if re.search(r"error|exceeds|illegal|misaligned|timed out|out of resource", ln.lower()):
            best = ln
            break
    if len(lines) > 1 and best == lines[0] and re.search(r"\w+Error: at \d+:\d+:", best):
        best = f"{best} ... {lines[-1]}"
    return best if len(best) <= limit else best[: limit - 3] + "..."


# a working config spilling more 4-byte words a thread than this runs far from its speed (Mamba-2
# SSD's fp32 FMA dot at [128] columns: 2542 words, 49 ms; [32]: none): discovery takes it only
# where no later candidate works without
HEAVY_SPILL_WORDS = 64


@dataclasses.dataclass
class Attempt:
    """One config tried: its outcome and, when it failed, why."""

    config: Config
    category: Category | None  # None: it worked
    reason: str = ""
    elapsed_s: float = 0.0
    detail: str = ""  # full error text (traceback, worker stderr)
    ms: float | None = None  # benchmark time, when benchmarked
    resources: dict[str, int] = dataclasses.field(default_factory=dict)  # registers, spills...
    # a hash of its results where they differ from the baseline only in integer codes one off
    digest: str = ""

    @property
    def ok(self) -> bool:
        return self.category is None

    @property
    def lean(self) -> bool:
        """Whether it worked without spilling hard (Triton's ``n_spills``, 4-byte words of
        local memory a thread, at most ``HEAVY_SPILL_WORDS``)."""
        return self.ok and self.resources.get("spills", 0) <= HEAVY_SPILL_WORDS


def format_table(attempts: Sequence[Attempt], limit: int = 40) -> str:
    """A plain-text table of (config, category, one-line reason)."""
    failed = [a for a in attempts if not a.ok]
    rows = [(repr(a.config), str(a.category), a.reason) for a in failed[:limit]]
    if not rows:
        return "(no candidate configs)"
    w0 = min(max(len(r[0]) for r in rows), 90)
    w1 = max(len(r[1]) for r in rows)
    lines = [f"{'config':<{w0}}  {'category':<{w1}}  reason"]
    lines += [f"{c:<{w0}}  {cat:<{w1}}  {why}" for c, cat, why in rows]
    if len(failed) > limit:
        lines.append(f"... and {len(failed) - limit} more")
    return "\n".join(lines)


class NoWorkingConfigError(TilecraftError):
    """Every candidate config failed; the message holds the table of reasons and a repro path."""

    def __init__(
        self,
        kernel_name: str,
        attempts: Sequence[Attempt],
        repro: Path | None,
        cause: str = "",
        racy: Sequence[str] = (),
        refusal: str = "",
        shifted: Sequence[str] = (),
    ):
        """``cause``: why no config could work, where tilecraft knows (``config/unfit.py``);
        ``racy``: host tensors the kernel updates at loaded indices (:func:`racy_updates`);
        ``shifted``: those it stores and reads at other positions (:func:`shifted_updates`);
        ``refusal``: the one error every config raised (:func:`shared_error`), which is then
        the whole message: a table repeating it per config, and a hint to report a bug, would
        only bury what the user has to change."""
        self.kernel_name = kernel_name
        self.attempts = list(attempts)
        self.repro = repro
        if refusal:
            super().__init__(
                f"{kernel_name} cannot be compiled for this target: all {len(self.attempts)} "
                f"candidate configs raised the same error, which no config changes:\n{refusal}"
            )
            return
        where = f"\nrepro script: {repro}" if repro is not None else ""
        categories = {a.category for a in self.attempts if not a.ok}
        hint = _what_to_do(categories)
        if racy and categories == {Category.WRONG_RESULT}:
            names = ", ".join(racy)
            hint += (
                f"\n  {names}: read, changed and stored again at indices loaded from memory: "
                "programs that load the same index may race on those rows (one's store "
                "overwrites another's); tc.atomic_add(tensor, [index, ...], value) is the "
                "race-free way to accumulate"
            )
        if shifted and categories == {Category.WRONG_RESULT}:
            hint = (  # (the race explains the results: not a report of a tilecraft bug)
                f"every config disagrees with the baseline: {', '.join(shifted)} is stored by "
                "each program in its own part and read by the same loop at other positions (a "
                "stencil updated in place): programs race, one reading an element another has "
                "already overwritten; write into a second tensor (ping-pong buffers, swapped "
                "between launches)"
            )
        if categories == {Category.WRONG_RESULT} and any(
            "!= expected [" in a.reason + a.detail for a in self.attempts if not a.ok
        ):
            hint = (  # (configs return other shapes than the baseline: not a tilecraft bug)
                "configs return a tensor of another shape than ref mode's: a shape "
                "that follows the config (a buffer sized by tc.register_block_size, one row "
                "per tile) cannot be returned; combine the per-block results in host code "
                "before returning (docs/models.md)"
            )
        super().__init__(
            f"no working config found for {kernel_name}: all {len(self.attempts)} candidates "
            f"failed\n{format_table(self.attempts)}{where}",
            hint=f"{cause}\n  {hint}" if cause else hint,
        )


def shared_error(attempts: Sequence[Attempt]) -> str:
    """The one tilecraft error (its message, source line and hint) every failed config raised
    while its code was generated: the kernel meets something no config changes (an op this
    target lacks), which the table would only repeat per config; '' otherwise."""
    return _shared_error(attempts)[1]


def shared_argument_error(attempts: Sequence[Attempt]) -> ArgumentError | None:
    """The ArgumentError every failed config raised (the call's arguments, checked as each
    config's host code launches: one tensor passed as the written and a read argument), which
    is the call's error, not a config's."""
    kind, text = _shared_error(attempts)
    return ArgumentError(text) if kind == ArgumentError.__name__ else None


def is_argument_error(attempt: Attempt) -> bool:
    return f"\ntilecraft.errors.{ArgumentError.__name__}: " in attempt.detail


def _shared_error(attempts: Sequence[Attempt]) -> tuple[str, str]:
    found: set[tuple[str, str]] = set()
    for attempt in attempts:
        if attempt.ok:
            continue
        _, tag, rest = attempt.detail.rpartition("\ntilecraft.errors.")
        if not tag:
            return "", ""
        kind, sep, text = rest.partition(": ")
        found.add((kind, text.rstrip()) if sep else ("", rest.rstrip()))
    return found.pop() if len(found) == 1 else ("", "")


def racy_updates(loops: Sequence[DeviceLoop]) -> list[str]:
    """Host tensors a device loop loads and stores (a read-modify-write, ``out[ids[t]] += v``)
    with a store index computed from loaded data: programs can race on such elements."""
    found: list[str] = []
    for loop in loops:
        nodes = loop.walk()
        loaded = {id(n.attrs["tensor"]) for n in nodes if n.op is Op.LOAD}
        for node in nodes:
            tensor: Any = node.attrs.get("tensor")
            if node.op is not Op.STORE or id(tensor) not in loaded or _named(node) in found:
                continue
            if value_indexed(node) and any(reads_memory(v) for v in node.inputs[1:]):
                found.append(_named(node))
    return found


def shifted_updates(loops: Sequence[DeviceLoop]) -> list[str]:
    """Host tensors a device loop stores in each program's part and also reads outside it (a
    stencil updated in place): programs race on the shared elements."""
    found = [_named(store) for loop in loops for store in read_elsewhere(loop)]
    return list(dict.fromkeys(found))


def _named(store: Node) -> str:
    name = store.attrs["tensor"].name
    return f"'{name}' (line {store.loc.lineno})" if store.loc else f"'{name}'"


def _what_to_do(categories: set[Category | None]) -> str:
    """A bug report only where tilecraft's own code failed in a way it does not understand."""
    if categories & {Category.UNKNOWN, Category.COMPILE_ERROR}:
        return (
            "pass a working config with @tc.kernel(config=tc.Config(...)), or report the repro "
            "script as a tilecraft bug"
        )
    if categories == {Category.WRONG_RESULT}:
        return (
            "every config disagrees with the baseline: if kernel.run_ref(...) gives what you "
            "expect, the compiled code is wrong (report the repro script as a tilecraft bug); "
            "if it does not, fix the kernel; for float error within your needs, pass "
            "autotune_tolerances= (or baseline=) to @tc.kernel"
        )
    return (
        "the configs ran out of resources or time: pass a smaller @tc.kernel(config=tc.Config(...))"
    )

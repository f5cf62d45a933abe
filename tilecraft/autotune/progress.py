"""What the tuner shows and logs (stage: autotune; docs/architecture.md, "autotune/").

A ``rich`` progress bar (time spent of the budget, best so far) when stderr is a terminal, plain
``tilecraft:`` lines otherwise (one per generation, with the best so far), a final line with the
winning ``tc.Config(...)`` to paste into the decorator, and a CSV row for every config tried when
``TILECRAFT_AUTOTUNE_LOG=path`` is set.
"""

from __future__ import annotations

import csv
import sys
import time
import warnings
from pathlib import Path
from typing import IO, Any

from tilecraft.autotune.classify import Attempt
from tilecraft.config.config import Config
from tilecraft.errors import user_stacklevel
from tilecraft.settings import autotune_log_path

CSV_FIELDS = (
    "time",
    "kernel",
    "stage",
    "generation",
    "status",
    "ms",
    "elapsed_s",
    "reason",
    "config",
)


class Reporter:
    def __init__(
        self,
        kernel: str,
        *,
        budget_s: float | None = None,
        stream: IO[str] | None = None,
        log_path: Path | None = None,
        verbose: bool = True,
    ):
        self.kernel = kernel
        self.stream = stream if stream is not None else sys.stderr
        self.verbose = verbose
        self.start = time.monotonic()
        self.budget_s = budget_s
        self.log_path = log_path if log_path is not None else autotune_log_path()
        self.stage = "discover"
        self.generation = 0
        self.tried = 0
        self._bar: Any = None
        self._task: Any = None
        if verbose and budget_s and _is_tty(self.stream):
            self._start_bar(budget_s)

    # -- progress -------------------------------------------------------------------------
    def _start_bar(self, budget_s: float) -> None:
        try:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        except ImportError:  # rich missing: plain lines
            return
        self._bar = Progress(
            TextColumn("[bold]tilecraft[/] {task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            console=Console(file=self.stream),
            transient=True,
        )
        self._task = self._bar.add_task(f"tuning {self.kernel}", total=budget_s)
        self._bar.start()

    def _advance(self, description: str | None = None) -> None:
        if self._bar is not None:
            elapsed = time.monotonic() - self.start
            self._bar.update(self._task, completed=elapsed, description=description)

    def line(self, text: str) -> None:
        """A log line (above the bar on a terminal)."""
        if not self.verbose:
            return
        if self._bar is not None:
            self._bar.console.print(f"tilecraft: {text}", markup=False, highlight=False)
        else:
            print(f"tilecraft: {text}", file=self.stream, flush=True)

    # -- events ---------------------------------------------------------------------------
    def attempt(self, attempt: Attempt) -> None:
        """One config finished (any outcome)."""
        self.tried += 1
        self._csv(attempt)
        self._advance()

    def end_generation(self, best: Attempt | None, tried: int) -> None:
        self.generation += 1
        elapsed = time.monotonic() - self.start
        best_text = f"best {best.ms:.4g} ms {best.config!r}" if best and best.ms else "no timing"
        text = (
            f"{self.kernel}: generation {self.generation}: {tried} configs "
            f"({self.tried} total, {elapsed:.1f}s): {best_text}"
        )
        if self._bar is not None:
            self._advance(f"{self.kernel} gen {self.generation}: {best_text[:60]}")
        self.line(text)

    def final(self, config: Config, what: str = "best") -> str:
        self.close()
        text = f"{what} config for {self.kernel}: {config!r}"
        if self.verbose:
            print(f"tilecraft: {text}", file=self.stream, flush=True)
        return text

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    # -- CSV log --------------------------------------------------------------------------
    def _csv(self, attempt: Attempt) -> None:
        if self.log_path is None:
            return
        try:
            self._append(attempt)
        except OSError as exc:  # a diagnostic, never a reason for the call to fail
            warnings.warn(
                f"tilecraft: TILECRAFT_AUTOTUNE_LOG={self.log_path} cannot be appended to "
                f"({type(exc).__name__}: {exc.strerror or exc}); not logging this tuning",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
            self.log_path = None

    def _append(self, attempt: Attempt) -> None:
        assert self.log_path is not None
        new = not self.log_path.exists()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(CSV_FIELDS)
            writer.writerow(
                [
                    f"{time.time():.3f}",
                    self.kernel,
                    self.stage,
                    self.generation + 1 if self.stage == "search" else 0,
                    "ok" if attempt.ok else str(attempt.category),
                    "" if attempt.ms is None else f"{attempt.ms:.6g}",
                    f"{attempt.elapsed_s:.3f}",
                    attempt.reason,
                    repr(attempt.config),
                ]
            )


def _is_tty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class JobsProgress:
    """``tilecraft tune PLAN``'s output: a bar over the plan's jobs on a terminal (else one
    line per job), and a summary table of the winners at the end."""

    def __init__(self, total: int, done: int, stream: IO[str] | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.done, self.start = total, done, time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        try:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )
        except ImportError:  # rich missing: plain lines
            return
        self.console = Console(file=self.stream)
        if _is_tty(self.stream):
            self._bar = Progress(
                TextColumn("[bold]tilecraft tune[/] {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._task = self._bar.add_task("", total=total, completed=done)
            self._bar.start()

    def result(self, what: str, ms: float | None, device: str, error: str | None) -> None:
        self.done += 1
        outcome = f"error: {error}" if error else ("ok" if ms is None else f"{ms:.4g} ms")
        text = f"[{self.done}/{self.total}] {what} on device {device}: {outcome}"
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, description=what[:40])
            self._bar.console.print(text, markup=False, highlight=False)
        else:
            print(f"tilecraft tune: {text}", file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def summary(self, rows: list[tuple[str, str, str, str]]) -> None:
        """Rows of (job, winner ms, runner-up ms, config)."""
        self.close()
        head = ("job", "ms", "runner-up ms", "config")
        try:
            from rich.table import Table
        except ImportError:
            for row in (head, *rows):
                print("  ".join(row), file=self.stream)
            return
        table = Table(title=f"tilecraft tune: {len(rows)} entries")
        for name in head:
            table.add_column(name, overflow="fold")
        for row in rows:
            table.add_row(*row)
        self.console.print(table)

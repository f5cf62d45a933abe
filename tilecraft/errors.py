"""Errors raised to users (all stages).

Every error that a user can cause is a :class:`TilecraftError`. When the error is tied to a line of
the user's kernel it carries a :class:`SourceLoc`, and the message shows ``file:line``, the source
line and a caret, the way Triton reports compile errors, without the compiler's own frames.
"""

from __future__ import annotations

import dataclasses
import linecache
import os
import sys


@dataclasses.dataclass(frozen=True)
class SourceLoc:
    """A position in the user's kernel source."""

    filename: str
    lineno: int
    col: int = 0

    @property
    def short(self) -> str:
        return f"{self.filename.rsplit('/', 1)[-1]}:{self.lineno}"

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"

    def source_line(self) -> str:
        return linecache.getline(self.filename, self.lineno).rstrip("\n")

    def render(self) -> str:
        line = self.source_line()
        if not line:
            return f"  File {self}"
        # col 0 (a statement's line, no column known): under its first character
        col = self.col or len(line) - len(line.lstrip())
        caret = " " * col + "^"
        return f"  File {self}\n    {line}\n    {caret}"


def innermost_frame(exc: BaseException, filename: str) -> SourceLoc | None:
    """The deepest line of ``filename`` in ``exc``'s traceback (the statement of the user's
    kernel that raised), or None."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            found = SourceLoc(filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


class TilecraftError(Exception):
    """Base class of all errors tilecraft raises on purpose."""

    def __init__(self, message: str, loc: SourceLoc | None = None, hint: str | None = None):
        self.message = message
        self.loc = loc
        self.hint = hint
        super().__init__(self._format())

    def _format(self) -> str:
        text = self.message
        if self.loc is not None:
            text = f"{self.loc}: {text}\n{self.loc.render()}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def with_loc(self, loc: SourceLoc | None) -> TilecraftError:
        """Attach ``loc`` if the error does not have one yet."""
        if self.loc is None and loc is not None:
            self.loc = loc
            self.args = (self._format(),)
        return self


class UnsupportedOpError(TilecraftError):
    """A torch function or Python construct that device code cannot use."""


# what to do where a Python int (a range() bound, a static_range count) is a run-time value
RUN_TIME_COUNT_HINT = (
    "bake the size in: tc.specialize(n) in host code or @tc.kernel(static_shapes=True); or "
    "loop at run time with `for i in tc.grid(n)` (then x[..., n - 1 - i] walks it backwards)"
)


class ShapeError(TilecraftError):
    """Shapes that do not broadcast, or a store whose value does not fit its index."""


class DeviceCodeError(TilecraftError):
    """Misuse of the DSL inside (or outside) a device loop."""


class IndexOutOfBoundsError(DeviceCodeError, IndexError):
    """An index out of its tensor's range where no mask covers it (found by ref mode before it
    indexes: compiled code reads 0 there and skips the write, which is not what the kernel
    means either). An IndexError too,
    so code that catches torch's own keeps working."""


class ArgumentError(TilecraftError):
    """A kernel argument that does not match what the kernel was compiled for."""


class ConfigError(TilecraftError):
    """A config that cannot work for this kernel or target."""


class CompileError(TilecraftError):
    """Triton failed to compile generated code."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """``warnings.warn``'s stacklevel that names the first frame outside tilecraft and torch:
    the user's call, not the line of tilecraft that warned, nor torch's custom-op or autograd
    code a call that needs gradients runs through (call it in the ``warn`` call)."""
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    libraries = (_PACKAGE, os.path.dirname(torch_file) + os.sep) if torch_file else (_PACKAGE,)
    frame = sys._getframe(1)  # the function that warns: level 1
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(libraries):
        frame = frame.f_back
        level += 1
    return level

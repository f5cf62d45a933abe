"""A small source writer: indentation, unique names, ``# src[...]`` comments (stage: codegen)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from tilecraft.errors import SourceLoc


class CodeWriter:
    def __init__(self, indent: int = 0) -> None:
        self.lines: list[str] = []
        self.level = indent
        self._taken: set[str] = set()
        self._last_loc: SourceLoc | None = None

    def line(self, text: str) -> None:
        self.lines.append("    " * self.level + text)

    @contextmanager
    def indented(self) -> Iterator[None]:
        self.level += 1
        try:
            yield
        finally:
            self.level -= 1

    def fresh(self, hint: str) -> str:
        base = re.sub(r"\W", "_", hint) or "v"
        if base[0].isdigit():
            base = "v_" + base
        name, k = base, 0
        while name in self._taken or name in _RESERVED:
            k += 1
            name = f"{base}_{k}"
        self._taken.add(name)
        return name

    def reserve(self, name: str) -> None:
        self._taken.add(name)

    def src_comment(self, loc: SourceLoc | None) -> None:
        if loc is None or loc == self._last_loc:
            return
        if self._last_loc is not None and (loc.filename, loc.lineno) == (
            self._last_loc.filename,
            self._last_loc.lineno,
        ):
            return
        self._last_loc = loc
        self.line(f"# src[{loc.short}]: {loc.source_line().strip()}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


_RESERVED = {
    "tl",
    "triton",
    "torch",
    "pid",
    "and",
    "or",
    "not",
    "if",
    "for",
    "in",
    "is",
    "def",
    "return",
    "lambda",
    "range",
    "min",
    "max",
    "sum",
    "abs",
}

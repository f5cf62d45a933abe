"""Triton's own functions called in tile code, refused (stage: frontend; in: a device loop's
``for`` statement and the names its code reads; out: nothing, or an UnsupportedOpError at the
call).

Tile code is written with torch ops, which tilecraft lowers to Triton itself. ``tl.exp(x[t])``
called on a traced tile failed inside Triton ("Did you forget to add @triton.jit?"), and under
the interpreter ``tl.sum`` failed on a torch dtype, reported as a failure of the host code.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import torch

from tilecraft.errors import SourceLoc, UnsupportedOpError


def refuse_triton_calls(
    loop: ast.For, scope: dict[str, Any], where: Callable[[ast.AST], SourceLoc]
) -> None:
    """Raise at the first call in ``loop``'s body of a function of ``triton.language`` (``tl.*``,
    ``libdevice``) or of a ``@triton.jit`` function, as ``scope`` resolves the names."""
    for node in ast.walk(loop):
        if not isinstance(node, ast.Call):
            continue
        fn = _resolve(node.func, scope)
        if fn is None or not _is_triton_device_function(fn):
            continue
        name = ast.unparse(node.func)
        raise UnsupportedOpError(
            f"{name}() is a Triton function: tile code is written with torch ops, which "
            "tilecraft lowers to Triton",
            where(node),
            hint=_hint(name, fn),
        )


def _resolve(expr: ast.expr, scope: dict[str, Any]) -> Any:
    """The object a ``name`` / ``name.attr.attr`` expression names, or None."""
    if isinstance(expr, ast.Name):
        return scope.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _resolve(expr.value, scope)
        return None if base is None else getattr(base, expr.attr, None)
    return None


_JIT_TYPES = ("JITFunction", "InterpretedFunction")  # (the second under TRITON_INTERPRET=1)


def _is_triton_device_function(fn: Any) -> bool:
    return _is_jit(fn) or _from_triton_language(fn)


def _is_jit(fn: Any) -> bool:
    return type(fn).__name__ in _JIT_TYPES


def _from_triton_language(fn: Any) -> bool:
    """A builtin of ``triton.language`` (tl.exp) or one of its jit functions (tl.sum)."""
    inner = getattr(fn, "fn", fn) if _is_jit(fn) else fn
    module = getattr(inner, "__module__", None) or ""
    return callable(fn) and (module == "triton.language" or module.startswith("triton.language."))


def _hint(name: str, fn: Any) -> str:
    if not _from_triton_language(fn):
        return f"call it through tc.triton_call({name}, ...), which passes tiles to it"
    short = name.rsplit(".", 1)[-1]
    if callable(getattr(torch, short, None)):
        return f"write torch.{short}(...) on the tile"
    return (
        "write the torch op that computes it, or call a @triton.jit function through "
        "tc.triton_call(fn, ...)"
    )

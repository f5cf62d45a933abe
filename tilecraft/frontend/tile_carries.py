"""Host values carried from tile to tile of a device loop, refused (stage: frontend; in: a
device loop's ``for`` statement and the host values before it; out: nothing, or a
DeviceCodeError at the assignment).

``total = total + x[t, :].sum()`` or ``best = torch.maximum(best, ...)`` in a device loop's body,
of a number the host code set before the loop, reads as a running value over the tiles, and ref
mode runs it so (its tiles are a Python loop). Compiled, each tile is its own program, run in
parallel from the host's value: nothing carries between them, the host never sees the result
(total stayed 0.0), and a stored running max was each tile's own. Inner loops
(``for tk in tc.tile(n)``) carry values, and are not looked into.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

import torch

from tilecraft.errors import DeviceCodeError
from tilecraft.frontend.values import HostTensor


def refuse_tile_carries(loop: ast.For, env: dict[str, Any], where: Any) -> None:
    """Raise at the first assignment of ``loop``'s body (outside inner loops) that rebinds a
    host value of ``env`` from itself; ``where(stmt)`` is the statement's SourceLoc."""
    bound: set[str] = set()  # names the body binds first, from other values
    for stmt in _statements(loop.body):
        name = _self_update(stmt)
        if name is None:
            bound |= _bound_names(stmt)
            continue
        if name in bound or name not in env or isinstance(env[name], (HostTensor, torch.Tensor)):
            continue
        raise DeviceCodeError(
            f"'{name}' is updated from itself in a device loop's body: each tile runs as its "
            "own program, in parallel and from the host's value, so nothing carries from tile "
            f"to tile and host code never sees the result",
            where(stmt),
            hint=f"accumulate into a zeroed tensor (`tc.atomic_add({name}_t, [0], ...)`, "
            "`tc.atomic_max`), or carry the value in an inner loop inside the device loop "
            "(`for tk in tc.tile(n): acc = acc + ...`)",
        )


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """``body``'s statements, into ``if`` branches and ``with`` blocks, not into loops."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _statements(stmt.body)
            yield from _statements(stmt.orelse)
        elif isinstance(stmt, ast.With):
            yield from _statements(stmt.body)


def _bound_names(stmt: ast.stmt) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else []
    if isinstance(stmt, ast.AnnAssign):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _self_update(stmt: ast.stmt) -> str | None:
    """The name an assignment rebinds from its own value (``n = n + v``, ``n += v``)."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        if isinstance(target, ast.Name) and any(
            isinstance(n, ast.Name) and n.id == target.id for n in ast.walk(stmt.value)
        ):
            return target.id
    return None

"""Names a block of device statements assigns (stage: frontend; in: AST statements; out: names),
for loop-carried values and values carried out of ``if`` / ``while``."""

from __future__ import annotations

import ast


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names bound by plain assignment in ``stmts`` (not inside nested defs), in order."""
    names: list[str] = []
    for stmt in stmts:
        for node in ast.walk(stmt):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
                targets = [node.target]
            for target in targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name) and n.id not in names:
                        names.append(n.id)
    return names

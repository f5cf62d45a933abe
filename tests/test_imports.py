"""The package's import graph flows one way: no import cycles (function-level imports included;
imports under ``if TYPE_CHECKING:`` are type-only and do not count), and the runtime never
imports the autotuner (the package hands it a hook)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tilecraft"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str) -> set[str]:
    """Every tilecraft module ``module`` imports at run time, at any depth of its code."""
    tree = ast.parse(MODULES[module].read_text())
    is_package = MODULES[module].name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` mod
            submodules = {f"{base}.{a.name}" for a in node.names} & MODULES.keys()
            found.update(submodules or {base})
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m in MODULES and m != module}


GRAPH = {m: _imports(m) for m in MODULES}


def _strongly_connected() -> list[list[str]]:
    """Tarjan's algorithm: the components of more than one module are the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            connect(v)
    return [c for c in out if len(c) > 1]


def _package_edges_removed(graph: dict[str, set[str]]) -> None:
    """A package's ``__init__`` re-exports its modules; a module importing a sibling through the
    package is still an edge, but ``tilecraft/__init__`` (the top, which wires hooks) is not a
    dependency of anything: drop edges into it."""
    for deps in graph.values():
        deps.discard("tilecraft")


_package_edges_removed(GRAPH)


def test_the_graph_sees_function_level_imports() -> None:
    """The walker must see imports inside functions (they hide cycles)."""
    assert "tilecraft.runtime.hooks" in GRAPH["tilecraft.runtime.kernel"]
    assert any("tilecraft.settings" in deps for deps in GRAPH.values())


def test_no_import_cycles() -> None:
    cycles = _strongly_connected()
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_runtime_never_imports_the_autotuner() -> None:
    bad = {
        m: sorted(d for d in deps if d.startswith("tilecraft.autotune"))
        for m, deps in GRAPH.items()
        if m.startswith("tilecraft.runtime")
    }
    assert not any(bad.values()), bad

"""Host names that are views of a kernel's parameters (stage: frontend; in: a kernel's AST and
its device loops; out: each such name with the parameter it views).

A kernel that writes an argument is checked (overlaps, expanded views) and bumps the argument's
version counter on each call (``runtime/validate.py``). Device loops name what they store into;
that name may be a view the host code made (``flat = x.view(-1)``, ``dst = x[1:]``,
``xt = x.t()``) or an item of a list argument (``for g in grads:``). Found by name only, such
writes skipped every check and autograd used the overwritten values silently.
"""

from __future__ import annotations

import ast
import collections
from collections.abc import Iterator

# methods of a tensor that return one view of it with another shape (values.py's hint for a
# host tensor viewed inside a device loop names them: make the view above the loop)
SHAPE_VIEWS = frozenset(
    {
        "view", "view_as", "reshape", "reshape_as", "t", "transpose", "swapaxes", "swapdims",
        "permute", "movedim", "moveaxis", "flatten", "unflatten", "squeeze", "unsqueeze",
        "narrow", "select", "expand", "expand_as", "as_strided", "diagonal", "unfold",
    }
)  # fmt: skip
# methods and attributes of a tensor that return a view of it (or items of a list)
VIEW_METHODS = SHAPE_VIEWS | {
    "chunk", "split", "tensor_split", "unbind", "detach", "__getitem__", "values",
}  # fmt: skip
VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})
# torch.<fn>(x, ...) returning a view of x
VIEW_FUNCTIONS = frozenset(
    {
        "flatten", "reshape", "transpose", "permute", "narrow", "squeeze", "unsqueeze",
        "select", "chunk", "split", "tensor_split", "unbind", "movedim", "t", "diagonal",
        "view_as_real", "view_as_complex",
    }
)  # fmt: skip


def host_view_roots(
    tree: ast.FunctionDef, params: tuple[str, ...], device_loops: list[ast.For]
) -> dict[str, str]:
    """Each host name the function binds to a view or an item of a parameter (through any
    chain of such names), with that parameter. Device loops' bodies are not host code."""
    bindings = list(_bindings(tree, {id(loop) for loop in device_loops}))
    roots: dict[str, str] = {p: p for p in params}
    changed = True
    while changed:  # (a chain: x -> flat -> rows)
        changed = False
        for targets, value in bindings:
            root = _root(value, roots)
            for name in targets:
                if root is not None and name not in roots:
                    roots[name] = root
                    changed = True
    return {name: root for name, root in roots.items() if name not in params}


def _host_nodes(tree: ast.FunctionDef, skipped: set[int]) -> Iterator[ast.AST]:
    """Every node of the function's body but the subtrees rooted at ``skipped`` ids, in
    ``ast.walk``'s order (breadth first: a name bound twice keeps its first binding's root)."""
    todo: collections.deque[ast.AST] = collections.deque(tree.body)
    while todo:
        node = todo.popleft()
        if id(node) in skipped:
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _bindings(tree: ast.FunctionDef, loops: set[int]) -> Iterator[tuple[list[str], ast.expr]]:
    """(names bound, the expression they come from) of each host assignment and host ``for``
    (its target from the iterated value: ``for g in grads``, ``for i, g in enumerate(grads)``);
    ``loops``: the ids of the device loops, skipped whole."""
    for node in _host_nodes(tree, loops):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield _names(target), node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            yield _names(node.target), node.value
        elif isinstance(node, ast.For):
            iterated = node.iter
            if isinstance(iterated, ast.Call) and _called(iterated) in ("enumerate", "zip"):
                args = iterated.args
                if _called(iterated) == "enumerate" and args and isinstance(node.target, ast.Tuple):
                    yield _names(node.target.elts[-1]), args[0]
                elif isinstance(node.target, ast.Tuple):
                    for element, arg in zip(node.target.elts, args, strict=False):
                        yield _names(element), arg
                continue
            yield _names(node.target), iterated


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for element in target.elts for n in _names(element)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []


def _called(call: ast.Call) -> str:
    func = call.func
    return (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else ""
    )


def _root(value: ast.expr, roots: dict[str, str]) -> str | None:
    """The parameter ``value`` is a view or an item of, if it is one."""
    while True:
        if isinstance(value, ast.Name):
            return roots.get(value.id)
        if (
            isinstance(value, (ast.Subscript, ast.Starred))
            or isinstance(value, ast.Attribute)
            and value.attr in VIEW_ATTRIBUTES
        ):
            value = value.value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            func = value.func
            module = isinstance(func.value, ast.Name) and func.value.id == "torch"
            if module and func.attr in VIEW_FUNCTIONS and value.args:
                value = value.args[0]  # torch.flatten(x, ...)
            elif not module and func.attr in VIEW_METHODS:
                value = func.value
            else:
                return None
        else:
            return None


def host_reads(tree: ast.FunctionDef, device_loops: list[ast.For]) -> set[str]:
    """The names host code reads: everywhere but the bodies of device loops (a loop's range,
    ``tc.tile(n * reps)``, is host code). A parameter outside this set reaches only device
    code, so its value decides no shape the host code makes."""
    bodies = {id(stmt) for loop in device_loops for stmt in (*loop.body, *loop.orelse)}
    return {
        node.id
        for node in _host_nodes(tree, bodies)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }

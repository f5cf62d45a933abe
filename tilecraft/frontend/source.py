"""Source -> AST for a kernel function, and the host/device split (stage: frontend).

Finds the top-level device loops (``for t in tc.tile(...)`` / ``tc.grid(...)`` outside any other
device loop) and builds two rewritten versions of the function:

* the **launch** version, where each device loop is replaced by
  ``__tc_launch__(i, <iter expr>, locals())`` so host code runs as plain PyTorch and each device loop
  becomes one kernel launch;
* the **ref** version, where device loops stay Python loops and subscripts with tiles become calls
  that turn tiles into slices (eager torch on whole tiles).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
import types
from collections.abc import Callable, Collection
from typing import Any

from tilecraft.errors import DeviceCodeError, SourceLoc
from tilecraft.frontend.glue import GlueRun, find_glue_runs, launch_statements

LAUNCH = "__tc_launch__"
REF_GET = "__tc_ref_get__"
REF_SET = "__tc_ref_set__"
REF_ADDMM = "__tc_ref_addmm__"
REF_CALL = "__tc_ref_call__"
REF_MATMUL = "__tc_ref_matmul__"


@dataclasses.dataclass
class DeviceLoopSource:
    index: int
    node: ast.For
    loc: SourceLoc

    @functools.cached_property
    def names(self) -> set[str]:
        """Every name the loop mentions, its header included (what a launch checks and the
        global guard watches)."""
        return {n.id for n in ast.walk(self.node) if isinstance(n, ast.Name)}


@dataclasses.dataclass
class KernelSource:
    fn: Callable[..., Any]
    filename: str
    line_offset: int
    tree: ast.FunctionDef
    text: str
    loops: list[DeviceLoopSource]
    glue: list[GlueRun] = dataclasses.field(default_factory=list)  # frontend/glue.py

    def closure_values(self) -> dict[str, Any]:
        """The kernel's closure variables (device code may read them like globals)."""
        out = {}
        for name, cell in zip(
            self.fn.__code__.co_freevars, self.fn.__closure__ or (), strict=False
        ):
            try:
                out[name] = cell.cell_contents
            except ValueError:  # an empty cell: not assigned yet
                continue
        return out

    def free_value(self, name: str) -> Any:
        """The current value of a global or closure variable the kernel reads."""
        code = self.fn.__code__
        if name in code.co_freevars:
            cells = self.fn.__closure__ or ()
            return cells[code.co_freevars.index(name)].cell_contents
        return self.fn.__globals__[name]

    def loc(self, node: ast.AST) -> SourceLoc:
        return SourceLoc(
            self.filename,
            getattr(node, "lineno", 1) + self.line_offset,
            getattr(node, "col_offset", 0),
        )


def _is_device_iter(expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    name = (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )
    return name in ("tile", "grid")


def parse_kernel(fn: Callable[..., Any]) -> KernelSource:
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise DeviceCodeError(f"cannot read the source of kernel '{fn.__name__}': {exc}") from None
    text = textwrap.dedent("".join(lines))
    module = ast.parse(text)
    _shift_columns(module, len(lines[0].rstrip("\r\n")) - len(text.split("\n", 1)[0]))
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise DeviceCodeError(
            f"@tc.kernel must decorate a plain function, got {type(tree).__name__}"
        )
    tree.decorator_list = []
    src = KernelSource(fn, filename, first - 1, tree, text, [])
    _find_loops(src, tree.body)
    if not src.loops:
        raise _no_device_loop(src, tree)
    src.glue = find_glue_runs(tree, [loop.node for loop in src.loops], src.loc)
    return src


def _shift_columns(module: ast.Module, indent: int) -> None:
    """Put back the indentation ``textwrap.dedent`` took off a kernel defined inside a function
    or class, so that columns (carets, Python's own tracebacks) match the file's lines."""
    if indent <= 0:
        return
    for node in ast.walk(module):
        for field in ("col_offset", "end_col_offset"):
            value = getattr(node, field, None)
            if isinstance(value, int):
                setattr(node, field, value + indent)


def _no_device_loop(src: KernelSource, tree: ast.FunctionDef) -> DeviceCodeError:
    """The error of a kernel without a device loop, naming a function it calls that has one
    (only the kernel's own body is traced: a helper's loop is never reached)."""
    name = src.fn.__name__
    scope = {**src.fn.__globals__, **src.closure_values()}  # as device code reads names
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if not isinstance(call.func, ast.Name):
            continue
        callee = scope.get(call.func.id)
        if callable(callee) and _has_device_loop(callee):
            return DeviceCodeError(
                f"kernel '{name}' has no device loop of its own: the function "
                f"'{call.func.id}' it calls has one, and only loops written in the kernel's "
                "body are compiled",
                src.loc(call),
                hint=f"move the `for ... in tc.tile(...)` loop of '{call.func.id}' into "
                f"'{name}' (a helper may hold the code inside the loop)",
            )
    return DeviceCodeError(
        f"kernel '{name}' has no device loop",
        src.loc(tree),
        hint="put the device code in `for tile in tc.tile(n):`",
    )


def _has_device_loop(fn: Callable[..., Any]) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    return any(isinstance(n, ast.For) and _is_device_iter(n.iter) for n in ast.walk(tree))


def _find_loops(src: KernelSource, stmts: list[ast.stmt]) -> None:
    for stmt in stmts:
        if isinstance(stmt, ast.For) and _is_device_iter(stmt.iter):
            src.loops.append(DeviceLoopSource(len(src.loops), stmt, src.loc(stmt)))
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _find_loops(src, inner)
        for handler in getattr(stmt, "handlers", []) or []:
            _find_loops(src, handler.body)


class _LaunchRewriter(ast.NodeTransformer):
    def __init__(self, loops: list[DeviceLoopSource]):
        self.by_id = {id(loop.node): loop.index for loop in loops}

    def visit_For(self, node: ast.For) -> Any:
        index = self.by_id.get(id(node))
        if index is None:
            return self.generic_visit(node)
        call = ast.Call(
            func=ast.Name(LAUNCH, ast.Load()),
            args=[
                ast.Constant(index),
                node.iter,
                ast.Call(func=ast.Name("locals", ast.Load()), args=[], keywords=[]),
            ],
            keywords=[],
        )
        # every new node at the loop's line: a traceback through the launch shows the loop,
        # not the line build_function gives nodes without one (the ``def``)
        return ast.fix_missing_locations(ast.copy_location(ast.Expr(call), node))


def _ref_set(target: ast.Subscript, value: ast.expr) -> ast.stmt:
    """``target = value`` for a subscript target in ref mode: ``__tc_ref_set__(a, i, value)``."""
    call = ast.Call(
        ast.Name(REF_SET, ast.Load()), [target.value, _slice_expr(target.slice), value], []
    )
    return ast.Expr(call)


def _unpack(target: ast.expr, value: ast.expr) -> list[ast.stmt]:
    """Statements that assign ``value`` to ``target``, a name, a subscript or a tuple of them
    (each element from ``value[k]``)."""
    if isinstance(target, ast.Subscript):
        return [_ref_set(target, value)]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [
            stmt
            for k, elt in enumerate(target.elts)
            for stmt in _unpack(elt, ast.Subscript(value, ast.Constant(k), ast.Load()))
        ]
    return [ast.Assign([target], value)]


class _RefRewriter(ast.NodeTransformer):
    """Inside device loops: ``a[i]`` -> ``__tc_ref_get__(a, i)``; stores likewise."""

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            call = ast.Call(
                ast.Name(REF_GET, ast.Load()), [node.value, _slice_expr(node.slice)], []
            )
            return ast.copy_location(call, node)
        return node

    def visit_Assign(self, node: ast.Assign) -> Any:
        self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            return ast.copy_location(_ref_set(node.targets[0], node.value), node)
        parts = [n for t in node.targets for n in ast.walk(t)]
        stores = any(isinstance(n, ast.Subscript) for n in parts)
        if not stores or any(isinstance(n, ast.Starred) for n in parts):
            return node
        # `a[i], b[i] = v, w` (or `a[i] = b[i] = v`): the value once, then each store
        rhs = f"__tc_ref_rhs{id(node)}__"
        stmts: list[ast.stmt] = [ast.Assign([ast.Name(rhs, ast.Store())], node.value)]
        for target in node.targets:
            stmts += _unpack(target, ast.Name(rhs, ast.Load()))
        return [ast.fix_missing_locations(ast.copy_location(s, node)) for s in stmts]

    def visit_Call(self, node: ast.Call) -> Any:
        """``x.addmm(a, b)`` / ``torch.baddbmm(x, a, b)`` -> ``__tc_ref_addmm__(f, ...)``: on
        tiles an fp32 input accumulates operands of another dtype, which eager torch refuses.
        Other calls of an attribute (``torch.clamp(...)``) -> ``__tc_ref_call__(f, ...)``: in
        ref mode ``tile.begin`` is a Python int, which some torch functions refuse where device
        code takes a scalar."""
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("addmm", "baddbmm"):
            call = ast.Call(ast.Name(REF_ADDMM, ast.Load()), [node.func, *node.args], node.keywords)
            return ast.copy_location(call, node)
        if isinstance(node.func, ast.Attribute):  # torch.clamp(tm.begin - w, min=0): see REF_CALL
            call = ast.Call(ast.Name(REF_CALL, ast.Load()), [node.func, *node.args], node.keywords)
            return ast.copy_location(call, node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        """``a @ b`` -> ``__tc_ref_matmul__(a, b)``: products of fp8 tiles are fp32 in device
        code (``tc.dot``), where torch's ``@`` returns fp8 or refuses mixed operands."""
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult):
            call = ast.Call(ast.Name(REF_MATMUL, ast.Load()), [node.left, node.right], [])
            return ast.copy_location(call, node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        if isinstance(node.target, ast.Subscript):
            target = node.target
            load = ast.Subscript(target.value, target.slice, ast.Load())
            value = ast.BinOp(self.visit(load), node.op, self.visit(node.value))
            call = ast.Call(
                ast.Name(REF_SET, ast.Load()), [target.value, _slice_expr(target.slice), value], []
            )
            return ast.copy_location(ast.Expr(call), node)
        self.generic_visit(node)
        return node


def _slice_expr(expr: ast.expr) -> ast.expr:
    if isinstance(expr, ast.Slice):
        args = [
            e if e is not None else ast.Constant(None) for e in (expr.lower, expr.upper, expr.step)
        ]
        return ast.Call(ast.Name("slice", ast.Load()), args, [])
    if isinstance(expr, ast.Tuple):
        return ast.Tuple([_slice_expr(e) for e in expr.elts], ast.Load())
    return expr


def _copy(tree: ast.FunctionDef) -> ast.FunctionDef:
    import copy

    return copy.deepcopy(tree)


def build_function(
    src: KernelSource, tree: ast.FunctionDef, extra: dict[str, Any]
) -> Callable[..., Any]:
    """Compile a rewritten function over the kernel's own globals (read live, as the user's
    function reads them: a global changed between calls is seen) and closure values; ``extra``
    (the launch hooks) reaches it as closure variables of a factory, not as globals."""
    fn = src.fn
    freevars = fn.__code__.co_freevars
    closure = fn.__closure__ or ()
    hooks = [name for name in extra if name not in freevars]
    # named apart from the kernel: inside the factory the user's name would be this function,
    # and host code calling its own kernel (a recursive tree sum) ran as the caller's launches
    tree = _copy(tree)
    tree.name = f"__tc_{tree.name}__"
    factory = ast.FunctionDef(
        name="__tc_factory__",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(v) for v in (*freevars, *hooks)],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        ),
        body=[tree, ast.Return(ast.Name(tree.name, ast.Load()))],
        decorator_list=[],
        returns=None,
    )
    for node in ast.walk(factory):
        if "lineno" in node._attributes and not hasattr(node, "lineno"):
            ast.copy_location(node, tree)
    ast.copy_location(factory, tree)
    factory.body[1] = ast.copy_location(factory.body[1], tree)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, src.line_offset)
    code = compile(module, src.filename, "exec")
    defined: dict[str, Any] = {}
    exec(code, fn.__globals__, defined)  # the factory lands in ``defined``, not the module
    values = []
    for cell in closure:
        try:
            values.append(cell.cell_contents)
        except ValueError:
            values.append(None)
    made = defined["__tc_factory__"](*values, *(extra[name] for name in hooks))
    # the user's own closure cells (a nonlocal the caller changes is seen), the hooks' cells
    own = dict(zip(freevars, closure, strict=True))
    cells = dict(zip(made.__code__.co_freevars, made.__closure__ or (), strict=True))
    live = tuple(own[name] if name in own else cells[name] for name in made.__code__.co_freevars)
    built = types.FunctionType(made.__code__, fn.__globals__, made.__name__, None, live)
    built.__defaults__ = fn.__defaults__
    built.__kwdefaults__ = fn.__kwdefaults__
    return built


def launch_tree(src: KernelSource, glue: bool | Collection[int] = True) -> ast.FunctionDef:
    """The launch version (module docstring); ``glue``: the glue runs to rewrite
    (``frontend/glue.py``; True: all), whose hooks the caller then provides."""
    tree = _copy(src.tree)
    loops: list[ast.For] = []
    _find_loops_in(tree, loops)
    runs = [r for r in src.glue if glue is True or (glue and r.index in glue)]
    for run in reversed(runs):  # (positions in the body stay valid)
        tree.body[run.start : run.stop] = launch_statements(run)
    return _LaunchRewriter(
        [DeviceLoopSource(i, n, src.loops[i].loc) for i, n in enumerate(loops)]
    ).visit(tree)  # type: ignore[no-any-return]


def ref_tree(src: KernelSource) -> ast.FunctionDef:
    tree = _copy(src.tree)
    loops: list[ast.For] = []
    _find_loops_in(tree, loops)
    rewriter = _RefRewriter()
    for loop in loops:
        visited = [rewriter.visit(s) for s in loop.body]  # a statement may become several
        loop.body = [s for v in visited for s in (v if isinstance(v, list) else [v])]
    return tree


def _find_loops_in(tree: ast.FunctionDef, out: list[ast.For]) -> None:
    tmp = KernelSource(lambda: None, "", 0, tree, "", [])
    _find_loops(tmp, tree.body)
    out.extend(loop.node for loop in tmp.loops)

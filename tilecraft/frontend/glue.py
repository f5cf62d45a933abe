"""Host glue after device loops (stage: frontend; in: the kernel's AST; out: the runs of host
statements one small device program can compute, the launch version's rewrite of them, and the
device statements that compute them).

Host code after a device loop often finishes a reduction over a small tensor the loop wrote: a
loss's ``total[0] / torch.clamp(count[0], min=1)``, a clip coefficient from per-row norms
(``torch.clamp(max_norm / (torch.sqrt(torch.sum(norms * norms)) + eps), max=1)``), a mean of
per-row losses. Run eagerly, each op is a kernel launch and several microseconds of host time;
the norms' clip coefficient is six. A **glue run** is a maximal sequence of top-level
assignments (and a final ``return``) after the first device loop whose right-hand sides only
compute with tensors (torch functions, tensor methods, operators): no in-place method, no
random numbers, no reads of tensor data into Python, no other calls. The launch version runs
it as::

    __tc_glue_0 = __tc_glue__(0, locals())
    if __tc_glue_0 is None:
        <the statements, as written>
        __tc_glue_done__(0, locals())
    else:
        (a, b) = __tc_glue_0

so whatever decides against computing it on the device (``runtime/glue.py``: tensors over
:data:`MAX_ELEMENTS`, fewer than :data:`MIN_OPS` eager ops, a trace or compile that fails, a
first result that differs from eager) leaves the user's statements to run as they always did.
The device version is one program (``tc.grid(1)``) that loads each input tensor whole
(``norms`` -> ``norms[:]``), runs the statements and stores every name they assign.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Callable

from tilecraft.errors import SourceLoc
from tilecraft.frontend.assigned import assigned_names

GLUE = "__tc_glue__"
GLUE_DONE = "__tc_glue_done__"
GLUE_PID = "__tc_glue_pid__"
MAX_ELEMENTS = 8192  # per input and output tensor: one program holds each whole
MIN_OPS = 2  # eager ops a run must replace: one op is one launch either way
# methods that read data into Python, move it, draw random numbers or write in place
_REFUSED_METHODS = frozenset(
    [
        "item", "tolist", "numpy", "cpu", "cuda", "backward", "register_hook", "data_ptr",
        "storage", "untyped_storage", "bernoulli", "multinomial", "normal", "random", "uniform",
        "exponential", "geometric", "cauchy", "log_normal", "rand", "randn", "randint",
        "rand_like", "randn_like", "randint_like", "randperm", "poisson", "dropout", "nonzero",
        "unique", "masked_select", "argwhere",
    ]
)  # fmt: skip
# tensor methods that only view their operand (no launch when run eagerly)
VIEW_METHODS = frozenset(
    [
        "view", "view_as", "reshape", "reshape_as", "unsqueeze", "squeeze", "flatten",
        "unflatten", "t", "transpose", "permute", "expand", "expand_as", "contiguous", "detach",
        "narrow", "select", "movedim", "swapaxes", "__getitem__",
    ]
)  # fmt: skip


# calls a statement made only of does not compute: views, and allocations (an output buffer a
# later loop fills: ``out = torch.empty_like(x)`` ends a run)
_NOT_COMPUTING = VIEW_METHODS | frozenset(
    [
        "empty", "empty_like", "empty_strided", "new_empty", "zeros", "zeros_like", "new_zeros",
        "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "arange", "tensor",
    ]
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class GlueRun:
    """Statements ``tree.body[start:stop]`` of a kernel, a glue candidate. A run that ends in
    ``return`` assigns each computing part of the value to ``__tc_ret_<index>_<k>``;
    ``returned`` is the value with those parts replaced by the names."""

    index: int
    start: int
    stop: int
    stmts: tuple[ast.stmt, ...]  # as the device and trace see them (a return as assignments)
    outputs: tuple[str, ...]  # every name the statements assign, in order
    inputs: tuple[str, ...]  # names read before the run assigns them
    returned: ast.expr | None  # the return's value, its computed parts replaced by names
    loc: SourceLoc


def find_glue_runs(
    tree: ast.FunctionDef,
    loop_nodes: list[ast.For],
    loc_of: Callable[[ast.AST], SourceLoc],
) -> list[GlueRun]:
    """The glue candidates among ``tree``'s top-level statements after its first device
    loop."""
    loops = {id(n) for n in loop_nodes}
    runs: list[GlueRun] = []
    seen_loop = False
    pending: list[tuple[int, ast.stmt]] = []
    for i, stmt in enumerate(tree.body):
        if id(stmt) in loops:
            seen_loop = True
            _close(runs, pending, loc_of)
            continue
        if seen_loop and _is_glue_statement(stmt):
            pending.append((i, stmt))
            if isinstance(stmt, ast.Return):
                break
            continue
        _close(runs, pending, loc_of)
    _close(runs, pending, loc_of)
    return runs


def _close(
    runs: list[GlueRun],
    pending: list[tuple[int, ast.stmt]],
    loc_of: Callable[[ast.AST], SourceLoc],
) -> None:
    if not pending:
        return
    index = len(runs)
    stmts, returned = _as_assignments([s for _, s in pending], index)
    outputs, inputs = _names(stmts)
    start, stop = pending[0][0], pending[-1][0] + 1
    runs.append(
        GlueRun(index, start, stop, tuple(stmts), outputs, inputs, returned, loc_of(pending[0][1]))
    )
    pending.clear()


def _as_assignments(stmts: list[ast.stmt], index: int) -> tuple[list[ast.stmt], ast.expr | None]:
    """A final ``return E`` as ``__tc_ret_<index>_<k> = part`` for each part of ``E`` (``E``
    itself, or each element of a tuple) that computes; the return keeps the other parts."""
    if not isinstance(stmts[-1], ast.Return) or stmts[-1].value is None:
        return list(stmts), None
    ret = stmts[-1]
    value = ret.value
    assert value is not None
    parts = value.elts if isinstance(value, ast.Tuple) else [value]
    assigns: list[ast.stmt] = []
    kept: list[ast.expr] = []
    for k, part in enumerate(parts):
        if not _computes(part):  # a name, a view of one (``rows[0:2]``): returned as it is
            kept.append(part)
            continue
        name = f"__tc_ret_{index}_{k}"
        assigns.append(ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], part), ret))
        kept.append(ast.copy_location(ast.Name(name, ast.Load()), part))
    rebuilt = ast.Tuple(kept, ast.Load()) if isinstance(value, ast.Tuple) else kept[0]
    return [*stmts[:-1], *assigns], ast.copy_location(rebuilt, value)


def _names(stmts: list[ast.stmt]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    outputs: list[str] = []
    inputs: list[str] = []
    for stmt in stmts:
        assert isinstance(stmt, ast.Assign)
        for node in ast.walk(stmt.value):
            if isinstance(node, ast.Name) and node.id not in outputs and node.id not in inputs:
                inputs.append(node.id)
        name = stmt.targets[0]
        assert isinstance(name, ast.Name)
        if name.id not in outputs:
            outputs.append(name.id)
    return tuple(outputs), tuple(inputs)


def _is_glue_statement(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Return):
        return stmt.value is not None and _computes(stmt.value)
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return False
    return isinstance(stmt.targets[0], ast.Name) and _computes(stmt.value)


def _computes(expr: ast.expr) -> bool:
    """Whether ``expr`` is built only of what a glue run may hold, and computes something.
    Raises nothing; a refused node anywhere makes it False."""
    found = _scan(expr)
    return found is not None and found


def _scan(node: ast.AST) -> bool | None:
    """None: ``node`` holds something a glue run may not; else whether it computes (the sizes
    given to a view or an allocation, ``out.view(b, 2 * h)``, do not)."""
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        if isinstance(node.op, (ast.MatMult, ast.Not)):  # tl.dot's sizes; Python's bool
            return None
        computes = not _constant(node)
    elif isinstance(node, ast.Call):
        if not _allowed_call(node):
            return None
        if _call_name(node) in _NOT_COMPUTING:
            inner = _scan(node.func)  # the viewed value may compute; its sizes do not
            args = [_scan(a) for a in (*node.args, *node.keywords)]
            return None if inner is None or None in args else inner
        computes = True
    elif isinstance(node, ast.Compare):
        computes = True
    elif isinstance(node, _PLAIN_NODES):
        computes = False
    else:
        return None
    for child in ast.iter_child_nodes(node):
        found = _scan(child)
        if found is None:
            return None
        computes = computes or found
    return computes


def _constant(node: ast.BinOp | ast.UnaryOp) -> bool:
    """``-1``, ``2 * 64``: arithmetic of literals (a view's sizes), not a launch."""
    return all(
        isinstance(n, (ast.Constant, ast.operator, ast.unaryop))
        for n in ast.walk(node)
        if n is not node
    )


_PLAIN_NODES = (
    ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List,
    ast.keyword, ast.Load, ast.operator, ast.unaryop, ast.cmpop,
)  # fmt: skip


def _call_name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else ""


def _allowed_call(call: ast.Call) -> bool:
    """A call on an attribute (``torch.sqrt(x)``, ``x.sum()``, ``F.silu(x)``; its base is
    checked to be torch's or a tensor when traced, :func:`call_bases`); never ``out=``, an
    in-place method, or one that reads data into Python, moves it or draws random numbers."""
    func = call.func
    if not isinstance(func, ast.Attribute) or any(k.arg == "out" for k in call.keywords):
        return False
    name = func.attr
    return name not in _REFUSED_METHODS and not (name.endswith("_") and not name.endswith("__"))


def call_bases(run: GlueRun) -> set[str]:
    """Names a call of the run is made on (``torch``, ``F``, ``norms`` in ``norms.sum()``),
    less those the run assigned before: each must be a torch module or a tensor."""
    return _attribute_bases(run, calls=True)


def attribute_bases(run: GlueRun) -> set[str]:
    """Names whose attributes the run reads other than to call them (``cfg.SCALE``,
    ``x.dtype``), less those it assigned before: each must be torch's or a tensor."""
    return _attribute_bases(run, calls=False)


def _attribute_bases(run: GlueRun, calls: bool) -> set[str]:
    out: set[str] = set()
    assigned: set[str] = set()
    for stmt in run.stmts:
        called = {id(n.func) for n in ast.walk(stmt) if isinstance(n, ast.Call)}
        for node in ast.walk(stmt):
            if isinstance(node, ast.Attribute) and (id(node) in called) == calls:
                base = node.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id not in assigned:
                    out.add(base.id)
        assigned.update(assigned_names([stmt]))
    return out


def launch_statements(run: GlueRun) -> list[ast.stmt]:
    """The launch version of the run (see the module docstring)."""
    first = run.stmts[0]
    result = f"__tc_glue_{run.index}"
    env = ast.Call(ast.Name("locals", ast.Load()), [], [])
    call = ast.Call(ast.Name(GLUE, ast.Load()), [ast.Constant(run.index), env], [])
    done = ast.Call(ast.Name(GLUE_DONE, ast.Load()), [ast.Constant(run.index), env], [])
    unpack = ast.Assign(
        [ast.Tuple([ast.Name(n, ast.Store()) for n in run.outputs], ast.Store())],
        ast.Name(result, ast.Load()),
    )
    test = ast.Compare(ast.Name(result, ast.Load()), [ast.Is()], [ast.Constant(None)])
    eager = [copy.deepcopy(s) for s in run.stmts] + [ast.Expr(done)]
    stmts: list[ast.stmt] = [
        ast.Assign([ast.Name(result, ast.Store())], call),
        ast.If(test, eager, [unpack]),
    ]
    if run.returned is not None:
        stmts.append(ast.Return(copy.deepcopy(run.returned)))
    return [ast.fix_missing_locations(ast.copy_location(s, first)) for s in stmts]


def device_loop(run: GlueRun, whole: dict[str, int], out_ranks: list[int]) -> ast.For:
    """The run as one program's device code: ``whole`` maps each input tensor of rank >= 1 to
    its rank (loaded whole where the run reads it before assigning it); output ``k`` (of rank
    ``out_ranks[k]``) is stored whole into :func:`output_name` ``(k)``."""
    body: list[ast.stmt] = []
    assigned: set[str] = set()
    for stmt in run.stmts:
        assert isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)
        loads = _WholeLoads({n: r for n, r in whole.items() if n not in assigned})
        value = loads.visit(copy.deepcopy(stmt.value))
        body.append(ast.copy_location(ast.Assign(copy.deepcopy(stmt.targets), value), stmt))
        assigned.add(stmt.targets[0].id)
    for k, (name, rank) in enumerate(zip(run.outputs, out_ranks, strict=True)):
        out = ast.Name(output_name(k), ast.Load())
        target = ast.Subscript(out, _whole_index(rank), ast.Store())
        store = ast.Assign([target], ast.Name(name, ast.Load()))
        body.append(ast.copy_location(store, run.stmts[-1]))
    loop = ast.For(ast.Name(GLUE_PID, ast.Store()), ast.Constant(None), body, [])
    return ast.fix_missing_locations(ast.copy_location(loop, run.stmts[0]))


def output_name(k: int) -> str:
    """The name the device version of a run stores its ``k``-th output into."""
    return f"__tc_glue_out_{k}"


def _whole_index(rank: int) -> ast.expr:
    """``[:, :]`` for rank 2, ``[()]`` for rank 0."""
    return ast.Tuple([ast.Slice() for _ in range(rank)], ast.Load())


class _WholeLoads(ast.NodeTransformer):
    """Loads of the named tensors as whole tiles (``norms`` -> ``norms[:]``), except where the
    user indexes them (``total[0]``) or reads a host property (``x.shape``, ``x.size(0)``)."""

    def __init__(self, ranks: dict[str, int]):
        self.ranks = ranks

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        if isinstance(node.value, ast.Name):
            node.slice = self.visit(node.slice)
            return node
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.attr in _HOST_PROPERTIES:
            return node
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_Name(self, node: ast.Name) -> ast.expr:
        rank = self.ranks.get(node.id)
        if rank is None or not isinstance(node.ctx, ast.Load):
            return node
        return ast.copy_location(ast.Subscript(node, _whole_index(rank), ast.Load()), node)


_HOST_PROPERTIES = frozenset(
    ["shape", "dtype", "device", "size", "dim", "ndim", "numel", "stride", "is_cuda"]
)

"""Trace a device loop's body by interpreting its statements (stage: frontend).

Statements (assignment, augmented assignment, stores, ``if`` on compile-time values, nested tile
loops, unrolled ``static_range`` loops) are interpreted here; expressions are evaluated by Python
with proxy values, so torch calls reach the tracer through ``__torch_function__``. Loop-carried
variables of nested loops are found from the AST and checked for a stable shape and dtype.
"""

from __future__ import annotations

import ast
import copy
import warnings
from typing import Any

import torch

from tilecraft.errors import (
    RUN_TIME_COUNT_HINT,
    DeviceCodeError,
    SourceLoc,
    TilecraftError,
    UnsupportedOpError,
)
from tilecraft.frontend import loop_nest
from tilecraft.frontend.assigned import assigned_names
from tilecraft.frontend.dispatch import contained_host_tensor
from tilecraft.frontend.factories import DeviceFactories
from tilecraft.frontend.scalar_builtins import with_device_builtins
from tilecraft.frontend.tracer import Tracer
from tilecraft.frontend.values import HostTensor, TileProxy, TileValue, host_tensor_operand
from tilecraft.ir.nodes import Node, Op, Sym, reads_memory
from tilecraft.language import _context
from tilecraft.language.loops import TileSpec
from tilecraft.language.tunables import DynamicInt


class Interpreter:
    """Interprets device statements against an environment of proxies."""

    def __init__(
        self,
        tracer: Tracer,
        env: dict[str, Any],
        globals_: dict[str, Any],
        filename: str,
        line_offset: int,
    ):
        self.tracer = tracer
        self.env = env
        self.globals = with_device_builtins(dict(globals_))
        self.globals[_EQ], self.globals[_NE] = _runtime_eq, _runtime_ne
        self.filename = filename
        self.line_offset = line_offset
        # keyed by the AST node itself (identity hash): the dict keeps nodes alive, so an id() is
        # never reused for another expression
        self._code_cache: dict[ast.AST, Any] = {}
        self._derived: dict[ast.AST, ast.expr] = {}

    def loc(self, node: ast.AST) -> SourceLoc:
        return SourceLoc(
            self.filename,
            getattr(node, "lineno", 1) + self.line_offset,
            getattr(node, "col_offset", 0),
        )

    # -- expressions ----------------------------------------------------------------------
    def eval(self, expr: ast.expr) -> Any:
        code = self._code_cache.get(expr)
        if code is None:
            code = compile(self._located(expr), self.filename, "eval")
            self._code_cache[expr] = code
        scope = dict(self.globals)
        scope.update(self.env)
        try:
            with _context.device_context(self.tracer), DeviceFactories():
                return eval(code, scope)
        except TilecraftError:
            raise
        except NameError as exc:
            raise DeviceCodeError(
                f"{exc}",
                self.tracer.loc,
                hint="a name assigned only inside an inner loop is not visible after it; "
                "initialize it before the loop to carry it",
            ) from None
        except (TypeError, AttributeError, ValueError, IndexError, RuntimeError) as exc:
            text = str(exc)
            if isinstance(exc, TypeError) and text.startswith("arange()"):
                raise UnsupportedOpError(
                    "torch.arange in device code needs Python int bounds, not a tile's size "
                    "(`lsm.shape[0]`) or another device value",
                    self.tracer.loc,
                    hint="use `tc.arange(n)` (compile-time bounds, e.g. a block size) or a "
                    "tile's `.index` (`tm.index`: the tile's positions in its dim)",
                ) from None
            if isinstance(exc, TypeError) and "cannot be interpreted as an integer" in text:
                raise DeviceCodeError(
                    "a Python int is needed here (a range() bound, a repeat count), but this "
                    "value is known only at run time (a size under static_shapes=False, or a "
                    "value computed in device code)",
                    self.tracer.loc,
                    hint=RUN_TIME_COUNT_HINT,
                ) from None
            if isinstance(exc, TypeError) and "its length is not an int when" in text:
                # a tile dim of a run-time size where Python needs an int (tc.arange(t.size(1)))
                raise DeviceCodeError(
                    f"{text}, and this needs a Python int (a length, a range bound)",
                    self.tracer.loc,
                    hint="use the size from host code (torch.arange(n) with n = x.size(1)), "
                    "or " + RUN_TIME_COUNT_HINT,
                ) from None
            if isinstance(exc, TypeError) and "not HostTensor" in text:
                raise host_tensor_operand(text.split("(", 1)[0], text, self.tracer.loc) from None
            number = isinstance(exc, TypeError) and "is not subscriptable" in text
            # a list / tuple / array argument indexed with a device value (lengths[tb.begin])
            listed = "indices must be integers" in text or "only integers, slices" in text
            if number or listed:
                raise _not_a_tensor(expr, scope, self.tracer.loc, listed) or UnsupportedOpError(
                    f"{type(exc).__name__}: {exc}", self.tracer.loc
                ) from None
            raise UnsupportedOpError(f"{type(exc).__name__}: {exc}", self.tracer.loc) from None

    def _located(self, expr: ast.expr) -> ast.Expression:
        """``expr`` to compile, at its line of the user's file: the AST counts lines from the
        kernel's first line, and a traceback through the evaluated code would otherwise show
        whatever line of the file has that number (an import line, the ``def``)."""
        tree = ast.Expression(body=_RuntimeEquality().visit(copy.deepcopy(expr)))
        return ast.increment_lineno(ast.fix_missing_locations(tree), self.line_offset)

    # -- statements -----------------------------------------------------------------------
    def run(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.tracer.loc = self.loc(stmt)
            try:
                self.exec_stmt(stmt)
            except TilecraftError as exc:
                raise exc.with_loc(self.loc(stmt)) from None

    def exec_stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.IfExp):
            # ``t = a if c else b``: the ``if`` statement it means, so a condition on device
            # data branches (an IF node) instead of asking a traced value for a Python bool
            self.exec_stmt(_as_if_statement(stmt, stmt.value))
        elif isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value)
            for target in stmt.targets:
                self.assign(target, value)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value))
        elif isinstance(stmt, ast.AugAssign):
            self.aug_assign(stmt)
        elif isinstance(stmt, ast.Expr):
            if not isinstance(stmt.value, ast.Constant):
                self.eval(stmt.value)
        elif isinstance(stmt, ast.If):
            test = self.eval(stmt.test)
            if isinstance(test, DynamicInt):  # a run-time int (or flag): a branch on data
                test = self.tracer.wrap(self.tracer.value_node(test))
            if isinstance(test, (TileValue, TileProxy)):  # a branch on data: an IF node
                from tilecraft.frontend.branches import exec_if

                exec_if(self, stmt, test)
                return
            self.run(stmt.body if test else stmt.orelse)
        elif isinstance(stmt, ast.For):
            self.exec_for(stmt)
        elif isinstance(stmt, ast.While):
            from tilecraft.frontend.branches import exec_while

            exec_while(self, stmt)
        elif isinstance(stmt, ast.Pass):
            pass
        elif isinstance(stmt, ast.Assert):
            test = self.eval(stmt.test)
            if isinstance(test, (TileValue, TileProxy)):  # (it was dropped: ref mode raised)
                raise DeviceCodeError(
                    "`assert` on a device value: compiled kernels have no assertions (Triton "
                    "keeps tl.device_assert in debug builds only)",
                    hint="check the data in host code (`assert (x >= 0).all()`) before the "
                    "kernel, or run kernel.run_ref(...), where the assert runs as eager code",
                )
            if not test:
                raise DeviceCodeError("assertion failed while tracing device code")
        elif isinstance(stmt, (ast.Break, ast.Continue)):
            word = "break" if isinstance(stmt, ast.Break) else "continue"
            raise UnsupportedOpError(
                f"`{word}` in device code: device loops cannot be left or skipped early",
                hint="put the exit condition in a `while` test (`while (i < n) & ~done:`), "
                "or guard the rest of the loop body with an `if`",
            )
        else:
            raise UnsupportedOpError(
                f"`{type(stmt).__name__}` statement in device code",
                hint="device loops support assignments, stores, `if`, `while`, and nested loops",
            )

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, TileValue) and value.node.hint in ("v", "load"):
                value.node.hint = target.id
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = list(value)
            if len(values) != len(target.elts):
                raise DeviceCodeError(
                    f"cannot unpack {len(values)} values into {len(target.elts)} names"
                )
            for t, v in zip(target.elts, values, strict=True):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value)
            index = self.eval_index(target.slice)
            if isinstance(obj, (list, dict)):
                kind = "list" if isinstance(obj, list) else "dict"
                raise DeviceCodeError(
                    f"assignment into a Python {kind} in device code: Python containers of "
                    "tiles cannot be assigned in device loops",
                    hint="keep one stacked tile instead (e.g. `accs = tc.zeros([4, tch])`, "
                    "updated with `accs = torch.where(tc.arange(4)[:, None] == k, accs + x, "
                    "accs)`), or unroll the loop with `tc.static_range` and use separate names",
                )
            if type(obj) is torch.Tensor:  # noqa: E721 - a plain tensor, not a tile
                raise contained_host_tensor(self.tracer, obj)
            if not isinstance(obj, HostTensor):
                raise DeviceCodeError(
                    "assignment into a subscript of something that is not a host tensor",
                    hint="tiles are values; build a new tile with torch.where instead of assigning into it",
                )
            obj[index] = value
        else:
            raise UnsupportedOpError(f"assignment to {type(target).__name__}")

    def eval_index(self, expr: ast.expr) -> Any:
        derived = self._derived.get(expr)
        if derived is None:
            derived = ast.fix_missing_locations(ast.copy_location(_index_expr(expr), expr))
            self._derived[expr] = derived
        return self.eval(derived)

    def aug_assign(self, stmt: ast.AugAssign) -> None:
        """``x += v`` (or ``t[i] += v``) as ``x = x + v``; the built expression is kept per statement."""
        derived = self._derived.get(stmt)
        if derived is None:
            binop = ast.BinOp(left=_as_load(stmt.target), op=stmt.op, right=stmt.value)
            derived = ast.fix_missing_locations(ast.copy_location(binop, stmt))
            self._derived[stmt] = derived
        block = self.tracer.blocks[-1]
        before = len(block)
        value = self.eval(derived)
        if isinstance(stmt.target, ast.Name):
            value = self._in_place_dtype(stmt, self.eval(_as_load(stmt.target)), value)
        self.assign(stmt.target, value)
        if any(_scatters_by_data(n) for n in block[before:]):
            _warn_at(
                self.tracer.loc,
                f"{ast.unparse(stmt.target)} {_OPERATOR_TEXT.get(type(stmt.op), '?=')} ... at "
                "indices loaded from memory is a load, an update and a store: elements of one "
                "tile that hit the same index lose all but one update (torch's own x[idx] += v "
                "does too); to accumulate each, use tc.atomic_add(tensor, [index, ...], value)",
            )

    def _in_place_dtype(self, stmt: ast.AugAssign, old: Any, value: Any) -> Any:
        """``v += b`` of a tile ``v`` keeps ``v``'s dtype, as torch's in-place op: the result is
        cast back (a bf16 ``v *= fp32_w`` became fp32, an int8 ``h -= int32_b`` did not wrap),
        and a result ``v``'s dtype cannot hold (a float into an int tile) is refused as torch
        does."""
        if not isinstance(old, TileValue) or not isinstance(value, TileValue):
            return value
        have, got = self.tracer.dtype_of(old), self.tracer.dtype_of(value)
        if have == got:
            return value
        if not torch.can_cast(got, have):
            name, op = ast.unparse(stmt.target), _OPERATOR_TEXT.get(type(stmt.op), "?=")
            raise DeviceCodeError(
                f"{name} {op} ...: the result is {got}, which {name} ({have}) cannot hold; "
                "torch's in-place op refuses it too",
                self.tracer.loc,
                hint=f"rebind {name} to a new tile: {name} = {name} {op[:-1]} ... (of dtype {got})",
            )
        return self.tracer.to_dtype(value, have)

    # -- loops ----------------------------------------------------------------------------
    def exec_for(self, stmt: ast.For) -> None:
        if stmt.orelse:
            raise UnsupportedOpError("for/else in device code")
        spec = self.eval(stmt.iter)
        if isinstance(spec, TileSpec):
            self.exec_tile_loop(stmt, spec)
        elif isinstance(spec, (range, tuple, list, enumerate, zip, reversed)):
            # a Python sequence known while tracing (``for v in (lo, hi)``): unrolled, as a list
            # comprehension over it is
            if isinstance(spec, range) and len(spec) > UNROLL_WARNING:
                _warn_unrolled(spec, stmt.target, self.tracer.loc)
            for i in list(spec):
                self.assign(stmt.target, i)
                self.run(stmt.body)
        else:
            raise UnsupportedOpError(
                f"device `for` over a {type(spec).__name__}",
                hint="device loops iterate tc.tile(...), tc.grid(...), tc.static_range(...) or a "
                "Python tuple or list (unrolled)",
            )

    def exec_tile_loop(self, stmt: ast.For, spec: TileSpec) -> None:
        bounds = zip(spec.begins, spec.ends, spec.block_sizes, strict=True)
        syms = [
            loop_nest.block_sym(
                self.tracer, end, begin, block, scalar=spec.kind == "grid", site=(id(stmt), dim)
            )
            for dim, (begin, end, block) in enumerate(bounds)
        ]
        self._loop_nest(stmt, syms, spec.multi)

    def _loop_nest(self, stmt: ast.For, syms: list[Sym], multi: bool) -> None:
        carried_names = [
            n
            for n in assigned_names(stmt.body)
            if isinstance(self.env.get(n), (TileValue, int, float))
        ]
        body_locals = [n for n in assigned_names(stmt.body) if n not in self.env]
        tracer = self.tracer
        loops = loop_nest.open_nest(tracer, syms)
        carries: dict[str, Node] = {}
        for name in carried_names:  # declared on the outermost loop of the nest
            carries[name] = loop_nest.carry_in(tracer, loops[0], name, self.env[name])
            self.env[name] = tracer.wrap(carries[name])
        proxies = [TileProxy(s, tracer) for s in syms]
        self.assign(stmt.target, tuple(proxies) if multi else proxies[0])
        self.run(stmt.body)
        nexts = [self.env[name] for name in carries]
        loop_nest.close_nest(tracer, loops, list(carries.values()), nexts)
        for name, carry in carries.items():
            self.env[name] = tracer.wrap(carry)
        for name in body_locals:
            self.env.pop(name, None)
        for target in ast.walk(stmt.target):
            if isinstance(target, ast.Name):
                self.env.pop(target.id, None)


_EQ, _NE = "__tc_eq__", "__tc_ne__"


# a Python range in device code longer than this warns: Triton compiles every unrolled copy (an
# RK4 integrator storing each of 100 steps ran the sm_90 compile past 300 s; as tc.grid, 1.3 s)
UNROLL_WARNING = 32


def _warn_unrolled(spec: range, target: ast.expr, loc: SourceLoc | None) -> None:
    bounds = f"{spec.start}, {spec.stop}" if spec.start else f"{spec.stop}"
    name = ast.unparse(target)
    _warn_at(
        loc,
        f"for {name} in range(...) in device code unrolls its body {len(spec)} times (a Python "
        "loop while tracing): Triton compiles every copy, minutes for long bodies; write "
        f"`for {name} in tc.grid({bounds})` for a loop on the device (its index is then a "
        "device scalar)",
    )


def _warn_at(loc: SourceLoc | None, message: str) -> None:
    """A warning attributed to the user's kernel line (not tilecraft's frames)."""
    filename, lineno = (loc.filename, loc.lineno) if loc else ("<kernel>", 0)
    warnings.warn_explicit(message, UserWarning, filename, lineno)


_OPERATOR_TEXT = {
    ast.Add: "+=",
    ast.Sub: "-=",
    ast.Mult: "*=",
    ast.Div: "/=",
    ast.FloorDiv: "//=",
    ast.Mod: "%=",
    ast.Pow: "**=",
    ast.BitOr: "|=",
    ast.BitAnd: "&=",
    ast.BitXor: "^=",
    ast.LShift: "<<=",
    ast.RShift: ">>=",
}


def _scatters_by_data(node: Node) -> bool:
    """Whether ``node`` stores at positions computed from loaded values (a scatter by an index
    list), where two elements of one tile may hit one address."""
    if node.op is not Op.STORE:
        return False
    indices = [node.inputs[1 + item[1]] for item in node.attrs["index"] if item[0] == "value"]
    return any(reads_memory(index) for index in indices)


class _RuntimeEquality(ast.NodeTransformer):
    """``a == b`` / ``a != b`` in device code as calls that compare on the device: a run-time
    int (``if i == 1:`` with ``i`` a host loop's varying int) or a 0-d tensor argument
    (``torch.where(s == 2.0, ...)``). ``DynamicInt`` keeps int equality and ``HostTensor``
    identity for the compiler's own comparisons, so the user's are rewritten instead."""

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            return node
        name = _EQ if isinstance(node.ops[0], ast.Eq) else _NE
        call = ast.Call(ast.Name(name, ast.Load()), [node.left, node.comparators[0]], [])
        return ast.copy_location(call, node)


def _runtime_eq(a: Any, b: Any) -> Any:
    return _device_compare(torch.eq, a, b) if _on_device(a, b) else a == b


def _runtime_ne(a: Any, b: Any) -> Any:
    return _device_compare(torch.ne, a, b) if _on_device(a, b) else a != b


def _on_device(a: Any, b: Any) -> bool:
    """Whether ``a == b`` compares run-time values: a host tensor (whose 0-d value is read; a
    larger one is refused with a hint to index it) or a run-time int beside another int."""
    if _context.device() is None:
        return False
    if isinstance(a, HostTensor) or isinstance(b, HostTensor):
        return a is not None and b is not None
    return (
        (isinstance(a, DynamicInt) or isinstance(b, DynamicInt))
        and isinstance(a, int)
        and isinstance(b, int)
    )


def _device_compare(func: Any, a: Any, b: Any) -> Any:
    tracer: Any = _context.device()
    for operand in (a, b):
        if isinstance(operand, HostTensor) and operand.ndim:
            detail = f"'{operand.name}' is {operand.ndim}-D (== compares elements)"
            raise host_tensor_operand(func.__name__, detail, tracer.loc)
    return tracer.torch_call(func, (a, b), {})


def _not_a_tensor(
    expr: ast.expr, scope: dict[str, Any], loc: Any, listed: bool
) -> DeviceCodeError | None:
    """``y[t]`` with ``y`` a number (an int argument passed for a tensor), or with ``listed``
    a list, tuple or NumPy array indexed with a device value (Python's indexing takes ints),
    named."""
    for node in ast.walk(expr):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            continue
        name, value = node.value.id, scope.get(node.value.id)
        if not listed and (value is None or isinstance(value, (bool, int, float))):
            return DeviceCodeError(
                f"'{name}' is a host {type(value).__name__} (an argument or a host value), not "
                "a tensor: device code indexes tensors",
                loc,
                hint=f"pass a tensor for '{name}', or use the value as it is",
            )
        if not listed and isinstance(value, torch.nn.Module):  # rms(x, self.norm)
            tensors = [n for n, _ in value.named_parameters(recurse=False)]
            named = f" (`{name}.{tensors[0]}`)" if tensors else ""
            return DeviceCodeError(
                f"'{name}' is a {type(value).__name__} module, not a tensor: device code "
                "indexes tensors",
                loc,
                hint=f"pass the module's tensor{named} for '{name}'",
            )
        array = type(value).__module__ == "numpy"
        if listed and (isinstance(value, (list, tuple)) or array):
            kind = "a NumPy array" if array else f"a Python {type(value).__name__}"
            return DeviceCodeError(
                f"'{name}' is {kind}, indexed with a device value: device code reads tensors "
                "(a host value is indexed by Python ints only)",
                loc,
                hint=f"pass it as a tensor on the kernel's device: torch.tensor({name}, "
                "device=x.device)",
            )
    return None


def _as_if_statement(stmt: ast.Assign, choice: ast.IfExp) -> ast.If:
    """``targets = a if c else b`` as ``if c: targets = a`` / ``else: targets = b``."""
    branch = [ast.Assign(stmt.targets, choice.body), ast.Assign(stmt.targets, choice.orelse)]
    for node in branch:
        ast.copy_location(node, stmt)
    return ast.copy_location(ast.If(choice.test, [branch[0]], [branch[1]]), stmt)


def _as_load(target: ast.expr) -> ast.expr:
    clone = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(clone, target)


def _index_expr(expr: ast.expr) -> ast.expr:
    """A subscript's slice as an expression: ``a, :`` -> ``(a, slice(None))``."""
    if isinstance(expr, ast.Slice):
        args = [
            e if e is not None else ast.Constant(None) for e in (expr.lower, expr.upper, expr.step)
        ]
        return ast.Call(func=ast.Name("slice", ast.Load()), args=args, keywords=[])
    if isinstance(expr, ast.Tuple):
        return ast.Tuple([_index_expr(e) for e in expr.elts], ast.Load())
    return expr

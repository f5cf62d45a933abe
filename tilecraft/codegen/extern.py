"""A user's ``@triton.jit`` function in the generated module (stage: codegen; in: an ``EXTERN``
node; out: the call, and the function's source among the kernel's helpers).

The function is copied in under its own name, with what it reads from its module: other
``@triton.jit`` functions (copied the same way), ``tl.constexpr`` and number constants, and
``triton`` / ``triton.language`` themselves. So the generated module, and the standalone export
made from it, run without the user's module. Anything else the function reads is an error that
names it.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import textwrap
import types
from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from tilecraft.codegen.registry import emits
from tilecraft.errors import UnsupportedOpError
from tilecraft.frontend.extern import is_jit
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext

_OURS = ("_tc_", "launch_")  # prefixes of the generated module's own names


def _source(fn: Any) -> str:
    """The function's source from its ``def`` on (decorators dropped)."""
    text = textwrap.dedent(inspect.getsource(fn.fn))
    start = re.search(r"^def\s", text, re.MULTILINE)
    return text[start.start() :] if start else text


def _free_names(tree: ast.FunctionDef) -> list[str]:
    bound = {a.arg for a in ast.walk(tree.args) if isinstance(a, ast.arg)}
    bound |= {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    loads = [
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    ]
    return sorted({n for n in loads if n not in bound and not hasattr(builtins, n)})


def _global_source(owner: str, name: str, value: Any, seen: dict[str, Any]) -> list[str]:
    """The module-level source that defines ``name`` for the copied functions (once)."""
    if is_jit(value):
        return function_sources(value, seen)
    if name in seen:
        if seen[name] is not value:
            raise UnsupportedOpError(
                f"tc.triton_call: two Triton functions read different globals named '{name}'",
                hint="rename one of them",
            )
        return []
    seen[name] = value
    if value is tl or value is triton:  # the generated module imports both as tl / triton
        home = "tl" if value is tl else "triton"
        return [] if name == home else [f"{name} = {home}"]
    if isinstance(value, types.ModuleType) and value.__name__.startswith("triton."):
        return [f"import {value.__name__} as {name}"]
    if isinstance(value, tl.constexpr):
        return [f"{name} = tl.constexpr({value.value!r})"]
    if isinstance(value, (bool, int, float)):
        # a constexpr: Triton's GPU code generator refuses plain globals (the interpreter
        # reads them), and the function's module had the number as a Python constant
        return [f"{name} = tl.constexpr({value!r})"]
    raise UnsupportedOpError(
        f"tc.triton_call: {owner} reads the global '{name}' (a {type(value).__name__}), which "
        "cannot be copied into the generated module",
        hint="use @triton.jit functions, tl.constexpr or number constants, and triton.language",
    )


def function_sources(fn: Any, seen: dict[str, Any] | None = None) -> list[str]:
    """Source blocks defining ``fn`` and what it reads, dependencies first (each once)."""
    seen = {} if seen is None else seen
    name = fn.__name__
    if name in seen:
        if seen[name] is not fn:
            raise UnsupportedOpError(
                f"tc.triton_call: two different Triton functions are named '{name}'",
                hint="rename one of them",
            )
        return []
    if name.startswith(_OURS) or name in ("triton", "tl"):
        raise UnsupportedOpError(
            f"tc.triton_call: the function name '{name}' is reserved for generated code",
            hint="rename the function",
        )
    seen[name] = fn
    source = _source(fn)
    tree = ast.parse(source).body[0]
    assert isinstance(tree, ast.FunctionDef)
    scope = fn.fn.__globals__
    blocks: list[str] = []
    for free in _free_names(tree):
        if free not in scope:
            raise UnsupportedOpError(f"tc.triton_call: {name} reads undefined name '{free}'")
        blocks += _global_source(name, free, scope[free], seen)
    blocks.append("@triton.jit\n" + source.rstrip() + "\n")
    return blocks


def add_functions(em: EmitContext) -> None:
    """Copy every function the loop's ``EXTERN`` nodes call into the kernel's helpers, and keep
    the names they define (functions, constants) free of generated temporaries."""
    seen: dict[str, Any] = {}
    for node in em.loop.walk():
        if node.op is Op.EXTERN and "call" not in node.attrs:  # (ours are imported)
            em.helpers.extend(function_sources(node.attrs["fn"], seen))
    for name in seen:
        em.w.reserve(name)


@emits(Op.EXTERN)
def emit_extern(em: EmitContext, node: Node) -> None:
    if "call" in node.attrs:  # one of tilecraft's own (torch.sort, a bitcast): a call template
        text = node.attrs["call"].format(*(em.expr(i) for i in node.inputs))
    else:
        args = ", ".join(em.expr(i) for i in node.inputs)
        text = f"{node.attrs['fn'].__name__}({args})"
    em.bind(node, f"{text}.to({dtypes.triton_dtype(node.dtype)})")

"""Deciding and building a glue run's program (stage: frontend; in: a glue run, the host's
meta values where it starts; out: its eager function, why it stays eager, or its traced
program). The runs and their rewrite are ``frontend/glue.py``'s; ``runtime/glue.py`` compiles
and launches the programs."""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from tilecraft.frontend.assigned import assigned_names
from tilecraft.frontend.glue import MAX_ELEMENTS, MIN_OPS, VIEW_METHODS, GlueRun, module_bases
from tilecraft.frontend.source import KernelSource, build_function
from tilecraft.ir.nodes import DeviceLoop

# torch functions a tensor's metadata goes through (no launch when run eagerly)
_METADATA = frozenset(
    [
        "__get__",
        "size",
        "dim",
        "numel",
        "stride",
        "element_size",
        "is_contiguous",
        "storage_offset",
        "__len__",
        "__format__",
        "__repr__",
        "type",
    ]
)


@dataclasses.dataclass
class GlueLoop:
    """A glue run traced as one program: its outputs' shapes and dtypes (allocated contiguous
    per call), the names they are bound to, and the names of the host values it reads."""

    loop: DeviceLoop
    outputs: tuple[tuple[tuple[int, ...], torch.dtype], ...]
    names: tuple[str, ...]
    inputs: tuple[str, ...]


class OpCounter(TorchFunctionMode):
    """Counts the torch calls that launch a kernel when run eagerly (not views or metadata)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if name not in VIEW_METHODS and name not in _METADATA:
            self.ops += 1
        return func(*args, **(kwargs or {}))


def eager_glue_functions(src: KernelSource) -> list[Callable[[dict[str, Any]], tuple[Any, ...]]]:
    """Per glue run, its statements as a function of the host's locals that returns every name
    they assign (how the trace runs them on meta tensors)."""
    tree = src.tree
    params = [a.arg for a in (*tree.args.posonlyargs, *tree.args.args, *tree.args.kwonlyargs)]
    locals_ = set(params) | set(assigned_names(tree.body))
    return [_eager_function(src, run, locals_) for run in src.glue]


def _eager_function(
    src: KernelSource, run: GlueRun, locals_: set[str]
) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    env = "__tc_env__"
    first = run.stmts[0]
    reads: list[ast.stmt] = [
        ast.Assign(
            [ast.Name(n, ast.Store())],
            ast.Subscript(ast.Name(env, ast.Load()), ast.Constant(n), ast.Load()),
        )
        for n in run.inputs
        if n in locals_
    ]
    result = ast.Tuple([ast.Name(n, ast.Load()) for n in run.outputs], ast.Load())
    body = [*reads, *(copy.deepcopy(s) for s in run.stmts), ast.Return(result)]
    args = ast.arguments(
        posonlyargs=[], args=[ast.arg(env)], kwonlyargs=[], kw_defaults=[], defaults=[]
    )
    fn = ast.FunctionDef(f"__tc_glue_fn_{run.index}__", args, body, [], None)
    fn = ast.fix_missing_locations(ast.copy_location(fn, first))
    for node in ast.walk(fn):
        if "lineno" in node._attributes and getattr(node, "lineno", None) is None:
            ast.copy_location(node, first)
    built = build_function(src, fn, {})
    built.__defaults__ = built.__kwdefaults__ = None
    return built  # type: ignore[no-any-return]


def glue_problem(
    run: GlueRun,
    env: dict[str, Any],
    scope: dict[str, Any],
    outputs: tuple[Any, ...],
    ops: int,
) -> str | None:
    """Why glue run ``run`` stays eager on these meta values (None: it may be one program):
    fewer than MIN_OPS launches, a call on something other than torch, a tensor not made for
    the device, empty, larger than MAX_ELEMENTS or complex, or an output not a contiguous
    tensor."""
    if ops < MIN_OPS:
        return f"{ops} eager op(s): nothing to save"
    for base in sorted(module_bases(run, set(env))):
        module = scope.get(base)
        if not (inspect.ismodule(module) and module.__name__.split(".")[0] == "torch"):
            return f"a call on '{base}', not a torch module"
    if not any(isinstance(env.get(name), torch.Tensor) for name in run.inputs):
        return "no tensor input"
    for name in run.inputs:
        value = env[name] if name in env else scope.get(name)
        if isinstance(value, torch.Tensor) and name not in env:
            return f"'{name}' is a global tensor"
        if isinstance(value, torch.Tensor) and (problem := _tensor_problem(name, value)):
            return problem
    for name, out in zip(run.outputs, outputs, strict=True):
        if not isinstance(out, torch.Tensor):
            return f"'{name}' is a {type(out).__name__}, not a tensor"
        if problem := _tensor_problem(name, out) or (
            None if out.is_contiguous() else f"'{name}' is not contiguous"
        ):
            return problem
    return None


def _tensor_problem(name: str, value: torch.Tensor) -> str | None:
    if value.device.type != "meta":  # made on the host's CPU, not for the kernel's device
        return f"'{name}' is on {value.device.type}"
    if not 1 <= value.numel() <= MAX_ELEMENTS:
        return f"'{name}' has {value.numel()} elements"
    if value.dtype.is_complex:
        return f"'{name}' is {value.dtype}"
    return None

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

from tilecraft import settings
from tilecraft.frontend.assigned import assigned_names
from tilecraft.frontend.glue import (
    MAX_ELEMENTS,
    MIN_OPS,
    VIEW_METHODS,
    GlueRun,
    attribute_bases,
    call_bases,
)
from tilecraft.frontend.source import KernelSource, build_function
from tilecraft.frontend.values import memory_owner
from tilecraft.ir.nodes import DeviceLoop

# torch functions a tensor's metadata goes through (no launch when run eagerly)
_METADATA = frozenset(
    [
        "__get__", "size", "dim", "numel", "stride", "element_size", "is_contiguous",
        "storage_offset", "__len__", "__format__", "__repr__", "type",
    ]
)  # fmt: skip


@dataclasses.dataclass
class GlueLoop:
    """A glue run traced as one program: its outputs' shapes and dtypes (allocated contiguous
    per call), the names they are bound to, and the names of the host values it reads."""

    loop: DeviceLoop
    outputs: tuple[tuple[tuple[int, ...], torch.dtype], ...]
    names: tuple[str, ...]
    inputs: tuple[str, ...]  # the host values it reads: locals, then globals and closure values
    floats: tuple[str, ...] = ()  # those passed as launch arguments (each call: still a float)
    baked: tuple[tuple[str, Any], ...] = ()  # those baked in (ints, bools, dtypes): compared


class OpCounter(TorchFunctionMode):
    """Counts the torch calls that launch a kernel when run eagerly (not views or metadata)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.in_place = ""  # an in-place op the statements ran (F.relu(x, inplace=True))

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if name not in VIEW_METHODS and name not in _METADATA:
            self.ops += 1
        in_place = name.endswith("_") and not name.endswith("__")
        if in_place or _inplace_argument(func, args, kwargs or {}):
            self.in_place = self.in_place or name
        return func(*args, **(kwargs or {}))


def _inplace_argument(func: Any, args: Any, kwargs: dict[str, Any]) -> bool:
    """``F.relu(x, inplace=True)`` / ``F.hardtanh(x, -1, 1, True)``: the function writes its
    input (the mode sees F.relu; the torch.relu_ it calls runs with the mode off)."""
    if "inplace" in kwargs:
        return bool(kwargs["inplace"])
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: no inplace parameter
        return False
    at = params.index("inplace") if "inplace" in params else len(args)
    return at < len(args) and bool(args[at])


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
    counter: OpCounter,
) -> str | None:
    """Why glue run ``run`` stays eager on these meta values (None: it may be one program):
    fewer than MIN_OPS launches, an in-place op, a call on something other than torch or a
    tensor, a read of another kind of global or object, a tensor not made for the device,
    empty, larger than MAX_ELEMENTS or complex, an output not a contiguous tensor, or one that
    is an input or another output (eager gives them the same memory)."""
    if not settings.fuse_glue():
        return "TILECRAFT_GLUE=0"
    if counter.ops < MIN_OPS:
        return f"{counter.ops} eager op(s): nothing to save"
    if counter.in_place:
        return f"an in-place op ({counter.in_place})"
    for base in sorted(call_bases(run)):
        value = env[base] if base in env else scope.get(base)
        if not _torch_code(value) and not isinstance(value, torch.Tensor):
            return f"a call on '{base}' ({type(value).__name__}), not torch or a tensor"
    for base in sorted(attribute_bases(run)):  # cfg.SCALE, loss.scale: read once when traced
        value = env[base] if base in env else scope.get(base)
        if not _torch_code(value) and not isinstance(value, torch.Tensor):
            return f"reads an attribute of '{base}' ({type(value).__name__})"
    if not any(isinstance(env.get(name), torch.Tensor) for name in run.inputs):
        return "no tensor input"
    for name in run.inputs:
        problem = _input_problem(name, env[name] if name in env else scope.get(name), name in env)
        if problem:
            return problem
    return _output_problem(run, env, outputs)


def glue_inputs(run: GlueRun, env: dict[str, Any], scope: dict[str, Any]) -> dict[str, Any]:
    """The host values the run reads, by name: its locals, then the numbers, bools and dtypes
    it reads from globals or the closure (modules and functions stay code)."""
    inputs = {n: env[n] for n in run.inputs if n in env}
    for name in run.inputs:
        value = scope.get(name)
        if name not in env and isinstance(value, _VALUES):
            inputs[name] = float(value) if isinstance(value, float) else value
    return inputs


_VALUES = (int, float, bool, str, type(None), torch.dtype, torch.device)


def _input_problem(name: str, value: Any, local: bool) -> str | None:
    if isinstance(value, torch.Tensor):
        return _tensor_problem(name, value) if local else f"'{name}' is a global tensor"
    if isinstance(value, _VALUES) or _torch_code(value):
        return None  # values are checked or passed at each call; torch's modules are code
    if callable(value) and not isinstance(value, torch.nn.Module):
        return None  # a function (a helper the run calls is refused by the call check)
    return f"'{name}' is a {type(value).__name__}"


def _torch_code(value: Any) -> bool:
    return inspect.ismodule(value) and value.__name__.split(".")[0] == "torch"


def _output_problem(run: GlueRun, env: dict[str, Any], outputs: tuple[Any, ...]) -> str | None:
    inputs = {_root(v): n for n in run.inputs if isinstance(v := env.get(n), torch.Tensor)}
    seen: dict[int, str] = {}
    for name, out in zip(run.outputs, outputs, strict=True):
        if not isinstance(out, torch.Tensor):
            return f"'{name}' is a {type(out).__name__}, not a tensor"
        if problem := _tensor_problem(name, out) or (
            None if out.is_contiguous() else f"'{name}' is not contiguous"
        ):
            return problem
        root = _root(out)
        if (same := inputs.get(root) or seen.get(root)) is not None:
            return f"'{name}' shares memory with '{same}'"
        seen[root] = name
    return None


def _root(value: torch.Tensor) -> int:
    """The identity of the tensor whose memory ``value`` views (itself if none)."""
    return id(memory_owner(value))


def _tensor_problem(name: str, value: torch.Tensor) -> str | None:
    if value.device.type != "meta":  # made on the host's CPU, not for the kernel's device
        return f"'{name}' is on {value.device.type}"
    if not 1 <= value.numel() <= MAX_ELEMENTS:
        return f"'{name}' has {value.numel()} elements"
    if value.dtype.is_complex:
        return f"'{name}' is {value.dtype}"
    return None

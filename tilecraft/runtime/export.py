"""Standalone export (stage: runtime; in: a :class:`BoundKernel` and a config; out: the source of
a Python module that runs the kernel with only torch and triton installed).

The module holds the generated ``@triton.jit`` functions and launchers, the kernel's host code
(device loops replaced by launches, as in a compiled run), and a small stand-in for the DSL's host
names (``tile``, ``grid``, ``register_block_size``, ``register_tunable``, ``specialize``) with the
config's values baked in. Globals the host code reads are re-created: modules by import, constants
by value; anything else cannot be exported and is reported by name.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import types
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.codegen.kernel import HEADER
from tilecraft.config.config import Config
from tilecraft.errors import ArgumentError
from tilecraft.frontend.source import LAUNCH, launch_tree
from tilecraft.ir.index_width import INT32_LIMIT, max_offset, needs_int64
from tilecraft.runtime import device, triton_helpers
from tilecraft.runtime.signature import dynamic_layout

if TYPE_CHECKING:
    from tilecraft.runtime.kernel import BoundKernel

_PRELUDE = '''from __future__ import annotations

import functools

import numpy as np
import torch
import triton
import triton.language as tl


class ShapeError(ValueError):
    """An argument that does not fit the specialization this module was exported for."""


@functools.cache
def _sm_count(device_type, index):
    if device_type == "cuda":
        return torch.cuda.get_device_properties(index).multi_processor_count
    return 4


def sm_count(tensor):
    return _sm_count(tensor.device.type, tensor.device.index or 0)


def ensure_allocator():
    def alloc(size, alignment, stream):
        device = "cuda" if torch.cuda.is_available() else "cpu"
        return torch.empty(size, dtype=torch.int8, device=device)

    triton.set_allocator(alloc)
'''

_SHIM = '''

class _TileSpec:
    def __init__(self, begins, ends, block_sizes):
        self.begins, self.ends, self.block_sizes = begins, ends, block_sizes


def _bounds(args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return tuple(0 for _ in args[0]), tuple(args[0])
    if len(args) == 2 and isinstance(args[0], (list, tuple)):
        return tuple(args[0]), tuple(args[1])
    return ((0,), (args[0],)) if len(args) == 1 else ((args[0],), (args[1],))


class _DSL:
    """The tilecraft names host code uses, with the exported config's values."""

    constexpr = object

    def __init__(self, blocks, tunables):
        self._blocks, self._tunables, self._next = blocks, tunables, 0

    def start(self):
        self._next = 0

    def tile(self, *args, block_size=None):
        begins, ends = _bounds(args)
        return _TileSpec(begins, ends, (block_size,) * len(ends))

    def grid(self, *args):
        begins, ends = _bounds(args)
        return _TileSpec(begins, ends, (1,) * len(ends))

    def register_block_size(self, lo, hi=None):
        self._next += 1
        return self._blocks[self._next - 1]

    def register_tunable(self, name, choices):
        return self._tunables.get(name, tuple(choices)[0])

    def specialize(self, value):
        return value
'''

_DSL_NAMES = {"tile", "grid", "register_block_size", "register_tunable", "specialize", "constexpr"}


def _is_dsl(value: Any) -> bool:
    name = getattr(value, "__module__", "") or ""
    if isinstance(value, types.ModuleType):
        return value.__name__ in ("tilecraft", "tilecraft.language")
    return name.startswith("tilecraft.language") and getattr(value, "__name__", "") in _DSL_NAMES


def _helpers() -> str:
    """The Triton helpers generated code imports from tilecraft, copied in, under their names."""
    text = inspect.getsource(triton_helpers).replace("from __future__ import annotations\n", "")
    aliases = re.findall(
        r"^from tilecraft\.runtime\.triton_helpers import (\w+) as (\w+)$", HEADER, re.M
    )
    return "\n" + text + "\n" + "".join(f"{alias} = {name}\n" for name, alias in aliases)


def _constant(value: Any) -> bool:
    """Whether ``repr(value)`` re-creates it: None, numbers, strings, dtypes, and tuples of
    them (Muon's Newton-Schulz coefficients)."""
    if isinstance(value, tuple):
        return all(_constant(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, torch.dtype))


def _global_line(kernel_name: str, name: str, value: Any) -> str:
    """The line that re-creates a global the host code reads."""
    if _is_dsl(value):
        return f"{name} = _tc" if isinstance(value, types.ModuleType) else f"{name} = _tc.{name}"
    if isinstance(value, types.ModuleType):
        return f"import {value.__name__} as {name}"
    if _constant(value):
        return f"{name} = {value!r}"
    raise ArgumentError(
        f"{kernel_name}(): cannot export: the host code reads '{name}' "
        f"(a {type(value).__name__}), which is not a module or a constant",
        hint="compute it inside the kernel, or pass it as an argument",
    )


def _host_tree(bound: BoundKernel) -> tuple[ast.FunctionDef, list[str]]:
    """The host function (launches in place of device loops) and the globals it reads."""
    kernel = bound.kernel
    tree = launch_tree(kernel.source, glue=False)  # the glue runs as written
    tree.name = "_host"
    defaults = kernel.fn.__defaults__ or ()
    tree.args.defaults = [ast.Constant(d) for d in defaults]
    for arg in [*tree.args.args, *tree.args.kwonlyargs]:
        arg.annotation = None
    tree.returns = None
    params = {a.arg for a in ast.walk(tree.args) if isinstance(a, ast.arg)}
    assigned = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    local = params | assigned | {LAUNCH, "locals"}
    names = sorted(n for n in read - local if not hasattr(builtins, n))
    return tree, names


def _guard(bound: BoundKernel) -> str:
    """The wrapper's check that arguments fit the specialization: dtypes, and the shapes and
    strides (static) or size ranks and layouts (dynamic) baked into the code, and a 16-byte
    aligned pointer where the code was compiled for one (TMA descriptors need it)."""
    static = bound.kernel.static_shapes
    expected = [
        (
            s.name,
            str(s.dtype),
            list(s.shape or ()) if static else len(s.shape or ()),
            list(s.stride or ()),
            s.aligned,
        )
        for s in bound.arg_signatures
        if s.kind == "tensor"
    ]
    layout = (
        "list(value.stride())" if static else "list(dynamic_layout(value.shape, value.stride()))"
    )
    what = "strides" if static else "the layout (unit strides, dim order, int64 offsets)"
    got_layout = (
        "{list(value.stride())}" if static else f"{{{layout}}} (strides {{list(value.stride())}})"
    )
    sources = (
        ""
        if static
        else "".join(
            inspect.getsource(fn) + "\n\n" for fn in (max_offset, needs_int64, dynamic_layout)
        )
    )
    return (
        f"INT32_LIMIT = {INT32_LIMIT}\n\n\n{sources}"
        f"_EXPECTED = {expected!r}\n\n\n"
        "def _check(values):\n"
        "    for (name, dtype, shape, stride, aligned), value in zip(_EXPECTED, values):\n"
        "        got = list(value.shape) if isinstance(shape, list) else value.dim()\n"
        "        if str(value.dtype) != dtype or got != shape:\n"
        "            raise ShapeError(\n"
        "                f'{name}: exported for {dtype} {shape}, got {value.dtype} {got}'\n"
        "            )\n"
        f"        if {layout} != stride:\n"
        "            raise ShapeError(\n"
        f"                f'{{name}}: exported for {what} {{stride}}, got {got_layout} '\n"
        "                '(the code computes offsets with them): pass a tensor of that layout '\n"
        "                '(.contiguous()), or export again for this one'\n"
        "            )\n"
        "        if aligned and value.data_ptr() % 16:\n"
        "            raise ShapeError(\n"
        "                f'{name}: exported for a 16-byte aligned pointer, got one '\n"
        "                f'{value.data_ptr() % 16} bytes off: pass .clone(), or export again'\n"
        "            )\n"
    )


def _baked_check(bound: BoundKernel) -> str:
    """``_check_baked(values)``: the int and bool arguments the code has compiled in (ints
    with static shapes, bools always), None and strings must have their exported values
    (another ``k`` ran silently as the exported one; a bias passed for a None was ignored)."""
    baked = [
        (s.name, s.kind, s.value)
        for s in bound.arg_signatures
        if s.kind == "bool" or (s.kind == "int" and bound.kernel.static_shapes)
    ]
    args, kwargs = bound.example_arguments()
    values = bound.kernel.signature.bind(*args, **kwargs).arguments
    baked += [  # an optional tensor traced as None, a mode string: their paths are compiled in
        (name, type(v).__name__, v) for name, v in values.items() if v is None or isinstance(v, str)
    ]
    return (
        f"_BAKED = {baked!r}\n\n\n"
        "def _check_baked(values):\n"
        "    for name, kind, want in _BAKED:\n"
        "        value = values.get(name, want)\n"
        "        if type(value).__name__ != kind or value != want:\n"
        "            shown = f'a tensor of shape {tuple(value.shape)}' if hasattr(value, 'shape') \\\n"
        "                else repr(value)\n"
        "            raise ValueError(\n"
        "                f'{name}: exported for {want!r} (compiled in), got {shown}: export '\n"
        "                'again for this value'\n"
        "            )\n"
    )


def standalone_source(bound: BoundKernel, config: Config) -> str:
    """A module defining ``<kernel name>(*args)`` that runs without tilecraft installed."""
    plan, source, traced, kernels = bound.generate(config)
    name = bound.kernel.__name__
    tree, names = _host_tree(bound)
    scope = {**bound.kernel.fn.__globals__, **bound.kernel.source.closure_values()}
    missing = [n for n in names if n not in scope]
    if missing:
        raise ArgumentError(f"{name}(): cannot export: host code reads undefined {missing}")
    blocks = [plan.config.block_sizes[s] for s in traced.host_slot_order]
    tunables = {n: plan.config.user_values.get(n, c[0]) for n, c in traced.tunables.items()}
    launchers = {loop.index: k.launcher_name for loop, k in zip(traced.loops, kernels, strict=True)}
    tensor_params = [s.name for s in bound.arg_signatures if s.kind == "tensor"]
    bounds = {loop.index: list(loop.host_bounds) for loop in traced.loops}
    parts = [
        f'"""{name}: exported by tilecraft for {plan.config!r} (runs without tilecraft)."""\n',
        _PRELUDE,
        "\n\n" + inspect.getsource(device.capturing),
        "\n\n" + inspect.getsource(device.interpreted_quietly),
        "\n\n_SPLIT_COUNTERS = {}\n\n\n" + inspect.getsource(device.split_counters),
        _helpers(),
        source.removeprefix(HEADER),
        _SHIM,
        f"_tc = _DSL({blocks!r}, {tunables!r})\n",
        *(_global_line(name, n, scope[n]) + "\n" for n in names),
        "_LAUNCHERS = {" + ", ".join(f"{i}: {fn}" for i, fn in launchers.items()) + "}\n\n\n",
        f"_BOUNDS = {bounds!r}\n\n\n",
        f"def {LAUNCH}(index, spec, env):\n",
        "    for want, b, e in zip(_BOUNDS[index], spec.begins, spec.ends):\n",
        "        if want is not None and tuple(want) != (b, e):\n",
        "            raise ValueError(\n",
        "                f'device loop {index}: exported for the bounds {tuple(want)}, got '\n",
        "                f'{(b, e)} (host code derived them from a value that changed): export '\n",
        "                'again for these arguments'\n",
        "            )\n",
        "    _LAUNCHERS[index](env, spec)\n\n\n",
        ast.unparse(tree) + "\n\n\n",
        _guard(bound) + "\n\n",
        _baked_check(bound) + "\n\n",
        f"_PARAMS = {list(bound.kernel.signature.parameters)!r}\n\n\n",
        f"def {name}(*args, **kwargs):\n",
        "    values = dict(zip(_PARAMS, args), **kwargs)\n",
        f"    _check([values[p] for p in {tensor_params!r}])\n",
        "    _check_baked(values)\n",
        "    _tc.start()\n",
        "    return _host(*args, **kwargs)\n",
    ]
    return "".join(parts)

"""A kernel as a PyTorch op (stage: runtime; in: a :class:`Kernel` and the kinds of a call's
arguments; out: a ``torch.library`` custom op in the ``tilecraft`` namespace).

``torch.compile`` cannot trace a kernel's Python (the tracer, the specialization cache, Triton), so a
call made while compiling goes through a custom op instead: one op per pattern of argument kinds
(tensor dtype and rank, int, float, bool value...). Everything about the op is read from the kernel
itself, so users write nothing extra:

* the schema comes from the parameters and the kinds of this call's arguments;
* ``mutates_args`` and the output layout come from running the host code once on ``meta`` tensors
  (device loops are skipped; a store into a tensor that is an argument, or a view of one, is a
  mutation; an output that *is* an argument is returned by the wrapper, not by the op);
* the fake implementation runs the host code on the fake tensors ``torch.compile`` passes in;
* the real implementation is the ordinary eager call of the kernel.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import re
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import ArgumentError, TilecraftError, user_stacklevel
from tilecraft.frontend.host_aliases import host_reads
from tilecraft.frontend.source import LAUNCH, KernelSource, build_function, launch_tree
from tilecraft.frontend.values import memory_owner
from tilecraft.language import _context
from tilecraft.runtime import launch_overlaps, op_floats, op_records
from tilecraft.runtime.op_autograd import (
    autograd_adapters,
    mutating_backward_error,
    no_backward_error,
)
from tilecraft.runtime.op_kinds import (
    EXAMPLES,
    ArgKind,
    Hint,
    arg_kind,
    autocast_context,
    autocast_state,
    example_arg,
    hinted_example,
    shape_hint,
)
from tilecraft.runtime.validate import host_code_error, raised_by_user

if TYPE_CHECKING:
    from tilecraft.runtime.kernel import Kernel

NAMESPACE = "tilecraft"
_FAKE_BLOCK = 32
_taken: set[str] = set()

# an output slot: ("out", i) the op's i-th output, ("arg", i) the i-th argument, ("none",) None;
# LIST last: the kernel returns a list (as it does eagerly, not a tuple)
Slot = tuple[Any, ...]
_LIST_TAG = "list"
LIST: Slot = (_LIST_TAG,)


_SCHEMA_TYPE = {"Tensor": "Tensor", "None": "Tensor?", "bool": "bool", "int": "SymInt"}
_SCHEMA_TYPE.update({"float": "float", "str": "str"})


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """One custom op of a kernel: its qualified name and how to rebuild the kernel's result."""

    name: str
    layout: Slot | tuple[Slot, ...]  # one slot (single return) or a tuple of slots
    mutated: tuple[str, ...]
    # the float arguments the op takes as 0-d tensors (runtime/op_floats.py)
    float_tensors: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.name):
            raise ValueError(f"bad op name {self.name!r}")

    @property
    def qualname(self) -> str:
        return f"{NAMESPACE}::{self.name}"

    @property
    def multi(self) -> bool:
        """Whether the kernel returns a tuple (else one value)."""
        return _is_multi(self.layout)

    def slots(self) -> tuple[Slot, ...]:
        if not self.multi:
            return (self.layout,)  # type: ignore[return-value]
        return tuple(s for s in self.layout if s[0] != _LIST_TAG)  # type: ignore[index]

    def rebuild(self, outs: Any, args: tuple[Any, ...]) -> Any:
        return rebuild(self.layout, outs, args)


def rebuild(layout: Any, outs: Any, args: tuple[Any, ...]) -> Any:
    """The kernel's result from the op's outputs (``outs``: a tensor or tuple of tensors)."""
    flat = outs if isinstance(outs, (tuple, list)) else (outs,)
    if not _is_multi(layout):
        return _slot_value(layout, flat, args)
    # (string compares: Dynamo 2.11 raised NotImplementedError comparing the slot tuples)
    values = tuple(_slot_value(s, flat, args) for s in layout if s[0] != _LIST_TAG)
    return list(values) if layout[-1][0] == _LIST_TAG else values


def _is_multi(layout: Any) -> bool:
    return bool(layout) and isinstance(layout[0], tuple)


def _slot_value(slot: Slot, flat: Any, args: tuple[Any, ...]) -> Any:
    if slot[0] == "out":
        return flat[slot[1]]
    return args[slot[1]] if slot[0] == "arg" else None


class _FakeHost:
    """Host context for the fake implementation: only shapes matter, not the config."""

    mode = "fake"

    def __init__(self) -> None:
        self.slots = 0

    def block_size(self, lo: Any, hi: Any) -> int:
        """A plain int: with dynamic shapes host sizes are SymInts, and SymInt arithmetic
        refuses int subclasses (``m + mb - 1`` raised TypeError for a BlockSize)."""
        self.slots += 1
        return _FAKE_BLOCK

    def tunable(self, name: str, choices: tuple[Any, ...]) -> Any:
        return choices[0]

    def specialized(self, value: int) -> None:
        return None


def stored_names(src: KernelSource, atomics: bool = True) -> dict[int, set[str]]:
    """Per device loop: the host names its body stores into (``t[...] = v``, ``tc.store(t, ...)``,
    and unless ``atomics`` is False ``tc.atomic_*(t, ...)``)."""
    out: dict[int, set[str]] = {}
    for loop in src.loops:
        names: set[str] = set()
        for node in ast.walk(loop.node):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign):
                targets = [node.target]
            elif (
                isinstance(node, ast.Call)
                and _writes_first_argument(node.func, atomics)
                and node.args
            ):
                targets = [ast.Subscript(node.args[0], ast.Constant(0), ast.Store())]
            for t in targets:
                while isinstance(t, ast.Subscript):
                    t = t.value
                    if isinstance(t, ast.Name):
                        names.add(t.id)
        out[loop.index] = names
    return out


def _writes_first_argument(func: ast.expr, atomics: bool) -> bool:
    """``tc.store(t, ...)`` and ``tc.atomic_*(t, ...)`` (``torch.compile`` must know ``t``
    changes: a kernel writing only through tc.store returned zeros under compile)."""
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return (atomics and name.startswith("atomic_")) or name == "store"


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return memory_owner(a) is memory_owner(b)


class HostRunner:
    """Runs a kernel's host code with device loops skipped, recording stores into arguments."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.stores = stored_names(kernel.source)
        self._launched: list[tuple[int, dict[str, Any]]] = []
        tree = launch_tree(kernel.source, glue=False)  # fake tensors: the glue runs as written
        self.fn = build_function(kernel.source, tree, {LAUNCH: self._launch})

    def _launch(self, index: int, spec: Any, env: dict[str, Any]) -> None:
        self._launched.append((index, env))

    def run(self, args: tuple[Any, ...]) -> tuple[Any, list[tuple[int, dict[str, Any]]]]:
        self._launched = []
        with _context.host_context(_FakeHost()):
            result = self.fn(*args)
        return result, self._launched

    def mutated(
        self, args: tuple[Any, ...], launched: list[tuple[int, dict[str, Any]]]
    ) -> set[int]:
        """Indices of the arguments a device loop stores into (directly or through a view)."""
        hit: set[int] = set()
        for index, env in launched:
            for name in self.stores.get(index, ()):
                target = env.get(name)
                if not isinstance(target, torch.Tensor):
                    continue
                for i, a in enumerate(args):
                    if isinstance(a, torch.Tensor) and _same_memory(target, a):
                        hit.add(i)
        return hit


Run = tuple[tuple[Any, ...], Any, list[tuple[int, dict[str, Any]]]]


def run_examples(
    runner: HostRunner, kinds: tuple[ArgKind, ...], hint: Hint | None = None
) -> list[Run]:
    """The host code run on stand-ins of ``kinds`` (the first call's sizes when ``hint`` has
    them, then each of :data:`EXAMPLES`: it may divide by ``1 - p`` or view sizes in threes),
    with what it returned and launched: every run that worked, the first first (none: the last
    one's error is raised). Host code may branch on a number (``if t == 1.0: return x``): the
    op must serve each path, not only the first stand-in's."""
    examples = [tuple(example_arg(k, extent, value) for k in kinds) for extent, value in EXAMPLES]
    if hint is not None and len(hint) == len(kinds):
        examples.insert(0, hinted_example(kinds, hint))
    runs: list[Run] = []
    for example in examples[:-1]:
        try:
            runs.append((example, *runner.run(example)))
        except Exception:  # noqa: BLE001  (the next stand-ins; the last one's error is raised)
            continue
    try:
        runs.append((examples[-1], *runner.run(examples[-1])))
    except Exception:
        if not runs:
            raise
    return runs


def merged_layout(
    kernel: Kernel, runner: HostRunner, runs: list[Run]
) -> tuple[Slot | tuple[Slot, ...], int, set[int]]:
    """The op's output layout and mutated arguments over the stand-in runs: the first run's
    layout, with a slot where it returned an argument a new output where another run made one
    (``_op_outputs`` copies an argument returned there), and the arguments any run wrote."""
    example, result, launched = runs[0]
    layout, _ = output_layout(kernel, result, example)
    multi = _is_multi(layout)
    slots = list(layout) if multi else [layout]
    mutated = set(runner.mutated(example, launched))
    for other, other_result, other_launched in runs[1:]:
        mutated |= runner.mutated(other, other_launched)
        try:
            found = output_layout(kernel, other_result, other)[0]
        except ArgumentError:  # (a view of an argument there: the calls that take it say so)
            continue
        others = list(found) if _is_multi(found) else [found]
        if _is_multi(found) == multi and len(others) == len(slots):
            pairs = zip(slots, others, strict=True)
            slots = [b if a[0] == "arg" and b[0] == "out" else a for a, b in pairs]
    numbered: list[Slot] = []
    n_out = 0
    for slot in slots:
        numbered.append(("out", n_out) if slot[0] == "out" else slot)
        n_out += slot[0] == "out"
    return (tuple(numbered) if multi else numbered[0]), n_out, mutated


def output_layout(
    kernel: Kernel, result: Any, args: tuple[Any, ...]
) -> tuple[Slot | tuple[Slot, ...], int]:
    """Where each returned value goes: a new op output, an argument returned as is, or None."""
    multi = isinstance(result, (tuple, list))
    items = tuple(result) if multi else (result,)
    slots: list[Slot] = []
    n_out = 0
    for k, item in enumerate(items):
        if item is None:
            slots.append(("none",))
            continue
        if not isinstance(item, torch.Tensor):
            raise ArgumentError(
                f"{kernel.__name__}(): return value {k} is a {type(item).__name__}; a kernel "
                "used as a PyTorch op (torch.compile, autograd) may return only tensors and None",
                kernel.def_loc,
            )
        same = [i for i, a in enumerate(args) if a is item]
        if same:
            slots.append(("arg", same[0]))
            continue
        if any(isinstance(a, torch.Tensor) and _same_memory(item, a) for a in args):
            raise ArgumentError(
                f"{kernel.__name__}(): return value {k} is a view of an argument; a PyTorch op "
                "cannot return one",
                kernel.def_loc,
                hint="return the argument itself, or a new tensor",
            )
        earlier = [j for j, other in enumerate(items[:k]) if _shares_memory(item, other)]
        if earlier:
            raise ArgumentError(
                f"{kernel.__name__}(): return values {earlier[0]} and {k} share memory (one "
                "tensor, or views of one); a PyTorch op's outputs must not (torch.compile and "
                "autograd run the kernel as one)",
                kernel.def_loc,
                hint="return the tensor once and make the view outside the kernel, or return "
                "a .clone()",
            )
        slots.append(("out", n_out))
        n_out += 1
    if isinstance(result, list):
        slots.append(LIST)
    return (tuple(slots) if multi else slots[0]), n_out


def _shares_memory(a: Any, b: Any) -> bool:
    return isinstance(b, torch.Tensor) and _same_memory(a, b)


def check_kinds(kernel: Kernel, kinds: tuple[ArgKind, ...]) -> None:
    """Every argument of an op call is of a kind a schema has (before the host code runs on
    stand-ins: a tuple's stand-in, None, failed in the user's ``factors[0]``)."""
    for name, kind in zip(kernel.signature.parameters, kinds, strict=True):
        if kind[0] not in _SCHEMA_TYPE:
            raise ArgumentError(
                f"{kernel.__name__}(): argument '{name}' is a {kind[1]}; a kernel used as a "
                "PyTorch op (with autograd or under torch.compile) takes tensors, ints, floats, "
                "bools, strings and None",
                kernel.def_loc,
                hint=f"pass the {kind[1]}'s items as separate arguments, or as one tensor",
            )


def schema(
    kernel: Kernel,
    kinds: tuple[ArgKind, ...],
    mutated: set[int],
    n_out: int,
    float_tensors: tuple[int, ...] = (),
) -> str:
    check_kinds(kernel, kinds)
    params = list(kernel.signature.parameters)
    parts = []
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    for i, (name, kind) in enumerate(zip(params, kinds, strict=True)):
        typ = "Tensor" if i in float_tensors else _SCHEMA_TYPE[kind[0]]
        if i in mutated:
            typ = f"Tensor({next(letters)}!)"
        parts.append(f"{typ} {schema_name(name)}")
    returns = "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"
    return f"({', '.join(parts)}) -> {returns}"


# names torch's wrappers of an op pass arguments beside (auto_functionalized's HOP takes the op's
# arguments as keywords next to its own `mode`; `self` and `out` mean a method and an out= variant
# in a schema): a kernel parameter of that name is renamed in the schema
_RESERVED = frozenset({"mode", "self", "out", "_mutable_op", "_all_bases", "name"})


def schema_name(param: str) -> str:
    """A kernel parameter's name in its op's schema (a kernel with a parameter called ``mode``
    that writes an argument failed under torch.compile: 'got multiple values for argument
    mode')."""
    return f"{param}_arg" if param in _RESERVED else param


def op_base_name(kernel: Kernel, signature: str = "") -> str:
    """The op's name: the kernel's, a digest of where it is defined, its source and the op's
    ``signature`` (schema): a kernel edited to store into another argument, or a schema
    tilecraft now infers otherwise, is a new op, so torch.compile's on-disk graph cache cannot
    return a graph built for the old one (it dropped the writes of a kernel whose stores were
    not yet recorded as mutations)."""
    fn = kernel.fn
    key = f"{fn.__module__}.{fn.__qualname__}\n{kernel.source.text}\n{signature}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return re.sub(r"\W", "_", fn.__name__) + "_" + digest


def create_op(
    kernel: Kernel,
    kinds: tuple[ArgKind, ...],
    hint: Hint | None = None,
    amp: str = "",
    float_tensors: bool = False,
) -> tuple[OpInfo, Any]:
    """Define the custom op for calls with arguments of ``kinds`` (real and fake impls);
    ``hint``: the first call's sizes (:func:`shape_hint`); ``amp``: the autocast both impls
    run the host code under (:func:`autocast_state`); ``float_tensors``: whether floats that
    host code never reads travel as tensors (:mod:`~tilecraft.runtime.op_floats`)."""
    check_kinds(kernel, kinds)
    runner = kernel.host_runner()
    runs = run_examples(runner, kinds, hint)
    example = runs[0][0]
    layout, n_out, mutated = merged_layout(kernel, runner, runs)
    params = list(kernel.signature.parameters)
    floats: tuple[int, ...] = ()
    if float_tensors:  # (a walk of the host code: only for ops that may take them)
        source = kernel.source
        host_names = host_reads(source.tree, [loop.node for loop in source.loops])
        floats = op_floats.device_only_floats(kinds, params, host_names)
    op_schema = schema(kernel, kinds, mutated, n_out, floats)
    base, n = op_base_name(kernel, op_schema + amp), 0
    while f"{base}_{n}" in _taken:
        n += 1
    info = OpInfo(f"{base}_{n}", layout, tuple(params[i] for i in sorted(mutated)), floats)
    _taken.add(info.name)

    def real(*args: Any) -> Any:
        with autocast_context(amp):
            result = kernel.call_eager(op_floats.to_floats(args, floats), {})
        return _op_outputs(info, result, n_out, args)

    def fake(*args: Any) -> Any:
        try:
            with autocast_context(amp):
                result = runner.run(op_floats.stand_ins(args, floats, example))[0]
        except TilecraftError:
            raise
        except Exception as exc:  # the user's host code on these (fake) arguments, as eager says
            where = kernel.source.filename
            if raised_by_user(exc, where):
                raise
            arguments = dict(zip(params, args, strict=True))
            raise host_code_error(kernel.__name__, exc, where, arguments, kernel.def_loc) from exc
        return _op_outputs(info, result, n_out, args)

    op = torch.library.custom_op(
        info.qualname,
        real,
        mutates_args=tuple(schema_name(name) for name in info.mutated),
        schema=op_schema,
    )
    op.register_fake(fake)
    return info, op


def _op_outputs(info: OpInfo, result: Any, n_out: int, args: tuple[Any, ...]) -> Any:
    """The op's new tensors from the kernel's result. A slot the layout (read on stand-ins)
    says is new may hold an argument, or a view of one, for other values (dropout's ``if p ==
    0.0: return x``): torch forbids an op's output to alias its input, so that one is copied."""
    items = tuple(result) if _is_multi(info.layout) else (result,)
    owners = [memory_owner(a) for a in args if isinstance(a, torch.Tensor)]
    outs = [
        item.clone() if _aliases(item, owners) else item
        for item, slot in zip(items, info.slots(), strict=True)
        if slot[0] == "out"
    ]
    if len(outs) != n_out:
        raise ArgumentError(f"op {info.qualname}: expected {n_out} new tensors, got {len(outs)}")
    if n_out == 0:
        return None
    return outs[0] if n_out == 1 else tuple(outs)


def _aliases(item: Any, owners: list[torch.Tensor]) -> bool:
    return isinstance(item, torch.Tensor) and any(memory_owner(item) is o for o in owners)


class KernelOps:
    """The custom ops of one kernel (one per pattern of argument kinds) and its backward."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.ops: dict[tuple[tuple[ArgKind, ...], str, bool], tuple[OpInfo, Any]] = {}
        self.backward: Callable[..., Any] | None = None
        self.setup_context: Callable[..., Any] | None = None
        # a str: an int attribute of a graph input becomes a dynamic int under
        # torch.compile(dynamic=True), which op_for's constant folding cannot take
        self.id = f"ops{len(_registry)}"
        _registry[self.id] = self

    def get(
        self,
        kinds: tuple[ArgKind, ...],
        hint: Hint | None = None,
        amp: str = "",
        tensor_floats: bool = False,
    ) -> tuple[OpInfo, Any]:
        """The op for calls of ``kinds`` under autocast ``amp`` (defined on first use);
        ``tensor_floats``: one that takes floats host code never reads as tensors
        (``runtime/op_floats.py``), for calls autograd need not see: it has no backward, whose
        user code reads floats as numbers."""
        found = self.ops.get((kinds, amp, tensor_floats))
        if found is None:
            found = create_op(self.kernel, kinds, hint, amp, float_tensors=tensor_floats)
            self.ops[kinds, amp, tensor_floats] = found
            op_records.record(op_base_name(self.kernel), kinds, amp)
            self._register_autograd(*found)
        return found

    def register_backward(
        self, backward: Callable[..., Any], setup_context: Callable[..., Any] | None
    ) -> None:
        self.backward, self.setup_context = backward, setup_context
        for info, op in self.ops.values():
            self._register_autograd(info, op)
        refused = [key for key in RAISERS if key[0] == self.id]
        if refused:
            # torch.compile kept code that raises "no backward" for this kernel (its guards
            # cannot see a registration): only a reset makes the next call trace again
            for key in refused:
                del RAISERS[key]
            torch.compiler.reset()
            warnings.warn(
                f"tilecraft: {self.kernel.__name__}: a backward registered after torch.compile "
                "traced a call that needed one; torch.compiler.reset() was called so compiled "
                "functions trace again (register backwards before compiling to avoid this)",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )

    def autograd_error(
        self, kinds: tuple[ArgKind, ...], values: tuple[Any, ...] | None = None
    ) -> ArgumentError | None:
        """Why a call of ``kinds`` whose inputs require grad gets no gradients (None: it does);
        ``values``: the call's, whose sizes define the op where the stand-ins fail (host code
        viewing an argument by its own dims: ``grid.view(n, ho * wo, 2)``), as under
        torch.compile (:func:`op_for_sizes`)."""
        try:
            info = self._op_info(kinds, values)
        except Exception:
            if self.backward is None:  # no op to build (a list argument): no backward either
                return no_backward_error(self.kernel, values)
            raise
        # a kernel that writes into an argument never takes a backward: say so first (the
        # no-backward hint, register_backward, could not help it)
        if info.mutated:
            return mutating_backward_error(self.kernel, info.mutated, values)
        return no_backward_error(self.kernel, values) if self.backward is None else None

    def _op_info(self, kinds: tuple[ArgKind, ...], values: tuple[Any, ...] | None) -> OpInfo:
        try:
            return self.get(kinds)[0]
        except Exception:
            if values is None:
                raise
        return self.get_sized(kinds, shape_hint(values))[0]

    def get_sized(
        self, kinds: tuple[ArgKind, ...], hint: Hint, amp: str = "", tensor_floats: bool = False
    ) -> tuple[OpInfo, Any]:
        """:meth:`get` with the layout read on a call's own sizes: where the host code fails
        on them too, the error a plain call gives (the user's line and the arguments)."""
        try:
            return self.get(kinds, hint, amp, tensor_floats)
        except TilecraftError:
            raise
        except Exception as exc:
            kernel = self.kernel
            where = kernel.source.filename
            if raised_by_user(exc, where):
                raise
            example = hinted_example(kinds, hint)
            arguments = dict(zip(kernel.signature.parameters, example, strict=True))
            raise host_code_error(kernel.__name__, exc, where, arguments, kernel.def_loc) from exc

    def _register_autograd(self, info: OpInfo, op: Any) -> None:
        """The user's backward on ``op``, where it has one and the op can take it: not on an
        op that mutates (torch refuses; ``autograd_error`` says) nor one taking floats as
        tensors (calls needing gradients use the kernel's op with floats)."""
        if self.backward is None or info.mutated or info.float_tensors:
            return
        setup, bwd = autograd_adapters(self.kernel, info, self.backward, self.setup_context)
        op.register_autograd(bwd, setup_context=setup)
        _define_recorded(info.name)

    def call(self, values: tuple[Any, ...]) -> Any:
        """Run the kernel through its op (eager calls that need autograd)."""
        kinds, amp = tuple(arg_kind(v) for v in values), autocast_state(values)
        hint = None if (kinds, amp, False) in self.ops else shape_hint(values)  # (a new op's)
        info, op = self.get(kinds, hint, amp)  # (floats as floats: eager calls do not recompile)
        with launch_overlaps.gradients_wanted():
            return info.rebuild(op(*values), values)


def _define_recorded(forward_op: str) -> None:
    """Define the ops ``forward_op``'s backward defined in earlier processes
    (``runtime/op_records.py``): a compiled backward from torch.compile's disk cache calls them."""
    for key, kinds, amp in op_records.recorded(forward_op):
        for ops in list(_registry.values()):
            if op_base_name(ops.kernel) == key and (kinds, amp, False) not in ops.ops:
                # a record this kernel no longer fits: nothing to define (traced again if needed)
                with contextlib.suppress(Exception):
                    ops.get(kinds, None, amp)


_registry: dict[str, KernelOps] = {}
# per (KernelOps.id, argument kinds): raises the call's autograd error, skipped by torch.compile
# (runtime/compiled_calls.py makes them; a backward registered later drops them)
RAISERS: dict[tuple[str, tuple[ArgKind, ...]], Callable[[], None]] = {}


def ops_of(ops_id: str) -> KernelOps:
    """The registered ops of one kernel, by ``KernelOps.id``."""
    return _registry[ops_id]

"""A kernel call as torch.compile traces it (stage: runtime; in: a call's values while Dynamo
traces; out: one custom op in the graph, or tilecraft's own error through a raiser Dynamo
skips).

Defining an op cannot itself be traced: :func:`op_for` runs as a constant. Errors raised in
traced code reached the user as "Observed exception" or InternalTorchDynamoError; the raisers
here are ``torch.compiler.disable``d functions, whose reason (fullgraph) or error (after a
graph break) is ours. Also the tests of whether a call must go through the op at all (a
tracer's tensors, a vmap wrapper's, inputs that need gradients).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tilecraft.errors import TilecraftError
from tilecraft.runtime import op_floats
from tilecraft.runtime.op_autograd import requires_grad
from tilecraft.runtime.op_kinds import ArgKind, Hint, arg_kind, autocast_state, shape_hint
from tilecraft.runtime.torch_op import NAMESPACE, RAISERS, KernelOps, ops_of, rebuild


def mark_constant(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compiler.assume_constant_result(fn)`` without importing ``torch._dynamo`` when it
    is not loaded yet (5 s; every autotuner worker imports the kernels): the decorator only sets
    this attribute, which ``tests/test_torch_op.py`` checks against the real decorator."""
    if "torch._dynamo" in sys.modules:
        return torch.compiler.assume_constant_result(fn)
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn


OpFound = tuple[str, Any, tuple[int, ...]]  # name, output layout, floats passed as tensors
_NO_OP: OpFound = ("", None, ())


@mark_constant
def dynamic_floats() -> bool:
    """Whether Dynamo may make a float argument an input of this graph: under
    ``torch.compile(dynamic=True)``, or when it compiles a frame again (a float that changed is
    then dynamic). Such floats reach the op without a recompile only as tensors
    (``runtime/op_floats.py``). A first static compile keeps floats constants, as torch does: a
    CPU scalar tensor in the graph made inductor skip CUDA graphs. (Dynamo's compile id and
    config have no public accessors; without them, floats stay constants.)"""
    try:
        import torch._dynamo
        from torch._guards import CompileContext

        if not torch._dynamo.config.assume_static_by_default:  # dynamic=True
            return True
        compile_id = CompileContext.current_compile_id()
    except (ImportError, AttributeError, RuntimeError):
        return False
    return bool(compile_id is not None and getattr(compile_id, "frame_compile_id", 0))


@mark_constant
def op_for(ops_id: str, kinds: tuple[ArgKind, ...], amp: str, tensor_floats: bool) -> OpFound:
    """The op's name, output layout and float arguments it takes as tensors; ``torch.compile``
    runs this while tracing and keeps the result as a constant (defining an op cannot itself
    be traced). ``("", None, ())`` where the host code fails on every stand-in:
    :func:`op_for_sizes` defines it from the call's sizes."""
    try:
        info, _ = ops_of(ops_id).get(kinds, None, amp, tensor_floats)
    except Exception:  # noqa: BLE001  (op_for_sizes raises it again, with the call's sizes)
        return _NO_OP
    return info.name, info.layout, info.float_tensors


@mark_constant
def op_for_sizes(
    ops_id: str, kinds: tuple[ArgKind, ...], hint: Hint, amp: str, tensor_floats: bool
) -> OpFound:
    """:func:`op_for` with the op's layout read on the call's own sizes (``hint``); ``("",
    None)`` where the kernel cannot be an op (outputs that share memory, a list argument),
    with ``OP_RAISERS[(ops_id, kinds)]`` made to raise why: raised here, in code torch.compile
    runs as a constant, the error reached the user as an InternalTorchDynamoError, which
    ``except tc.TilecraftError`` missed."""
    try:
        info, _ = ops_of(ops_id).get_sized(kinds, hint, amp, tensor_floats)
    except TilecraftError as error:
        raiser = functools.partial(_raise, error)
        OP_RAISERS[(ops_id, kinds)] = torch.compiler.disable(raiser, reason=str(error))
        return _NO_OP
    return info.name, info.layout, info.float_tensors


# per (KernelOps.id, argument kinds): raises why the call cannot be an op, skipped by torch.compile
OP_RAISERS: dict[tuple[str, tuple[ArgKind, ...]], Callable[[], None]] = {}


def compiled_call(ops: KernelOps, values: tuple[Any, ...], grad: bool) -> Any:
    """The kernel call as ``torch.compile`` traces it: one custom op in the graph. ``grad``:
    autograd must see it (the op with the user's backward, which reads floats as numbers;
    other calls, no_grad ones included, may take floats as tensors)."""
    kinds, amp = tuple(arg_kind(v) for v in values), autocast_state(values)
    tensor_floats = not grad and any(k[0] == "float" for k in kinds) and dynamic_floats()
    name, layout, floats = op_for(ops.id, kinds, amp, tensor_floats)
    if not name:  # the host code needs the sizes' relations: specialize on this call's
        name, layout, floats = op_for_sizes(ops.id, kinds, shape_hint(values), amp, tensor_floats)
    if not name:
        OP_RAISERS[(ops.id, kinds)]()
    op = getattr(getattr(torch.ops, NAMESPACE), name).default
    outs = op(*op_floats.to_tensors(values, floats))
    return rebuild(layout, outs, values)


_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def plain_numbers(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """NumPy scalars as Python numbers: Dynamo traces a ``numpy.float64`` argument as an array,
    which an op's schema has no type for ("argument 's' is a ndarray"; with fullgraph,
    Dynamo refused the container checks' hasattr on it)."""
    return tuple(
        v.item() if isinstance(v, (np.generic, np.ndarray)) and not np.ndim(v) else v
        for v in values
    )


def traced(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a tracer is running the call with tensors that have no memory: AOT autograd traces
    a backward function with functional/fake tensor subclasses while ``is_compiling()`` is already
    False again (inductor's joint graph). The kernel must then appear as its op, never launch."""
    values = (*args, *kwargs.values()) if kwargs else args
    return any(
        isinstance(v, torch.Tensor) and type(v) not in _PLAIN_TENSORS and _dispatches(type(v))
        for v in values
    )


def _dispatches(kind: type) -> bool:
    """A tensor subclass that intercepts torch's dispatch (fake, functional tensors); a plain
    Python subclass (a library's tagged tensor) holds memory and runs as a tensor."""
    return getattr(kind, "__torch_dispatch__", None) is not torch.Tensor.__torch_dispatch__


def storage_less(values: tuple[Any, ...]) -> bool:
    """Whether a tensor argument has no memory of its own: a functorch transform's wrapper
    (``torch.vmap``'s BatchedTensor, ``jvp``'s TensorWrapper; Triton's launcher failed on them).
    Such a call runs as the kernel's op, which the transforms know how to run."""
    for v in values:
        if isinstance(v, torch.Tensor):
            try:
                v.data_ptr()
            except (RuntimeError, NotImplementedError):
                return True
    return False


def needs_grad(values: tuple[Any, ...]) -> bool:
    """Whether autograd must see this call: a tensor argument (or one in a list or tuple
    argument) requires grad."""
    return torch.is_grad_enabled() and any(requires_grad(v) for v in values)


def check_autograd(ops: KernelOps, values: tuple[Any, ...], compiling: bool) -> None:
    """A call whose inputs require grad: raise if the kernel cannot give their gradients."""
    kinds = tuple(arg_kind(v) for v in values)
    if not compiling:
        error = ops.autograd_error(kinds, values)
        if error is not None:
            raise error
    elif autograd_problem(ops.id, kinds):
        RAISERS[(ops.id, kinds)]()


@mark_constant
def autograd_problem(ops_id: str, kinds: tuple[ArgKind, ...]) -> str:
    """Under torch.compile: why a call that needs gradients cannot have them ("" if it can),
    with ``RAISERS[(ops_id, kinds)]`` made to raise it. Building the error reads the kernel's
    source (linecache), which torch.compile cannot trace, and an error raised in traced code
    reaches the user as "Observed exception": this runs outside the trace (a constant, like
    :func:`op_for`) and makes a raiser torch.compile skips, whose reason (fullgraph) or error
    (after a graph break) is ours."""
    error = ops_of(ops_id).autograd_error(kinds)
    if error is None:
        return ""
    # made again each trace: a backward registered since changes the reason
    raiser = functools.partial(_raise, error)
    RAISERS[(ops_id, kinds)] = torch.compiler.disable(raiser, reason=str(error))
    return str(error)


def _raise(error: Exception) -> None:
    raise error

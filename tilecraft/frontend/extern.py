"""``tc.triton_call`` in device code (stage: frontend; in: the user's ``@triton.jit`` function,
tile arguments and the declared result; out: an ``EXTERN`` node).

The call's result is what the user declares (``out_shape`` of tiles / ints, ``out_dtype``): the
function's body is Triton, which tilecraft does not trace. Codegen puts the function's source in
the generated module (:mod:`tilecraft.codegen.extern`) and calls it by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError
from tilecraft.ir.nodes import Dim, Op, Sym

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue


def is_jit(fn: Any) -> bool:
    """A ``@triton.jit`` function (under ``TRITON_INTERPRET=1`` Triton makes those
    ``InterpretedFunction`` objects, which hold the Python function the same way)."""
    from triton.runtime.jit import KernelInterface

    return isinstance(fn, KernelInterface) and callable(getattr(fn, "fn", None))


def triton_call(
    t: Tracer,
    fn: Any,
    *args: Any,
    out_shape: Sequence[Any],
    out_dtype: torch.dtype,
    ref: Callable[..., Any] | None = None,
) -> TileValue:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    if not is_jit(fn):
        raise DeviceCodeError(
            f"tc.triton_call({name}): expected a @triton.jit function, got a {type(fn).__name__}",
            t.loc,
            hint="decorate the function with @triton.jit (plain Python functions run as traced "
            "device code: call them directly)",
        )
    if not isinstance(out_dtype, torch.dtype):
        raise DeviceCodeError(
            f"tc.triton_call({name}): out_dtype= must be a torch.dtype, got {out_dtype!r}", t.loc
        )
    dims = out_shape if isinstance(out_shape, (list, tuple)) else [out_shape]
    used: list[Sym] = []
    shape: list[Dim] = []
    for d in dims:
        dim = t.size_dim(d, used)
        if isinstance(dim, Sym):
            used.append(dim)
        shape.append(dim)
    inputs = [t.value_node(a) for a in args]
    node = t.emit(Op.EXTERN, inputs, tuple(shape), out_dtype, fn=fn)
    node.hint = name.strip("_") or "ext"
    return t.wrap(node)

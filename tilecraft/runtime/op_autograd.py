"""A kernel's op and autograd (stage: runtime; in: a kernel, its op's layout and the user's
backward; out: ``torch.library`` autograd hooks, and the errors for calls autograd cannot take).
Used by :mod:`tilecraft.runtime.torch_op`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import ArgumentError
from tilecraft.runtime import op_records

if TYPE_CHECKING:
    from tilecraft.runtime.kernel import Kernel
    from tilecraft.runtime.torch_op import OpInfo


def autograd_adapters(
    kernel: Kernel,
    info: OpInfo,
    backward: Callable[..., Any],
    setup_context: Callable[..., Any] | None,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``torch.library`` autograd hooks that show the user the kernel's own result layout."""

    def setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        result = info.rebuild(output, tuple(inputs))
        if setup_context is not None:
            setup_context(ctx, tuple(inputs), result)
            return
        values = [*inputs, *(result if info.multi else (result,))]
        ctx.save_for_backward(*[v for v in values if isinstance(v, torch.Tensor)])

    def bwd(ctx: Any, *grads: Any) -> Any:
        slots = info.slots()
        per_output = tuple(grads[s[1]] if s[0] == "out" else None for s in slots)
        with op_records.backward_of(info.name):  # the ops it defines, for a later process
            got = backward(ctx, *per_output)
        grads = tuple(got) if isinstance(got, (tuple, list)) else (got,)
        if len(grads) != len(params):
            raise ArgumentError(
                f"{kernel.__name__}(): its backward returned {len(grads)} gradient(s) for "
                f"{len(params)} parameters ({', '.join(params)})",
                kernel.def_loc,
                hint="return one gradient per parameter, in order, None for those without one "
                "(ints, floats, tensors that need no gradient)",
            )
        return grads

    params = list(kernel.signature.parameters)

    return setup, bwd


def mutating_backward_error(kernel: Kernel, mutated: tuple[str, ...]) -> ArgumentError:
    names = ", ".join(f"'{m}'" for m in mutated)
    return ArgumentError(
        f"{kernel.__name__}(): an input requires grad, but this kernel writes into its argument "
        f"{names}, and autograd takes only kernels that return new tensors",
        kernel.def_loc,
        hint=f"write the result into a new tensor (torch.empty_like) and return it, then "
        f"register the backward for that; or call {kernel.__name__} under torch.no_grad()",
    )


def no_backward_error(kernel: Kernel) -> ArgumentError:
    return ArgumentError(
        f"{kernel.__name__}(): an input requires grad, but this kernel has no backward",
        kernel.def_loc,
        hint=f"pair it with a backward: {kernel.__name__}.register_backward(backward, "
        "setup_context=...) (see docs/models.md), or call it under torch.no_grad()",
    )

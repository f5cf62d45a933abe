"""A kernel's op and autograd (stage: runtime; in: a kernel, its op's layout and the user's
backward; out: ``torch.library`` autograd hooks, and the errors for calls autograd cannot take).
Used by :mod:`tilecraft.runtime.torch_op`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tilecraft import containers
from tilecraft.errors import ArgumentError
from tilecraft.runtime import op_records

if TYPE_CHECKING:
    from tilecraft.runtime.kernel import Kernel
    from tilecraft.runtime.torch_op import OpInfo


_TENSOR_PARAMS = "_tilecraft_tensor_params"  # set on the autograd ctx by setup


def _plain(value: Any) -> bool:
    """A value no gradient flows to: a number, a string, None (not a tensor or list of them)."""
    return not isinstance(value, (torch.Tensor, list, tuple))


def autograd_adapters(
    kernel: Kernel,
    info: OpInfo,
    backward: Callable[..., Any],
    setup_context: Callable[..., Any] | None,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``torch.library`` autograd hooks that show the user the kernel's own result layout."""

    def setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        # which parameters were tensors (or lists of them): only those take a gradient
        setattr(ctx, _TENSOR_PARAMS, tuple(not _plain(v) for v in inputs))
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
        _check_gradient_count(grads)
        tensors = getattr(ctx, _TENSOR_PARAMS, None)
        for param, grad, is_tensor in zip(params, grads, tensors or (), strict=False):
            if grad is not None and not is_tensor:
                raise ArgumentError(
                    f"{kernel.__name__}(): its backward returned a {type(grad).__name__} as the "
                    f"gradient of '{param}', which this call passed as a non-tensor",
                    kernel.def_loc,
                    hint=f"return None for '{param}' (only tensor arguments take gradients)",
                )
        return grads

    def _check_gradient_count(grads: tuple[Any, ...]) -> None:
        if len(grads) != len(params):
            raise ArgumentError(
                f"{kernel.__name__}(): its backward returned {len(grads)} gradient(s) for "
                f"{len(params)} parameters ({', '.join(params)})",
                kernel.def_loc,
                hint="return one gradient per parameter, in order, None for those without one "
                "(ints, floats, tensors that need no gradient)",
            )

    params = list(kernel.signature.parameters)

    return setup, bwd


def needing_grad(kernel: Kernel, values: tuple[Any, ...] | None) -> str:
    """Which of a call's arguments require grad, as the errors name them ("an input" where
    the values are not known: under torch.compile the check sees only their kinds)."""
    if values is None:
        return "an input requires"
    params = list(kernel.signature.parameters)
    names = [f"'{p}'" for p, v in zip(params, values, strict=False) if requires_grad(v)]
    if not names:
        return "an input requires"
    return (
        f"argument {names[0]} requires"
        if len(names) == 1
        else f"arguments {', '.join(names)} require"
    )


def requires_grad(value: Any) -> bool:
    """Whether a tensor argument (or one in a list, tuple, dict or record argument) requires
    grad (a dict's parameter was written, or read without a gradient, silently)."""
    if isinstance(value, torch.Tensor):
        return value.requires_grad
    return any(requires_grad(v) for v in containers.items(value))


def mutating_backward_error(
    kernel: Kernel, mutated: tuple[str, ...], values: tuple[Any, ...] | None = None
) -> ArgumentError:
    names = ", ".join(f"'{m}'" for m in mutated)
    return ArgumentError(
        f"{kernel.__name__}(): {needing_grad(kernel, values)} grad, but this kernel writes into "
        f"its argument {names}, and autograd takes only kernels that return new tensors",
        kernel.def_loc,
        hint=f"write the result into a new tensor (torch.empty_like) and return it, then "
        f"register the backward for that; or call {kernel.__name__} under torch.no_grad()",
    )


def no_backward_error(kernel: Kernel, values: tuple[Any, ...] | None = None) -> ArgumentError:
    return ArgumentError(
        f"{kernel.__name__}(): {needing_grad(kernel, values)} grad, but this kernel has no "
        "backward",
        kernel.def_loc,
        hint=f"pair it with a backward: {kernel.__name__}.register_backward(backward, "
        "setup_context=...) (see docs/models.md), or call it under torch.no_grad()",
    )

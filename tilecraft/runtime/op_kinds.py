"""What a kernel's PyTorch op is keyed and defined by (stage: runtime; in: a call's argument
values; out: their kinds, the sizes a layout may need, meta stand-ins, the autocast state).

``runtime/torch_op.py`` defines one op per pattern of argument kinds and autocast state, and reads
its output layout by running the host code on stand-ins of those kinds (or on the call's own sizes
where no stand-in fits).
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any

import torch

ArgKind = tuple[Any, ...]
EXAMPLE_EXTENT = 16  # every dim of the meta tensors the output layout is read from


def arg_kind(value: Any) -> ArgKind:
    """What the op's schema depends on (constant under ``torch.compile``: no sizes)."""
    if isinstance(value, torch.Tensor):
        return ("Tensor", str(value.dtype), value.dim(), value.device.type)
    if value is None:
        return ("None",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int",)
    if isinstance(value, float):
        return ("float",)
    if isinstance(value, str):
        return ("str", value)
    return ("other", type(value).__name__)


# stand-in sizes and float values to try, in order, until the host code runs on them: a dropout's
# ``1 / (1 - p)`` fails at p = 1.0, ``pts.view(n, c // 3, 3)`` at sizes of 16
EXAMPLES = ((EXAMPLE_EXTENT, 1.0), (48, 0.5), (240, 0.25), (720, 2.0))


def example_arg(
    kind: ArgKind, extent: int = EXAMPLE_EXTENT, value: float = 1.0, shape: Any = None
) -> Any:
    """A meta stand-in for an argument of this kind (the layout does not depend on sizes); a
    tensor's ``shape`` when given, else ``extent`` along every dim."""
    tag = kind[0]
    if tag == "Tensor":
        dtype = getattr(torch, kind[1].removeprefix("torch."))
        return torch.zeros(shape or [extent] * kind[2], dtype=dtype, device="meta")
    if tag in ("bool", "str"):
        return kind[1]
    return {"None": None, "int": extent, "float": value}.get(tag)


Hint = tuple[Any, ...]  # per argument: a tensor's concrete shape, a number's value, or None


def shape_hint(values: tuple[Any, ...]) -> Hint:
    """The call's sizes and numbers (under torch.compile this specializes on them: used only
    where the stand-ins failed). Host code may need its sizes' relations (``w.view(3, h, i)``
    of a [3 H, I] weight beside an [B, H] state; ``x.view(m, k // 128, 128)``), which no one
    extent satisfies."""
    # operator.index, not int(): under torch.compile with dynamic sizes (dynamic=True, or
    # sizes a recompile made dynamic) int() of a size stays symbolic, which op_for_sizes (a
    # constant to the tracer) cannot take; operator.index specializes on the size
    hint: list[Any] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            hint.append(tuple(operator.index(d) for d in v.shape))
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            hint.append(None)
        else:
            hint.append(float(v) if isinstance(v, float) else operator.index(v))
    return tuple(hint)


def hinted_example(kinds: tuple[ArgKind, ...], hint: Hint) -> tuple[Any, ...]:
    example = []
    for kind, h in zip(kinds, hint, strict=True):
        if kind[0] in ("int", "float") and h is not None:
            example.append(h)
        else:
            example.append(example_arg(kind, shape=h if isinstance(h, tuple) else None))
    return tuple(example)


_AUTOCAST_DEVICES = ("cuda", "cpu", "xpu")


def autocast_state(values: tuple[Any, ...]) -> str:
    """The autocast a call runs under, as ``"cuda:torch.bfloat16"`` ("" for none). A compiled
    graph runs its ops with autocast off (its casts are explicit nodes), so the op carries it:
    a matmul in the host code returned fp32 under torch.compile where eager returned bf16.
    Dynamo traces these reads (and guards on the autocast state)."""
    for v in values:
        if isinstance(v, torch.Tensor):
            device = v.device.type
            if device in _AUTOCAST_DEVICES and torch.is_autocast_enabled(device):
                return f"{device}:{torch.get_autocast_dtype(device)}"
    return ""


def autocast_context(amp: str) -> contextlib.AbstractContextManager[Any]:
    """The context an :func:`autocast_state` names (a null one for "")."""
    if not amp:
        return contextlib.nullcontext()
    device, dtype = amp.split(":")
    return torch.autocast(device, dtype=getattr(torch, dtype.removeprefix("torch.")))

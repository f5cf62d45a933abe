"""Loss functions of tiles (stage: frontend; in: ``F.cross_entropy`` / ``F.nll_loss`` calls on
traced tiles; out: the nodes of their per-row losses).

Device code computes a loss per row (``reduction="none"``): a program holds a tile of rows, so
torch's default mean over the batch would be a mean over one tile. The per-row form is what a
fused loss kernel stores; the batch mean is a host ``.mean()`` of it (or an ``tc.atomic_add``
of each tile's sum). :data:`LOWERINGS` lists the torch callables each function handles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from tilecraft.errors import DeviceCodeError, UnsupportedOpError

PER_ROW_HINT = (
    "pass reduction='none' and reduce on the host (losses.mean()), or add each tile's sum with "
    "tc.atomic_add"
)


def cross_entropy(
    t: Any,
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: Any = 0.0,
) -> Any:
    """``F.cross_entropy(input [rows, C], target [rows], reduction="none")`` with class-index
    targets: ``logsumexp(x) - x[target]`` in fp32 (with ``label_smoothing`` e: ``(1 - e)`` of
    that plus ``e`` times ``logsumexp(x) - mean(x)``), 0 where ``target == ignore_index``;
    in ``input``'s dtype. The class dim must be whole; no class ``weight``."""
    x = _checked(t, "F.cross_entropy", input, target, weight, size_average, reduce, reduction)
    xf = x.to(_math_dtype(x.dtype))
    lse = torch.logsumexp(xf, dim=1)
    ignored, picked = _targets(xf, target, ignore_index)
    loss = lse - picked
    if not isinstance(label_smoothing, (int, float)) or label_smoothing != 0:  # (or run-time)
        # no smoothing term where it is 0 (a run-time 0.0 times a row's inf - -inf logits,
        # banned tokens - is NaN; torch adds nothing)
        smooth = torch.where(label_smoothing != 0, label_smoothing * (lse - xf.mean(dim=1)), 0.0)
        loss = (1.0 - label_smoothing) * loss + smooth
    return torch.where(ignored, 0.0, loss).to(x.dtype)


def nll_loss(
    t: Any,
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    """``F.nll_loss(input [rows, C], target [rows], reduction="none")``: ``-input[target]``,
    0 where ``target == ignore_index``; no class ``weight``."""
    x = _checked(t, "F.nll_loss", input, target, weight, size_average, reduce, reduction)
    ignored, picked = _targets(x, target, ignore_index)
    return torch.where(ignored, 0.0, -picked).to(x.dtype)


def _targets(x: Any, target: Any, ignore_index: int) -> tuple[Any, Any]:
    """Which rows are ignored, and each row's value at its target class (class 0's where
    ignored: a gather must stay in the row)."""
    ignored = target == ignore_index
    return ignored, torch.gather(x, 1, torch.where(ignored, 0, target)[:, None]).squeeze(1)


def _checked(
    t: Any,
    op: str,
    input: Any,
    target: Any,
    weight: Any,
    size_average: Any,
    reduce: Any,
    reduction: str,
) -> Any:
    """``input`` when the call is the per-row form device code computes, else a clear error."""
    if size_average is not None or reduce is not None:
        raise UnsupportedOpError(
            f"{op}: size_average= and reduce= are deprecated in torch", t.loc, hint=PER_ROW_HINT
        )
    if reduction != "none":
        raise UnsupportedOpError(
            f"{op}(reduction={reduction!r}) in device code would reduce one tile of rows, not "
            "the batch",
            t.loc,
            hint=PER_ROW_HINT,
        )
    if weight is not None:
        raise UnsupportedOpError(
            f"{op}: class weight= is not supported in device code",
            t.loc,
            hint="multiply each row's loss by weight[target] yourself (torch.gather of the "
            "loaded weights); with reduction='mean' torch also divides by their sum",
        )
    x, tgt = t.value_node(input), t.value_node(target)
    if x.ndim != 2 or tgt.ndim != 1:
        raise DeviceCodeError(
            f"{op} needs input [rows, classes] and class-index target [rows], got "
            f"{x.ndim}-D input and {tgt.ndim}-D target",
            t.loc,
            hint="index the logits as x[tm, :] and the targets as target[tm]",
        )
    if not x.dtype.is_floating_point or tgt.dtype.is_floating_point or tgt.dtype == torch.bool:
        raise DeviceCodeError(
            f"{op} needs float input and integer class indices, got {x.dtype} and {tgt.dtype}",
            t.loc,
            hint="class-probability targets: -(p * torch.log_softmax(x, 1)).sum(1)",
        )
    return input


def _math_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


LOWERINGS: list[tuple[tuple[Any, ...], Callable[..., Any]]] = [
    ((F.cross_entropy,), cross_entropy),
    ((F.nll_loss,), nll_loss),
]

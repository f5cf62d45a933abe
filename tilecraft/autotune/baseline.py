"""The accuracy baseline, independent of any config (stage: autotune; see docs/architecture.md).

The baseline is the user's ``baseline=`` callable if the kernel has one, else the kernel run in ref
mode (eager torch on whole tiles, no Triton). It runs on clones of the arguments, so the caller's
inputs are untouched and in-place results (mutated arguments) are recorded for comparison.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from tilecraft.runtime.kernel import Kernel


@dataclasses.dataclass
class Baseline:
    outputs: Any
    args_after: tuple[Any, ...]  # positional arguments after the run (clones: mutations visible)
    kwargs_after: dict[str, Any]
    source: str  # "the baseline= function", "ref mode" or "the working default config"


def clone_tensor(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same shape, strides, dtype and device (strides matter: a kernel is
    specialized to them)."""
    if any(s == 0 for s, n in zip(t.stride(), t.shape, strict=True) if n > 1):
        return t  # an expanded (broadcast) view: elements share memory, so no kernel writes it
    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    with torch.no_grad():
        out.copy_(t.detach())
    return out


def clone_args(
    args: Sequence[Any], kwargs: dict[str, Any] | None = None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Clones of every tensor in ``args``/``kwargs`` (other values as they are)."""
    return (
        tuple(clone_tensor(a) if isinstance(a, torch.Tensor) else a for a in args),
        {
            k: clone_tensor(v) if isinstance(v, torch.Tensor) else v
            for k, v in (kwargs or {}).items()
        },
    )


def compute_baseline(
    kernel: Kernel, args: Sequence[Any], kwargs: dict[str, Any] | None = None
) -> Baseline:
    """Run the baseline on clones of the arguments (raises what the baseline raises)."""
    a, kw = clone_args(args, kwargs)
    fn = kernel.baseline
    source = "the baseline= function" if fn is not None else "ref mode"
    with torch.no_grad():
        outputs = fn(*a, **kw) if fn is not None else kernel.run_ref(*a, **kw)
    if isinstance(outputs, torch.Tensor) and any(outputs is x for x in a):
        outputs = clone_tensor(outputs)  # an in-place kernel returning its argument
    return Baseline(outputs, a, kw, source)

"""Ref mode: run a kernel eagerly with torch ops on whole tiles, no Triton (stage: runtime).

Device loops stay Python loops over :class:`RefTile` objects; subscripts with tiles become slices.
Block sizes registered on the host are the whole extent, so each device loop runs as one tile where
it can. This is the accuracy baseline of the autotuner, independent of any config.
"""

from __future__ import annotations

from typing import Any

from tilecraft.frontend.source import (
    REF_ADDMM,
    REF_GET,
    REF_SET,
    KernelSource,
    build_function,
    ref_tree,
)
from tilecraft.language import _context
from tilecraft.language.loops import RefTile
from tilecraft.language.tunables import BlockSize


def _convert(index: Any) -> Any:
    if isinstance(index, tuple):
        return tuple(_convert(i) for i in index)
    if isinstance(index, RefTile):
        return index.as_index()
    return index


def ref_get(obj: Any, index: Any) -> Any:
    return obj[_convert(index)]


def ref_set(obj: Any, index: Any, value: Any) -> None:
    obj[_convert(index)] = value  # torch broadcasts and casts to obj's dtype


def ref_addmm(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn`` (``torch.addmm`` / ``torch.baddbmm`` or a tensor's bound method) as the compiled
    kernel means it: an input of another dtype than the operands (an fp32 accumulator of bf16
    tiles) takes their product in its own dtype, as ``tl.dot`` accumulates."""
    import torch

    owner = getattr(fn, "__self__", None)
    operands = (owner, *args) if isinstance(owner, torch.Tensor) else args
    if len(operands) == 3 and all(isinstance(t, torch.Tensor) for t in operands):
        acc, a, b = operands
        if a.dtype != acc.dtype or b.dtype != acc.dtype:
            product = torch.matmul(a.to(acc.dtype), b.to(acc.dtype))
            beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
            return beta * acc + alpha * product if (beta, alpha) != (1, 1) else acc + product
    return fn(*args, **kwargs)


class RefHost:
    mode = "ref"

    def __init__(self, device: Any = None) -> None:
        self.slots = 0
        self.device = device  # where tc.zeros/tc.full/tile.index tensors are made

    def block_size(self, lo: int, hi: int | None) -> int:
        self.slots += 1
        return BlockSize(max(hi if hi is not None else lo, 1), self.slots - 1)

    def tunable(self, name: str, choices: tuple[Any, ...]) -> Any:
        return choices[0]

    def specialized(self, value: int) -> None:
        pass


def build_ref(src: KernelSource) -> Any:
    fn = build_function(
        src, ref_tree(src), {REF_GET: ref_get, REF_SET: ref_set, REF_ADDMM: ref_addmm}
    )

    def run(*args: Any, **kwargs: Any) -> Any:
        import torch

        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        with _context.host_context(RefHost(tensors[0].device if tensors else None)):
            return fn(*args, **kwargs)

    return run

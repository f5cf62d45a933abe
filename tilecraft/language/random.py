"""Random numbers: ``rand(shape, seed, offset=0, device=None)`` (stage: language; inside a traced
device loop it builds IR, elsewhere it computes the same Philox stream eagerly).

Element ``(i0, i1, ...)`` of the result, where ``i_k`` is the global index along a tile dim (or
``0..n-1`` along a whole extent ``n``), draws Philox counter ``offset + i0 * L1 * L2... + i1 * L2...``
with ``L_k`` the end of dim ``k``'s loop: the numbers depend on the seed and the position only, never
on block sizes, so every config (and ref mode) gives the same numbers.
"""

from __future__ import annotations

from typing import Any

import torch

from tilecraft.ir import philox
from tilecraft.language import _context
from tilecraft.language.loops import RefTile


def rand(shape: Any, seed: int, offset: int = 0, device: torch.device | str | None = None) -> Any:
    """Uniform fp32 numbers in [0, 1) for a tile of ``shape`` (tiles or ints), as ``tl.rand``.
    ``device``: where host code (a reference) makes them (default: the kernel's device in ref
    mode, else the CPU); a kernel draws them where it runs."""
    tracer = _context.device()
    if tracer is not None:
        return tracer.call("rand", shape, seed, offset)
    return _eager_host_rand()(shape, seed, offset, device)


_EAGER_HOST_RAND: Any = None


def _eager_host_rand() -> Any:
    """:func:`_host_rand` hidden from torch.compile: Philox written in int64 torch ops is a few
    hundred elementwise ops that Inductor fuses into one kernel and compiles for minutes (a
    reference drawing 256 x 128256 numbers did not finish compiling in 150 s on the H200); run
    eagerly, the same numbers take ~40 ms on the GPU. Wrapped on first use: importing tilecraft
    must not load torch's dynamo."""
    global _EAGER_HOST_RAND
    if _EAGER_HOST_RAND is None:
        _EAGER_HOST_RAND = torch.compiler.disable(_host_rand)
    return _EAGER_HOST_RAND


def _host_rand(shape: Any, seed: int, offset: int, device: torch.device | str | None) -> Any:
    host = _context.host()
    device = device if device is not None else getattr(host, "device", None)
    dims = shape if isinstance(shape, (list, tuple)) else [shape]
    number = torch.full([1] * len(dims), int(offset), dtype=torch.int64, device=device)
    stride = 1
    for pos in reversed(range(len(dims))):
        d = dims[pos]
        if isinstance(d, RefTile):
            idx, length = torch.arange(d.begin, d.end, device=device), d.stop
        else:
            idx, length = torch.arange(int(d), device=device), int(d)
        view = [1] * len(dims)
        view[pos] = -1
        number = number + idx.view(view) * stride
        stride *= length
    return philox.rand(int(seed), number)

"""Float arguments a kernel's op carries as 0-d tensors (stage: runtime; in: the argument kinds
and the names host code reads, a call's values; out: which float arguments travel as tensors,
and the values converted each way).

A custom op's ``float`` argument is a constant to ``torch.compile``: a learning rate that
changes every step recompiled the caller every step (8 steps, then the recompile limit; under
``fullgraph=True`` an error). A float torch.compile has made dynamic reaches an op without a
recompile only as a tensor it computed (``ones(()) * lr``: Dynamo turns the Python float into
a graph input). So when Dynamo may make a float dynamic (``compiled_calls.dynamic_floats``: a
frame compiled again, or ``dynamic=True``), the op takes such floats as 0-d float64 tensors on
the CPU, and its real implementation reads them back exactly (a float64 holds a Python
float). A first compile keeps them constants: a CPU tensor in the graph makes inductor skip
CUDA graphs.

Only floats that host code never reads (device loops alone do): the fake implementation must
give the outputs' sizes without the value (a fake tensor has none), so it runs the host code
on the stand-in value the op was defined with. A float host code reads (``int(n * keep)``)
stays a constant, as torch keeps floats that size outputs. Only calls autograd need not see
(no input requires grad, or grad mode is off): a user's ``setup_context`` and backward read the
float as a number, so calls that need gradients take the op with floats.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

Positions = tuple[int, ...]


def device_only_floats(
    kinds: tuple[tuple[Any, ...], ...], params: Sequence[str], host_names: set[str]
) -> Positions:
    """The positions of the float arguments host code never reads (only device loops do): such
    a float decides no output's shape, so the fake implementation may run the host code with
    any stand-in for it. A float host code reads stays a constant, whatever values a probe
    would try: ``math.ceil(r)`` or ``n if p >= 0.5 else n // 2`` size outputs only for some."""
    return tuple(
        i
        for i, (kind, name) in enumerate(zip(kinds, params, strict=True))
        if kind[0] == "float" and name not in host_names
    )


def to_tensors(values: tuple[Any, ...], positions: Positions) -> tuple[Any, ...]:
    """The op's arguments: the floats at ``positions`` as 0-d float64 CPU tensors. Made by a
    multiplication, which Dynamo traces with the float as a graph input (``torch.tensor`` and
    ``torch.full`` of a dynamic float specialized on its value)."""
    if not positions:
        return values
    return tuple(
        torch.ones((), dtype=torch.float64) * v if i in positions else v
        for i, v in enumerate(values)
    )


def to_floats(args: tuple[Any, ...], positions: Positions) -> tuple[Any, ...]:
    """The kernel's arguments from the op's (real tensors: their exact values)."""
    if not positions:
        return args
    return tuple(float(a.item()) if i in positions else a for i, a in enumerate(args))


def stand_ins(
    args: tuple[Any, ...], positions: Positions, example: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The fake implementation's arguments: the op's stand-in values for its tensor floats
    (they set no output's layout; a fake tensor has no value to read)."""
    if not positions:
        return args
    return tuple(example[i] if i in positions else a for i, a in enumerate(args))

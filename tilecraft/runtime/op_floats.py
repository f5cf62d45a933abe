"""Float arguments a kernel's op carries as 0-d tensors (stage: runtime; in: the host code run
on stand-ins, a call's values; out: which float arguments travel as tensors, and the values
converted each way).

A custom op's ``float`` argument is a constant to ``torch.compile``: a learning rate that
changes every step recompiled the caller every step (8 steps, then the recompile limit; under
``fullgraph=True`` an error). A float torch.compile has made dynamic reaches an op without a
recompile only as a tensor it computed (``ones(()) * lr``: Dynamo turns the Python float into
a graph input). So when Dynamo compiles a frame again (``compiled_calls.recompiling``: a
float that changed is then dynamic), the op takes such floats as 0-d float64 tensors on the
CPU, and its real implementation reads them back exactly (a float64 holds a Python float). A
first compile keeps them constants: a CPU tensor in the graph makes inductor skip CUDA graphs.

Only floats that set no output's shape: the fake implementation must give the outputs' sizes
without the value (a fake tensor has none), so it runs the host code on the stand-in value the
op was defined with. A float that sizes an output (``int(n * keep)``) stays a constant, as
torch keeps such floats. Only ops of kernels without a backward: a user's ``setup_context``
and backward read the float as a number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Positions = tuple[int, ...]


def value_free_floats(
    run: Callable[[tuple[Any, ...]], Any], example: tuple[Any, ...], result: Any
) -> Positions:
    """The positions of ``example``'s floats whose values change no output's layout: the host
    code (``run``) gives the same dtypes, shapes and strides with other values. () where any
    float sets one, or the host code fails on the other values."""
    positions = tuple(i for i, v in enumerate(example) if type(v) is float)
    if not positions:
        return ()
    other = tuple(_other_value(v) if i in positions else v for i, v in enumerate(example))
    try:
        again = run(other)
    except Exception:  # noqa: BLE001  (a value the host code refuses: keep the constants)
        return ()
    return positions if _layout(again) == _layout(result) else ()


def _other_value(value: float) -> float:
    """Another value, away from the ones host code often refuses (a dropout's p = 1.0)."""
    return value / 2 + 0.125 if value != 0.25 else 0.375


def _layout(result: Any) -> tuple[Any, ...]:
    items = result if isinstance(result, (tuple, list)) else (result,)
    return tuple(
        (i.dtype, tuple(i.shape), i.stride()) if isinstance(i, torch.Tensor) else type(i)
        for i in items
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

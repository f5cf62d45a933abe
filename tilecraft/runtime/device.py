"""Device facts the generated launchers need at run time (stage: runtime)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

INTERPRETER_PROGRAMS = 4  # "SMs" of the CPU interpreter: enough programs to exercise persistence


@functools.cache
def _sm_count(device_type: str, index: int) -> int:
    if device_type == "cuda":
        return int(torch.cuda.get_device_properties(index).multi_processor_count)
    return INTERPRETER_PROGRAMS


def sm_count(tensor: Any) -> int:
    """Streaming multiprocessors (compute units) of the device holding ``tensor``."""
    device = tensor.device
    return _sm_count(device.type, device.index or 0)


def interpreted_quietly(launcher: Callable[..., Any]) -> Callable[..., Any]:
    """A launcher of code for Triton's interpreter, run with NumPy's floating-point warnings off:
    NumPy warns where a GPU computes the IEEE result silently (a masked-off lane loads 0 and a
    padded row divides 0 / 0; lanes whose results no store keeps), once per call."""

    @functools.wraps(launcher)
    def run(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return launcher(*args)

    return run


_allocator_set = False


def ensure_allocator() -> None:
    """Tensor descriptors built on the device need Triton's global scratch allocator."""
    global _allocator_set
    if _allocator_set:
        return
    import triton

    def alloc(size: int, alignment: int, stream: Any) -> torch.Tensor:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        return torch.empty(size, dtype=torch.int8, device=device)

    triton.set_allocator(alloc)
    _allocator_set = True


def capturing(device_type: str) -> bool:
    """Whether the current CUDA stream is capturing a graph (``torch.cuda.graph``)."""
    return (
        device_type == "cuda"
        and torch.cuda.is_available()
        and torch.cuda.is_current_stream_capturing()
    )


_SPLIT_COUNTERS: dict[tuple[str, int, int], torch.Tensor] = {}


def reset_split_counters() -> None:
    """Zero every arrival-counter buffer: a launch stopped part-way (a candidate's time limit
    interrupting the interpreter, an error raised in one of its programs) leaves the counts of
    the tiles whose last program never ran, and the next split launch on the buffer would
    combine those tiles early, from partials not yet written."""
    for counters in _SPLIT_COUNTERS.values():
        counters.zero_()


def split_counters(tensor: Any, tiles: int) -> torch.Tensor:
    """At least ``tiles`` zeroed int32 arrival counters on ``tensor``'s device, for a split
    reduction combined in one launch (``codegen/split.py``): its last program per tile resets
    its counter, so a buffer stays zeroed between launches and one per stream is reused (two
    streams never share one). While a CUDA graph is being captured, a fresh zeroed buffer: its
    zeroing is captured too and runs before each replay. (Called on every launch: the stream is
    read through Triton's driver, a C call, not a ``torch.cuda.Stream`` object.)"""
    device = tensor.device
    stream = 0
    if capturing(device.type):
        return torch.zeros(tiles, dtype=torch.int32, device=device)
    if device.type == "cuda":
        from triton.runtime import driver

        stream = driver.active.get_current_stream(device.index)
    key = (device.type, device.index or 0, stream)
    counters = _SPLIT_COUNTERS.get(key)
    if counters is None or counters.numel() < tiles:
        counters = torch.zeros(max(tiles, 1024), dtype=torch.int32, device=device)
        _SPLIT_COUNTERS[key] = counters
    return counters

"""Device facts the generated launchers need at run time (stage: runtime)."""

from __future__ import annotations

import functools
from typing import Any

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

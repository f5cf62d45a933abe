"""The tilecraft kernel suite: one module per kernel family, each with an eager reference.

Every module in :data:`EXAMPLES` exposes the same surface:

``KERNELS: dict[str, tc.Kernel]``
    The module's tilecraft kernels by name (e.g. ``{"rms_norm_fwd": ..., "rms_norm_bwd": ...}``).
``make_inputs(shape, dtype, device, seed) -> tuple[torch.Tensor, ...]``
    Random (never all-zero) inputs for one problem of ``shape`` (a tuple of ints whose meaning the
    module's docstring gives, e.g. ``(rows, hidden)``).
``reference(*inputs) -> torch.Tensor | tuple[torch.Tensor, ...]``
    The expected outputs in plain PyTorch (the backward kernels' reference uses autograd).
``run(inputs, call=default_call) -> same structure as reference(*inputs)``
    Computes the outputs with the module's kernels. Every kernel launch goes through
    ``call(kernel, *args)``; the default, :func:`default_call`, is ``kernel(*args)`` (the default
    config). Tests pass a ``call`` that binds a kernel and runs a chosen config, or that runs
    ``kernel.run_ref`` (ref mode), or that records the arguments each kernel is bound with. Kernels
    that consume another kernel's outputs (a backward pass) get them from that kernel through the
    same ``call``.
``BENCH_SHAPES`` / ``TEST_SHAPES: list[tuple[int, ...]]``
    LLM-sized shapes (including awkward ones) for benchmarks; tiny and awkward shapes for the CPU
    interpreter (each tensor stays under ~50k elements).
``DTYPES: list[torch.dtype]``
    The dtypes the kernels support.
``peer(*inputs)`` (optional)
    What a PyTorch user would run instead, at the inputs' dtype (``torch.mm``, SDPA); the benchmark
    times it eager and under ``torch.compile``. Default: ``reference``.
``flops(shape) -> int`` (optional)
    Floating-point operations of one ``run``: the benchmark reports TFLOP/s instead of GB/s.
``TOLERANCES: dict[torch.dtype, tuple[float, float]]`` (optional)
    ``(rtol, atol)`` overrides of the tests' per-dtype defaults (e.g. fp32 through ``tl.dot``,
    which may use TF32 on GPUs); ``atol`` is relative to the reference's largest magnitude.

``python -m examples.demo`` runs a short tour (RMSNorm and LayerNorm, forward and backward).
"""

from __future__ import annotations

from types import ModuleType

from examples import (
    add,
    attention,
    block_sparse_attention,
    cross_entropy,
    cumsum,
    dropout_layer_norm,
    fp8_quant,
    geglu,
    layer_norm,
    matmul,
    rms_norm,
    rope,
    softmax,
    swiglu,
)
from examples import sum as sum_
from examples._common import Call, default_call

EXAMPLES: dict[str, ModuleType] = {
    "add": add,
    "softmax": softmax,
    "rms_norm": rms_norm,
    "layer_norm": layer_norm,
    "matmul": matmul,
    "cross_entropy": cross_entropy,
    "attention": attention,
    "block_sparse_attention": block_sparse_attention,
    "swiglu": swiglu,
    "geglu": geglu,
    "rope": rope,
    "cumsum": cumsum,
    "dropout_layer_norm": dropout_layer_norm,
    "fp8_quant": fp8_quant,
    "sum": sum_,
}

__all__ = ["EXAMPLES", "Call", "default_call"]

"""fp32 dots: their input precision and whether they run on the FMA units (stage: config; in: a
ConfigSpec or a target and the kernel's ``dot_precision=``; out: a Triton input precision, the
FMA dots' K block slots).

An fp32 ``tl.dot`` takes ``input_precision``: "ieee" (exact; on NVIDIA the FMA units, since no
tensor-core instruction takes fp32 operands), "tf32" or "tf32x3" (tensor cores). The heuristic
shapes FMA dots differently from tensor-core ones (``config/tile_budget.py``,
``config/pipelines.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from tilecraft.config.fma_operands import fma_dot
from tilecraft.ir.nodes import Node, Sym, SymKind

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec
    from tilecraft.targets.target import Target

# torch.get_float32_matmul_precision() -> tl.dot input_precision ("high" and "medium" let PyTorch
# use TF32 tensor cores for fp32 matmuls; Triton has no bf16 input precision for fp32 operands)
TORCH_PRECISION = {"highest": "ieee", "high": "tf32", "medium": "tf32"}
DOT_PRECISIONS = ("ieee", "tf32", "tf32x3")


def fma_dots(spec: ConfigSpec) -> bool:
    """Whether the kernel's fp32 dots run on the FMA units (``input_precision="ieee"`` on
    NVIDIA: no tensor-core instruction takes fp32 operands exactly)."""
    return (
        spec.target.backend == "cuda" and dot_precision(spec.target, spec.dot_precision) == "ieee"
    )


def fma_dot_nodes(spec: ConfigSpec) -> list[Node]:
    """The kernel's fp32 dots that run on the FMA units (none where they use tensor cores)."""
    if not fma_dots(spec):
        return []
    return [node for loop in spec.loops for node in loop.walk() if fma_dot(node)]


def fma_dot_k_slots(spec: ConfigSpec) -> list[int]:
    """The block slots of the K dims of the fp32 dots that run on the FMA units (a K tiled by
    a ``tc.tile`` loop; none where the dots use tensor cores)."""
    ks = [node.inputs[0].shape[-1] for node in fma_dot_nodes(spec)]
    return sorted(
        {
            k.config_slot
            for k in ks
            if isinstance(k, Sym)
            and k.kind is not SymKind.RDIM
            and k.fixed_block is None
            and k.config_slot is not None
        }
    )


def on_fma_units(backend: str, precision: str) -> bool:
    """Whether fp32 dots of ``precision`` run on FMA units on ``backend`` (NVIDIA's "ieee"; the
    interpreter runs the same code, so its numerics are tested)."""
    return backend in ("cuda", "interpret") and precision == "ieee"


def dot_precision(target: Target, requested: str | None) -> str:
    """The input precision of fp32 dots: the kernel's ``dot_precision=``, else what PyTorch's
    float32 matmul precision allows; a precision the target lacks becomes "ieee" (never less
    precise than asked)."""
    wanted = requested or TORCH_PRECISION.get(torch.get_float32_matmul_precision(), "ieee")
    return wanted if wanted in target.dot_precisions else "ieee"

"""The benchmark cases several source-variant experiments time (``benchmarks/source_variants.py``):
each builder takes the experiment's variants and gives the experiment dict, so an experiment
file holds only what it varies."""

from __future__ import annotations

from typing import Any

import torch

Variant = tuple[str, str, list[tuple[str, str]]]
DEFAULT: Variant = ("default", "default", [])
# output stores through pointers (bmm_3d's accesses: a, b, out)
PTR = "indexing=['tensor_descriptor', 'tensor_descriptor', 'pointer']"
# causal attention's query blocks walked last first (the edit measured before codegen did it)
REV = [
    (r"offset_1 = pid_1 \* _BLOCK_1", "offset_1 = (tl.cdiv(4096, _BLOCK_1) - 1 - pid_1) * _BLOCK_1")
]


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """The attention example's reference: SDPA at the inputs' dtype."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def with_ptr_stores(*fixed: str, **fields: object) -> str:
    """``default.replace(...)`` with ``fixed`` settings (source text) and ``fields``, the output
    stored through pointers (``PTR``): a bmm variant's config expression."""
    parts = [*fixed, *(f"{k}={v!r}" for k, v in fields.items()), PTR]
    return f"default.replace({', '.join(parts)})"


def bookended(variants: list[Variant]) -> list[Variant]:
    """``variants`` between two runs of the default (drift between the two shows noise)."""
    return [DEFAULT, *variants, DEFAULT]


def bmm_16x1024(variants: list[Variant]) -> dict[str, Any]:
    return dict(
        name="bmm 16x1024^3",
        kernel="benchmarks.gen_kernels.dots:bmm_3d",
        shape=(16, 1024, 1024, 1024),
        inputs="gen:bmm_3d",
        reference="benchmarks.gen_kernels.dots:bmm_reference",
        variants=variants,
    )


def column_sum_tall(variants: list[Variant]) -> dict[str, Any]:
    return dict(
        name="column sum 65536x1024",
        kernel="benchmarks.gen_kernels.reductions:column_sum",
        shape=(65536, 1024),
        inputs="gen:column_sum_tall",
        reference="benchmarks.gen_kernels.reductions:column_sum_reference",
        variants=variants,
    )


def attention(
    name: str, shape: tuple[int, ...], causal: bool, variants: list[Variant], reference: Any = sdpa
) -> dict[str, Any]:
    """The attention example's causal (call 1) or non-causal (call 0) launch at ``shape``."""
    out = dict(
        name=name,
        kernel="examples.attention:attention",
        shape=shape,
        inputs=f"example:attention:{int(causal)}",
        variants=variants,
    )
    if reference is not None:
        out["reference"] = reference
    return out


def heldout(case_name: str, variants: list[Variant]) -> dict[str, Any]:
    """A generalization case (``benchmarks.gen_kernels.CASES`` or the held-out ``HELDOUT``) at
    its first GPU shape."""
    from benchmarks.gen_kernels import ALL_CASES

    case = ALL_CASES[case_name]
    kernel = case.kernels[0]
    return dict(
        name=case_name,
        kernel=f"{kernel.fn.__module__}:{kernel.__name__}",
        shape=case.gpu_shapes[0],
        inputs=f"gen:{case_name}",
        reference=case.reference,
        variants=variants,
    )

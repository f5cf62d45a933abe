"""Reductions that run as one (stage: ir analysis; in: a device loop's nodes; out: the keys of
the float max (min) and argmax (argmin) reductions of one input over one axis).

``torch.max(x, dim)`` traces as two reductions of ``x``: codegen (``codegen/reduce.py``) emits
both from one tuple reduction of (value, index), and the resource model counts them as one
point of the program where ``x`` is last needed.
"""

from __future__ import annotations

from collections.abc import Iterable

from tilecraft.ir.nodes import Node, Op

ARG_OF = {"max": "argmax", "min": "argmin", "argmax": "argmax", "argmin": "argmin"}
PairKey = tuple[tuple[int | str, ...], int, bool, str]


def pair_key(node: Node) -> PairKey:
    """What a value reduction and its arg partner share: input, axis, keepdim, arg kind. A cast
    counts as its source (``x.float().amax(1)`` and ``x.float().argmax(1)`` trace two casts
    of ``x``, the same values)."""
    a, src = node.attrs, node.inputs[0]
    values = (src.id,) if src.op is not Op.CAST else (src.inputs[0].id, str(src.dtype))
    return (values, a["axis"], a["keepdim"], ARG_OF.get(a["kind"], a["kind"]))


def pairable(node: Node) -> bool:
    """A float max/min/argmax/argmin reduction (one that could have a partner)."""
    return (
        node.op is Op.REDUCE
        and node.attrs["kind"] in ARG_OF
        and node.inputs[0].dtype.is_floating_point
    )


def paired_keys(nodes: Iterable[Node]) -> set[PairKey]:
    """The keys of ``nodes``' reductions that have both a value and an arg member."""
    kinds: dict[PairKey, set[str]] = {}
    for node in nodes:
        if pairable(node):
            kinds.setdefault(pair_key(node), set()).add(node.attrs["kind"])
    return {key for key, found in kinds.items() if len(found) == 2}


__all__ = ["ARG_OF", "PairKey", "pair_key", "pairable", "paired_keys"]

"""Tuple scans narrowed to the members they need (stage: ir pass; in: a device loop's body after
dead-code elimination; out: the same body, each tuple scan scanning only the tiles its used
results depend on).

``torch.cummax(x, 0)`` traces as one ``tl.associative_scan`` over (values, int64 positions) whose
combine picks both. When only the values are used (``vals, _ = torch.cummax(...)``, a running
max), dead-code elimination drops the positions' result node, but the scan still carries the
positions through every step: cross-compiled for sm_90, a [16, 512] fp32 column cummax at 8
warps took 190 registers, the same loop scanning the values alone 126. A member may go when no
kept result of the combine reads it (the values' pick, ``rv >= lv | rv != rv``, never reads the
positions); the combine keeps the nodes its kept results need, its placeholders renamed to the
narrower helper's parameters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from tilecraft.ir.nodes import Node, Op, walk


def narrow_tuple_scans(body: list[Node]) -> list[Node]:
    """``body`` with every tuple scan narrowed in place to the members its results need."""
    groups: dict[int, list[Node]] = {}
    for node in walk(body):
        if node.op is Op.SCAN and node.attrs["kind"] == "combine" and len(node.inputs) > 1:
            groups.setdefault(id(node.attrs["combine"]), []).append(node)
    for scans in groups.values():
        _narrow(scans)
    return body


def _narrow(scans: list[Node]) -> None:
    combine = scans[0].attrs["combine"]
    width = len(combine.value_dtypes)
    if any(s.inputs != scans[0].inputs for s in scans):
        return  # one combine over two different tuples: leave it whole
    keep = _needed({s.attrs["output"] for s in scans}, combine.results, width)
    if len(keep) == width:
        return
    narrowed = _narrowed_combine(combine, keep)
    inputs = [scans[0].inputs[i] for i in keep]
    for scan in scans:
        scan.inputs = list(inputs)
        scan.attrs["output"] = keep.index(scan.attrs["output"])
        scan.attrs["combine"] = narrowed


def _needed(used: set[int], results: tuple[Node, ...], width: int) -> list[int]:
    """The members (in order) the ``used`` results read, transitively through the combine."""
    keep = set(used)
    while True:
        read = {i % width for r in (results[k] for k in keep) for i in _params_read(r)}
        if read <= keep:
            return sorted(keep)
        keep |= read


def _params_read(result: Node) -> set[int]:
    """Indices into ``lhs0, .., rhs0, ..`` of the placeholders ``result`` depends on."""
    return {
        n.attrs["param"]
        for n in _reached([result]).values()
        if n.op is Op.ARG and "param" in n.attrs
    }


def _reached(roots: Iterable[Node]) -> dict[int, Node]:
    """``roots`` and every node they read, transitively, by id."""
    found: dict[int, Node] = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node.id not in found:
            found[node.id] = node
            stack.extend(node.inputs)
    return found


def _narrowed_combine(combine: Any, keep: list[int]) -> Any:
    """A copy of ``combine`` over the ``keep`` members: its body cut to what their results
    read, its placeholders renamed (``lhs``/``rhs`` for one member)."""
    width = len(combine.value_dtypes)
    results = tuple(combine.results[k] for k in keep)
    needed = _reached(results)
    narrowed = dataclasses.replace(
        combine,
        value_dtypes=tuple(combine.value_dtypes[k] for k in keep),
        body=[n for n in combine.body if n.id in needed],
        results=results,
    )
    names = narrowed.params
    # the placeholders live outside the combine's body (traced before it opened)
    for node in needed.values():
        if node.op is Op.ARG and "param" in node.attrs:
            side, member = divmod(node.attrs["param"], width)
            node.attrs["param"] = side * len(keep) + keep.index(member)
            node.attrs["name"] = names[node.attrs["param"]]
    return narrowed


__all__ = ["narrow_tuple_scans"]

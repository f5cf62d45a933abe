"""Where a kernel's results branch on computed floats (stage: autotune, read from the IR).

Input: a traced kernel's device loops. Output: the ops that decide on float data (a comparison
of a float computed from loaded values, an argmax, a float rounded to an integer), each named by
its line. Two correct programs that sum in another order can land on either side of such a
decision for an input sitting on its boundary: a top-p mask that bisects each row's probability
threshold keeps one token more or less in a few rows (4 of 16.4M outputs, 128 x 128256 on the
H200), and no config could match ref mode exactly; an argsort of computed similarities puts two
keys a rounding apart in either order. The accuracy check (``compare.py``) lets such kernels'
outputs differ in a few scattered elements, never in a row, a column or a run, or in a few
short runs whose values trade places (sorted positions of near-tied keys).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tilecraft.ir.nodes import DeviceLoop, Node, Op, reads_memory

COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
ROUNDINGS = frozenset({"floor", "ceil", "round", "trunc", "floordiv"})
ARG_REDUCTIONS = frozenset({"argmax", "argmin"})
SORTS = frozenset({"torch.sort", "torch.argsort", "torch.topk"})


def float_decisions(loops: Sequence[DeviceLoop]) -> list[str]:
    """The ops of ``loops`` whose outcome depends on where a loaded float falls, as
    ``"'>=' (line 12)"`` (each op and line once, in program order)."""
    found: list[str] = []
    for loop in loops:
        for node in loop.walk():
            what = _decision(node)
            if what is None:
                continue
            where = f" (line {node.loc.lineno})" if node.loc else ""
            if what + where not in found:
                found.append(what + where)
    return found


def rounds_floats(loops: Sequence[DeviceLoop]) -> bool:
    """Whether ``loops`` round a float computed from loaded data to an integer (a
    quantization: ``round``, ``floor``, ``//``, a cast to an integer dtype), where codes may
    land one off at ties (``compare._rounding_ties``); an argmax or a comparison does not."""
    return any(
        _decision(node) in (*ROUNDINGS, "cast to an integer")
        for loop in loops
        for node in loop.walk()
    )


def _decision(node: Node) -> str | None:
    """The op's name if ``node`` decides on float data read from memory, else ``None``."""
    if node.op is Op.REDUCE and node.attrs.get("kind") in ARG_REDUCTIONS:
        return str(node.attrs["kind"]) if _float_data(node.inputs[0]) else None
    if node.op in (Op.UNARY, Op.BINARY):
        fn = str(node.attrs.get("fn"))
        if fn in COMPARISONS or fn in ROUNDINGS:
            return fn if any(_float_data(i) for i in node.inputs) else None
    if node.op is Op.CAST and not node.dtype.is_floating_point and node.dtype != torch.bool:
        return "cast to an integer" if _float_data(node.inputs[0]) else None
    if node.op is Op.EXTERN and node.attrs.get("what") in SORTS:
        # keys a rounding apart may come out in either order
        return str(node.attrs["what"]) if any(_float_data(i) for i in node.inputs) else None
    return None


def _float_data(node: Node) -> bool:
    """Whether ``node`` is a float computed from a load."""
    return node.dtype.is_floating_point and reads_memory(node)

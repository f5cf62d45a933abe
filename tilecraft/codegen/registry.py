"""The table of emissions: one function per IR op (stage: codegen; in: an IR :class:`Op`; out: the
function that writes that op's Triton code through an :class:`~tilecraft.codegen.context.EmitContext`).

Families of ops register with ``@emits(Op.X)`` in their own modules (``pointwise.py``,
``reduce.py``, ``dots.py``, ``loops.py``, ``memory.py``, ``scans.py``, ``views.py``); the driver
(``emitter.py``) imports every family, so the table is full before anything is emitted. Leaf ops
(constants, arguments, tile attributes) have no emission: they are expressions
(:meth:`EmitContext.leaf_expr`), and ``CARRY`` values are bound by their loop (except those kept
in memory, ``homes.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tilecraft.errors import SourceLoc, UnsupportedOpError
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext

Emission = Callable[["EmitContext", Node], None]
EMISSIONS: dict[Op, Emission] = {}


def emits(*ops: Op) -> Callable[[Emission], Emission]:
    """Register ``fn(ctx, node)`` as the emission of ``ops`` (one function per op, never two)."""

    def register(fn: Emission) -> Emission:
        for op in ops:
            if op in EMISSIONS:
                raise AssertionError(f"two emissions for {op}: {EMISSIONS[op]} and {fn}")
            EMISSIONS[op] = fn
        return fn

    return register


def emission(op: Op, loc: SourceLoc | None) -> Emission:
    """The emission of ``op``; an op codegen cannot emit is an error naming it."""
    fn = EMISSIONS.get(op)
    if fn is None:
        raise UnsupportedOpError(f"codegen has no emission for the IR op '{op.value}'", loc)
    return fn

"""The generalization benchmark's kernels: written the way users write them, unlike the
``examples/`` versions, each with an eager reference, GPU shapes and tiny CPU shapes.

:data:`CASES` maps each case name to its :class:`~benchmarks.gen_kernels.case.Case`.
"""

from __future__ import annotations

from benchmarks.gen_kernels import dots, norms, reductions
from benchmarks.gen_kernels.case import Case

CASES: dict[str, Case] = {
    case.name: case for mod in (norms, reductions, dots) for case in mod.CASES
}

__all__ = ["CASES", "Case"]

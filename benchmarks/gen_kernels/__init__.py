"""The generalization benchmark's kernels: written the way users write them, unlike the
``examples/`` versions, each with an eager reference, GPU shapes and tiny CPU shapes.

:data:`CASES` maps each case name to its :class:`~benchmarks.gen_kernels.case.Case`: the eight
kernels issue 11 measures. :data:`HELDOUT` holds more, written after the heuristic was
frozen and timed to find where the default is weak (``benchmarks.generalize --set heldout``).
:data:`REWRITTEN` holds held-out kernels rewritten with a feature built after they were timed
(``--set rewritten``).
"""

from __future__ import annotations

from benchmarks.gen_kernels import (
    dots,
    heldout_dots,
    heldout_more,
    heldout_rows,
    heldout_s13,
    heldout_s14,
    heldout_s14b,
    heldout_s15,
    heldout_s17,
    heldout_s17b,
    heldout_s19,
    heldout_s19b,
    heldout_s21,
    heldout_s22,
    heldout_s22b,
    heldout_s24,
    heldout_s25,
    heldout_s26,
    heldout_s27,
    heldout_s28,
    heldout_s28b,
    heldout_s28c,
    heldout_s29,
    heldout_s29b,
    heldout_s30,
    heldout_s30b,
    heldout_s31,
    heldout_s31b,
    heldout_s31c,
    heldout_s32,
    heldout_s33,
    heldout_s33b,
    heldout_s34,
    heldout_s35,
    heldout_s35b,
    heldout_s36,
    heldout_s37a,
    heldout_s37b,
    heldout_s38,
    heldout_s38c,
    heldout_s39a,
    heldout_s39b,
    heldout_s39c,
    heldout_s39d,
    heldout_s40a,
    heldout_s40b,
    heldout_s41a,
    heldout_s41b,
    heldout_s42a,
    heldout_s42b,
    heldout_s43a,
    heldout_s43b,
    heldout_s43c,
    heldout_s43d,
    norms,
    reductions,
    rewritten,
)
from benchmarks.gen_kernels.case import Case

CASES: dict[str, Case] = {
    case.name: case for mod in (norms, reductions, dots) for case in mod.CASES
}
_HELDOUT_MODULES = (
    heldout_rows,
    heldout_dots,
    heldout_more,
    heldout_s13,
    heldout_s14,
    heldout_s14b,
    heldout_s15,
    heldout_s17,
    heldout_s17b,
    heldout_s19,
    heldout_s19b,
    heldout_s21,
    heldout_s22,
    heldout_s22b,
    heldout_s24,
    heldout_s25,
    heldout_s26,
    heldout_s27,
    heldout_s28,
    heldout_s28b,
    heldout_s28c,
    heldout_s29,
    heldout_s29b,
    heldout_s30,
    heldout_s30b,
    heldout_s31,
    heldout_s31b,
    heldout_s31c,
    heldout_s32,
    heldout_s33,
    heldout_s33b,
    heldout_s34,
    heldout_s35,
    heldout_s35b,
    heldout_s36,
    heldout_s37a,
    heldout_s37b,
    heldout_s38,
    heldout_s38c,
    heldout_s39a,
    heldout_s39b,
    heldout_s39c,
    heldout_s39d,
    heldout_s40a,
    heldout_s40b,
    heldout_s41a,
    heldout_s41b,
    heldout_s42a,
    heldout_s42b,
    heldout_s43a,
    heldout_s43b,
    heldout_s43c,
    heldout_s43d,
)
HELDOUT: dict[str, Case] = {case.name: case for mod in _HELDOUT_MODULES for case in mod.CASES}
# held-out kernels rewritten with a feature built after they were timed (rewritten.py)
REWRITTEN: dict[str, Case] = {case.name: case for case in rewritten.CASES}
# a dict keeps the last of two cases of one name: a new module must not shadow an old case
_NAMES = [*CASES, *(case.name for mod in _HELDOUT_MODULES for case in mod.CASES), *REWRITTEN]
assert len(_NAMES) == len(set(_NAMES)), sorted({n for n in _NAMES if _NAMES.count(n) > 1})

# every case by name: the tools that take a case name look it up here
ALL_CASES: dict[str, Case] = {**CASES, **HELDOUT, **REWRITTEN}

__all__ = ["ALL_CASES", "CASES", "HELDOUT", "REWRITTEN", "Case"]

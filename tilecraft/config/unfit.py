"""Values no config can hold (stage: config analysis; in: a ConfigSpec; out: a message naming
them, or '').

A value whose dims are whole ``:`` extents that cannot be looped (a dot or a transpose uses
them, an argsort needs them) keeps those extents in every config: at its smallest blocks and
the target's most threads it may still need more registers a thread than a thread has. A
k-means step written with the 4096 centroids as a whole dim (``centroids[:, :]``,
``xt @ ct.t()``) holds 524288 fp32 elements a program: 512 a thread at 32 warps, and ptxas
refuses every config. The message tells the user to loop over the dim; discovery puts it in its
"no working config" error, where the compiler's own messages do not say why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecraft.config.config import Config
from tilecraft.config.resources import MAX_REGISTERS

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec


def unfit_values(spec: ConfigSpec) -> str:
    """Why no config of ``spec`` fits its target's registers, or '' (the interpreter: never)."""
    target = spec.target
    if target.backend == "interpret" or not spec.values:
        return ""
    smallest = Config(
        block_sizes=[b.lo for b in spec.blocks],
        reduction_loops=[16 if r.loopable else None for r in spec.reductions],
    )
    threads = target.max_warps * target.warp_size
    elements, value = spec.largest_value(smallest)
    if value is None or elements <= MAX_REGISTERS * threads:
        return ""
    whole = [spec.reductions[d[1]] for d in value.dims if d[0] == "r"]
    why = "; ".join(f"{r.extent} elements: {r.reason}" for r in whole if not r.loopable)
    where = f"{value.loc}: " if value.loc is not None else ""
    return (
        f"{where}this value keeps {elements} elements a program even at its smallest blocks "
        f"({elements // threads} a thread at {target.max_warps} warps, more than a thread's "
        f"{MAX_REGISTERS} registers): its whole ':' dims cannot be looped ({why or 'fixed'})"
        "; loop over the long dim with tc.tile(...) inside the kernel instead"
    )

"""On/off strategy knobs a kernel offers only where its IR allows them (stage: config; in: the
kernel's spec and a user's or the search's config; out: each knob's resolved value, repairs).

* ``deferred_sums``: ``acc + x.sum(0)`` (or ``torch.maximum(acc, x.amax(0))``, a min likewise)
  in a row loop keeps a tile accumulator and reduces once after the loop (``ir/deferred_sums.py``);
* ``deferred_args``: a running arg-best over a loop (``v, i = torch.min(x, 1)``, kept where
  ``v < best``) keeps a best and an index a lane and reduces once after it
  (``ir/deferred_args.py``);
* ``chunk_outer``: a row loop whose ``[n]`` accumulators live in memory runs its row statistics
  first, then column chunks outer with its rows inner and the accumulators in registers
  (``ir/chunk_outer.py``);
* ``diagonal_splits``: a loop whose select compares its indices with an enclosing tile's (a
  causal mask) runs as two, the blocks off the diagonal without the select
  (``codegen/diagonal.py``).

All default to ``None``. The first three are then on wherever the kernel has such a loop
(deferred sums and chunks outer move fewer bytes than the plain schedule: H200 numbers in
``docs/architecture.md``; deferred arg-bests drop a cross-lane reduction a step: H100 numbers
in ``benchmarks/results/deferred_args_s51_h100.md``); the
diagonal split is then off: it measured 1-3% faster on causal attention's forward and dk/dv
loops but 10% slower on its dq loop (``benchmarks/results/diagonal_s17.md``), so the search
tries it. ``False`` turns one off, ``True`` where the kernel has no such loop is repaired with a
message. A kernel without such a loop resolves the knob to ``None``, so its configs do not
spell it out.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilecraft.config.config import Config
    from tilecraft.config.spec import ConfigSpec

WHY_NOT = {
    "deferred_sums": "no inner loop adds a sum over its own tile to a carried value "
    "(acc = acc + x.sum(0)) or takes its max or min (torch.maximum(acc, x.amax(0)))",
    "deferred_args": "no inner loop without stores keeps a running arg-best of its own tile "
    "(v, i = torch.min(x, dim=1); better = v < best; arg = torch.where(better, i + t.begin, arg); "
    "best = torch.where(better, v, best); see ir/deferred_args.py)",
    "chunk_outer": "no row loop keeps [n] accumulators in memory that could run column chunks "
    "outer (see ir/chunk_outer.py)",
    "diagonal_splits": "no select compares a loop's indices with an enclosing tile's "
    "(see codegen/diagonal.py)",
}
# what an unset knob resolves to where the kernel offers it
UNSET = {
    "deferred_sums": True,
    # on: H100, chamfer 4.04 -> 0.80 ms, kmeans 0.40 -> 0.27, spec_decode 0.19 -> 0.18, four
    # others equal; a loop of one step never defers (ir/deferred_args.MIN_STEPS)
    "deferred_args": True,
    "chunk_outer": True,
    "diagonal_splits": False,
}


def offered(spec: ConfigSpec, config: Config | None = None) -> dict[str, bool]:
    """Which knobs the kernel has a loop for (``chunk_outer``: where ``config``'s reduction loops
    chunk a width whose accumulators live in memory and no inner loop is split across programs;
    None: any config)."""
    chunks = None if config is None else config.reduction_loops
    chunked = [
        r.chunk_outer and (chunks is None or (r.slot < len(chunks) and chunks[r.slot] is not None))
        for r in spec.reductions
    ]
    split = config is not None and any(s > 1 for s in config.split_reductions)
    return {
        "deferred_sums": spec.deferrable_sums,
        "deferred_args": spec.deferrable_args,
        "chunk_outer": any(chunked) and not split,
        "diagonal_splits": spec.diagonal_selects,
    }


def normalize_flags(spec: ConfigSpec, config: Config, repairs: list[str]) -> dict[str, Any]:
    """Each knob's resolved value (True / False where offered, else None); ``config``'s
    reduction loops and splits are already normalized."""
    out: dict[str, Any] = {}
    for name, ok in offered(spec, config).items():
        value = getattr(config, name)
        if value and not ok:
            repairs.append(f"{name}=True: {WHY_NOT[name]}; using False")
        out[name] = (UNSET[name] if value is None else value) if ok else None
    return out


def random_flags(spec: ConfigSpec, config: Config, rng: random.Random) -> dict[str, Any]:
    """A random value for each knob the kernel offers at ``config``'s chunks and splits."""
    return {name: rng.random() < 0.5 for name, ok in offered(spec, config).items() if ok}


def flipped(spec: ConfigSpec, config: Config) -> list[Config]:
    """``config`` with each offered knob turned the other way (None counts as its unset value)."""
    return [
        config.replace(**{name: not _resolved(config, name)})
        for name, ok in offered(spec, config).items()
        if ok
    ]


def _resolved(config: Config, name: str) -> bool:
    value = getattr(config, name)
    return UNSET[name] if value is None else bool(value)


__all__ = ["UNSET", "WHY_NOT", "flipped", "normalize_flags", "offered", "random_flags"]

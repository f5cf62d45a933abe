"""Checking and repairing a user's config for one kernel (stage: config; in: a ConfigSpec and a
Config; out: the repaired Config and the repairs made, or a ConfigError naming the field).

``ConfigSpec.resolve`` calls :func:`normalize_config` once per config and builds the Plan from
its result: block sizes clamped to each dim's range, reduction chunks a dim can take, splits and
flags the kernel allows, launch options the target supports (dropped with a repair otherwise),
tunables among their choices, and tiles that Triton can compile (:func:`_fit_tiles`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecraft import settings
from tilecraft.config import flags, occupancy, split, tile_budget
from tilecraft.config.compat_names import unknown_name_error
from tilecraft.config.config import Config, jsonable
from tilecraft.config.warp_specialize import fit_specialized_stages
from tilecraft.errors import ConfigError
from tilecraft.targets.target import filter_launch_options

if TYPE_CHECKING:
    from tilecraft.config.spec import ConfigSpec

MAX_NUMEL = 1 << 20  # Triton's limit on elements in one tensor
# elements per thread of the largest tile: explicit configs above this are shrunk, and the tuner
# skips candidates above it (Triton's compiler runs for many minutes on such tiles)
HARD_ELEMS_PER_THREAD = 512


def normalize_config(spec: ConfigSpec, config: Config) -> tuple[Config, list[str]]:
    """Check ``config`` against this kernel; return it repaired with what was repaired and
    why, or raise ConfigError.

    Fields the target cannot honor (``maxnreg`` on HIP/XPU, tensor descriptors before sm_90)
    are dropped (the caller warns once naming the field and the target, or rejects in strict
    mode); the interpreter drops launch options it lacks silently (CPU runs of GPU configs).
    Fields left unset (no block sizes, warps or stages) take the heuristic default's.
    """
    default = functools.cache(spec.default)  # computed once, and only if a field needs it
    fields = config.to_dict()
    repairs: list[str] = []
    fields.update(spec.space.normalize_fields(config, repairs))
    kept, dropped = filter_launch_options(spec.target, {"maxnreg": config.maxnreg})
    if "maxnreg" not in kept:
        fields.pop("maxnreg", None)
        if spec.target.backend != "interpret" or settings.strict():
            repairs += dropped
    fields["block_sizes"] = _block_sizes(spec, config, default)
    fields["reduction_loops"] = _normalize_reductions(spec, config, repairs)
    fields["split_reductions"] = split.normalize_splits(
        spec, Config(**fields), fields["pid_type"], fields["reduction_loops"], repairs
    )
    fields["split_atomics"] = split.normalize_atomics(
        spec, config, fields["split_reductions"], repairs
    )
    chunked = config.replace(
        reduction_loops=fields["reduction_loops"], split_reductions=fields["split_reductions"]
    )
    fields.update(flags.normalize_flags(spec, chunked, repairs))
    for name in ("num_warps", "num_stages"):
        if fields.get(name) is None:
            fields[name] = getattr(default(), name)
    fields["maxnreg"] = occupancy.fit_maxnreg(
        spec.target, fields.get("maxnreg"), fields["num_warps"], repairs
    )
    specialized = any(fields.get("range_warp_specializes") or ())
    fields["num_stages"] = fit_specialized_stages(
        spec.target, fields["num_stages"], specialized, repairs
    )
    fields.update(_tunables(spec, config))
    return _fit_tiles(spec, Config(**fields), repairs), repairs


def _block_sizes(spec: ConfigSpec, config: Config, default: Callable[[], Config]) -> list[int]:
    """``config``'s block sizes (the default's when it gives none), each at most its dim's
    padded extent; too few or too many, or one below a dot's least, is a ConfigError."""
    if len(config.block_sizes) != len(spec.blocks) and config.block_sizes:
        raise ConfigError(
            f"block_sizes has {len(config.block_sizes)} entries; this kernel has {len(spec.blocks)} "
            f"block sizes (one per tunable tile dimension, in order of appearance)"
        )
    given = len(config.block_sizes) == len(spec.blocks)  # (a kernel without blocks has none)
    blocks = list(config.block_sizes if given else default().block_sizes)
    for i, b in enumerate(spec.blocks):
        if blocks[i] < b.lo:
            why = (
                f"tc.register_block_size asks for at least {b.least}"
                if b.least == b.lo and b.least > 1
                else "tl.dot needs every dim >= 16, and K >= 32 for 8-bit operands"
            )
            raise ConfigError(f"block_sizes[{i}]={blocks[i]} is below {b.lo} ({why})")
        blocks[i] = min(blocks[i], b.hi)
    return blocks


def _tunables(spec: ConfigSpec, config: Config) -> dict[str, Any]:
    """The kernel's tunables from ``config`` (each its first choice when not given); a value
    not among the choices, or a name that is neither a Config field nor a tunable, is an
    error naming it."""
    values = {}
    for name, choices in spec.tunables.items():
        value = config.user_values.get(name, choices[0])
        # a Config keeps tuples as lists (its JSON form): a choice (1, 2) comes back as [1, 2]
        found = [c for c in choices if c == value or jsonable(c) == jsonable(value)]
        if not found:
            raise ConfigError(f"tunable {name}={value!r} is not one of {list(choices)}")
        values[name] = found[0]
    for name in config.user_values:
        if name not in spec.tunables:
            known = [*sorted(Config.field_names()), *spec.tunables]
            raise unknown_name_error("Config field or tunable", name, known)
    return values


def _fit_tiles(spec: ConfigSpec, config: Config, repairs: list[str]) -> Config:
    """Tiles over Triton's 2^20-element limit fail to compile, and tiles of many thousand
    elements per thread make its compiler run for many minutes (seed 000): shrink the blocks
    (and add warps) until they fit, with one warning, or reject in strict mode."""
    largest, value = spec.largest_value(config)
    warps = config.num_warps or 4
    if largest <= MAX_NUMEL and largest <= warps * 32 * HARD_ELEMS_PER_THREAD:
        return config
    where = f" (the value at {value.loc.short})" if value and value.loc else ""
    if largest > MAX_NUMEL:
        problem = f"a tile of {largest} elements{where} is over Triton's limit of {MAX_NUMEL}"
    else:
        problem = (
            f"a tile of {largest} elements{where} is {largest // (warps * 32)} per thread with "
            f"{warps} warps (over {HARD_ELEMS_PER_THREAD}: Triton takes minutes to compile it)"
        )
    while largest > warps * 32 * HARD_ELEMS_PER_THREAD and warps < min(16, spec.target.max_warps):
        warps *= 2  # more threads first: it does not change what the kernel computes
    fitted = tile_budget.shrink_to(spec, config, min(MAX_NUMEL, warps * 32 * HARD_ELEMS_PER_THREAD))
    largest, _ = spec.largest_value(fitted)
    while largest > warps * 32 * HARD_ELEMS_PER_THREAD and warps < spec.target.max_warps:
        warps *= 2
    fitted = fitted.replace(num_warps=warps)
    if largest > MAX_NUMEL:
        raise ConfigError(
            f"{problem}, even with the smallest blocks",
            hint="use a looped reduction (reduction_loops=[...]) if the kernel allows it",
        )
    repairs.append(f"{problem}; use smaller block_sizes or reduction_loops; using {fitted!r}")
    return fitted


def _normalize_reductions(spec: ConfigSpec, config: Config, repairs: list[str]) -> list[int | None]:
    given = list(config.reduction_loops)
    if given and len(given) != len(spec.reductions):
        # a config written for other shapes (a whole dim of size 1 is no reduction dim): each
        # dim is whole, which every shape allows, as the README promises for explicit configs
        repairs.append(
            f"reduction_loops has {len(given)} entries; this kernel has "
            f"{len(spec.reductions)} reduction dims at these shapes; using None (the whole "
            "dim) for each"
        )
        given = []
    out: list[int | None] = []
    for i, r in enumerate(spec.reductions):
        chunk = given[i] if given else None
        if chunk is not None and chunk >= r.full:
            chunk = None
        if chunk is not None and not r.loopable:  # a repair, as the README promises
            repairs.append(
                f"reduction_loops[{i}]={chunk}: this reduction dim cannot be looped: "
                f"{r.reason}; using None (the whole dim)"
            )
            chunk = None
        out.append(chunk)
    kept = spec.one_looped(out)
    if kept != out:  # codegen rolls one dim (codegen/schedule.py): a repair, not an error
        dropped = [f"[{i}]={c}" for i, c in enumerate(out) if c is not None and kept[i] is None]
        repairs.append(
            f"reduction_loops{', '.join(dropped)}: at most one reduction dim per kernel can "
            f"be looped; keeping the longest dim's chunk, using None (the whole dim) for "
            f"the others"
        )
    return kept


__all__ = ["HARD_ELEMS_PER_THREAD", "MAX_NUMEL", "normalize_config"]

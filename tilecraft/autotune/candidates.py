"""Candidate configs for default discovery, neighbours for the search, and static checks
(stage: autotune; see docs/architecture.md).

:func:`candidates` ranks the spec's heuristic default first, then progressively safer variants
(one stage, enough warps for the tile, halved blocks, looped reductions with smaller chunks), each
normalized by the spec (those it rejects are recorded with the reason) and de-duplicated.
:func:`static_check` rejects configs before anything is compiled: a tile over Triton's 2^20-element
limit, staged loads needing more shared memory than the target has (the launch would fail), or
far too many elements per thread (such configs make Triton's compiler run for many minutes: a
64x1024 fp32 tile with 1 warp did not finish compiling in 300 s).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tilecraft.autotune.classify import Attempt, Category, classify
from tilecraft.config import flags
from tilecraft.config.config import Config
from tilecraft.config.dims import cdiv
from tilecraft.config.normalize import HARD_ELEMS_PER_THREAD, MAX_NUMEL
from tilecraft.config.pipelines import SORT_KEY_BYTES, sort_scratch, staged_operands
from tilecraft.config.plan import block_dims, next_pow2
from tilecraft.config.spec import ConfigSpec
from tilecraft.config.split import split_moves
from tilecraft.errors import ConfigError
from tilecraft.ir.nodes import Sym, SymKind

MAX_ELEMS_PER_THREAD = HARD_ELEMS_PER_THREAD  # the static check's limit (largest tile / threads)
SAFE_ELEMS_PER_THREAD = 64  # what the safer variants aim for when they pick num_warps
MAX_STAGES = 5


def static_check(
    spec: ConfigSpec,
    config: Config,
    warp_size: int = 32,
    max_per_thread: int = MAX_ELEMS_PER_THREAD,
) -> str | None:
    """Why ``config`` (normalized) must not be compiled, or ``None`` if it passes."""
    largest, value = spec.largest_value(config)
    where = f" (the value at {value.loc.short})" if value is not None and value.loc else ""
    if largest > MAX_NUMEL:
        return f"a tile of {largest} elements{where} exceeds Triton's limit of {MAX_NUMEL}"
    shared, limit = spec.estimated_shared_bytes(config), spec.target.limits.max_shared_bytes
    if spec.target.backend != "interpret" and shared > limit:
        sort_bytes, sorted_tile = sort_scratch(spec, config)
        if sort_bytes > limit and sorted_tile is not None:
            at = f" at {sorted_tile.loc.short}" if sorted_tile.loc else ""
            return (
                f"the sort{at} of a tile of {sort_bytes // SORT_KEY_BYTES} elements needs "
                f"{sort_bytes} bytes of shared memory ({SORT_KEY_BYTES} a key), more than the "
                f"target's {limit}: sort at most {_sortable(limit)} elements a program"
            )
        return _shared_memory_reason(spec, config, shared, limit)
    threads = (config.num_warps or 4) * warp_size
    per_thread = largest / threads
    if per_thread > max_per_thread:
        return (
            f"{per_thread:.0f} elements per thread (a tile of {largest} elements{where} over "
            f"{threads} threads) > {max_per_thread}: the compiler could run for many minutes"
        )
    return None


def _shared_memory_reason(spec: ConfigSpec, config: Config, shared: int, limit: int) -> str:
    """Why ``config`` needs more shared memory than the target has, naming the tl.dot operands
    that take it (their file:line, block shape and bytes) and what shrinks them."""
    reason = (
        f"its staged loads need at least {shared} bytes of shared memory, more than the "
        f"target's {limit}: the launch would fail"
    )
    operands = sorted(staged_operands(spec, config), key=lambda item: -item[1])
    operands = [(node, size) for node, size in operands if size]
    if sum(size for _, size in operands) * 2 < shared:
        return reason  # pipelined loads, not dot operands, take most of it
    blocks, chunks = tuple(config.block_sizes), tuple(config.reduction_loops)
    named = ", ".join(
        f"{node.loc.short if node.loc else 'a dot operand'} "
        f"({block_dims(node.shape, blocks, chunks)} {str(node.dtype).removeprefix('torch.')}, "
        f"{size} B with its stages)"
        for node, size in operands[:3]
    )
    whole = any(isinstance(d, Sym) and d.kind is SymKind.RDIM for n, _ in operands for d in n.shape)
    remedy = (
        "a dim loaded whole (`:`) is in shared memory whole whatever the blocks: loop over it "
        "in chunks (an inner tc.tile with a running combine) so each step's operand fits"
        if whole
        else "smaller blocks or fewer stages"
    )
    return f"{reason}; the tl.dot operands {named} take most of it: {remedy}"


def _sortable(limit: int) -> int:
    """The most elements (a power of two) whose sort keys fit ``limit`` bytes."""
    return 1 << ((limit // SORT_KEY_BYTES).bit_length() - 1)


def quiet_normalize(spec: ConfigSpec, config: Config) -> Config:
    """``config`` resolved without repair warnings (the tuner's own configs, not the user's;
    strict mode still turns repairs into ConfigErrors)."""
    return spec.resolve(config, warn=False).config


def check(
    spec: ConfigSpec,
    config: Config,
    warp_size: int = 32,
    max_per_thread: int = MAX_ELEMS_PER_THREAD,
) -> tuple[Config | None, Attempt | None]:
    """Normalize and statically check ``config``: ``(normalized, None)`` or ``(None, why)``."""
    try:
        normalized = quiet_normalize(spec, config)
    except ConfigError as exc:
        category, _ = classify(exc.message, "static")
        if category is Category.COMPILE_ERROR:
            category = Category.RESOURCE if "exceeds" in exc.message else category
        return None, Attempt(config, category, f"rejected by normalize: {exc.message}")
    why = static_check(spec, normalized, warp_size, max_per_thread)
    if why is not None:
        return None, Attempt(normalized, Category.RESOURCE, f"static check: {why}")
    return normalized, None


def candidates(
    spec: ConfigSpec,
    *,
    warp_size: int = 32,
    first: Sequence[Config] = (),
    limit: int = 16,
) -> tuple[list[Config], list[Attempt]]:
    """Ranked, normalized, statically checked, de-duplicated candidates (``first``, then the
    heuristic default, then safer variants) and the rejected ones with their reasons."""
    out: list[Config] = []
    rejected: list[Attempt] = []
    seen_raw: set[str] = set()
    seen: set[str] = set()
    default = spec.default()
    if check(spec, default, warp_size)[0] is None:  # a broken heuristic: start from small tiles
        raw = [*first, default, *_safer_variants(spec, smallest(spec), warp_size)]
    else:
        # a Hopper pipeline default (TMA, persistent, ...) is followed by its own tiles fed by
        # pointers (a TMA miscompile keeps its tile shape), then the plain default's tiles and
        # the safer variants of those
        plain = spec.plain_default()
        fed = [_pointer_fed(spec, default)] if default != plain else []
        raw = [*first, default, *fed, *_safer_variants(spec, plain, warp_size)]
    for config in raw:
        if config.key() in seen_raw:
            continue
        seen_raw.add(config.key())
        normalized, why = check(spec, config, warp_size)
        if normalized is None:
            assert why is not None
            rejected.append(why)
            continue
        if normalized.key() in seen:
            continue
        seen.add(normalized.key())
        out.append(normalized)
        if len(out) >= limit:
            break
    return out, rejected


def _pointer_fed(spec: ConfigSpec, config: Config) -> Config:
    """``config``'s tiles and stages with pointer indexing, a flat grid and no warp
    specialization (8 warps where the specialized consumers had 4 warpgroups' rows)."""
    specialized = any(config.range_warp_specializes)
    return config.replace(
        indexing=["pointer"] * len(spec.space.indexing_choices),
        pid_type="flat",
        num_sm_multiplier=None,
        range_warp_specializes=[],
        num_warps=8 if specialized else config.num_warps,
    )


def _safer_variants(spec: ConfigSpec, base: Config, warp_size: int) -> Iterator[Config]:
    yield base
    if (base.num_stages or 1) > 1:
        yield base.replace(num_stages=1)
    yield fit_warps(spec, base.replace(num_stages=1), warp_size)
    current = base
    for _ in range(24):
        smaller = halve_largest(spec, current)
        if smaller is None:
            break
        current = smaller
        yield fit_warps(spec, current.replace(num_stages=1), warp_size)


def smallest(spec: ConfigSpec) -> Config:
    """A config with the smallest blocks and whole reductions (a base when the default fails)."""
    return Config(
        block_sizes=[b.lo for b in spec.blocks],
        reduction_loops=[None] * len(spec.reductions),
        num_warps=4,
        num_stages=1,
    )


def fit_warps(spec: ConfigSpec, config: Config, warp_size: int = 32) -> Config:
    """``config`` with num_warps (4..16) chosen so the largest tile has at most
    SAFE_ELEMS_PER_THREAD elements per thread where possible."""
    largest, _ = spec.largest_value(config)
    want = next_pow2(cdiv(largest, warp_size * SAFE_ELEMS_PER_THREAD))
    return config.replace(num_warps=max(4, min(spec.target.max_warps, want)))


def halve_largest(spec: ConfigSpec, config: Config) -> Config | None:
    """Halve the largest shrinkable dim of the largest tile that has one: a block size (not
    below its lower bound) or a loopable reduction (rolled into chunks; at most one is looped)."""
    blocks = list(config.block_sizes) or [b.hi for b in spec.blocks]
    chunks = list(config.reduction_loops) or [None] * len(spec.reductions)
    looped = [i for i, c in enumerate(chunks) if c is not None]
    for value in sorted(spec.values, key=lambda v: -spec.numel(v, config)):
        options: list[tuple[int, str, int]] = []  # (current size, kind, slot)
        for kind, slot in ((d[0], d[1]) for d in value.dims if d[0] in ("b", "r")):
            if kind == "b" and slot < len(spec.blocks) and blocks[slot] > spec.blocks[slot].lo:
                options.append((blocks[slot], "b", slot))
            elif kind == "r" and slot < len(spec.reductions):
                red = spec.reductions[slot]
                size = chunks[slot] or red.full
                if red.loopable and size > 16 and (not looped or looped == [slot]):
                    options.append((size, "r", slot))
        if not options:
            continue
        _, kind, slot = max(options)
        if kind == "b":
            blocks[slot] //= 2
        else:
            chunks[slot] = (chunks[slot] or spec.reductions[slot].full) // 2
        return config.replace(block_sizes=blocks, reduction_loops=chunks)
    return None


def neighbors(spec: ConfigSpec, config: Config, strategies: bool = False) -> list[Config]:
    """Configs one step away from ``config`` (normalized): each block size x2 and /2, each
    loopable reduction looped / chunk x2 / chunk /2 / whole, num_warps x2 and /2, num_stages +-1,
    every other choice of each user tunable, each split inner loop's factor x2 and /2, and
    ``deferred_sums`` and ``chunk_outer`` flipped where the kernel has such a loop;
    with ``strategies``, instead the codegen strategy moves of
    :meth:`StrategySpace.neighbor_fields`. Not normalized."""
    if strategies:
        return [config.replace(**fields) for fields in spec.space.neighbor_fields(config)]
    out: list[Config] = []
    blocks = list(config.block_sizes)
    for i, b in enumerate(spec.blocks):
        if i >= len(blocks):
            break
        for size in (blocks[i] * 2, blocks[i] // 2):
            if b.lo <= size <= b.hi and size != blocks[i]:
                out.append(config.replace(block_sizes=_set(blocks, i, size)))
    chunks = list(config.reduction_loops)
    for i, r in enumerate(spec.reductions):
        if i >= len(chunks) or not r.loopable or r.full <= 16:
            continue
        current = chunks[i]
        options: list[int | None] = (
            [r.full // 2, min(r.full // 2, 1024)]
            if current is None
            else [None if current * 2 >= r.full else current * 2, current // 2]
        )
        for chunk in options:
            if chunk != current and (chunk is None or chunk >= 16):
                out.append(config.replace(reduction_loops=_set(chunks, i, chunk)))
    warps = config.num_warps or 4
    for w in (warps * 2, warps // 2):
        if 1 <= w <= spec.target.max_warps:
            out.append(config.replace(num_warps=w))
    stages = config.num_stages or 1
    for s in (stages + 1, stages - 1):
        if 1 <= s <= MAX_STAGES:
            out.append(config.replace(num_stages=s))
    for name, choices in spec.tunables.items():
        current_value = config.user_values.get(name, choices[0])
        out += [config.replace(**{name: c}) for c in choices if c != current_value]
    if config.pid_type == "flat":
        out += split_moves(spec, config)  # split_reductions x2 and /2 where a loop can split
    out += flags.flipped(spec, config)  # deferred_sums, chunk_outer: where the kernel has them
    return out


def _set(values: Sequence[int | None], i: int, v: int | None) -> list[int | None]:
    out = list(values)
    out[i] = v
    return out

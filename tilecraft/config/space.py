"""The codegen-strategy part of a config space (stage: config; in: device loops + target; out:
legal values, defaults, random picks and normalization for the strategy fields).

Fields: ``pid_type`` / ``num_sm_multiplier``, ``indexing`` (per load/store), ``load_eviction_policies``
(per load), ``l2_groupings`` and ``loop_orders`` (per device loop), and the ``range_*`` knobs (per
``tl.range`` loop: each device loop's persistent loop, then its nested loops). A field is offered
only where the kernel has something for it to act on and the target can honor it.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Any

import torch

from tilecraft.config.config import Config
from tilecraft.config.grid_order import contiguous_first_order
from tilecraft.config.warp_specialize import (
    computed_left_operand_loads,
    warp_specialize_carry_problem,
    warp_specialize_problem,
)
from tilecraft.errors import ConfigError
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, walk
from tilecraft.ir.read_after_write import proxy_crossings

MAX_GRID_YZ = 65535
TMA_MAX_BOX = 256  # elements per dim of one tensor-descriptor block
RANGE_FIELDS = {
    # config field -> (tl.range keyword, choices; the first is "leave it to Triton")
    "range_unroll_factors": ("loop_unroll_factor", (0, 1, 2, 4)),
    "range_num_stages": ("num_stages", (0, 1, 2, 3, 4)),
    "range_multi_buffers": ("disallow_acc_multi_buffer", (None, True, False)),
    "range_flattens": ("flatten", (None, True, False)),
    "range_warp_specializes": ("warp_specialize", (None, True, False)),
}
NEUTRAL = {"indexing": "pointer", "load_eviction_policies": "", "l2_groupings": 1}


@dataclasses.dataclass
class GridInfo:
    rank: int
    counts: list[int] | None  # tiles per grid dim for the traced shapes (None: dynamic)


def _access_ok(node: Node, scalar_ok: bool = False) -> bool:
    """block_ptr / tensor_descriptor need every index to be a tile or ':' that spans the tensor
    dim from 0 (their bounds checks are the tensor's bounds, not a tile loop's), or a nested
    tile over bounds of such a tile (``tc.tile(tm.begin, tm.end)``: the plan then requires its
    block to divide that tile's, so no block reaches past the loop's bound). With
    ``scalar_ok`` (descriptors) a scalar tile index is a block dim of 1 that codegen drops."""
    tensor = node.attrs["tensor"]
    if node.attrs.get("extra_mask") is not None:
        return False  # a block access has no element mask to and it with
    for item in node.attrs["index"]:
        if item[0] == "rdim":
            continue
        if item[0] != "tile" or (item[1].scalar and not scalar_ok):
            return False
        sym: Sym = item[1]
        size = tensor.shape[item[2]]
        if not (_spans(sym.begin, 0, size) and _spans(sym.extent, size, size)):
            return False
    return len(node.attrs["index"]) == tensor.ndim


def _spans(bound: Any, want: int, size: Any) -> bool:
    """Whether a tile bound is ``want``, or the begin/end of a tile spanning ``[0, size)``."""
    if isinstance(bound, int):
        return bound == want and isinstance(size, int)
    outer = outer_tile(bound)
    return outer is not None and outer.begin == 0 and outer.extent == size and isinstance(size, int)


def outer_tile(bound: Any) -> Sym | None:
    """The tile whose ``.begin`` / ``.end`` a nested tile's bound is (None for other bounds)."""
    if isinstance(bound, Node) and bound.op in (Op.TILE_BEGIN, Op.TILE_END):
        sym = bound.attrs.get("sym")
        return sym if isinstance(sym, Sym) and not sym.scalar else None
    return None


def descriptor_order(tensor: Any) -> tuple[int, ...] | None:
    """The dims of ``tensor`` in the order its tensor descriptor lists them: its unit-stride dim
    last (TMA's inner dim), the others as they are. A transposed view (a linear layer's weight
    passed as ``w.t()``) gets a descriptor over its storage order whose loaded blocks codegen
    permutes back. None: no single unit-stride dim, or strides only known at run time."""
    if tensor.dynamic or tensor.ndim == 0:
        return None
    dims = range(tensor.ndim)
    if tensor.stride[-1] == 1:
        return tuple(dims)
    units = [d for d in dims if tensor.stride[d] == 1 and tensor.shape[d] > 1]
    if len(units) != 1:
        return None
    return (*(d for d in dims if d != units[0]), units[0])


def _descriptor_ok(node: Node) -> bool:
    """TMA's layout rules: a unit-stride dim (listed last, :func:`descriptor_order`), 16-byte
    aligned outer strides, and none of them 0 (a dim expanded over a batch: a tensor map is
    documented for strides that step through memory, so such a load stays a pointer load)."""
    tensor = node.attrs["tensor"]
    order = descriptor_order(tensor)
    if order is None or tensor.dtype == torch.bool:  # Triton's i1 element has no byte size
        return False
    size = tensor.dtype.itemsize
    outer = [(tensor.shape[d], tensor.stride[d]) for d in order[:-1]]
    return all((s * size) % 16 == 0 and (s > 0 or d == 1) for d, s in outer)


def _has_dot(node: Node) -> bool:
    return any(n.op is Op.DOT for n in walk(node.body or []))


class StrategySpace:
    def __init__(self, loops: list[DeviceLoop], target: Any):
        self.target = target
        caps = target.capabilities
        self.grids = [GridInfo(len(loop.grid_syms), _counts(loop)) for loop in loops]
        # per device loop: its grid dims with the one walking memory's rows fastest
        self.memory_orders = [contiguous_first_order(loop) for loop in loops]
        mem = sorted(
            (n for loop in loops for n in loop.walk() if "mem_slot" in n.attrs),
            key=lambda n: n.attrs["mem_slot"],
        )
        self.accesses: list[Node] = mem  # loads and stores, in mem_slot order
        self.n_loads = sum(1 for n in mem if n.op is Op.LOAD)
        self.indexing_choices: list[tuple[str, ...]] = []
        # accesses kept off descriptors: loads for a known miscompile (a pipeline streams them
        # by pointer), and the loads and stores of a read after a write (the async proxy)
        self.off_descriptors = {
            n.attrs["mem_slot"]
            for loop in loops
            for dot_loop in loop.walk()
            if dot_loop.op is Op.LOOP
            for n in computed_left_operand_loads(target, dot_loop)
        }
        # a load after a store to its tensor, and that store: TMA would not see the store
        crossings = set().union(*(proxy_crossings(loop) for loop in loops))
        self.off_descriptors |= {n.attrs["mem_slot"] for n in mem if n.id in crossings}
        for access in mem:
            kinds = ["pointer"]
            # (a 0-d tensor's one element has no block: pointers only)
            if _access_ok(access) and caps.block_pointers and access.attrs["tensor"].ndim:
                kinds.append("block_ptr")
            descriptor = target.tensor_descriptors and caps.block_pointers
            descriptor = descriptor and access.attrs["mem_slot"] not in self.off_descriptors
            if descriptor and _access_ok(access, scalar_ok=True) and _descriptor_ok(access):
                kinds.append("tensor_descriptor")
            self.indexing_choices.append(tuple(kinds))
        self.eviction_choices = ("", "first", "last") if caps.eviction_policies else ("",)
        self.range_choices: dict[str, list[tuple[Any, ...]]] = {}
        slots: list[Node | None] = []
        for loop in loops:
            slots.append(None)  # the persistent loop of this device loop
            slots.extend(n for n in loop.walk() if n.op is Op.LOOP)
        self.loop_loads = [
            []
            if n is None
            else [m.attrs["mem_slot"] for m in walk(n.body or []) if m.op is Op.LOAD]
            for n in slots
        ]
        self.n_ranges = len(slots)
        # range slots of loops that hold a tl.dot (the loops a Hopper pipeline streams)
        self.dot_slots = [i for i, n in enumerate(slots) if n is not None and _has_dot(n)]
        # why a dot loop may not be warp-specialized for what it carries ("" where it may)
        self.ws_carry_problems = [
            "" if n is None else warp_specialize_carry_problem(target, n) or "" for n in slots
        ]
        for field, (keyword, choices) in RANGE_FIELDS.items():
            per_slot: list[tuple[Any, ...]] = []
            for slot_node in slots:
                ok = keyword in caps.range_kwargs
                if field == "range_warp_specializes":
                    ok = (
                        ok
                        and target.warp_specialize
                        and slot_node is not None
                        and _has_dot(slot_node)
                        and not self.ws_carry_problems[len(per_slot)]
                    )
                per_slot.append(choices if ok else choices[:1])
            self.range_choices[field] = per_slot
        self.persistent_slots = [loop.range_slot for loop in loops]

    # -- allowed values -------------------------------------------------------------------
    def pid_types(self) -> list[str]:
        out = ["flat", "persistent_blocked", "persistent_interleaved"]
        if all(
            g.counts is not None and g.rank <= 3 and max(g.counts[1:], default=1) <= MAX_GRID_YZ
            for g in self.grids
        ):
            out.insert(1, "xyz")
        return out

    def default_fields(self) -> dict[str, Any]:
        return {
            "pid_type": "flat",
            "indexing": ["pointer"] * len(self.indexing_choices),
            "load_eviction_policies": [""] * self.n_loads,
            "l2_groupings": [1] * len(self.grids),
            "loop_orders": [list(range(g.rank)) for g in self.grids],
            **{field: [c[0] for c in per] for field, per in self.range_choices.items()},
        }

    def random_fields(self, rng: random.Random) -> dict[str, Any]:
        pid = rng.choice(self.pid_types())
        fields: dict[str, Any] = {
            "pid_type": pid,
            "indexing": [rng.choice(c) for c in self.indexing_choices],
            "load_eviction_policies": [
                rng.choice(self.eviction_choices) for _ in range(self.n_loads)
            ],
            "l2_groupings": [
                rng.choice((1, 4, 8, 16)) if g.rank >= 2 and pid != "xyz" else 1 for g in self.grids
            ],
            "loop_orders": [rng.sample(range(g.rank), g.rank) for g in self.grids],
            **{field: [rng.choice(c) for c in per] for field, per in self.range_choices.items()},
        }
        if pid.startswith("persistent"):
            fields["num_sm_multiplier"] = rng.choice((1, 2, 4))
        self._check_warp_specialize(fields, [])
        return self._neutral_persistent_slots(fields)

    def neighbor_fields(self, config: Config) -> list[dict[str, Any]]:
        """Strategy moves one step from a normalized ``config``, for the tuner's local search:
        every other pid_type (and SM multiplier), all accesses to one indexing kind (each
        access its closest allowed kind), all loads to one eviction policy, each L2 grouping of
        a 2-D grid to another size, and each 2-D+ grid to its identity or its memory order
        (``config/grid_order.py``)."""
        moves: list[dict[str, Any]] = []
        pid = config.pid_type
        # xyz has no L2 grouping: moving there resets it
        ungrouped = {"l2_groupings": [1] * len(self.grids)}
        moves += [
            {"pid_type": p, **(ungrouped if p == "xyz" else {})}
            for p in self.pid_types()
            if p != pid
        ]
        if pid.startswith("persistent"):
            mult = config.num_sm_multiplier or 1
            moves += [{"num_sm_multiplier": m} for m in (1, 2, 4) if m != mult]
        current = list(config.indexing) if not isinstance(config.indexing, str) else []
        for kind in ("pointer", "block_ptr", "tensor_descriptor"):
            picked = [kind if kind in c else c[-1] for c in self.indexing_choices]
            if any(kind in c for c in self.indexing_choices) and picked != current:
                moves.append({"indexing": picked})
        evict = list(config.load_eviction_policies)
        for policy in self.eviction_choices:
            if self.n_loads and [policy] * self.n_loads != evict:
                moves.append({"load_eviction_policies": [policy] * self.n_loads})
        l2 = list(config.l2_groupings) or [1] * len(self.grids)
        for i, info in enumerate(self.grids):
            if info.rank >= 2 and pid != "xyz":
                moves += [
                    {"l2_groupings": [*l2[:i], g, *l2[i + 1 :]]}
                    for g in (1, 4, 8, 16)
                    if g != l2[i]
                ]
        orders = self._loop_orders(config)
        for i, info in enumerate(self.grids):
            others = {tuple(range(info.rank)), tuple(self.memory_orders[i])} - {tuple(orders[i])}
            moves += [
                {"loop_orders": [*orders[:i], list(o), *orders[i + 1 :]]} for o in sorted(others)
            ]
        return moves

    def _check_warp_specialize(
        self, fields: dict[str, Any], repairs: list[str], num_warps: int | None = None
    ) -> None:
        """Triton 3.6 fails to compile warp-specialized loops that load through pointers
        (seen on sm_90: "PassManager::run failed"); they need tensor-descriptor loads. On sm_9x
        it specializes only 4-warp programs (:func:`warp_specialize_problem`)."""
        ws = fields["range_warp_specializes"]
        for slot, value in enumerate(ws):
            if not value:
                continue
            if any(fields["indexing"][m] != "tensor_descriptor" for m in self.loop_loads[slot]):
                why = "needs tensor_descriptor loads in that loop"
            else:
                why = warp_specialize_problem(self.target, num_warps) or ""
            if why:
                repairs.append(f"range_warp_specializes[{slot}]=True {why}; using None")
                ws[slot] = None

    def _neutral_persistent_slots(self, fields: dict[str, Any]) -> dict[str, Any]:
        if not str(fields["pid_type"]).startswith("persistent"):
            for field, per in self.range_choices.items():
                for slot in self.persistent_slots:
                    fields[field][slot] = per[slot][0]
            fields.pop("num_sm_multiplier", None)
        return fields

    # -- normalize ------------------------------------------------------------------------
    def normalize_fields(self, config: Config, warn: list[str]) -> dict[str, Any]:
        """The strategy fields of ``config`` checked and repaired; repairs are described in
        ``warn`` (the caller warns or, in strict mode, raises)."""
        out = self.default_fields()
        pid = config.pid_type
        if pid not in self.pid_types():
            raise ConfigError(
                f"pid_type={pid!r} is not possible here: the grid does not fit the y/z limits (or is dynamic)"
            )
        out["pid_type"] = pid
        if pid.startswith("persistent"):
            mult = config.num_sm_multiplier or 1
            if mult < 1:
                raise ConfigError(f"num_sm_multiplier={mult} must be >= 1")
            out["num_sm_multiplier"] = mult
        out["indexing"] = self._per_item("indexing", config.indexing, self.indexing_choices, warn)
        evict = [self.eviction_choices] * self.n_loads
        out["load_eviction_policies"] = self._per_item(
            "load_eviction_policies", config.load_eviction_policies, evict, warn
        )
        out["l2_groupings"] = self._l2(config, pid)
        out["loop_orders"] = self._loop_orders(config)
        for field, per in self.range_choices.items():
            out[field] = self._per_item(field, getattr(config, field), per, warn)
        self._check_warp_specialize(out, warn, config.num_warps)
        if config.flatten_loops and any(config.flatten_loops):
            raise ConfigError(
                "flatten_loops=True is not supported by tilecraft's codegen; use range_flattens"
            )
        return self._neutral_persistent_slots(out)

    def _per_item(
        self, field: str, given: Any, choices: list[tuple[Any, ...]], warn: list[str]
    ) -> list[Any]:
        broadcast = isinstance(
            given, str
        )  # one value for all: items that can't take it keep the default
        values = [given] * len(choices) if broadcast else list(given)
        neutral = [c[0] for c in choices]
        if not values or all(_is_neutral(field, v) for v in values):
            return neutral  # Helion-style explicit neutral lists fit whatever the count
        if len(values) != len(choices):  # written for shapes with other loads (a long row's
            # flip re-reads memory): the defaults here, as reduction_loops is repaired
            warn.append(
                f"{field} has {len(values)} entries; this kernel has {len(choices)} at these "
                "shapes; using the defaults"
            )
            return neutral
        out = []
        for i, (value, allowed) in enumerate(zip(values, choices, strict=True)):
            if value in allowed:
                out.append(value)
                continue
            if value not in RANGE_FIELDS.get(field, ("", ()))[1] and field in RANGE_FIELDS:
                raise ConfigError(
                    f"{field}[{i}]={value!r}: expected one of {list(RANGE_FIELDS[field][1])}"
                )
            if not broadcast:
                why = f"not available here ({self.target.key})"
                if field == "range_warp_specializes" and self.ws_carry_problems[i]:
                    why = f"not available: that loop {self.ws_carry_problems[i]}"
                warn.append(f"{field}[{i}]={value!r} is {why}; using {allowed[0]!r}")
            out.append(allowed[0])
        return out

    def _l2(self, config: Config, pid: str) -> list[int]:
        given = list(config.l2_groupings) or [1] * len(self.grids)
        if all(g == 1 for g in given):
            return [1] * len(self.grids)
        if len(given) != len(self.grids):
            raise ConfigError(
                f"l2_groupings has {len(given)} entries; this kernel has {len(self.grids)} device loops"
            )
        for g, info in zip(given, self.grids, strict=True):
            if g < 1 or g & (g - 1):
                raise ConfigError(f"l2_groupings: {g} is not a power of two >= 1")
            if g > 1 and (info.rank < 2 or pid == "xyz"):
                raise ConfigError(
                    "l2_groupings > 1 needs a 2-D (or larger) grid and a flat or persistent pid_type"
                )
        return given

    def _loop_orders(self, config: Config) -> list[list[int]]:
        given = [list(o) for o in config.loop_orders]
        if not given:
            return [list(range(g.rank)) for g in self.grids]
        if len(given) != len(self.grids):
            raise ConfigError(
                f"loop_orders has {len(given)} entries; this kernel has {len(self.grids)} device loops"
            )
        for order, info in zip(given, self.grids, strict=True):
            if sorted(order) != list(range(info.rank)):
                raise ConfigError(
                    f"loop_orders: {order} is not a permutation of the grid's {info.rank} dims"
                )
        return given

    def all_loop_orders(self) -> list[list[list[int]]]:
        return [[list(p) for p in itertools.permutations(range(g.rank))] for g in self.grids]


def _is_neutral(field: str, value: Any) -> bool:
    """Whether ``value`` means "default" for ``field`` (``False`` is not ``0`` or ``None`` here)."""
    neutral: tuple[Any, ...] = (
        (NEUTRAL[field],) if field in NEUTRAL else (RANGE_FIELDS[field][1][0],)
    )
    return any(value is n or (type(value) is type(n) and value == n) for n in neutral)


def _counts(loop: DeviceLoop) -> list[int] | None:
    counts = []
    for sym in loop.grid_syms:
        if not isinstance(sym.extent, int) or not isinstance(sym.begin, int):
            return None
        counts.append(sym.extent - sym.begin)  # an upper bound of tiles (block size >= 1)
    return counts


__all__ = ["GridInfo", "StrategySpace", "SymKind"]

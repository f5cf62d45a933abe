"""Device loops: ``tile``, ``grid``, ``static_range`` and the ``Tile`` objects they yield.

On the host of a compiled kernel a top-level device loop never runs as Python: the frontend replaces
it with a launch, and ``tile(...)`` only records its bounds (a :class:`TileSpec`). Inside a device
loop being traced, the tracer turns a ``TileSpec`` into a loop region. In ref mode a ``TileSpec``
iterates :class:`RefTile` objects over real index ranges.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from tilecraft.errors import RUN_TIME_COUNT_HINT, DeviceCodeError, ShapeError, SourceLoc
from tilecraft.language import _context, ref_sample
from tilecraft.language.tunables import SpecializeHostInts, host_int_names

BLOCK_SIZE_HINT = (
    "a tile's lanes are a power of two; to take groups of another size whole, view the "
    "tensor in host code (xv = x.view(n, c // g, g)) and tile the group dim, reading "
    "xv[tn, tg, :]; or use the next power of two and mask (torch.where on t.index)"
)


@dataclasses.dataclass
class TileSpec:
    """The bounds of a device loop: ``tile(end)``, ``tile(begin, end)``, ``tile([m, n])``."""

    begins: tuple[Any, ...]
    ends: tuple[Any, ...]
    block_sizes: tuple[Any, ...]  # None = tunable
    kind: str  # "tile" or "grid"
    multi: bool  # tile([m, n]) yields a tuple

    def __iter__(self) -> Iterator[Any]:
        ctx = _context.host()
        if ctx is None or ctx.mode != "ref":
            import sys

            caller = sys._getframe(1)
            where = SourceLoc(caller.f_code.co_filename, caller.f_lineno)
            if _context.device() is not None:  # a helper function called from device code
                raise DeviceCodeError(
                    f"tc.{self.kind}() in a helper function called from device code: loops are "
                    "traced from the kernel's own body, and a helper runs as plain Python",
                    where,
                    hint="write the loop in the kernel's body; a helper may take and return "
                    "tiles (def rows(x, tm): return x[tm, :])",
                )
            raise DeviceCodeError(
                f"tc.{self.kind}() ran as a plain Python loop",
                where,
                hint="device loops run inside a function decorated with @tc.kernel; "
                "call the kernel instead of iterating a tile outside it",
            )
        return _ref_iter(self)


@dataclasses.dataclass(frozen=True)
class RefTile:
    """A tile in ref mode: a real index range [begin, end)."""

    begin: int
    end: int
    block_size: int
    id: int
    is_grid: bool = False
    count: int = 1  # tiles in the loop
    stop: int = 0  # the end of the whole loop (a row length for global element numbers)

    @property
    def index(self) -> torch.Tensor:
        """The tile's indices; one (0-D) for a grid index or a tile of block size 1, which
        index like an int, as in compiled code."""
        device = getattr(_context.host(), "device", None)
        if self.is_grid:
            return torch.tensor(self.begin, device=device)
        return torch.arange(self.begin, self.end, device=device)

    def as_index(self) -> slice | int:
        if self.is_grid:
            return self.begin
        if self.begin < 0:  # as compiled code refuses it (frontend/coverage.py)
            from tilecraft.language.ref_access import user_loc

            raise ShapeError(
                f"a tile loop over [{self.begin}, {self.stop}) indexes a tensor from "
                f"{self.begin}, before its first element",
                user_loc(),
                hint="begin the loop at 0 or later (a negative index counts from the end only "
                "in Python's own indexing); where the begin is read from memory (offsets), "
                "check those values",
            )
        return slice(self.begin, self.end)

    def value(self) -> Any:
        """What the tile means in arithmetic: its int for a grid index, else its index tensor."""
        return self.begin if self.is_grid else self.index

    def __index__(self) -> int:
        # a grid index is its int; a tile where torch wants an int is a size (x.expand(tm, tn)),
        # as it is in device code (subscripts with tiles never get here: ref mode makes slices)
        return self.begin if self.is_grid else self.end - self.begin

    def __int__(self) -> int:
        return self.begin


def _ref_binary(name: str, reflected: bool) -> Any:
    import operator

    op = getattr(operator, name.rstrip("_") + "_" if name in ("and", "or") else name)

    def fn(self: RefTile, other: Any) -> Any:
        other = other.value() if isinstance(other, RefTile) else other
        return op(other, self.value()) if reflected else op(self.value(), other)

    return fn


def _ref_equal(negate: bool) -> Any:
    """``d == 0`` of a grid index compares its int, as compiled code does (the dataclass's field
    equality made it always False); two tiles of one loop stay equal as values."""

    def fn(self: RefTile, other: Any) -> Any:
        if isinstance(other, RefTile) and not (self.is_grid and other.is_grid):
            same = dataclasses.astuple(self) == dataclasses.astuple(other)
            return same != negate
        other = other.value() if isinstance(other, RefTile) else other
        return self.value() != other if negate else self.value() == other

    return fn


_ARITHMETIC = ("add", "sub", "mul", "floordiv", "truediv", "mod", "pow")
_BITWISE = ("and", "or", "xor", "lshift", "rshift")
for _name in (*_ARITHMETIC, *_BITWISE):
    setattr(RefTile, f"__{_name}__", _ref_binary(_name, False))
    setattr(RefTile, f"__r{_name}__", _ref_binary(_name, True))
for _name in ("lt", "le", "gt", "ge"):
    setattr(RefTile, f"__{_name}__", _ref_binary(_name, False))
RefTile.__eq__ = _ref_equal(negate=False)  # type: ignore[method-assign,assignment]
RefTile.__ne__ = _ref_equal(negate=True)  # type: ignore[method-assign,assignment]
RefTile.__neg__ = lambda self: -self.value()  # type: ignore[attr-defined,operator]


def _ref_iter(spec: TileSpec) -> Iterator[Any]:
    import itertools

    per_dim = []
    for begin, end, block in zip(spec.begins, spec.ends, spec.block_sizes, strict=True):
        b, e = _ref_bound(begin, spec.kind), _ref_bound(end, spec.kind)
        if type(block) is int and (block < 1 or block & (block - 1)):
            from tilecraft.language.ref_access import user_loc

            # as compiled code refuses it (a tile's block is a power of two)
            raise DeviceCodeError(
                f"block_size={block} must be a power of two", user_loc(), hint=BLOCK_SIZE_HINT
            )
        step = 1 if spec.kind == "grid" else int(block) if block is not None else max(e - b, 1)
        scalar = spec.kind == "grid" or (type(block) is int and block == 1)  # indexes like an int
        starts = range(b, e, step)
        tiles = [
            RefTile(s, min(s + step, e), step, i, scalar, len(starts), e)
            for i, s in enumerate(starts)
        ]
        per_dim.append(tiles)
    programs: Iterable[tuple[RefTile, ...]] = itertools.product(*reversed(per_dim))
    sample = ref_sample.active()
    if sample is not None and sample.depth == 0:  # a device loop: its programs may be sampled
        programs = sample.run(list(programs))
    for combo in programs:
        ordered = tuple(reversed(combo))
        if sample is not None:
            sample.depth += 1
        try:
            with _on_kernel_device():
                yield ordered if spec.multi else ordered[0]
        finally:
            if sample is not None:
                sample.depth -= 1


def _ref_bound(bound: Any, kind: str) -> int:
    """A loop bound as its int; a tensor of several values (``lengths[tb]``: one per row of a
    tile) is refused as compiled code refuses it (``frontend/loop_nest.py``)."""
    if isinstance(bound, torch.Tensor) and bound.numel() != 1:
        from tilecraft.language.ref_access import user_loc

        raise vector_bound_error(kind, user_loc())
    return int(bound)


def vector_bound_error(kind: str, loc: SourceLoc | None) -> DeviceCodeError:
    """A ``tc.tile`` / ``tc.grid`` bound that is a tile of values, not one number."""
    return DeviceCodeError(
        f"tc.{kind}(...): a loop bound is a tile of values (one per row: lengths[tb]), not one "
        "number; a loop has one begin and one end for all the rows of a tile",
        loc,
        hint="loop each row on its own (tc.tile(b, block_size=1) and lengths[tb.begin]), or "
        "loop to the longest row and mask lanes past each row's length: "
        "tc.load(x, [tb, ts], extra_mask=ts.index[None, :] < lengths[tb][:, None])",
    )


def _on_kernel_device() -> contextlib.AbstractContextManager[Any]:
    """Where device code's factory calls without a device (``torch.ones([1, n])``,
    ``torch.arange(k)``) put their tensors in ref mode: the kernel's device, as compiled code
    holds every tile there (on a GPU they were CPU tensors, and the accuracy baseline failed
    mixing them with the kernel's)."""
    device = getattr(_context.host(), "device", None)
    if device is None or torch.device(device).type == "cpu":
        return contextlib.nullcontext()
    return torch.device(device)


def _normalize_bounds(
    args: tuple[Any, ...], name: str = "tc.tile"
) -> tuple[tuple[Any, ...], tuple[Any, ...], bool]:
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        ends = tuple(args[0])
        return tuple(0 for _ in ends), ends, True
    if len(args) == 2 and isinstance(args[0], (list, tuple)):
        begins, ends = tuple(args[0]), tuple(args[1])
        if len(begins) != len(ends):
            raise DeviceCodeError(f"{name}(begins, ends): the two lists differ in length")
        return begins, ends, True
    if len(args) == 1:
        return (0,), (args[0],), False
    if len(args) == 2:
        return (args[0],), (args[1],), False
    from tilecraft.language.ref_access import user_loc

    raise DeviceCodeError(
        f"{name} takes (end), (begin, end) or ([ends...]); got {len(args)} arguments",
        user_loc(),
        hint="a range(begin, end, step) is not a loop form: to go backwards loop over the count "
        "and index end - 1 - i (tc.grid(n), then x[n - 1 - i])",
    )


def tile(*args: Any, block_size: Any = None) -> TileSpec:
    """Loop over ``[begin, end)`` in tiles; each iteration is one program (top level) or one
    iteration of an inner loop (nested)."""
    # isinstance, not type(): torch.Size (x.size()) is a tuple of the loop's ends
    single = len(args) == 1 and not isinstance(args[0], (list, tuple))
    if single and type(block_size) not in (list, tuple):
        return TileSpec((0,), args, (block_size,), "tile", False)  # the common case, per call
    begins, ends, multi = _normalize_bounds(args)
    blocks: Sequence[Any]
    if isinstance(block_size, (list, tuple)):
        blocks = tuple(block_size)
        if len(blocks) != len(ends):
            raise DeviceCodeError("tc.tile: block_size list must have one entry per dimension")
    else:
        blocks = tuple(block_size for _ in ends)
    return TileSpec(begins, ends, tuple(blocks), "tile", multi)


def grid(*args: Any, step: Any = None) -> TileSpec:
    """Loop over ``[begin, end)`` one index at a time (block size 1, the index is a scalar)."""
    steps = step if isinstance(step, (list, tuple)) else [step]
    if any(s is not None and int(s) != 1 for s in steps):
        raise DeviceCodeError(
            f"tc.grid(step={step!r}): only step 1 is supported",
            hint="loop with tc.grid over the step count and compute begin + i * step",
        )
    begins, ends, multi = _normalize_bounds(args, "tc.grid")
    return TileSpec(begins, ends, tuple(1 for _ in ends), "grid", multi)


def static_range(*args: int) -> range:
    """A loop unrolled at compile time (its bounds must be Python ints).

    A ``tc.tile`` loop in its body is one loop to the config: every unrolled copy over the same
    range gets the same block size, and copies that do not depend on each other run as one
    loop (``ir/fuse_loops.py``: four taps of a convolution read their inputs once)."""
    for a in args:
        if (names := host_int_names(a)) is not None:
            raise SpecializeHostInts(names)  # traced again with them baked in
        if not isinstance(a, int) or type(a).__name__ == "DynamicInt":
            what = "a run-time int" if type(a).__name__ == "DynamicInt" else type(a).__name__
            raise DeviceCodeError(
                f"tc.static_range needs int bounds known when the kernel compiles, got {what}",
                hint=RUN_TIME_COUNT_HINT,
            )
    return range(*args)

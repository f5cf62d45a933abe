"""Paired stride-2 slices of one tensor (stage: ir analysis; in: a device loop's nodes and which
reduction dim a config rolls; out: the pairs of loads / stores that codegen emits as one access).

``even = x[t, 0::2]`` and ``odd = x[t, 1::2]`` each read every other element: Triton cannot
vectorize a stride-2 access, so every element is its own memory instruction and two stores each
write half of every sector. Together they read (or write) one contiguous span ``x[t, 0:2L]``:
codegen (``codegen/paired.py``) then loads the span once and splits it (``tl.reshape`` to
``[..., L, 2]`` + ``tl.split``), or joins the two values (``tl.join`` + ``tl.reshape``) and stores
the span once, at the later store.

Two accesses pair when they are both loads or both stores of the same tensor in the same block,
their index items are equal except for one ``("rslice", sym, dim, a, 2)`` / ``(..., a + 1, 2)``
item on the same slice dim ``sym`` (equal lengths), that item is the last index item and the last
dim of the value, the tensor's ``dim`` is contiguous (stride 1), and nothing between them could
change the result: no store or atomic on that tensor, nor on one that may share its memory
(another view of its buffer, or any argument if it is one: one tensor may be passed twice),
between two loads;
no access to it at all between two stores (the first store moves down to the second). With a rolled reduction dim, both
must fall in the same chunk loop (equal phases). An access the config does not emit as a pointer
access, or a store that the row-does-not-fit schedule drops, never pairs.

Element pairs are the same memory walk written with an int index: ``x2 = x.view(m, k // 2, 2)``,
``x2[t, tk, 0]`` and ``x2[t, tk, 1]`` (a size-2 contiguous last dim: complex numbers, interleaved
pairs, an int4 weight's even and odd activation columns) read every other element each. They
pair under the same rules with the last index items ``("int", 0)`` / ``("int", 1)``; codegen
loads ``[..., 2]`` once and splits it (a w4a16 GEMM's activation loads: 13.6 -> 8.25 ms on an
H200, s22_upsample_w4). Where the item before the pair is a tile (or whole dim) of the value's
last dim over a tensor dim of stride 2 (``x2[t, tp, 0]``: the pairs of a row lie one after the
other), the pair is ``"merged"``: both items are one contiguous span ``2 * offset +
tl.arange(0, 2B)``, loaded and split as a slice pair's. With a trailing dim of 2 Triton proves
only two elements contiguous and ties the other dims, laying a warp's lanes down the rows: a
complex multiply of [16384, 4096] bf16 pairs compiled to 4-byte loads with threadsPerWarp [32,
1, 1] (cross-compiled for sm_90) and ran at 0.68 TB/s on an H200 (heldout_s28). Groups of 4 and
8 merge the same way (span ``G * offset + tl.arange(0, G B)``): the windows of a width-4 unfold,
``out[tb, tc, tw, k] = x[tb, tc, tw.index + k]`` for k < 4, stored with a trailing dim of 4 laid
a warp's lanes over [4 batches, 8 channels] with 8 bytes each (threadsPerWarp [4, 8, 1, 1]):
0.27 ms on an H200 at [16, 256, 4096] bf16 against 0.05 ms for torch.compile (heldout_s30b).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, bodies, walk
from tilecraft.ir.phases import phases

KINDS = ("slice", "element", "merged", "lone")
GROUP_SIZES = (2, 4, 8)  # elements of one access: a pair, or a whole dim of 4 or 8


@dataclasses.dataclass(frozen=True)
class SlicePair:
    """Two accesses (``mem_slot`` numbers) emitted as one contiguous access of ``2 * L`` elements
    starting at the even access's slice start; an element group's four or eight (``rest``:
    the accesses of elements 2, 3, ...) as one access of the whole dim."""

    op: str  # "load" or "store"
    even: int  # mem_slot of the access whose slice starts at a (an element group's element 0)
    odd: int | None  # mem_slot of the access whose slice starts at a + 1 (element 1); None: a
    # lone stride-2 load, whose span's odd half no access reads
    item: int  # position of the sliced item in the accesses' index
    # "slice": ``[a::2]`` / ``[a+1::2]`` items; "element": ``[0]``, ``[1]``, ... of a size-2
    # (4, 8) dim; "merged": an element pair whose previous item (``item``, a tile of stride 2)
    # spans both
    kind: str = "slice"
    rest: tuple[int, ...] = ()  # an element group's elements 2, 3, ... (mem_slots)

    @property
    def width(self) -> int:
        """Elements of the span per element of the sliced item: 2 for a slice pair (and a lone
        slice), the group's size for elements."""
        return max(2, len(self.slots))

    def __post_init__(self) -> None:
        if self.op not in ("load", "store"):
            raise ValueError(f"SlicePair.op: {self.op!r} is neither 'load' nor 'store'")
        if len(set(self.slots)) != len(self.slots):
            raise ValueError("SlicePair: an access cannot pair with itself")
        if self.kind not in KINDS:
            raise ValueError(f"SlicePair.kind: {self.kind!r} is not one of {KINDS}")
        if (self.odd is None) != (self.kind == "lone") or (self.odd is None and self.op != "load"):
            raise ValueError("SlicePair: a lone slice (no odd access) is a load of kind 'lone'")
        if self.kind == "lone":
            return
        if len(self.slots) not in GROUP_SIZES or (
            self.rest and self.kind not in ("element", "merged")
        ):
            raise ValueError(
                f"SlicePair: {len(self.slots)} accesses; groups of 4 or 8 are elements"
            )

    @property
    def slots(self) -> tuple[int, ...]:
        """The accesses' mem_slots in element order."""
        return (self.even,) if self.odd is None else (self.even, self.odd, *self.rest)

    @property
    def later(self) -> int:
        """The slot emitted last in program order (mem_slots follow program order)."""
        return max(self.slots)

    def describe(self) -> str:
        if self.odd is None:
            return f"load {self.even}: the stride-2 slice's contiguous span, its even half kept"
        if self.kind == "slice" or (self.kind == "merged" and len(self.slots) == 2):
            return f"{self.op}s {self.even} (even) + {self.odd} (odd): one contiguous {self.op}"
        slots = " + ".join(map(str, self.slots))
        which = "both" if len(self.slots) == 2 else f"all {len(self.slots)}"
        return f"{self.op}s {slots}: one {self.op} of {which} elements"


def _sliced(node: Node) -> tuple[Any, ...] | None:
    """(tensor name, other items, sym or "int", dim, start, eviction policy) of a pairable
    stride-2 access (a slice ``a::2`` or an int ``a`` on a size-2 dim), else None."""
    if node.op not in (Op.LOAD, Op.STORE) or "mem_slot" not in node.attrs:
        return None
    attrs = node.attrs
    if attrs.get("positions") is not None or attrs.get("extra_mask") is not None:
        return None
    index = attrs["index"]
    if not index or any(
        item[0] not in ("tile", "rdim", "rslice", "int", "none") for item in index[:-1]
    ):
        return None  # tensor-valued indices have inputs of their own
    if node.op is Op.STORE and node.inputs[0].ndim not in (0, node.ndim):
        return None  # a value of another rank (``out[t, 0:1] = row.sum(-1, keepdim=True)``)
    tensor, last = attrs["tensor"], index[-1]
    policy = attrs.get("eviction_policy", "")
    if last[0] == "int":
        dim = last[2]
        if not tensor.unit_stride(dim) or tensor.shape[dim] not in GROUP_SIZES:
            return None
        if not 0 <= last[1] < tensor.shape[dim]:
            return None  # a negative index of the dim
        return (tensor.name, index[:-1], "int", dim, last[1], policy)
    if last[0] != "rslice" or last[4] != 2:
        return None
    _, sym, dim, start, _ = last
    if not tensor.unit_stride(dim) or not node.shape or node.shape[-1] is not sym:
        return None
    return (tensor.name, index[:-1], sym, dim, start, policy)


def _merges(node: Node, size: int) -> bool:
    """Whether an element group's access spans its previous item too: a tile or whole dim that
    is the value's last dim, over a tensor dim of stride ``size`` (the group dim's size)."""
    index, tensor = node.attrs["index"], node.attrs["tensor"]
    if len(index) < 2 or index[-2][0] not in ("tile", "rdim"):
        return False
    _, sym, dim = index[-2]
    if tensor.dynamic:
        return False  # a stride other than 1 is a kernel argument: no span can assume it
    return bool(node.shape) and node.shape[-1] is sym and tensor.stride[dim] == size


def _touches(nodes: Iterable[Node], tensor: Any, ops: tuple[Op, ...], alias: bool) -> bool:
    """Whether ``nodes`` access ``tensor`` with ``ops``; with ``alias`` also a tensor that may
    share its memory (``HostTensor.alias_group``: ``x.view(...)`` twice, or one tensor passed as
    two arguments): a load moved up past a store through the other name would read the old
    value. A buffer the host code allocated (``torch.empty``) aliases only its own views."""
    return any(
        n.op in ops
        and (
            n.attrs["tensor"].name == tensor.name
            or (alias and n.attrs["tensor"].alias_group == tensor.alias_group)
        )
        for n in walk(list(nodes))
    )


def _group_size(node: Node, key: tuple[Any, ...]) -> int:
    """Accesses one contiguous access replaces: a slice pair's two, an element dim's size."""
    return int(node.attrs["tensor"].shape[key[3]]) if key[2] == "int" else 2


def _partners(
    block: list[Node],
    i: int,
    keys: dict[int, Any],
    ok: Callable[[int], bool],
    phase: dict[int, int],
) -> dict[int, int]:
    """Start -> block position of the accesses that group with ``block[i]`` (itself included):
    later accesses of the same tensor, items and shape, up to the first hazard (an access of
    the tensor that is not one of the group's)."""
    first, key = block[i], keys[i]
    load = first.op is Op.LOAD
    # what may not happen between them: a write between two loads, anything between stores
    hazards = (Op.STORE, Op.ATOMIC) if load else (Op.LOAD, Op.STORE, Op.ATOMIC)
    size = _group_size(first, key)
    members = {key[4]: i}
    for j in range(i + 1, len(block)):
        between = [block[k] for k in range(i + 1, j) if k not in members.values()]
        if len(members) == size or _touches(between, first.attrs["tensor"], hazards, load):
            break
        other, second = keys.get(j), block[j]
        if (
            other is None
            or not ok(j)
            or second.op is not first.op
            or tuple(second.shape) != tuple(first.shape)  # out[t, 0:1] beside out[t, 1]
            or other[:4] != key[:4]
            or other[5] != key[5]
            or other[4] in members
            or phase.get(second.id, 0) != phase.get(first.id, 0)
            or (key[2] != "int" and abs(other[4] - key[4]) != 1)
        ):
            continue
        members[other[4]] = j
    return members if len(members) == size else {}


def _pairs_in(block: list[Node], phase: dict[int, int], skip: set[int]) -> list[SlicePair]:
    pairs: list[SlicePair] = []
    taken: set[int] = set()
    lone: list[int] = []  # stride-2 slice loads no other access pairs with
    keys = {i: k for i, n in enumerate(block) if (k := _sliced(n)) is not None}

    def ok(j: int) -> bool:
        node = block[j]
        return j not in taken and node.attrs["mem_slot"] not in skip

    for i in keys:
        first = block[i]
        if not ok(i):
            continue
        members = _partners(block, i, keys, ok, phase)
        if not members:
            if first.op is Op.LOAD and keys[i][2] != "int":
                lone.append(i)
            continue
        slots = [block[members[start]].attrs["mem_slot"] for start in sorted(members)]
        item, kind = len(first.attrs["index"]) - 1, "slice"
        if keys[i][2] == "int":
            merged = _merges(first, len(slots))
            item, kind = (item - 1, "merged") if merged else (item, "element")
        op = "load" if first.op is Op.LOAD else "store"
        pairs.append(SlicePair(op, slots[0], slots[1], item, kind, tuple(slots[2:])))
        taken.update(members.values())
    for i in lone:
        if ok(i):  # no later access took it as its partner
            pairs.append(
                SlicePair("load", block[i].attrs["mem_slot"], None, _last(block[i]), "lone")
            )
    return pairs


def _last(node: Node) -> int:
    return len(node.attrs["index"]) - 1


def slice_pairs(
    loops: list[DeviceLoop], looped: Callable[[Sym], bool], skip: Iterable[int] = ()
) -> tuple[SlicePair, ...]:
    """The pairs of every device loop; ``looped(sym)``: whether the config rolls ``sym``;
    ``skip``: mem_slots that may not pair (not pointer accesses, stores a schedule drops)."""
    skipped = set(skip)
    out: list[SlicePair] = []
    for loop in loops:
        rolled = next((s for s in loop.syms if looped(s)), None)
        for block in bodies(loop.body):
            phase = phases(block, rolled)[0] if rolled is not None else {}
            out += _pairs_in(block, phase, skipped)
    return tuple(out)


__all__ = ["SlicePair", "slice_pairs"]

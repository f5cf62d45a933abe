"""Tile IR data structures (stage: frontend -> ir -> codegen).

A device loop is traced into a list of :class:`Node` in program order. One node type carries an
:class:`Op` from a small enum; a node's ``shape`` is a tuple of dims, each a :class:`Sym` (a tile's
block dimension or a reduction dimension) or the literal ``1`` (a broadcast dim). Loop nodes own a
``body``; their loop-carried values are ``CARRY`` nodes that name their initial and next values.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import Iterator
from typing import Any, TypeGuard

import torch

from tilecraft.errors import SourceLoc


class SymKind(enum.Enum):
    BLOCK = "block"  # the dim of a tile loop: BLOCK elements per program / iteration
    RDIM = "rdim"  # a whole extent (a ':' slice), reduced over or kept whole


@dataclasses.dataclass(eq=False)
class Sym:
    """A symbolic dimension of tiles. Identity matters; two syms with equal fields differ."""

    kind: SymKind
    index: int  # number in the kernel: BLOCK_<index> / RDIM_<index>
    extent: Any  # int, or a scalar Node (device-computed end), or an int-valued arg Node
    begin: Any = 0  # int or scalar Node
    fixed_block: int | None = None  # a literal block size from the user (block_size=64)
    config_slot: int | None = None  # index into Config.block_sizes (BLOCK) / reduction_loops (RDIM)
    scalar: bool = False  # tc.grid: block size 1, the index is a scalar
    extent_args: list[Any] = dataclasses.field(default_factory=list)  # RDIM: ARG nodes (dynamic)
    # a run-time whole dim that a static one of its extent stands for (``out[t, :] = x[t, 2:10]``
    # with dynamic shapes): the launch checks it still has that extent
    pinned: bool = False
    # an RDIM sized by a registered block size (Helion's ``hl.zeros([tm, block_n])``): the lanes
    # of every tile of a loop with that block (``Config.block_sizes[block_slot]``)
    block_slot: int | None = None

    @property
    def name(self) -> str:
        return f"{'BLOCK' if self.kind is SymKind.BLOCK else 'RDIM'}_{self.index}"

    def __repr__(self) -> str:
        return self.name

    def __index__(self) -> int:
        """A whole dim of a static length is that int where Python or torch needs one
        (``torch.ones(T, T)`` with ``T = x.size(-1)``, ``range(T)``); torch's factories in
        device code still receive the dim itself (``frontend/factories.py``)."""
        n = whole_length(self)
        if n is None or self.extent_args:
            kind = (
                "a tile loop's block"
                if self.kind is SymKind.BLOCK
                else "a whole dim whose size is known only at run time (static_shapes=False)"
            )
            raise TypeError(
                f"a tile dim ({self.name}) is {kind}: its length is not an int when the kernel "
                "compiles"
            )
        return n


def same_range(a: Sym, b: Sym) -> bool:
    """Two syms over one range: the same kind, equal begins and extents (ints equal, nodes the
    same node)."""

    def same(x: Any, y: Any) -> bool:
        return x is y if isinstance(x, Node) or isinstance(y, Node) else bool(x == y)

    return a.kind is b.kind and same(a.extent, b.extent) and same(a.begin, b.begin)


Dim = Sym | int
Shape = tuple[Dim, ...]


def shape_str(shape: Shape) -> str:
    """A shape as messages and the IR printer show it: ``[BLOCK_0, RDIM_1, 1]``."""
    return "[" + ", ".join(d.name if isinstance(d, Sym) else str(d) for d in shape) + "]"


def sized_shape_str(shape: Shape) -> str:
    """A shape for error messages, whole dims with their sizes: ``[BLOCK_0, RDIM_1 (64), 1]``
    (a tile loop's block has no size of its own: the config's)."""
    return "[" + ", ".join(_sized(d) for d in shape) + "]"


def _sized(d: Dim) -> str:
    if not isinstance(d, Sym):
        return str(d)
    if (length := whole_length(d)) is not None:
        at_run_time = ", this call's: a run-time size" if d.extent_args else ""
        return f"{d.name} ({length}{at_run_time})"
    return d.name


def whole_length(d: Dim) -> int | None:
    """The length of a whole dim whose ends are ints when tracing (a run-time size's is the
    traced call's); None for a tile loop's block or a literal dim."""
    if not isinstance(d, Sym) or d.kind is not SymKind.RDIM:
        return None
    if isinstance(d.extent, int) and isinstance(d.begin, int):
        return d.extent - d.begin
    return None


def tile_block(d: Dim) -> TypeGuard[Sym]:
    """Whether ``d`` is a tile loop's block: positions a config sets, the last tile possibly
    partial (not ``tc.grid``'s or a block size of 1's scalar index)."""
    return isinstance(d, Sym) and d.kind is SymKind.BLOCK and not d.scalar


class Op(enum.Enum):
    # leaves
    CONST = "const"  # attrs: value
    ARG = "arg"  # a scalar kernel argument; attrs: name
    TILE_INDEX = "tile_index"  # attrs: sym -> 1-D [sym] int32 (or scalar for grid)
    TILE_BEGIN = "tile_begin"  # attrs: sym -> scalar
    TILE_END = "tile_end"  # attrs: sym -> scalar
    TILE_ID = "tile_id"  # attrs: sym -> scalar
    BLOCK_SIZE = "block_size"  # attrs: sym -> scalar constexpr
    FULL = "full"  # attrs: value
    # memory
    LOAD = "load"  # attrs: tensor (HostTensor), index (tuple of IndexItem)
    STORE = "store"  # inputs: [value, *index values]; attrs: tensor, index
    ATOMIC = "atomic"  # attrs: tensor, index, kind ('add', 'max', 'min', 'xchg')
    # compute
    UNARY = "unary"  # attrs: fn (name in codegen.ops.UNARY_TEMPLATES)
    BINARY = "binary"  # attrs: fn
    WHERE = "where"
    CAST = "cast"
    VIEW = "view"  # attrs: spec (tuple of ':' / None / 0 for each output dim)
    REDUCE = "reduce"  # attrs: kind ('sum', 'max', 'min', 'argmax', 'argmin'), axis
    DOT = "dot"  # inputs: a, b, [acc]
    PRINT = "print"  # inputs: values; attrs: prefix (tl.device_print; kept like a store)
    SCAN = "scan"  # attrs: kind ('sum', 'prod', 'combine'), axis, combine (frontend.scans.Combine)
    GATHER = "gather"  # inputs: [src, index]; attrs: axis (tl.gather: src at index along axis)
    EXTERN = "extern"  # a user's @triton.jit function on the inputs; attrs: fn (frontend.extern)
    # control
    LOOP = "loop"  # attrs: sym; body: list[Node]; carried: list[Node] (CARRY nodes)
    IF = "if"  # inputs: [scalar bool]; body: then-nodes; attrs: orelse (nodes), carried (CARRY
    # nodes: a value assigned in a branch, with attrs then / else: its value at each branch's end)
    WHILE = "while"  # body; attrs: cond_body (nodes computing cond), cond (scalar bool), carried
    # (CARRY nodes with attrs next: the value at the body's end)
    CARRY = "carry"  # inputs: [init]; attrs: next (Node, set when the body is traced)


# ops computed element by element from their inputs (no view, load or cross-element work)
ELEMENTWISE_OPS = (Op.CAST, Op.UNARY, Op.BINARY, Op.WHERE)


def is_weak(node: Node) -> bool:
    """A Python number in eager code: a host float or int argument (``eps``, ``scale``: weak
    in torch's type promotion), or float math of such numbers alone (a double)."""
    return node.op in (Op.ARG, Op.UNARY, Op.BINARY) and bool(node.attrs.get("weak"))


_ids = itertools.count()


@dataclasses.dataclass(eq=False)
class Node:
    op: Op
    inputs: list[Node]
    shape: Shape
    dtype: torch.dtype
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    loc: SourceLoc | None = None
    hint: str = "v"  # a readable variable name, from the user's source where possible
    body: list[Node] | None = None
    id: int = dataclasses.field(default_factory=lambda: next(_ids))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def syms(self) -> set[Sym]:
        return {d for d in self.shape if isinstance(d, Sym)}

    def __repr__(self) -> str:
        return f"%{self.hint}{self.id}"


@dataclasses.dataclass
class DeviceLoop:
    """One top-level device loop of a kernel: one Triton kernel launch."""

    index: int
    grid_syms: list[Sym]
    body: list[Node]
    tensors: dict[str, Any]  # capture name -> HostTensor (from frontend)
    scalar_args: dict[str, Node]  # capture name -> ARG node
    loc: SourceLoc
    syms: list[Sym]  # every sym of the loop, grid syms first
    range_slot: int = -1  # index into the range_* config lists of its persistent loop
    grid_slot: int = -1  # index into the per-device-loop config lists (l2_groupings, loop_orders)
    # a pre-pass computing a dot operand (ir/hoist.py): the index of the loop it runs before,
    # whose launcher launches it (the host code never reaches it)
    prepass_for: int | None = None
    # the (begin, end) of each grid dim the host code gave it when traced, where baked in (None
    # where a launch argument): a call whose host code computes others must re-specialize
    host_bounds: tuple[tuple[int, int] | None, ...] = ()
    # the host ints and bools its body reads that were baked in as constants, with their traced
    # values: one derived from a float (``flag = a > 0``), or with dynamic shapes from a size
    # (``big = n > 12``), is in no specialization key, so each launch compares them
    host_scalars: tuple[tuple[str, int], ...] = ()

    def walk(self) -> list[Node]:
        return list(walk(self.body))


def walk(nodes: list[Node]):
    for n in nodes:
        yield n
        if n.body is not None:
            yield from walk(n.body)
        if n.op is Op.IF:
            yield from walk(n.attrs["orelse"])
        if n.op is Op.WHILE:
            yield from walk(n.attrs["cond_body"])


def on_dim(node: Node, sym: Sym) -> bool:
    """Whether ``node``'s value spans ``sym``."""
    return any(d is sym for d in node.shape)


def value_indexed(node: Node) -> bool:
    """Whether a load, store or atomic takes a tensor-valued index (a gather or a scatter: its
    addresses come from computed values)."""
    return any(item[0] == "value" for item in node.attrs["index"])


def nested_bodies(node: Node) -> list[list[Node]]:
    """The node lists nested in ``node``, in program order: a while's condition, a loop's or a
    branch's body, an if's else branch."""
    found = [node.attrs.get("cond_body"), node.body, node.attrs.get("orelse")]
    return [block for block in found if block]


def bodies(nodes: list[Node]) -> Iterator[list[Node]]:
    """``nodes`` and every node list nested in them (a loop's body, a branch's, a while's
    condition)."""
    yield nodes
    for n in walk(nodes):
        for nested in (n.body, n.attrs.get("orelse"), n.attrs.get("cond_body")):
            if nested:
                yield nested


def dot_roles(node: Node) -> list[tuple[Dim, str]]:
    """Each operand dim of a 2-D or 3-D ``DOT`` node with its role: ``mn`` (an output dim) or
    ``k`` (the inner dim); a batch dim has none."""
    a, b = node.inputs[0], node.inputs[1]
    return [(a.shape[-2], "mn"), (b.shape[-1], "mn"), (a.shape[-1], "k")]


def upstream(nodes: list[Node]) -> Iterator[Node]:
    """Every node ``nodes`` are computed from (themselves included), through inputs and
    loop-carried next values, each once."""
    seen: set[int] = set()
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(n.inputs)
        if n.op is Op.CARRY and n.attrs.get("next") is not None:
            stack.append(n.attrs["next"])


def uses_sym(node: Node, sym: Sym) -> bool:
    """Whether ``node`` is computed from a tile of ``sym`` (its dim or its positions)."""
    return any(
        n.attrs.get("sym") is sym or any(d is sym for d in n.shape) for n in upstream([node])
    )


def reads_memory(node: Node) -> bool:
    """Whether ``node`` is computed from a load (a data-dependent value: a CSR offset, a gathered
    index), through its inputs and loop-carried next values."""
    return any(n.op is Op.LOAD for n in upstream([node]))

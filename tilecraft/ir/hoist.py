"""Dot operands that every program along another grid dim recomputes are computed once, by a
pre-pass (stage: ir transform; in: the traced device loops; out: the same loops, a GEMM-shaped
loop whose operand is computed reading it from a scratch buffer that a new loop fills first).

A user who writes a weight-only quantized matmul dequantizes the weight tile inside the k loop::

    for tm, tn in tc.tile([m, n]):
        for tk in tc.tile(k):
            wt = (w[tk, tn].float() * scale[tn][None, :]).to(x.dtype)
            acc = tc.dot(x[tm, tk], wt, acc=acc)

Every one of the ``cdiv(m, BLOCK_M)`` programs along ``tm`` computes the same ``wt`` tiles, and on
sm_90 a computed right operand is written from registers to shared memory each k step, between
the loads and the wgmma, so the loop cannot stream its operands by TMA. Computing ``wt`` once into
a ``[k, n]`` buffer (a pre-pass loop over ``[tk, tn]``) and loading it in the k loop makes the
matmul a plain one. On the H200 (CUDA-graph replays, ``benchmarks/results/operand_prepass_s14``),
4096^3 with an int8 weight: 0.361 ms as written, 0.226 with the pre-pass (torch.compile 0.215).

A site, checked on the IR (anything else is left as written):

* a ``DOT`` of 2-D operands directly in a tile loop over ``[0, k)`` with ``k`` known on the host,
  whose inner dim is that loop's tile, and whose operand is computed: not a load seen through
  views (a plain load is already what the pre-pass would give);
* the operand is made of elementwise ops (casts, views, unary and binary ops, ``where``) on
  constants, scalar arguments, tile indices and loads, all over the operand's two tiles only
  (no other tile, no loop-carried value, no load indexed by a device value, nothing the loop
  itself writes);
* its other dim is a grid tile with a host-known extent;
* the grid dims the operand does not depend on make it recomputed at least
  :data:`MIN_RECOMPUTES` times (counted in blocks of 128), and it has at least
  :data:`MIN_ELEMENTS`: a pre-pass is a launch and a wave of its own (a few microseconds) plus
  its bytes written and read again, which a small operand or a matmul covered by one or two
  programs along the other dim does not win back. Measured on the H200
  (``operand_prepass_s14``, graph replays): int8 weight at m = 256 (2 recomputes) 0.0523 ms in
  the loop vs 0.056 hoisted, at m = 512 (4) 0.0674 vs 0.0531; an input scaled per k column at
  64x4096 (0.26M elements, 32 recomputes) 0.0281 vs 0.0341, at 512x4096 (2M) 0.0374 vs 0.0355.
"""

from __future__ import annotations

import dataclasses
import math

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind

MIN_RECOMPUTES = 4  # programs along the grid dims the operand does not depend on
MIN_ELEMENTS = 1 << 21  # elements of the operand (4 MiB in bf16)
RECOMPUTE_BLOCK = 128  # the block those dims are counted in (a typical matmul tile)
SCRATCH_PREFIX = "_tc_operand"

_ELEMENTWISE = (Op.VIEW, Op.CAST, Op.UNARY, Op.BINARY, Op.WHERE)
_LEAVES = (Op.CONST, Op.ARG, Op.FULL)


@dataclasses.dataclass
class HoistSite:
    """One dot operand to compute in a pre-pass."""

    inner: Node  # the tile loop over k holding the dot
    dot: Node
    operand: int  # 0: left, 1: right
    nodes: list[Node]  # the operand's computation, in program order (ends with the operand)


def _operand_nodes(value: Node, dims: set[Sym]) -> list[Node] | None:
    """The nodes ``value`` is computed from, when all of them are elementwise over ``dims``
    (else None)."""
    found: dict[int, Node] = {}
    stack = [value]
    while stack:
        node = stack.pop()
        if node.id in found:
            continue
        if not node.syms() <= dims:
            return None
        if node.op is Op.LOAD:
            items = node.attrs["index"]
            plain = not node.inputs and "positions" not in node.attrs
            if not plain or not all(
                item[0] == "none" or (item[0] == "tile" and item[1] in dims) for item in items
            ):
                return None  # indexed by device values, gathered or masked by the user
        elif node.op is Op.TILE_INDEX:
            if node.attrs["sym"] not in dims:
                return None
        elif node.op not in _ELEMENTWISE and node.op not in _LEAVES:
            return None
        found[node.id] = node
        stack.extend(node.inputs)
    return sorted(found.values(), key=lambda n: n.id)


def _host_extent(sym: Sym) -> int | None:
    if isinstance(sym.extent, int) and isinstance(sym.begin, int) and sym.begin == 0:
        return sym.extent
    return None


def _recomputes(loop: DeviceLoop, dims: set[Sym]) -> int:
    """Programs along the grid dims that an operand over ``dims`` does not depend on."""
    total = 1
    for sym in loop.grid_syms:
        if sym in dims:
            continue
        extent = _host_extent(sym) or 1
        block = 1 if sym.scalar else sym.fixed_block or RECOMPUTE_BLOCK
        total *= math.ceil(extent / block)
    return total


def find_site(loop: DeviceLoop) -> HoistSite | None:
    """The first dot operand of ``loop`` worth computing in a pre-pass, if any."""
    for inner in (n for n in loop.body if n.op is Op.LOOP):
        k: Sym = inner.attrs["sym"]
        if k.kind is not SymKind.BLOCK or _host_extent(k) is None:
            continue
        for dot in (n for n in inner.body or [] if n.op is Op.DOT):
            a, b = dot.inputs[0], dot.inputs[1]
            if a.ndim != 2 or b.ndim != 2 or a.shape[1] is not k:
                continue
            for operand, other in ((1, a.shape[0]), (0, b.shape[1])):
                site = _site(loop, inner, dot, operand, other)
                if site is not None:
                    return site
    return None


def _site(
    loop: DeviceLoop, inner: Node, dot: Node, operand: int, other: object
) -> HoistSite | None:
    value = dot.inputs[operand]
    dims = value.syms()
    if len(dims) != 2 or not all(_host_extent(d) is not None for d in dims):
        return None
    if not isinstance(other, Sym) or other not in loop.grid_syms or other in dims:
        return None
    source = value
    while source.op is Op.VIEW:
        source = source.inputs[0]
    if source.op is Op.LOAD:
        return None  # a plain load: already what a pre-pass would give
    if not all(d in loop.grid_syms or d is inner.attrs["sym"] for d in dims):
        return None
    nodes = _operand_nodes(value, dims)
    if nodes is None or _recomputes(loop, dims) < MIN_RECOMPUTES:
        return None
    written = {n.attrs["tensor"].name for n in loop.walk() if n.op in (Op.STORE, Op.ATOMIC)}
    if any(n.op is Op.LOAD and n.attrs["tensor"].name in written for n in nodes):
        return None  # the loop writes what the operand reads: computing it first would differ
    if math.prod(_host_extent(d) or 0 for d in dims) < MIN_ELEMENTS:
        return None
    return HoistSite(inner, dot, operand, nodes)


def hoist(loop: DeviceLoop, site: HoistSite, index: int) -> tuple[DeviceLoop, DeviceLoop]:
    """``(pre-pass, loop)``: a new device loop storing the operand into a scratch tensor, and
    ``loop`` with the operand loaded from it."""
    value = site.dot.inputs[site.operand]
    dims = [d for d in value.shape if isinstance(d, Sym)]
    extents = [_host_extent(d) or 0 for d in dims]
    model = next(n.attrs["tensor"] for n in site.nodes if n.op is Op.LOAD)
    scratch = dataclasses.replace(
        model,
        name=f"{SCRATCH_PREFIX}{index}",
        dtype=value.dtype,
        shape=tuple(extents),
        stride=(extents[1], 1),
        dynamic=False,
    )
    index_items = tuple(("tile", d, axis) for axis, d in enumerate(dims))
    clones: dict[int, Node] = {}
    for node in site.nodes:
        attrs = dict(node.attrs)
        attrs.pop("mem_slot", None)
        attrs.pop("load_slot", None)
        inputs = [clones[i.id] for i in node.inputs]
        clones[node.id] = Node(node.op, inputs, node.shape, node.dtype, attrs, node.loc, node.hint)
    stored = clones[value.id]
    store = Node(
        Op.STORE, [stored], stored.shape, stored.dtype,
        {"tensor": scratch, "index": index_items}, site.dot.loc, hint="operand",
    )  # fmt: skip
    tensors = {n.attrs["tensor"].name: n.attrs["tensor"] for n in site.nodes if n.op is Op.LOAD}
    scalars = {
        n.attrs["name"]: clones[n.id] for n in site.nodes if n.op is Op.ARG and "name" in n.attrs
    }
    prepass = DeviceLoop(
        index, dims, [*clones.values(), store], {**tensors, scratch.name: scratch}, scalars,
        site.dot.loc or loop.loc, list(dims), prepass_for=loop.index,
    )  # fmt: skip
    load = Node(
        Op.LOAD, [], value.shape, value.dtype, {"tensor": scratch, "index": index_items},
        site.dot.loc, hint="operand",
    )  # fmt: skip
    body = site.inner.body or []
    body.insert(body.index(site.dot), load)
    site.dot.inputs[site.operand] = load
    tensors = {**loop.tensors, scratch.name: scratch}
    return prepass, dataclasses.replace(loop, tensors=tensors)


def hoist_operands(loops: list[DeviceLoop]) -> list[DeviceLoop]:
    """``loops`` with each site's pre-pass inserted before the loop it serves (new loops are
    numbered after the traced ones)."""
    out: list[DeviceLoop] = []
    next_index = max((loop.index for loop in loops), default=-1) + 1
    for loop in loops:
        pre: list[DeviceLoop] = []
        while (site := find_site(loop)) is not None:
            prepass, loop = hoist(loop, site, next_index)
            pre.append(prepass)
            next_index += 1
        out += [*pre, loop]
    return out

"""Independent inner loops become grid dimensions (stage: ir transform; in: a traced
:class:`DeviceLoop` and the number of programs one wave of the target runs; out: the same loop,
or one whose grid also covers its inner loop).

A user who writes ``for h in tc.grid(heads): for tq in tc.tile(seq): ...`` gets one program per
head, each walking the query tiles one after another. With 32 heads on a 132-SM GPU, three
quarters of the device idles, whatever the config. When the inner loop's iterations are
independent, running them in separate programs computes exactly the same thing, so the loop is
promoted to a grid dimension: ``(heads, cdiv(seq, BLOCK))`` programs. Its block size stays a
tunable, so the autotuner still chooses how much each program does.

Independent means, checked on the IR (anything else is left as written):

* the inner loop is the device loop's only top-level loop and carries no value;
* nothing outside it stores, prints or uses atomics (that code would run once per program);
* every store inside it indexes its tensor with the loop's tile (iterations write disjoint
  places), and no tensor it stores to is read anywhere in the device loop (no iteration reads
  what another one wrote); atomics are order-free and allowed;
* the loop starts at 0 and its extent is known on the host (a constant or a scalar argument).

Promotion only pays when the grid as written leaves SMs idle, so it happens when the grid's
program count is known and under one wave.
"""

from __future__ import annotations

import dataclasses
import math

from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, walk

_EFFECTS = (Op.STORE, Op.ATOMIC, Op.PRINT)


def _inner_loop(loop: DeviceLoop) -> Node | str:
    """The device loop's only top-level LOOP node, or why there is none to promote."""
    loops = [n for n in loop.body if n.op is Op.LOOP]
    if len(loops) != 1:
        return f"{len(loops)} top-level loops"
    inner = loops[0]
    if inner.attrs.get("carried"):
        return "the inner loop carries values"
    outside = [n for n in loop.body if n is not inner]
    if any(n.op in _EFFECTS for n in walk(outside)):
        return "code outside the inner loop stores"
    return inner


def _iterations_independent(loop: DeviceLoop, inner: Node, sym: Sym) -> str | None:
    """None when no iteration of ``inner`` can see another one's writes, else why not."""
    assert inner.body is not None
    stored = set()
    for node in walk(inner.body):
        if node.op is Op.PRINT:
            return "the inner loop prints"
        if node.op is Op.STORE:
            items = node.attrs["index"]
            if not any(item[0] == "tile" and item[1] is sym for item in items):
                return f"a store to {node.attrs['tensor'].name} is not indexed by the loop's tile"
            stored.add(node.attrs["tensor"].name)
    read = {n.attrs["tensor"].name for n in loop.walk() if n.op is Op.LOAD}
    both = stored & read
    return f"{sorted(both)[0]} is stored and read in the loop" if both else None


def promotable(loop: DeviceLoop) -> Node | str:
    """The inner LOOP node that may become a grid dimension, or the reason it may not."""
    inner = _inner_loop(loop)
    if isinstance(inner, str):
        return inner
    sym: Sym = inner.attrs["sym"]
    if sym.kind is not SymKind.BLOCK:
        return "the inner loop is not a tile loop"
    if not (isinstance(sym.begin, int) and sym.begin == 0):
        return "the inner loop does not start at 0"
    if not isinstance(sym.extent, int) and not (
        isinstance(sym.extent, Node) and sym.extent.op is Op.ARG
    ):
        return "the inner loop's extent is computed on the device"
    return _iterations_independent(loop, inner, sym) or inner


def grid_programs(loop: DeviceLoop) -> int | None:
    """Programs of the grid as written (None when an extent or a block size is not known)."""
    total = 1
    for sym in loop.grid_syms:
        if not isinstance(sym.extent, int):
            return None
        block = 1 if sym.scalar else sym.fixed_block
        if block is None:
            return None  # a tunable block: the grid varies with the config
        total *= math.ceil(sym.extent / block)
    return total


def promote(loop: DeviceLoop, inner: Node) -> DeviceLoop:
    """``loop`` with ``inner``'s sym appended to the grid and its body inlined in its place."""
    assert inner.body is not None
    sym: Sym = inner.attrs["sym"]
    at = loop.body.index(inner)
    body = [*loop.body[:at], *inner.body, *loop.body[at + 1 :]]
    grid_syms = [*loop.grid_syms, sym]
    syms = grid_syms + [s for s in loop.syms if s not in grid_syms]
    return dataclasses.replace(loop, grid_syms=grid_syms, body=body, syms=syms)


def promote_small_grids(loops: list[DeviceLoop], wave: int) -> list[DeviceLoop]:
    """Promote each loop's independent inner loop where its grid is under ``wave`` programs."""
    out = []
    for loop in loops:
        programs = grid_programs(loop)
        inner = promotable(loop) if programs is not None and programs < wave else None
        out.append(promote(loop, inner) if isinstance(inner, Node) else loop)
    return out

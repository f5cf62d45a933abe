"""Written tensors that share memory with tensors the same loop reads, checked at launch (stage:
runtime; in: a traced device loop, then each launch's host values; out: nothing, or an
ArgumentError naming both tensors).

The per-call check (``runtime/validate.check_written_arguments``) compares the kernel's
arguments with each other, as torch's in-place ops do. Two things it cannot see:

* views the host code made of one argument (``dst = x[1:]``, ``src = x[:-1]``): eager
  ``x[1:] = x[:-1]`` raises, compiled 3 elements of 4096 came out wrong;
* one tensor passed as both the written argument and one the loop reads at other positions
  than it writes (``permute_into(x, x, perm)``: ``dst[t] = src[perm[t]]``; an in-place
  transpose ``dst[tm, tn] = src[tn, tm].t()``): "the same view twice" is safe only where each
  program reads what it writes (``axpy_(z, z)``); here half the elements came out wrong.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tilecraft.errors import ArgumentError, SourceLoc
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym
from tilecraft.runtime.validate import partly_overlapping


class OverlapPair(NamedTuple):
    """A written and a read tensor of one loop that may share memory; ``elsewhere``: the loop
    reads ``read`` at other positions than it writes ``written``."""

    written: str
    read: str
    elsewhere: bool


def overlap_pairs(loop: DeviceLoop) -> tuple[OverlapPair, ...]:
    """The pairs a launch of ``loop`` compares: tensors of one alias group (arguments and
    their views, or one buffer the host code made), but not two arguments that each program
    reads where it writes (the per-call check covers those)."""
    stores = [n for n in loop.walk() if n.op in (Op.STORE, Op.ATOMIC)]
    loads = [n for n in loop.walk() if n.op is Op.LOAD]
    pairs: list[OverlapPair] = []
    for w in {n.attrs["tensor"] for n in stores}:
        written_at = {_positions(n) for n in stores if n.attrs["tensor"] is w}
        for r in {n.attrs["tensor"] for n in loads}:
            if r.name == w.name or r.alias_group != w.alias_group:
                continue
            read_at = {_positions(n) for n in loads if n.attrs["tensor"] is r}
            elsewhere = None in read_at or not read_at <= written_at
            if elsewhere or not (w.argument and r.argument):
                pairs.append(OverlapPair(w.name, r.name, elsewhere))
    return tuple(pairs)


def _positions(node: Node) -> tuple[Any, ...] | None:
    """The elements an access reaches, as its index items (None: a computed index)."""
    items = []
    for item in node.attrs["index"]:
        if item[0] == "value":
            return None
        items.append(tuple(id(x) if isinstance(x, Sym) else x for x in item))
    return tuple(items)


def check_overlaps(
    name: str, pairs: tuple[OverlapPair, ...], env: dict[str, Any], loc: SourceLoc | None
) -> None:
    """Refuse a launch whose written tensor shares memory with one it reads where programs
    would race: a partial overlap, or any overlap where the read is elsewhere."""
    for written, read, elsewhere in pairs:
        w, r = env[written], env[read]
        if w.is_meta or r.is_meta:
            continue
        start, other = w.data_ptr(), r.data_ptr()
        if not (other < start + w.nbytes and start < other + r.nbytes):
            continue
        if elsewhere:
            why = (
                f"shares memory with '{read}', which the same device loop reads at other "
                f"positions than it writes '{written}' (a permutation, a transpose): programs "
                "read elements others have already written"
            )
        elif partly_overlapping(w, r):
            why = (
                f"partly overlaps '{read}', which the same device loop reads (views of one "
                "buffer at different offsets or strides): which program reads an element "
                "before another writes it would decide the result"
            )
        else:
            continue
        raise ArgumentError(
            f"{name}(): '{written}' is written and {why}",
            loc,
            hint=f"read from a copy (pass {read}.clone()) or write into a new tensor, as torch "
            "refuses this for its in-place ops",
        )

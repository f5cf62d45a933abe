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

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch

from tilecraft.errors import ArgumentError, SourceLoc
from tilecraft.ir.nodes import DeviceLoop, Node, Op
from tilecraft.runtime.validate import partly_overlapping


class OverlapPair(NamedTuple):
    """A written and a read tensor of one loop that may share memory; ``elsewhere``: programs
    read ``read`` in other programs' parts of ``written`` (see :func:`_partition`)."""

    written: str
    read: str
    elsewhere: bool


def overlap_pairs(loop: DeviceLoop) -> tuple[OverlapPair, ...]:
    """The pairs a launch of ``loop`` compares: tensors of one alias group (arguments and
    their views, or one buffer the host code made), but not two arguments each program reads
    only within its own part of (the per-call check covers those)."""
    stores = [n for n in loop.walk() if n.op in (Op.STORE, Op.ATOMIC)]
    loads = [n for n in loop.walk() if n.op is Op.LOAD]
    grid = {id(s) for s in loop.grid_syms}
    pairs: list[OverlapPair] = []
    for w in {n.attrs["tensor"] for n in stores}:
        parts = [_partition(n, grid) for n in stores if n.attrs["tensor"] is w]
        for r in {n.attrs["tensor"] for n in loads}:
            if r.name == w.name or r.alias_group != w.alias_group:
                continue
            elsewhere = any(
                not part <= _items(n) for part in parts for n in loads if n.attrs["tensor"] is r
            )
            if elsewhere or not (w.argument and r.argument):
                pairs.append(OverlapPair(w.name, r.name, elsewhere))
    return tuple(pairs)


def foreign_writes(loop: DeviceLoop) -> tuple[str, ...]:
    """The tensors ``loop`` writes that host code took from elsewhere than the arguments (a
    module's buffer, a global): the tuner's runs undo their writes (``write_guard``)."""
    written = {n.attrs["tensor"] for n in loop.walk() if n.op in (Op.STORE, Op.ATOMIC)}
    return tuple(sorted(t.name for t in written if t.foreign))


def foreign_tensors(loop: DeviceLoop) -> tuple[str, ...]:
    """The tensors ``loop`` captures that host code took from elsewhere than the arguments."""
    return tuple(sorted(name for name, t in loop.tensors.items() if t.foreign))


# eager calls running through the kernel's op for autograd, per thread (as grad mode is)
_OP_CALLS_WITH_GRADIENTS = threading.local()


@contextlib.contextmanager
def gradients_wanted() -> Iterator[None]:
    """An eager call that needs gradients runs its kernel's op, which launches with gradients
    off (torch's custom op): its launches still check what they read."""
    _OP_CALLS_WITH_GRADIENTS.depth = _op_call_depth() + 1
    try:
        yield
    finally:
        _OP_CALLS_WITH_GRADIENTS.depth -= 1


def _op_call_depth() -> int:
    return int(getattr(_OP_CALLS_WITH_GRADIENTS, "depth", 0))


def check_foreign_grads(kernel: str, names: tuple[str, ...], env: dict[str, Any], loc: Any) -> None:
    """A launch with gradients on must not read a tensor that requires grad which is no
    argument (``w = mod.weight``, a global Parameter): the kernel's output had no grad_fn and
    the parameter silently got no gradient. Arguments that require grad take the kernel's op
    (its backward, which returns gradients for arguments only, or the no-backward error)."""
    if not (torch.is_grad_enabled() or _op_call_depth()):
        return
    for name in names:
        if env[name].requires_grad:
            raise ArgumentError(
                f"{kernel}(): device code reads '{name}', a tensor that requires grad which is "
                "not an argument of the kernel (an attribute of an argument, a global); its "
                "gradient would be lost",
                loc,
                hint="pass it as a tensor argument (a registered backward then returns its "
                "gradient), or read it under torch.no_grad() / pass .detach() if no gradient "
                "is wanted",
            )


def read_elsewhere(loop: DeviceLoop) -> list[Node]:
    """The stores of tensors the same loop also loads outside the storing program's part (a
    stencil updated in place: ``u[t] = (u[i - 1] + u[i + 1]) / 2``): a program may read an
    element before or after another program stores it. Safe only where the reads never meet
    another program's writes (red-black sweeps, whose masks the IR does not compare), so this
    explains wrong results; it refuses nothing."""
    grid = {id(s) for s in loop.grid_syms}
    nodes = loop.walk()
    found: list[Node] = []
    for store in (n for n in nodes if n.op is Op.STORE):
        tensor, part = store.attrs["tensor"], _partition(store, grid)
        if any(
            n.op is Op.LOAD and n.attrs["tensor"] is tensor and not part <= _items(n) for n in nodes
        ):
            found.append(store)
    return found


def _partition(node: Node, grid: set[int]) -> set[tuple[int, int]]:
    """(tensor dim, grid sym) of each grid tile indexing a store: the part of the tensor each
    program writes. A read of one tensor (one view of it) indexed by all of them stays in the
    reading program's own part, whatever else it reads there (``x2[tm, tn, 0]`` beside a
    store to ``[tm, tn, 1]``); otherwise it reaches other programs' parts."""
    return {
        (item[2], id(item[1]))
        for item in node.attrs["index"]
        if item[0] == "tile" and id(item[1]) in grid
    }


def _items(node: Node) -> set[tuple[int, int]]:
    """(tensor dim, sym) of each tile item of an access."""
    return {(item[2], id(item[1])) for item in node.attrs["index"] if item[0] == "tile"}


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
                f"positions than it writes '{written}' (a permutation, a transpose, a gather "
                "from memory): a program may read elements after they were written, by another "
                "program or by itself"
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

"""Launcher prologue checks (stage: codegen; in: a traced :class:`DeviceLoop`; out: Python source
lines of the host launcher that run before the kernel launch).

What a launch must not do: start a grid over an empty range (a program would run with no valid
element and, where the extent divides the block, no mask), or, with dynamic shapes, index a
tensor past its end because a later call's tensor is shorter than the loop it is indexed by.
Static shapes are checked once at trace time (``frontend/coverage.py``): each new shape re-traces.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tilecraft.ir.nodes import DeviceLoop, Node, Op


def arg_expr(name: str, source: Any) -> str:
    """How the launcher computes a kernel argument from the host locals ``env`` and ``spec``."""
    if source is None:
        return f"env[{name!r}]"
    kind = source[0]
    if kind == "size":
        return f"env[{source[1]!r}].shape[{source[2]}]"
    if kind == "stride":
        return f"env[{source[1]!r}].stride({source[2]})"
    if kind == "spec":
        return f"spec.{source[1]}s[{source[2]}]"
    if kind == "int":  # a bool flag a host loop changes: 0 or 1
        return f"int(env[{source[1]!r}])"
    if kind == "programs":
        return "num_programs"
    raise AssertionError(source)


def _describe(name: str, source: Any) -> str:
    if source is not None and source[0] == "size":
        return f"{source[1]}.shape[{source[2]}]"
    return name


def _extent_guards(loop: DeviceLoop) -> list[str]:
    """With dynamic shapes, extents that were equal when traced share one reduction dim; check at
    launch that they still are (else the kernel would read out of bounds)."""
    lines = []
    for sym in loop.syms:
        args = [(a.attrs["name"], a.attrs.get("source")) for a in sym.extent_args]
        if sym.pinned and args:  # a static dim of the traced extent stands for it
            first = arg_expr(*args[0])
            message = (
                f"{_describe(*args[0])} must be {sym.extent} (a dim of fixed size stands for it "
                "in this kernel, e.g. a constant slice), got "
            )
            lines.append(
                f"    if {first} != {sym.extent}:\n        raise ShapeError({message!r} + str({first}))\n"
            )
        for name, source in args[1:]:
            first, other = arg_expr(*args[0]), arg_expr(name, source)
            message = f"{_describe(*args[0])} and {_describe(name, source)} must be equal (one reduction dim), got "
            lines.append(
                f"    if {first} != {other}:\n        raise ShapeError({message!r} + str(({first}, {other})))\n"
            )
    return lines


def _bound_expr(value: Any) -> str | None:
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Node) and value.op is Op.ARG and value.attrs.get("source"):
        return arg_expr(value.attrs["name"], value.attrs["source"])
    return None


def _dynamic_accesses(loop: DeviceLoop) -> Iterator[tuple[Node, Any]]:
    """Each load, store or atomic of a tensor with run-time sizes, with that tensor."""
    for node in loop.walk():
        if node.op in (Op.LOAD, Op.STORE, Op.ATOMIC) and node.attrs["tensor"].dynamic:
            yield node, node.attrs["tensor"]


def _coverage_guards(loop: DeviceLoop) -> list[str]:
    """Dynamic shapes: every tensor indexed by a grid tile must reach the tile loop's end."""
    lines, seen = [], set()
    for node, tensor in _dynamic_accesses(loop):
        for item in node.attrs["index"]:
            if item[0] != "tile" or (tensor.name, item[2], item[1].index) in seen:
                continue
            seen.add((tensor.name, item[2], item[1].index))
            begin = _bound_expr(item[1].begin)
            if begin is not None and not begin.isdigit():
                message = f"{node.loc}: the tile loop indexing '{tensor.name}' begins before it: "
                lines.append(
                    f"    if {begin} < 0:\n        raise ShapeError({message!r} + str({begin}))\n"
                )
            end = _bound_expr(item[1].extent)
            if end is None or end.isdigit():
                continue  # a constant extent was checked when the access was traced
            size = f"env[{tensor.name!r}].shape[{item[2]}]"
            message = (
                f"{node.loc}: tensor '{tensor.name}' is too short along dim {item[2]} for the "
                "tile loop that indexes it: (size, loop end) = "
            )
            lines.append(
                f"    if {size} < {end}:\n        raise ShapeError({message!r} + str(({size}, {end})))\n"
            )
    return lines


def _unit_stride_guards(loop: DeviceLoop) -> list[str]:
    """Dynamic shapes: a tensor the host code made keeps some strides of 1 literal in the
    kernel (``HostTensor.unit_stride``); a launch where one is not 1 (a transposed view whose
    other dim was 1 when traced) must not read the wrong elements."""
    lines, seen = [], set()
    for node, tensor in _dynamic_accesses(loop):
        if tensor.argument or tensor.name in seen:
            continue
        seen.add(tensor.name)
        for dim in (d for d in range(tensor.ndim) if tensor.unit_stride(d)):
            stride = f"env[{tensor.name!r}].stride({dim})"
            size = f"env[{tensor.name!r}].shape[{dim}]"
            message = (
                f"{node.loc}: tensor '{tensor.name}' had stride 1 along dim {dim} when this "
                "kernel was compiled (static_shapes=False) and has another now; use "
                "static_shapes=True or make it contiguous: stride = "
            )
            # (along a dim of size 1 any stride reads the same element: torch.empty_like of a
            # [7, 1] column gives it 7 on the CPU and 1 on meta tensors)
            lines.append(
                f"    if {stride} != 1 and {size} != 1:\n"
                f"        raise ShapeError({message!r} + str({stride}))\n"
            )
    return lines


def _empty_grid_guard(loop: DeviceLoop) -> list[str]:
    """A grid over an empty range launches nothing (outputs stay as the host code made them)."""
    tests = []
    for sym in loop.grid_syms:
        begin, end = _bound_expr(sym.begin), _bound_expr(sym.extent)
        if begin is None or end is None:
            continue
        if begin.isdigit() and end.isdigit():
            if int(end) <= int(begin):
                return ["    return\n"]
            continue
        tests.append(f"{end} <= {begin}")
    return [f"    if {' or '.join(tests)}:\n        return\n"] if tests else []


def launch_guards(loop: DeviceLoop) -> list[str]:
    """Every check of a launcher's prologue, the cheapest (an empty grid) first."""
    return (
        _empty_grid_guard(loop)
        + _extent_guards(loop)
        + _coverage_guards(loop)
        + _unit_stride_guards(loop)
    )

"""Guards on the module globals and closure constants a kernel reads (stage: runtime; in: the
kernel's Python function; out: the constants it names and whether they changed since it was
traced).

Tracing bakes a global's value into the generated code (``x + SHIFT`` becomes ``x + 1.0``).
Without a guard, assigning ``SHIFT = 10.0`` later in the same process would leave every
compiled specialization computing with 1.0 while ref mode and eager PyTorch use 10.0. Each
call compares the constants the kernel's code names with the values it was traced with; a
change drops the kernel's specializations so the next call traces again (as ``torch.compile``
recompiles on a changed global, where Triton raises).

Guarded are names bound to immutable constants (numbers, strings, bools, None, dtypes and
tuples of them; a module, a function or a tensor is not baked as a value), and chains of
constant items and attributes that device code reads from a mutable object (``HP["scale"]``,
``CFG.lr``): a dict or an object changes without its binding changing.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import dis
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from tilecraft.frontend.source import DeviceLoopSource

_MISSING = object()
_SCALARS = (bool, int, float, complex, str, bytes, type(None), torch.dtype)


def is_constant(value: Any) -> bool:
    if isinstance(value, tuple | frozenset):
        return all(is_constant(v) for v in value)
    return isinstance(value, _SCALARS)


def _global_names(code: types.CodeType) -> set[str]:
    """Names a function's code (and code nested in it: comprehensions, lambdas) loads as
    globals."""
    names = {
        i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


# helpers from these packages are library code, not the user's: their globals are not followed
_LIBRARIES = frozenset({"torch", "triton", "tilecraft", "numpy", "math", "builtins"})
_HELPER_DEPTH = 3


class GlobalGuard:
    """The constant globals and closure variables ``fn`` names, also through the plain Python
    helpers it calls, with the values it was traced with (recorded by the first
    :meth:`changed` call)."""

    def __init__(self, fn: Callable[..., Any], loops: Sequence[DeviceLoopSource]):
        """``loops``: the kernel's device loops (host code reads its globals live at each
        call, and host values a loop captures are guarded where it is launched)."""
        names = set().union(*(loop.names for loop in loops))
        # (name, where, key): a global is where[key] of its module's dict, a closure
        # variable the contents of cell ``where`` (key None)
        self._slots: list[tuple[str, Any, str | None]] = []
        _collect(fn, set(), self._slots, _HELPER_DEPTH, names)
        # constants device code reads from a mutable object: HP["scale"], CFG.lr, TAPS[0]
        self._chains = _item_chains(fn, [loop.node for loop in loops])
        self._seen: tuple[Any, ...] | None = None

    @property
    def active(self) -> bool:
        return bool(self._slots or self._chains)

    def _values(self) -> tuple[Any, ...]:
        return tuple(
            _cell_value(where) if key is None else where.get(key, _MISSING)
            for _, where, key in self._slots
        ) + tuple(chain.read() for chain in self._chains)

    def _identical(self, before: tuple[Any, ...]) -> bool:
        """Every slot still holds the very object it held (each call's path: a plain loop, as
        a kernel call's overhead is a few microseconds)."""
        for (_, where, key), old in zip(self._slots, before, strict=False):
            if key is None:
                if _cell_value(where) is not old:
                    return False
            elif where.get(key, _MISSING) is not old:
                return False
        if self._chains:
            read = before[len(self._slots) :]
            return all(c.read() is old for c, old in zip(self._chains, read, strict=True))
        return True

    def fingerprint(self) -> str:
        """The guarded names and their values now, as text (part of the autotuner's cache key:
        kernels of one source that read other constants are other kernels)."""
        labels = [slot[0] for slot in self._slots] + [c.label for c in self._chains]
        return repr(sorted(zip(labels, map(repr, self._values()), strict=True)))

    def snapshot(self) -> list[Any]:
        """The guarded values now, in slot order (:meth:`restore` in another process: an
        autotuning worker imports the module afresh, with the values its source assigns)."""
        return [None if v is _MISSING else (v,) for v in self._values()]

    def restore(self, values: list[Any]) -> None:
        """Assign a :meth:`snapshot` of the same kernel's guard in another process (a slot
        left unset there, or a chain whose object refuses the assignment, is left as it is)."""
        if len(values) != len(self._slots) + len(self._chains):
            return  # another source: nothing to line up
        for (_, where, key), value in zip(self._slots, values, strict=False):
            if value is not None:
                if key is None:
                    where.cell_contents = value[0]
                else:
                    where[key] = value[0]
        for chain, value in zip(self._chains, values[len(self._slots) :], strict=True):
            if value is not None:
                with contextlib.suppress(Exception):
                    chain.assign(value[0])

    def changed(self) -> list[tuple[str, Any, Any]]:
        """(name, traced value, value now) of each guarded constant that differs from the values
        of the last trace; the current values become the new baseline."""
        before = self._seen
        if before is not None and self._identical(before):
            return []
        now = self._values()
        self._seen = now
        if before is None:
            return []
        labels = [slot[0] for slot in self._slots] + [c.label for c in self._chains]
        return [
            (label, old, new)
            for label, old, new in zip(labels, before, now, strict=True)
            if not _same(old, new)
        ]


def _collect(
    fn: Any,
    seen: set[Any],
    out: list[tuple[str, Any, str | None]],
    depth: int,
    only: set[str] | None = None,
) -> None:
    """Add ``fn``'s constant closure variables and globals (those in ``only``, if given) to
    ``out``, and those of the user helpers it names (``depth`` levels deep)."""
    code = fn.__code__
    if code in seen or depth < 0:
        return
    seen.add(code)
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        if only is not None and name not in only:
            continue
        value = _cell_value(cell)
        if is_constant(value):
            out.append((name, cell, None))
        elif _is_user_helper(value):
            _collect(value, seen, out, depth - 1)
    scope = fn.__globals__
    for name in sorted(_global_names(code)):
        if only is not None and name not in only:
            continue
        if name not in scope:
            # not bound yet: may become a constant later; builtins (range, float) are not in
            # the module's dict
            if not hasattr(builtins, name):
                out.append((name, scope, name))
        elif is_constant(scope[name]):
            out.append((name, scope, name))
        elif _is_user_helper(scope[name]):
            _collect(scope[name], seen, out, depth - 1)


def _is_user_helper(value: Any) -> bool:
    module = getattr(value, "__module__", None) or ""
    return isinstance(value, types.FunctionType) and module.split(".")[0] not in _LIBRARIES


@dataclasses.dataclass(frozen=True)
class _Chain:
    """``root`` then items and attributes with constant keys (``HP["scale"]``, ``CFG.lr``)."""

    label: str
    root: Any  # a module's dict or a closure cell
    key: str | None  # the root's name in that dict (None: a cell)
    steps: tuple[tuple[bool, Any], ...]  # (is_attribute, attribute name or item key)

    def read(self) -> Any:
        value = _cell_value(self.root) if self.key is None else self.root.get(self.key, _MISSING)
        return follow(value, self.steps)

    def assign(self, value: Any) -> None:
        """Make :meth:`read` give ``value`` (the last item or attribute set)."""
        owner = _cell_value(self.root) if self.key is None else self.root[self.key]
        for is_attr, step in self.steps[:-1]:
            owner = getattr(owner, step) if is_attr else owner[step]
        is_attr, step = self.steps[-1]
        if is_attr:
            setattr(owner, step, value)
        else:
            owner[step] = value


def _item_chains(fn: Any, loops: Sequence[ast.AST]) -> list[_Chain]:
    """The item / attribute chains device loops read from a global or closure object that is
    not a module, whose value now is a constant."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
    chains: dict[str, _Chain] = {}
    for node in (n for loop in loops for n in ast.walk(loop)):
        parsed = _parse_chain(node)
        if parsed is None:
            continue
        name, steps = parsed
        root, key = (cells[name], None) if name in cells else (fn.__globals__, name)
        base = _cell_value(root) if key is None else root.get(key, _MISSING)
        if isinstance(base, types.ModuleType) or base is _MISSING or is_constant(base):
            continue  # torch.float32, math.pi: library constants; a constant: a name slot
        chain = _Chain(ast.unparse(node), root, key, steps)
        if is_constant(chain.read()):
            chains.setdefault(chain.label, chain)
    return list(chains.values())


def follow(value: Any, steps: tuple[tuple[bool, Any], ...]) -> Any:
    """``value``'s item or attribute at the end of ``steps`` (a missing one: a sentinel)."""
    for is_attr, step in steps:
        try:
            value = getattr(value, step) if is_attr else value[step]
        except Exception:  # gone, or no longer indexable: a change either way
            return _MISSING
    return value


def argument_chains(
    tree: ast.AST, params: Sequence[str], loops: Sequence[ast.AST]
) -> tuple[tuple[int, tuple[tuple[bool, Any], ...]], ...]:
    """(parameter index, steps) of each item / attribute chain device loops read from a
    parameter (``cfg.opt.lr``, ``hp["betas"][0]``) that host code never rebinds: its value is
    baked in, so the specialization key holds it (an object's repr does not)."""
    rebound = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    chains: dict[tuple[int, tuple[tuple[bool, Any], ...]], None] = {}
    for node in (n for loop in loops for n in ast.walk(loop)):
        parsed = _parse_chain(node)
        if parsed is not None and parsed[0] in params and parsed[0] not in rebound:
            chains[(params.index(parsed[0]), parsed[1])] = None
    return tuple(chains)


def _parse_chain(node: ast.AST) -> tuple[str, tuple[tuple[bool, Any], ...]] | None:
    steps: list[tuple[bool, Any]] = []
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            steps.append((True, node.attr))
        elif isinstance(node.slice, ast.Constant):
            steps.append((False, node.slice.value))
        else:
            return None
        node = node.value
    if not steps or not isinstance(node, ast.Name):
        return None
    return node.id, tuple(reversed(steps))


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell: not assigned yet
        return _MISSING


def _same(a: Any, b: Any) -> bool:
    """Equal as the generated code would bake them: 1, 1.0 and True are three constants."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def describe(changes: list[tuple[str, Any, Any]]) -> str:
    return ", ".join(
        f"{name} {'(unset)' if old is _MISSING else repr(old)} -> "
        f"{'(unset)' if new is _MISSING else repr(new)}"
        for name, old, new in changes
    )

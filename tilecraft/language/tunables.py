"""Tunables and specialization: ``register_block_size``, ``register_tunable``, ``specialize``,
``constexpr`` (stage: language; values come from the host context installed by the runtime)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilecraft.errors import DeviceCodeError
from tilecraft.ir.nodes import Op
from tilecraft.language import _context


class BlockSize(int):
    """An int that is a tunable block size; ``slot`` is its index in ``Config.block_sizes``."""

    slot: int

    def __new__(cls, value: int, slot: int) -> BlockSize:
        obj = super().__new__(cls, value)
        obj.slot = slot
        return obj


class Specialized(int):
    """An int baked into the generated kernel (``tc.specialize``). Int arithmetic with plain
    ints keeps it baked (``h = n // 2`` in host code, then ``x[tm, :h]``: as int it was a
    run-time int under ``static_shapes=False``, though written from a specialized one)."""


def _keeps_specialized(name: str) -> Callable[[Specialized, Any], Any]:
    base = getattr(int, name)

    def op(self: Specialized, other: Any) -> Any:
        if type(other) not in (int, bool, Specialized):
            return NotImplemented  # a run-time int (DynamicInt), a float...: as int does
        result = base(self, other)
        return Specialized(result) if type(result) is int else result

    return op


for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
    "__rfloordiv__", "__mod__", "__rmod__", "__lshift__", "__rshift__", "__and__", "__or__",
    "__xor__",
):  # fmt: skip
    setattr(Specialized, _name, _keeps_specialized(_name))
Specialized.__neg__ = lambda self: Specialized(-int(self))  # type: ignore[assignment,method-assign]


class DynamicInt(int):
    """A host int passed to a ``static_shapes=False`` kernel at run time (not baked in), or one
    a host loop changes between launches of a device loop. Arithmetic and ordering in device
    code give device values (``n // 2``, ``i > 0``: computed at run time from the argument);
    as an int Python would fold them with the traced value and bake that in. ``==`` stays int
    equality (the compiler compares sizes); the interpreter rewrites the user's ``==`` / ``!=``
    into run-time tests (``frontend/interpreter._RuntimeEquality``)."""

    arg: str

    def __new__(cls, value: int, arg: str) -> DynamicInt:
        obj = super().__new__(cls, value)
        obj.arg = arg
        return obj


class SpecializeHostInts(Exception):
    """Device code needs these host ints (passed at run time under ``static_shapes=False``) as
    compile-time ints (``tc.static_range(-half, half + 1)``): the kernel is traced again with
    them baked in, and a call with other values compiles again (as ``tc.specialize`` does)."""

    def __init__(self, names: frozenset[str]):
        super().__init__(sorted(names))
        self.names = names


def host_int_names(value: Any) -> frozenset[str] | None:
    """The host ints a run-time int value is computed from (``half``, ``-half``, ``k // 2 + 1``
    of them and constants), or None where it reads anything else (a loaded value, a size's
    device-side expression)."""
    if isinstance(value, DynamicInt):
        return frozenset([value.arg])
    node = getattr(value, "node", None)
    if node is None:
        return None
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n.op is Op.ARG and not n.dtype.is_floating_point:
            names.add(n.attrs["name"])
        elif n.op in (Op.UNARY, Op.BINARY, Op.CAST, Op.CONST):
            stack.extend(n.inputs)
        else:
            return None
    return frozenset(names) or None


class DynamicFlag(DynamicInt):
    """A host bool that a host loop changes between launches of a device loop: 0 or 1 at run
    time (the launcher passes ``int(flag)``)."""


def _device_op(name: str, reflected: bool = False) -> Any:
    import torch

    method = getattr(torch.Tensor, name)
    fallback = getattr(int, ("__r" + name[2:]) if reflected else name)

    def fn(self: DynamicInt, other: Any) -> Any:
        tracer: Any = _context.device()
        if tracer is None:
            return fallback(self, other)
        args = (other, self) if reflected else (self, other)
        return tracer.torch_call(method, args, {})

    fn.__name__ = name
    return fn


def _device_unary(name: str) -> Any:
    import torch

    method = getattr(torch.Tensor, name)
    fallback = getattr(int, name)

    def fn(self: DynamicInt) -> Any:
        tracer: Any = _context.device()
        return fallback(self) if tracer is None else tracer.torch_call(method, (self,), {})

    fn.__name__ = name
    return fn


# every operator int has: one Python would fold with the traced value (``x * -i``, ``k ** 2``,
# ``~flag``) bakes the first launch's value into the compile
_BINARY = (
    "__add__", "__sub__", "__mul__", "__floordiv__", "__mod__", "__truediv__", "__pow__",
    "__and__", "__or__", "__xor__", "__lshift__", "__rshift__",
)  # fmt: skip
for _name in _BINARY:
    setattr(DynamicInt, _name, _device_op(_name))
    setattr(DynamicInt, "__r" + _name[2:], _device_op(_name, reflected=True))
for _name in ("__lt__", "__le__", "__gt__", "__ge__"):
    setattr(DynamicInt, _name, _device_op(_name))
for _name in ("__neg__", "__pos__", "__invert__", "__abs__"):
    setattr(DynamicInt, _name, _device_unary(_name))


class constexpr:  # noqa: N801 - the name users know from Triton and Helion
    """Annotation for arguments that are compile-time constants (part of the specialization)."""


def register_block_size(lo: int, hi: int | None = None) -> int:
    """A tunable block size for a loop over ``lo`` elements (the config's block is at most
    ``lo`` rounded up to a power of 2); with ``hi``, one in ``[lo, hi]`` (Helion's
    ``register_block_size(min, max)``). An int on the host (size per-block buffers with
    ``tc.cdiv(n, block)``) and the ``block_size=`` of the ``tc.tile`` it tiles."""
    ctx = _context.host()
    if ctx is None:
        raise DeviceCodeError("tc.register_block_size() called outside a tilecraft kernel")
    if ctx.mode == "fake":  # sizes may be symbolic under torch.compile: int() would specialize
        return ctx.block_size(lo, hi)
    return ctx.block_size(int(lo), None if hi is None else int(hi))


def register_tunable(name: str, choices: Any) -> Any:
    """A user tunable: ``choices`` is a sequence of values (the first is the default) or a
    Helion-style fragment (``PowerOfTwoFragment(16, 256, 64)``...); the config picks one."""
    from tilecraft.language.fragments import Fragment

    ctx = _context.host()
    if ctx is None:
        raise DeviceCodeError("tc.register_tunable() called outside a tilecraft kernel")
    options = choices.choices() if isinstance(choices, Fragment) else tuple(choices)
    if not options:
        raise DeviceCodeError(f"tc.register_tunable({name!r}): choices is empty")
    from tilecraft.config.config import Config  # (the config package imports the language)

    if name in Config.field_names() or name == "user":  # a Config keeps tunables by name
        from tilecraft.language.ref_access import user_loc

        raise DeviceCodeError(
            f"tc.register_tunable({name!r}): {name!r} is a tc.Config field (the launch's own "
            "setting); give the tunable another name",
            user_loc(),
            hint=f"e.g. tc.register_tunable('my_{name}', ...)",
        )
    return ctx.tunable(name, options)


def specialize(value: Any) -> Any:
    """Bake ``value`` (an int or a tuple of ints, e.g. ``x.size(1)``) into the compiled kernel."""
    if isinstance(value, (tuple, list)):
        return type(value)(specialize(v) for v in value)
    try:
        result = Specialized(int(value))
    except (TypeError, ValueError):
        raise DeviceCodeError(f"tc.specialize() needs an int, got {type(value).__name__}") from None
    ctx = _context.host()
    if ctx is not None:
        ctx.specialized(int(result))
    return result

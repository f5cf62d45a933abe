"""What a compiled specialization is for (stage: runtime; in: a call's argument values; out:
the key that selects a specialization, and each argument's signature for checks and messages).

Static shapes key every tensor's dtype, shape, strides and device; dynamic shapes a tensor's
power-of-two size buckets and its layout (strides of 1 and 0, the dims' order by stride: host
code's ``torch.empty_like`` follows it), and the index width. Ints and bools are keyed by value,
floats by type; a list, tuple, dict, SimpleNamespace or dataclass by its items' keys; an object
of another class (a config object, an ``nn.Module``) by its constant attributes (device code
bakes in what it reads of them; its default repr held its address: a new cache entry and a
new tuning in every process).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from tilecraft import containers
from tilecraft.config.plan import next_pow2
from tilecraft.frontend.values import aligned
from tilecraft.ir.index_width import needs_int64
from tilecraft.runtime.global_guard import follow, is_constant


@dataclasses.dataclass
class ArgSignature:
    """What a specialization was compiled for, per argument (for checks and messages)."""

    name: str
    kind: str  # "tensor", "int", "float", "bool", "other"
    dtype: torch.dtype | None = None
    shape: tuple[int, ...] | None = None
    stride: tuple[int, ...] | None = None
    device: str | None = None
    value: Any = None
    aligned: bool = True  # the data pointer is 16-byte aligned (TMA descriptors need it)

    def describe(self) -> str:
        if self.kind == "tensor" and self.value == "dynamic":
            return f"a {len(self.shape or ())}-D {self.dtype} tensor on {self.device} (size buckets {list(self.shape or ())})"
        if self.kind == "tensor":
            return f"a {self.dtype} tensor of shape {list(self.shape or ())} strides {list(self.stride or ())} on {self.device}"
        return f"{self.kind} {self.value!r}" if self.kind in ("int", "bool") else self.kind


def signature_of(name: str, value: Any, static_shapes: bool) -> ArgSignature:
    if isinstance(value, torch.Tensor):
        if static_shapes:
            shape, stride = tuple(value.shape), tuple(value.stride())
            return ArgSignature(
                name, "tensor", value.dtype, shape, stride, value.device.type, None, aligned(value)
            )
        # dynamic: one compile per power-of-two size bucket (whole reduction dims need a constexpr
        # block >= the extent) and per layout (dynamic_layout)
        buckets = tuple(s if s < 2 else next_pow2(s) for s in value.shape)
        unit = dynamic_layout(tuple(value.shape), tuple(value.stride()))
        return ArgSignature(
            name, "tensor", value.dtype, buckets, unit, value.device.type, "dynamic", aligned(value)
        )
    if isinstance(value, bool):
        return ArgSignature(name, "bool", value=value)
    if isinstance(value, int):
        return ArgSignature(name, "int", value=value)
    if isinstance(value, float):
        return ArgSignature(name, "float")
    # a container by its items' keys (its repr held its tensors' values: a list of gradients
    # was a new disk-cache entry and a new tuning in every process)
    return ArgSignature(name, "other", value=repr(value_key(value, static_shapes)))


def dynamic_layout(shape: tuple[int, ...], stride: tuple[int, ...]) -> tuple[int, ...]:
    """What a dynamic-shape compile keeps of a tensor's strides: which are 1 (literal in the
    code, for vectorization) and 0 (expanded), the dims' order by stride (``torch.empty_like``
    in host code follows it: an expanded [3, 5] column and a transposed [3, 5] had one pattern,
    not one layout), and the index width (1: offsets past 2^31 need int64). Exported modules
    check arguments with it (and carry ``ir/index_width``'s two functions)."""
    unit = tuple(1 if st == 1 else 2 if st == 0 else 0 for st in stride)
    order = tuple(sorted(range(len(stride)), key=lambda d: (-stride[d], d)))
    return unit + order + (int(needs_int64(shape, stride)),)


def value_key(v: Any, static_shapes: bool) -> Any:
    """One argument's part of the specialization key (the pointer's 16-byte alignment too: a
    TMA descriptor of a base 4 bytes off faults on the GPU)."""
    if isinstance(v, torch.Tensor):
        if static_shapes:
            return (v.dtype, v.shape, v.stride(), v.device.type, aligned(v))
        sig = signature_of("", v, False)
        return (v.dtype, sig.shape, sig.stride, v.device.type, sig.aligned)
    if isinstance(v, (bool, int)):
        return (type(v), v)
    if isinstance(v, float):
        return float
    if isinstance(v, (list, tuple)):  # a list of tensors: each one's key, not its repr
        return (type(v), tuple(_item_key(x, static_shapes) for x in v))
    items = containers.fields(v)
    if items is not None:  # a dict or a plain record: each item's key, never a tensor's values
        return (
            type(v),
            tuple((_field_key(k, static_shapes), _item_key(x, static_shapes)) for k, x in items),
        )
    if isinstance(v, torch.nn.Module) or type(v).__repr__ is object.__repr__:
        state = getattr(v, "__dict__", None)
        if isinstance(state, dict):
            return (type(v), _constant_attributes(state, isinstance(v, torch.nn.Module)))
    return (type(v), repr(v))


def _constant_attributes(state: dict[str, Any], module: bool) -> tuple[Any, ...]:
    """An object's attributes that are constants (numbers, strings, dtypes, tuples of them),
    floats by value; a module's public ones (its parameters, buffers and children are in
    private dicts: device code cannot read them, host code reads them live). A deeper value
    device code reads (``cfg.opt.lr``) is keyed by :func:`chain_key`."""
    return tuple(
        (name, _item_key(x, True))
        for name, x in state.items()
        if is_constant(x) and not (module and name.startswith("_"))
    )


def chain_key(root: Any, steps: tuple[tuple[bool, Any], ...]) -> Any:
    """What device code reads through an object argument's attributes or items
    (``cfg.opt.lr``), by value where it is a constant (None: the argument is a tensor or a
    container, keyed whole)."""
    if isinstance(root, (torch.Tensor, list, tuple)) or containers.fields(root) is not None:
        return None
    value = follow(root, steps)
    return _item_key(value, True) if is_constant(value) else type(value)


def _field_key(k: Any, static_shapes: bool) -> Any:
    """A dict key as the key holds it: a tensor (a state dict keyed by its parameters) by its
    layout (a tensor in a tuple compared with ``==``: an elementwise tensor, no bool)."""
    return value_key(k, static_shapes) if isinstance(k, torch.Tensor) else k


def _item_key(x: Any, static_shapes: bool) -> Any:
    """A container item's key: a container's floats are baked into the traced code (only a
    float argument itself is passed at run time), each by its value (repr: NaN equals NaN,
    -0.0 is not 0.0)."""
    return (float, repr(x)) if isinstance(x, float) else value_key(x, static_shapes)

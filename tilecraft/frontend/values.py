"""Proxy values seen by device code while it is traced (stage: frontend).

* :class:`TileValue` wraps an IR node: arithmetic, methods and torch functions on it build IR
  (torch functions arrive through ``__torch_function__``).
* :class:`TileProxy` is the loop variable of a tile loop (``.index``, ``.begin``, ``.end``, ...).
* :class:`HostTensor` is a host tensor captured by a device loop: indexing it loads, assigning to an
  index stores, ``new_zeros`` and friends make register tiles.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import types
from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError
from tilecraft.frontend.host_aliases import SHAPE_VIEWS
from tilecraft.ir.nodes import Node, Op, Sym

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


class TileValue:
    """A traced tile (or scalar) value in device code."""

    __slots__ = ("node", "tracer")

    def __init__(self, node: Node, tracer: Tracer):
        self.node = node
        self.tracer = tracer

    # -- torch protocol -------------------------------------------------------------------
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        tracer = _find_tracer(args, kwargs or {})
        return tracer.torch_call(func, args, kwargs or {})

    # -- attributes -----------------------------------------------------------------------
    @property
    def dtype(self) -> torch.dtype:
        return self.node.dtype

    @property
    def shape(self) -> tuple[Any, ...]:
        return self.node.shape

    @property
    def ndim(self) -> int:
        return self.node.ndim

    def dim(self) -> int:
        return self.node.ndim

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    @property
    def device(self) -> torch.device:
        """A placeholder: device code has one device, and its factories ignore ``device=``
        (``torch.ones(n, n, device=x.device)`` builds a tile as torch code writes it)."""
        return torch.device("meta")

    def __getattr__(self, name: str) -> Any:
        method = getattr(torch.Tensor, name, None)
        if method is None or name.startswith("_"):
            raise AttributeError(f"tile values have no attribute {name!r}")
        if name == "T":  # torch's properties: a view, not a method to call
            dims = tuple(reversed(range(self.node.ndim)))
            return self.tracer.torch_call(torch.Tensor.permute, (self, *dims), {})
        if name == "mT":
            return self.tracer.torch_call(torch.Tensor.transpose, (self, -2, -1), {})
        if not callable(method):
            raise DeviceCodeError(
                f"tile values have no attribute {name!r} in device code",
                hint="tiles have .shape, .dtype, .T and .mT and torch's methods",
            )
        return lambda *a, **k: self.tracer.torch_call(method, (self, *a), k)

    def __bool__(self) -> bool:
        if self.node.ndim == 0 and _from_tilecraft(sys._getframe(1)):
            # a lowering compared a number it needs as a Python int (``repeats < 1``): the
            # user wrote no and / or / not (the message said so)
            raise DeviceCodeError(
                "an argument that must be a Python int (a repeat count, a chunk count, a "
                "window size) is known only at run time: a size under static_shapes=False, "
                "or a value computed in device code",
                hint="wrap the size in tc.specialize(...) in host code, or use static_shapes=True",
            )
        if self.node.ndim == 0:  # `if` takes a scalar: what got here is and/or/not or a builtin
            raise DeviceCodeError(
                "a scalar device value was used as a Python bool (in `and`, `or`, `not`, "
                "`a if c else b`, or a Python builtin that compares it)",
                hint="write & | ~ for and / or / not, torch.where(c, a, b) for `a if c else b`; "
                "max() / min() of scalars work in device code and the plain functions it calls "
                "(in a method, write torch.maximum / torch.minimum); an `if` or `while` "
                "statement may test it",
            )
        raise DeviceCodeError(
            "a tile value was used as a Python bool (in `if`, `and`, `or`, `not` or a Python "
            "builtin that compares it)",
            hint="use torch.where(cond, a, b); an `if` or `while` may test one scalar condition "
            "(combine them with & and |)",
        )

    def __iter__(self) -> Any:
        raise DeviceCodeError("tile values cannot be iterated in device code")

    def _as_python(self, what: str) -> DeviceCodeError:
        return DeviceCodeError(
            f"{what}(...) of a device value: it holds no Python number while the kernel is "
            "traced (it is computed on the device; Python's math functions take one too)",
            hint="keep it a tile: .to(torch.float32) / .to(torch.int32) casts it, .shape / "
            ".size(d) give its sizes; a number the host needs is an argument or a kernel output. "
            "math.sqrt() / max() of a run-time value work in device code and the plain "
            "functions it calls; in a method or a callable object write torch.sqrt() / "
            "torch.maximum()",
        )

    def __float__(self) -> float:
        raise self._as_python("float")

    def __int__(self) -> int:
        raise self._as_python("int")

    def __len__(self) -> int:
        raise self._as_python("len")

    def __repr__(self) -> str:
        return f"TileValue({self.node!r}: {list(self.node.shape)} {self.node.dtype})"

    # -- views ----------------------------------------------------------------------------
    def __getitem__(self, index: Any) -> TileValue:
        return self.tracer.view(self, index)

    def to(self, *args: Any, **kwargs: Any) -> TileValue:
        return self.tracer.torch_call(torch.Tensor.to, (self, *args), kwargs)


def _binary(name: str, reflected: bool = False) -> Any:
    method = getattr(torch.Tensor, name)

    def fn(self: Any, other: Any) -> Any:
        args = (other, self) if reflected else (self, other)
        return _tracer_of(self).torch_call(method, args, {})

    fn.__name__ = name
    return fn


for _name in [
    "__add__",
    "__sub__",
    "__mul__",
    "__truediv__",
    "__floordiv__",
    "__mod__",
    "__pow__",
    "__matmul__",
    "__and__",
    "__or__",
    "__xor__",
    "__lshift__",
    "__rshift__",
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
]:
    setattr(TileValue, _name, _binary(_name))
for _name, _base in (
    ("__radd__", "__add__"),
    ("__rmul__", "__mul__"),
    ("__rand__", "__and__"),
    ("__ror__", "__or__"),
    ("__rxor__", "__xor__"),
):
    setattr(TileValue, _name, _binary(_base, reflected=True))


def _rtruediv(self: Any, other: Any) -> Any:
    """``number / tile`` as torch defines it, ``tile.reciprocal() * number`` (two roundings, not
    one: an equalization LUT's ``255.0 / n`` then times a count lands on the other side of .5
    than one division does)."""
    tracer = _tracer_of(self)
    if isinstance(other, (int, float)):
        inverse = tracer.torch_call(torch.reciprocal, (self,), {})
        return tracer.torch_call(torch.Tensor.__mul__, (inverse, other), {})
    return tracer.torch_call(torch.Tensor.__truediv__, (other, self), {})


TileValue.__rtruediv__ = _rtruediv  # type: ignore[attr-defined]
for _name, _base in (
    ("__rsub__", "__sub__"),
    ("__rfloordiv__", "__floordiv__"),
    ("__rpow__", "__pow__"),
    ("__rmatmul__", "__matmul__"),
    ("__rmod__", "__mod__"),
    ("__rlshift__", "__lshift__"),
    ("__rrshift__", "__rshift__"),
):
    setattr(TileValue, _name, _binary(_base, reflected=True))
TileValue.__neg__ = lambda self: self.tracer.torch_call(torch.neg, (self,), {})  # type: ignore
TileValue.__abs__ = lambda self: self.tracer.torch_call(torch.abs, (self,), {})  # type: ignore
TileValue.__pos__ = lambda self: self  # type: ignore
TileValue.__invert__ = lambda self: self.tracer.torch_call(torch.bitwise_not, (self,), {})  # type: ignore
TileValue.__hash__ = object.__hash__  # type: ignore[method-assign,assignment]


class TileProxy:
    """The variable of a tile loop inside device code."""

    def __init__(self, sym: Sym, tracer: Tracer):
        self.sym = sym
        self.tracer = tracer

    def _leaf(self, op: Op) -> TileValue:
        return self.tracer.tile_leaf(self.sym, op)

    @property
    def index(self) -> TileValue:
        return self._leaf(Op.TILE_INDEX)

    @property
    def begin(self) -> TileValue:
        return self._leaf(Op.TILE_BEGIN)

    @property
    def end(self) -> TileValue:
        return self._leaf(Op.TILE_END)

    @property
    def id(self) -> TileValue:
        return self._leaf(Op.TILE_ID)

    @property
    def block_size(self) -> TileValue:
        return self._leaf(Op.BLOCK_SIZE)

    @property
    def count(self) -> Any:
        """How many tiles the loop has: ceil((end - begin) / block_size)."""
        bounds = [self.sym.extent, self.sym.begin]  # the loop's, not this tile's
        end, begin = (b if isinstance(b, int) else self.tracer.wrap(b) for b in bounds)
        span: Any = end - begin  # type: ignore[operator]  # TileValue ops are set after the class
        return (span + self.block_size - 1) // self.block_size

    def __repr__(self) -> str:
        return f"Tile({self.sym.name})"

    # A grid index (block size 1) is a scalar and may be used in arithmetic directly.
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        tracer = _find_tracer(args, kwargs or {})
        return tracer.torch_call(func, args, kwargs or {})


for _name in [
    *(f"__{op}__" for op in ("add", "sub", "mul", "floordiv", "mod", "truediv", "pow")),
    *(f"__r{op}__" for op in ("add", "sub", "mul", "floordiv", "mod", "truediv", "pow")),
    *(f"__{op}__" for op in ("and", "or", "xor", "lshift", "rshift")),
    *(f"__r{op}__" for op in ("and", "or", "xor", "lshift", "rshift")),
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
]:
    setattr(
        TileProxy,
        _name,
        (lambda n: lambda self, other: getattr(self.index, n)(other))(_name),
    )


def _proxy_equal(negate: bool) -> Any:
    """``d == 0`` of a tile loop's variable compares its index, as torch compares a tensor
    (identity made ``if d == 0:`` never run); two proxies compare their indices too, unless
    they are one object."""

    def fn(self: TileProxy, other: Any) -> Any:
        if other is self:
            return not negate
        if isinstance(other, TileProxy):
            other = other.index
        elif not isinstance(other, (int, float, TileValue)):
            return NotImplemented
        return self.index != other if negate else self.index == other

    return fn


TileProxy.__eq__ = _proxy_equal(negate=False)  # type: ignore[method-assign,assignment]
TileProxy.__ne__ = _proxy_equal(negate=True)  # type: ignore[method-assign,assignment]
TileProxy.__hash__ = object.__hash__  # type: ignore[method-assign,assignment]
TileProxy.__neg__ = lambda self: -self.index  # type: ignore[attr-defined,operator]


# dtype conversions of a whole host tensor in device code: the tensor loaded whole, converted
_WHOLE_TENSOR_METHODS = frozenset(
    {"float", "half", "bfloat16", "double", "int", "long", "bool", "to", "type_as"}
)
_ACCUMULATING_METHODS = frozenset(
    [
        "scatter_add_",
        "index_put_",
        "scatter_reduce_",
        "add_",
        "scatter_",
        "index_copy_",
    ]
)


@dataclasses.dataclass(eq=False)
class HostTensor:
    """A host tensor captured by a device loop: a pointer argument of the kernel."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    device_type: str
    tracer: Any = None
    dynamic: bool = False  # sizes and strides are kernel arguments (static_shapes=False)
    argument: bool = False  # a kernel argument itself (not a tensor the host code made)
    # tensors of one group may share memory: 0 for the kernel's arguments and views of them
    # (two arguments may be one tensor), else one group per buffer the host code allocated
    alias_group: int = 0
    aligned: bool = True  # its data pointer is 16-byte aligned on every call (TMA needs it)
    # taken from elsewhere than the arguments (a module's buffer, a global): the caller's own
    # memory, not a clone, in the tuner's runs (``write_guard``); real, not meta, when traced
    foreign: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device(self) -> torch.device:
        """The kernel's device (``torch.arange(n, device=x.device)`` in device code)."""
        return torch.device(self.device_type)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """A torch function given a 0-d host tensor reads its one element, as arithmetic does
        (``torch.maximum(x[t], s)``, ``torch.where(c, x[t], s)``); a larger one is refused by
        :func:`_whole_operands` with a hint to index it."""
        kwargs = kwargs or {}
        _whole_operands(func, args, kwargs)
        return _find_tracer(args, kwargs).torch_call(func, args, kwargs)

    def unit_stride(self, dim: int) -> bool:
        """Whether the generated code may take ``dim``'s stride to be 1 on every launch of a
        compile: static shapes re-trace per stride; with dynamic ones the specialization key
        records which strides of an argument are 1. A tensor the host code made (or viewed)
        keeps its strides of 1 while none of its dims has size 1 (a transposed weight
        ``w.t()``: dim 0), else along its last dim only: ``torch.empty([4, n])`` has stride 1
        along dim 0 when ``n`` is 1 and ``n`` otherwise. The launcher checks each stride of 1
        kept (``codegen/guards.py``)."""
        if self.stride[dim] != 1:
            return False
        if not self.dynamic or self.argument:
            return True
        return dim == self.ndim - 1 or 1 not in self.shape

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __getitem__(self, index: Any) -> TileValue:
        return self.tracer.load(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        self.tracer.store(self, index, value)

    def _new(self, size: Any, fill: float, dtype: torch.dtype | None) -> TileValue:
        shape = size if isinstance(size, (list, tuple)) else [size]
        return self.tracer.call("full", list(shape), fill, dtype or self.dtype)

    def new_zeros(self, *size: Any, dtype: torch.dtype | None = None, **_: Any) -> TileValue:
        return self._new(size[0] if len(size) == 1 else size, 0.0, dtype)

    def new_ones(self, *size: Any, dtype: torch.dtype | None = None, **_: Any) -> TileValue:
        return self._new(size[0] if len(size) == 1 else size, 1.0, dtype)

    def new_empty(self, *size: Any, dtype: torch.dtype | None = None, **_: Any) -> TileValue:
        return self._new(size[0] if len(size) == 1 else size, 0.0, dtype)

    def new_full(
        self, size: Any, fill_value: float, dtype: torch.dtype | None = None, **_: Any
    ) -> TileValue:
        return self._new(size, fill_value, dtype)

    def index_add_(self, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> HostTensor:
        """``x.index_add_(dim, index, source)``: ``source``'s slices added into ``x`` at the
        positions a 1-D index tile holds along ``dim``, atomically (two elements of one index,
        as edges into one vertex, each count): ``tc.atomic_add(x, [:, .., index, ..], source)``."""
        if not isinstance(dim, int) or not -self.ndim <= dim < self.ndim:
            raise DeviceCodeError(
                f"'{self.name}'.index_add_: dim {dim!r} is out of range for {self.ndim}-D "
                f"{list(self.shape)}"
            )
        if getattr(index, "ndim", None) != 1:
            raise DeviceCodeError(
                f"'{self.name}'.index_add_: the index must be a 1-D tile of positions (as in "
                "torch)",
                hint="load the positions first (`idx[te]`)",
            )
        items = [slice(None)] * self.ndim
        items[dim % self.ndim] = index
        value = source if alpha == 1 else source * alpha
        from tilecraft.language.memory_ops import atomic_add

        atomic_add(self, items, value)
        return self

    def index_select(self, dim: int, index: Any) -> TileValue:
        """``x.index_select(dim, index)``: the rows (along ``dim``) at the positions of a 1-D
        index tile, every other dim whole: the load ``x[:, .., index]`` (an embedding lookup,
        a batch of table rows)."""
        if not isinstance(dim, int) or not -self.ndim <= dim < self.ndim:
            raise DeviceCodeError(
                f"'{self.name}'.index_select: dim {dim!r} is out of range for {self.ndim}-D "
                f"{list(self.shape)}"
            )
        rank = getattr(index, "ndim", None)
        if rank != 1:
            raise DeviceCodeError(
                f"'{self.name}'.index_select: the index must be a 1-D tile of positions, got "
                f"{'a value of rank ' + str(rank) if rank is not None else type(index).__name__}",
                hint="load the positions first (`idx[tn]`); for one element per row index with "
                "tiles directly (`x[tn.index, idx[tn]]`)",
            )
        return self.tracer.load(self, (slice(None),) * (dim % self.ndim) + (index,))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in _ACCUMULATING_METHODS:
            raise DeviceCodeError(
                f"host tensor '{self.name}' has no device-side method '{name}': in-place "
                "scatter/accumulate methods do not run in device code",
                hint=f"accumulate with `tc.atomic_add({self.name}, [index, ...], value)` "
                f"(`{self.name}[index] += value` atomically; race-free when programs hit the "
                f"same elements), or store with `{self.name}[index] = value`",
            )
        method = getattr(torch.Tensor, name, None)
        if self.ndim == 0 and callable(method):  # a 0-d argument's methods act on its value
            return lambda *a, **k: self.tracer.torch_call(method, (self, *a), k)
        if callable(method) and name in _WHOLE_TENSOR_METHODS:
            # ``w.float()`` of a weight in device code (``F.layer_norm(h, (n,), w.float(),
            # b.float())``): the whole tensor, as ``w[...]`` loads it, then the method
            whole = self.tracer.load(self, (slice(None),) * self.ndim)
            return lambda *a, **k: self.tracer.torch_call(method, (whole, *a), k)
        if name in SHAPE_VIEWS:
            hint = (
                f"make the view in host code, above the loop (`{self.name}v = {self.name}."
                f"{name}(...)`), and index that in the loop; or index '{self.name}' to load a "
                "tile and view the tile"
            )
        else:
            hint = (
                "inside a device loop, index a host tensor to load a tile, then operate on the tile"
            )
        raise DeviceCodeError(
            f"host tensor '{self.name}' has no device-side attribute or method '{name}'",
            hint=hint,
        )

    def __repr__(self) -> str:
        return f"HostTensor({self.name}: {list(self.shape)} {self.dtype})"


def aligned(t: torch.Tensor) -> bool:
    """Whether the tensor's data pointer is 16-byte aligned (a tensor without memory: yes)."""
    try:
        return t.data_ptr() % 16 == 0
    except (RuntimeError, NotImplementedError):
        return True


def memory_owner(value: torch.Tensor) -> torch.Tensor:
    """The tensor whose memory ``value`` views (itself if none): two tensors may alias when
    they share one (arguments' views, a glue run's outputs, an op's mutated arguments)."""
    return value._base if value._base is not None else value


def _tracer_of(value: Any) -> Tracer:
    return value.tracer  # type: ignore[no-any-return]


# a 0-d host tensor in arithmetic reads its one element (``-s``, ``s + 1``, ``s > 0``); its ``==``
# stays identity (the compiler compares host tensors): the interpreter rewrites the user's ==/!=
for _name in ("__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__"):
    setattr(HostTensor, _name, _binary(_name))
    setattr(HostTensor, "__r" + _name[2:], _binary(_name, reflected=True))
for _name in ("__lt__", "__le__", "__gt__", "__ge__"):
    setattr(HostTensor, _name, _binary(_name))
HostTensor.__neg__ = lambda self: self.tracer.torch_call(torch.neg, (self,), {})  # type: ignore
HostTensor.__abs__ = lambda self: self.tracer.torch_call(torch.abs, (self,), {})  # type: ignore


# a host tensor's views are host code's (a tile of a view is a load with its strides)
def host_tensor_operand(op: str, detail: str, loc: Any) -> DeviceCodeError:
    """The error for a host tensor given whole to ``torch.<op>`` (``torch.gather(x, ...)`` of a
    kernel argument): device code reaches host tensors only by indexing them."""
    allocating = op.startswith(("empty", "zeros", "ones", "full", "rand"))
    return DeviceCodeError(
        f"torch.{op} of a host tensor: {detail}",
        loc,
        hint="allocate outputs in host code, above the `for ... in tc.tile(...)` loop "
        "(`out = torch.empty_like(x)`), and store tiles into them"
        if allocating
        else "make the view in host code, above the loop (`xv = torch.reshape(x, ...)`), and "
        "index that in the loop"
        if op in SHAPE_VIEWS
        else "index it to load a tile first (`x[tm, :]`); a gather from a host tensor is a "
        "load with a tensor index (`x[tm.index, idx]`: tensor indices pair up elementwise)",
    )


def _whole_operands(func: Any, args: Any, kwargs: dict[str, Any]) -> None:
    """A host tensor of rank >= 1 given whole to a torch function: :func:`host_tensor_operand`."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, HostTensor) and a.ndim:
            name = getattr(func, "__name__", str(func))
            loc = a.tracer.loc if a.tracer is not None else None
            raise host_tensor_operand(name, f"'{a.name}' is {a.ndim}-D", loc)


def _find_tracer(args: Any, kwargs: dict[str, Any]) -> Tracer:
    from tilecraft.language import _context

    tracer = _context.device()
    if tracer is None:
        for a in (*args, *kwargs.values()):
            if isinstance(a, (TileValue, TileProxy)):
                return a.tracer
        raise DeviceCodeError("a tile value was used outside the device loop that made it")
    return tracer  # type: ignore[return-value]


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _from_tilecraft(frame: types.FrameType) -> bool:
    """Whether ``frame`` runs tilecraft's own code (a lowering), not the user's kernel."""
    return os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)

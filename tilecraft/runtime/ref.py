"""Ref mode: run a kernel eagerly with torch ops on whole tiles, no Triton (stage: runtime).

Device loops stay Python loops over :class:`RefTile` objects; subscripts with tiles become slices.
Block sizes registered on the host are the whole extent, so each device loop runs as one tile where
it can. This is the accuracy baseline of the autotuner, independent of any config.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from tilecraft.errors import IndexOutOfBoundsError
from tilecraft.frontend.source import (
    REF_ADDMM,
    REF_CALL,
    REF_GET,
    REF_MATMUL,
    REF_SET,
    KernelSource,
    build_function,
    ref_tree,
)
from tilecraft.ir.dtypes import FP8
from tilecraft.language import _context, ref_access
from tilecraft.language.creation import dot
from tilecraft.language.loops import RefTile
from tilecraft.language.tunables import BlockSize


def _convert(index: Any) -> Any:
    if isinstance(index, tuple):
        return tuple(_convert(i) for i in index)
    if isinstance(index, RefTile):
        return index.as_index()
    return index


def _items(index: Any) -> tuple[Any, ...]:
    converted = _convert(index)
    return converted if isinstance(converted, tuple) else (converted,)


def ref_get(obj: Any, index: Any) -> Any:
    """``obj[index]``; an index out of range is a located error before anything is read (a GPU
    would assert on the device)."""
    if not isinstance(obj, torch.Tensor):
        return obj[_convert(index)]  # a list, a shape, a dict: Python's own indexing
    return ref_access.load("subscript load", obj, _items(index))


def ref_set(obj: Any, index: Any, value: Any) -> None:
    """``obj[index] = value``; torch broadcasts and casts to obj's dtype."""
    if not isinstance(obj, torch.Tensor):
        obj[_convert(index)] = value
        return
    ref_access.store("subscript store", obj, _items(index), value)


class TileSubscripts(TorchFunctionMode):
    """Ref mode's torch calls as compiled code means them.

    Subscripts with tiles outside the kernel's own body (a helper ``def rows(x, tm): return
    x[tm, :]``, a lambda): ref mode rewrites the kernel's subscripts only, and torch took a tile
    as its ``__index__``, its size (row 8 for every row, or an IndexError). And dtypes torch
    refuses where compiled code takes them (:data:`_WIDENINGS`): ref mode converts them as
    compiled code computes, where torch refuses the dtype; an error there left the tuner
    checking configs for running only."""

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.__getitem__ and _has_tile(args[1]):
            return ref_get(args[0], args[1])
        if func is torch.Tensor.__setitem__ and _has_tile(args[1]):
            return ref_set(args[0], args[1], args[2])
        try:
            return func(*args, **kwargs)
        except (RuntimeError, NotImplementedError) as err:
            for words, takes, convert in _WIDENINGS:
                if any(w in str(err) for w in words) and _has(takes, args, kwargs):
                    wide = tuple(convert(a) if takes(a) else a for a in args)
                    kw = {k: convert(v) if takes(v) else v for k, v in kwargs.items()}
                    return func(*wide, **kw)
            raise


def _integer_tensor(value: Any) -> bool:
    """An integer or bool tensor."""
    return (
        isinstance(value, torch.Tensor) and not value.is_floating_point() and not value.is_complex()
    )


def _narrow_index(value: Any) -> bool:
    return _integer_tensor(value) and value.dtype not in (torch.int64, torch.bool)


def _bool_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool


def _has(takes: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return any(takes(v) for v in (*args, *kwargs.values()))


# what torch refuses that compiled code computes (docs/ops.md), by torch's words, and the
# arguments ref mode converts to run it: integer inputs of float math without an integer kernel
# (``F.gelu``, ``mean``) in float32; int32 class labels and indices (``F.cross_entropy``,
# ``take_along_dim``: "should be Long") as int64; a bool tile's ``argmax`` as integers
_WIDENINGS: tuple[tuple[tuple[str, ...], Any, Any], ...] = (
    (("not implemented for '", "could not infer"), _integer_tensor, lambda t: t.float()),
    (("Long",), _narrow_index, lambda t: t.long()),
    (("support bool",), _bool_tensor, lambda t: t.to(torch.uint8)),
)


def _has_tile(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, RefTile) for i in items)


def ref_addmm(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn`` (``torch.addmm`` / ``torch.baddbmm`` or a tensor's bound method) as the compiled
    kernel means it: an input of another dtype than the operands (an fp32 accumulator of bf16
    tiles) takes their product in its own dtype, as ``tl.dot`` accumulates."""
    operands = _operands(fn, args)
    if len(operands) == 3 and all(isinstance(t, torch.Tensor) for t in operands):
        acc, a, b = operands
        if a.dtype != acc.dtype or b.dtype != acc.dtype:
            product = torch.matmul(a.to(acc.dtype), b.to(acc.dtype))
            beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
            return beta * acc + alpha * product if (beta, alpha) != (1, 1) else acc + product
    return fn(*args, **kwargs)


def _operands(fn: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The tensors ``fn(*args)`` works on: a bound tensor method's tensor first."""
    owner = getattr(fn, "__self__", None)
    return (owner, *args) if isinstance(owner, torch.Tensor) else args


# torch functions and methods of a matrix product, by name
_PRODUCTS = ("matmul", "mm", "bmm")


def ref_matmul(a: Any, b: Any) -> Any:
    """``a @ b`` as device code means it: with an fp8 operand, ``tc.dot``'s product (fp32 for
    two fp8 tiles, the other operand's dtype beside one), where torch returns fp8 or refuses."""
    if _fp8_operands((a, b)):
        return dot(a, b)
    return a @ b


def _fp8_operands(operands: tuple[Any, ...]) -> bool:
    return len(operands) == 2 and any(
        isinstance(t, torch.Tensor) and t.dtype in FP8 for t in operands
    )


# keywords of torch functions that take a tensor (or a number ref mode makes one)
_TENSOR_KEYWORDS = ("input", "other", "min", "max", "condition", "exponent")


def ref_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; where a torch function refuses a Python number (an int from
    ``tile.begin``: ``torch.clamp(tm.begin - w + 1, min=0)``, ``torch.where(tb > 0, ...)``) that
    device code takes as a scalar, it runs again on 0-d tensors of those numbers. A result
    computed from numbers alone is a number again, as ``tile.begin`` arithmetic is. A matrix
    product of fp8 tiles (``torch.matmul``, ``x.mm(w)``) is :func:`ref_matmul`'s."""
    _check_gather_index(fn, args, kwargs)
    if (sorted_ := _stable_sort(fn, args, kwargs)) is not None:
        return sorted_
    if (middle := _stable_median(fn, args, kwargs)) is not None:
        return middle
    if getattr(fn, "__name__", "") in _PRODUCTS and not kwargs:
        operands = _operands(fn, args)
        if _fp8_operands(operands):
            return dot(*operands)
    try:
        return fn(*args, **kwargs)
    except TypeError as refused:
        retry = _numbers_as_tensors(fn, args, kwargs)
        if retry is None:
            raise
        try:
            out = fn(*retry[0], **retry[1])
        except (TypeError, RuntimeError):
            raise refused from None
    from_numbers = not any(isinstance(a, torch.Tensor) for a in (*args, *kwargs.values()))
    if from_numbers and isinstance(out, torch.Tensor) and out.ndim == 0:
        return out.item()
    return out


_SORTS = {"sort": torch.sort, "argsort": torch.argsort, "topk": torch.topk}


def _stable_sort(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``torch.sort`` / ``argsort`` / ``topk`` as compiled code computes them (frontend/
    sorting.py): stable, ties by position. torch's CUDA sort is not stable by default and its
    topk orders ties as it likes, so ref mode differed from every config wherever a row held
    equal values (int and bool rows, bf16). None for any other call."""
    name = getattr(fn, "__name__", "")
    if name not in _SORTS:
        return None
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.Tensor):
        x, rest = owner, args
    elif fn is _SORTS[name] and args:
        x, rest = args[0], args[1:]
    else:
        return None
    if name == "topk":
        params = dict(zip(("k", "dim", "largest", "sorted"), rest, strict=False)) | kwargs
        k, dim = int(params["k"]), params.get("dim", -1)
        s = torch.sort(x, dim=dim, descending=params.get("largest", True), stable=True)
        return torch.return_types.topk((s.values.narrow(dim, 0, k), s.indices.narrow(dim, 0, k)))
    params = dict(zip(("dim", "descending"), rest, strict=False)) | kwargs
    params.pop("stable", None)
    s = torch.sort(
        x, dim=params.get("dim", -1), descending=params.get("descending", False), stable=True
    )
    return s if name == "sort" else s.indices


def _stable_median(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``torch.median(x, dim)`` / ``x.median(dim)`` as compiled code computes it (frontend/
    sorting.py): the stable sort's position ``(n - 1) // 2``, or a line's first NaN. torch's
    CUDA kernel returns the index of whichever equal value (or NaN) a thread finds first, so
    ref mode differed from every config on lines with NaN or ties. None for any other call."""
    if getattr(fn, "__name__", "") != "median":
        return None
    owner = getattr(fn, "__self__", None)
    x, rest = (owner, args) if isinstance(owner, torch.Tensor) else (args[0], args[1:])
    params = dict(zip(("dim", "keepdim"), rest, strict=False)) | kwargs
    if not isinstance(x, torch.Tensor) or params.get("dim") is None or x.ndim == 0:
        return None
    dim, keepdim = int(params["dim"]), bool(params.get("keepdim", False))
    s = torch.sort(x, dim=dim, stable=True)
    n = x.size(dim)
    at = torch.full_like(s.indices.narrow(dim, 0, 1), (n - 1) // 2)
    if x.dtype.is_floating_point:
        nans = torch.isnan(x).sum(dim=dim, keepdim=True)
        at = torch.where(nans > 0, n - nans, at)
    values, indices = s.values.gather(dim, at), s.indices.gather(dim, at)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return torch.return_types.median((values, indices))


# torch.gather / take_along_dim: their parameters in order
_GATHERS = {"gather": ("input", "dim", "index"), "take_along_dim": ("input", "indices", "dim")}


def _check_gather_index(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A tile gather's index out of range is a located error, before torch sees it: compiled
    code does not check it (``tl.gather`` reads an unspecified lane), and torch on a GPU would
    assert on the device, which poisons the process's CUDA context."""
    names = _GATHERS.get(getattr(fn, "__name__", ""))
    if names is None:
        return
    values = dict(zip(names, _operands(fn, args), strict=False)) | kwargs
    src, dim = values.get("input"), values.get("dim")
    index = values.get("index", values.get("indices"))
    if not isinstance(src, torch.Tensor) or not isinstance(index, torch.Tensor) or dim is None:
        return
    size = src.shape[int(dim)] if src.ndim else 1
    outside = (index < 0) | (index >= size)
    if bool(outside.any()):
        example = int(index[outside].flatten()[0])
        raise IndexOutOfBoundsError(
            f"torch.{fn.__name__}: an index along dim {int(dim)} (size {size}) is out of range: "
            f"{example} is not in [0, {size})",
            ref_access.user_loc(),
            hint=f"clamp it (torch.clamp(idx, 0, {size - 1})) and mask the lanes that moved "
            "past an edge with torch.where",
        )


def _numbers_as_tensors(
    fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """For a function of the ``torch`` namespace, the call with its Python numbers in tensor
    places (positional, ``min=``, ``other=``, ...) as 0-d tensors on the device of its tensors;
    None for other functions or where no number is in such a place."""
    if getattr(torch, getattr(fn, "__name__", ""), None) is not fn:
        return None
    values = (*args, *kwargs.values())
    first = next((a for a in values if isinstance(a, torch.Tensor)), None)

    def as_tensor(v: Any) -> Any:
        if not isinstance(v, (bool, int, float)):
            return v
        if first is None or isinstance(v, bool):
            return torch.tensor(v)
        # weak, as the number was: the tensor's dtype where torch would keep it (a 0-d float32
        # beside a 0-d bf16 would promote it)
        return torch.tensor(v, dtype=torch.result_type(first, v), device=first.device)

    new_args = tuple(as_tensor(a) for a in args)
    new_kwargs = {k: as_tensor(v) if k in _TENSOR_KEYWORDS else v for k, v in kwargs.items()}
    changed = [a is not b for a, b in zip(args, new_args, strict=True)]
    changed += [new_kwargs[k] is not v for k, v in kwargs.items()]
    return (new_args, new_kwargs) if any(changed) else None


class RefHost:
    mode = "ref"

    def __init__(self, device: Any = None) -> None:
        self.slots = 0
        self.device = device  # where tc.zeros/tc.full/tile.index tensors are made

    def block_size(self, lo: int, hi: int | None) -> int:
        self.slots += 1
        return BlockSize(max(hi if hi is not None else lo, 1), self.slots - 1)

    def tunable(self, name: str, choices: tuple[Any, ...]) -> Any:
        return choices[0]

    def specialized(self, value: int) -> None:
        pass


def build_ref(src: KernelSource) -> Any:
    shims = {
        REF_GET: ref_get,
        REF_SET: ref_set,
        REF_ADDMM: ref_addmm,
        REF_CALL: ref_call,
        REF_MATMUL: ref_matmul,
    }
    fn = build_function(src, ref_tree(src), shims)

    def run(*args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        with (
            _context.host_context(RefHost(tensors[0].device if tensors else None)),
            TileSubscripts(),
        ):
            return fn(*args, **kwargs)

    return run

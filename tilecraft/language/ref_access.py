"""Host-tensor accesses in ref mode, kept to the elements compiled code touches (stage: language).

Compiled code masks every access: lanes an ``extra_mask`` turns off are never read or written.
Eager torch has no masks, it indexes first: a masked-off index past an edge (a shifted window's
column -1 or ``w``) raises IndexError on the CPU, triggers a device-side assert on a GPU (which
poisons the process's CUDA context), and a negative one silently wraps. So ref mode checks every
index on the index itself, before the tensor is touched:

* a masked-off lane's index is replaced by a safe one (0); the lane then reads the load's
  ``other`` (0, as the compiled ``tl.load(..., other=0)``) and a store does not write it;
* an index out of range where no mask covers it is an :class:`IndexOutOfBoundsError` naming the
  op, the tensor, the index item and the user's line (compiled code never touches memory outside
  the tensor there: it reads 0 and skips the write, ``codegen/memory.access``).

Tensor-valued indices are in range in ``[0, size)``: compiled code adds them to the pointer and
never wraps a negative one. Python ints keep torch's meaning (``-1`` is the last element), as a
compiled literal does.
"""

from __future__ import annotations

import dataclasses
import linecache
import os
import sys
from types import FrameType
from typing import Any

import torch

from tilecraft.errors import IndexOutOfBoundsError, ShapeError, SourceLoc
from tilecraft.language import ref_sample, ref_views

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _internal(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE + os.sep)


def _user_frame() -> FrameType | None:
    """The innermost frame outside tilecraft: the line of the user's kernel."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_loc() -> SourceLoc | None:
    """The user's line making the current call (also in ref mode, where no tracer attaches
    one, and through the ref-mode shims of ``runtime/ref.py``)."""
    return _loc(_user_frame())


def _loc(frame: FrameType | None) -> SourceLoc | None:
    """``frame``'s line, the caret under its first character."""
    if frame is None:
        return None
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    line = linecache.getline(filename, lineno)
    return SourceLoc(filename, lineno, len(line) - len(line.lstrip()))


def _tensor_name(tensor: torch.Tensor, frame: FrameType | None) -> str:
    """The user's name for ``tensor`` at ``frame`` (for messages), else ``the tensor``."""
    if frame is not None:
        for name, value in frame.f_locals.items():
            if value is tensor and not name.startswith("__"):
                return f"'{name}'"
    return "the tensor"


@dataclasses.dataclass
class _OutOfRange:
    """One index item with values outside its dim."""

    position: int  # in the index list
    dim: int  # of the tensor
    size: int
    example: int  # one offending value
    lanes: Any  # bool: the item's lanes out of range (a tensor, or a Python bool for an int)


@dataclasses.dataclass
class _Checked:
    items: tuple[Any, ...]  # every out-of-range index replaced by 0
    bad: list[_OutOfRange]
    ends: list[_OutOfRange] = dataclasses.field(default_factory=list)  # tiles past the end


def _is_index_tensor(item: Any) -> bool:
    """An integer tensor used as an index (bool tensors select by mask: torch checks those)."""
    if not isinstance(item, torch.Tensor):
        return False
    return not item.dtype.is_floating_point and item.dtype != torch.bool


def _check_items(tensor: torch.Tensor, items: tuple[Any, ...]) -> _Checked:
    """Find index items out of range of ``tensor``'s dims, without indexing ``tensor``."""
    if any(i is Ellipsis or isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items):
        return _Checked(items, [])  # forms compiled code has no counterpart of: torch checks them
    safe: list[Any] = []
    bad: list[_OutOfRange] = []
    ends: list[_OutOfRange] = []
    dim = 0
    for position, item in enumerate(items):
        if item is None:
            safe.append(item)
            continue
        if dim >= tensor.ndim:
            return _Checked(items, [])  # too many indices: torch's own error says so
        size = tensor.shape[dim]
        if _is_index_tensor(item) and item.ndim == 0:
            # a scalar loaded from memory (``r = rows[t.begin]``; ``x[r - 1, :]``) indexes as an
            # int does, as in torch and the compiled code: a negative one wraps
            item = int(item)
        if isinstance(item, int) and not isinstance(item, bool):
            if -size <= item < size:
                safe.append(item)
            else:
                bad.append(_OutOfRange(position, dim, size, item, True))
                safe.append(0)
        elif _is_index_tensor(item):
            if item.dtype not in (torch.int64, torch.int32):
                # int8 / int16 codes pick positions as compiled code does (torch refuses them,
                # and takes a uint8 index as a mask)
                item = item.long()
            lanes = (item < 0) | (item >= size)
            if bool(lanes.any()):  # one sync, before anything reads the tensor
                example = int(item[lanes].reshape(-1)[0])
                bad.append(_OutOfRange(position, dim, size, example, lanes))
                safe.append(torch.where(lanes, torch.zeros_like(item), item))
            else:
                safe.append(item)
        else:
            if _past_end(item, size):
                ends.append(_OutOfRange(position, dim, size, item.stop, True))
            safe.append(item)
        dim += 1
    return _Checked(tuple(safe), bad, ends)


def _past_end(item: Any, size: int) -> bool:
    """A tile (ref mode's ``slice(begin, end)``) whose end lies past its dim: torch would
    return a shorter slice, which surfaced later as a bare broadcast error naming nothing."""
    return (
        isinstance(item, slice)
        and item.step in (None, 1)
        and isinstance(item.stop, int)
        and isinstance(item.start, int)
        and item.start < item.stop
        and item.stop > size
    )


def _lanes_in_result(tensor: torch.Tensor, checked: _Checked, which: _OutOfRange) -> Any:
    """``which``'s out-of-range lanes placed where ``tensor[items]`` puts that item's values
    (broadcastable to the result): torch places them itself, by indexing a probe of size 1 in
    every dim but ``which.dim``, with the same kinds of items as the access."""
    if not isinstance(which.lanes, torch.Tensor):
        return True  # an int out of range: every lane of the access
    shape = [1] * tensor.ndim
    shape[which.dim] = 2
    probe = torch.tensor([False, True], device=which.lanes.device).view(shape)
    items: list[Any] = []
    for position, item in enumerate(checked.items):
        if position == which.position:
            items.append(which.lanes.long())
        elif isinstance(item, torch.Tensor):
            items.append(torch.zeros_like(item))
        elif isinstance(item, slice):
            items.append(slice(None))  # a size-1 dim: broadcasts to the slice's extent
        elif isinstance(item, int) and not isinstance(item, bool):
            items.append(0)
        else:
            items.append(item)
    return probe[tuple(items)]


def _describe(op: str, tensor: torch.Tensor) -> tuple[str, SourceLoc | None]:
    """(``"tc.load of 'x'"``, the user's line) for a message; only errors pay for the frame
    walk and the name lookup."""
    frame = _user_frame()
    return f"{op} of {_tensor_name(tensor, frame)}", _loc(frame)


def _fit_mask(op: str, tensor: torch.Tensor, mask: Any, shape: torch.Size) -> Any:
    """``extra_mask`` as a bool tensor that broadcasts to the access's shape (as compiled)."""
    mask = torch.as_tensor(mask)
    try:
        fits = torch.broadcast_shapes(mask.shape, shape) == shape
    except RuntimeError:
        fits = False
    if not fits:
        what, loc = _describe(op, tensor)
        raise ShapeError(
            f"{what}: extra_mask of shape {list(mask.shape)} does not fit the access of "
            f"shape {list(shape)}",
            loc,
            hint="build the mask from the same tiles as the index, e.g. tile.index < n",
        )
    return mask.to(torch.bool)


def _raise_unmasked(op: str, tensor: torch.Tensor, which: _OutOfRange, masked: bool) -> None:
    what, loc = _describe(op, tensor)
    if isinstance(which.lanes, torch.Tensor):
        kind, valid = "a tensor", f"[0, {which.size})"
    else:
        kind, valid = "an int", f"[-{which.size}, {which.size})"
    where = "where extra_mask is True" if masked else "and no extra_mask covers it"
    negative = ""
    if kind == "a tensor" and -which.size <= int(which.example) < 0:
        negative = (
            f" A negative tensor index does not count from the end as in PyTorch: add the "
            f"size first (torch.where(idx < 0, idx + {which.size}, idx))."
        )
    raise IndexOutOfBoundsError(
        f"{what}: index item {which.position} ({kind} index of dim {which.dim}, size "
        f"{which.size}) is out of range {where}: {which.example} is not in {valid}",
        loc,
        hint="compiled code reads 0 there and skips the write. Mask those lanes "
        f"off with {_masked_form(op)}(..., extra_mask=(idx >= 0) & (idx < {which.size})), or "
        f"clamp the index into range (torch.clamp(idx, 0, {which.size - 1})).{negative}",
    )


def _masked_form(op: str) -> str:
    """The call that takes ``extra_mask`` for ``op`` (``tc.atomic_add``, else a load or store)."""
    return op if op.startswith("tc.atomic_") else "tc.load/tc.store"


def _masked_past_end(op: str, tensor: torch.Tensor, checked: _Checked, mask: Any) -> Any:
    """A masked load whose tiles run past the tensor's end (a loop over a wider output, each
    input's lanes masked in, as Helion's concatenate reads): read from a copy padded with 0 to
    the tiles' ends, as compiled code reads 0 there; an unmasked lane past the end raises."""
    grown = list(tensor.shape)
    for which in checked.ends:
        grown[which.dim] = max(grown[which.dim], int(checked.items[which.position].stop))
    padded = tensor.new_zeros(grown)
    inside = torch.zeros(grown, dtype=torch.bool, device=tensor.device)
    region = tuple(slice(0, n) for n in tensor.shape)
    padded[region], inside[region] = tensor, True
    view = padded[checked.items]
    fitted = _fit_mask(op, tensor, mask, view.shape)
    if bool((fitted & ~inside[checked.items]).any()):
        which = checked.ends[0]
        _raise_past_end(op, tensor, which, checked.items[which.position])
    for which in checked.bad:  # (an index tensor's lanes outside the tensor, as in _access)
        if bool((fitted & _lanes_in_result(padded, checked, which)).any()):
            _raise_unmasked(op, tensor, which, True)
    return torch.where(fitted, view, torch.zeros((), dtype=view.dtype, device=view.device))


def _raise_past_end(op: str, tensor: torch.Tensor, which: _OutOfRange, tile: slice) -> None:
    what, loc = _describe(op, tensor)
    raise IndexOutOfBoundsError(
        f"{what}: the tile along dim {which.dim} covers [{tile.start}, {tile.stop}), past the "
        f"tensor's end (size {which.size})",
        loc,
        hint="compiled code reads 0 there and skips the write. If the loop's bounds come from "
        "another tensor (offsets, a length), this tensor may be shorter than they say; else "
        f"mask the lanes off with tc.load/tc.store(..., extra_mask=idx < {which.size})",
    )


def _access(
    op: str,
    tensor: torch.Tensor,
    items: tuple[Any, ...],
    mask: Any,
    checked: _Checked | None = None,
) -> tuple[tuple[Any, ...], Any, Any]:
    """(items safe to index with, ``tensor[items]`` and the mask fitted to it, both None when
    there is no mask): raises where an index out of range is not masked off. Only safe items
    ever reach ``tensor``."""
    checked = checked if checked is not None else _check_items(tensor, items)
    if mask is None:
        if checked.bad:
            _raise_unmasked(op, tensor, checked.bad[0], False)
        if checked.ends:
            _raise_past_end(op, tensor, checked.ends[0], items[checked.ends[0].position])
        return checked.items, None, None
    view = _readable(tensor, checked)[checked.items]
    fitted = _fit_mask(op, tensor, mask, view.shape)
    for which in checked.bad:
        if bool((fitted & _lanes_in_result(tensor, checked, which)).any()):
            _raise_unmasked(op, tensor, which, True)
    return checked.items, view, fitted


def _readable(tensor: torch.Tensor, checked: _Checked) -> torch.Tensor:
    """``tensor``, or a zero one with its empty dims that an index item hits made size 1: the
    safe index 0 of a masked-off lane has nothing to point at in a dim of size 0 (a CSR matrix
    with no nonzeros; compiled code reads no memory there)."""
    empty = {which.dim for which in checked.bad if which.size == 0}
    if not empty:
        return tensor
    shape = [1 if d in empty else size for d, size in enumerate(tensor.shape)]
    return tensor.new_zeros(shape)


def load(op: str, tensor: torch.Tensor, items: tuple[Any, ...], mask: Any = None) -> Any:
    """``tensor[items]``; lanes where ``mask`` is False read 0 and reach no memory."""
    if not isinstance(tensor, torch.Tensor):
        return tensor[items]
    checked = _check_items(tensor, items) if mask is not None else None
    if checked is not None and checked.ends:
        return _masked_past_end(op, tensor, checked, mask)
    safe, view, fitted = _access(op, tensor, items, mask, checked)
    if view is None:
        return ref_views.remember(tensor, tensor[safe])
    zero = torch.zeros((), dtype=view.dtype, device=view.device)  # the compiled load's other=0
    return torch.where(fitted, view, zero)


def store(
    op: str, tensor: torch.Tensor, items: tuple[Any, ...], value: Any, mask: Any = None
) -> None:
    """``tensor[items] = value`` (broadcast and cast as torch does); where ``mask`` is False
    nothing is written."""
    if not isinstance(tensor, torch.Tensor):
        tensor[items] = value
        return
    safe, target, fitted = _access(op, tensor, items, mask)
    ref_views.before_write(tensor)
    sample = ref_sample.active()
    if target is None:
        # a compiled store converts to the tensor's dtype; torch's index_put would refuse
        tensor[safe] = value.to(tensor.dtype) if isinstance(value, torch.Tensor) else value
        if sample is not None:
            sample.mark(tensor, lambda m: m.__setitem__(safe, True))
        return
    values = torch.as_tensor(value, device=tensor.device).to(tensor.dtype).expand(target.shape)
    keep = fitted.expand(target.shape)
    if tensor.numel() == 0:
        return  # every lane is masked off (_access raised for any other), nothing to write
    if not any(isinstance(i, torch.Tensor) for i in safe):
        target[keep] = values[keep]  # basic indexing: target is a view of tensor
        if sample is not None:
            sample.mark(tensor, lambda m: m[safe].__setitem__(keep, True))
        return
    coords = _coordinates(tensor, safe, target.shape)
    where = tuple(c[keep] for c in coords)
    tensor[where] = values[keep]
    if sample is not None:
        sample.mark(tensor, lambda m: m.__setitem__(where, True))


def _coordinates(
    tensor: torch.Tensor, items: tuple[Any, ...], shape: torch.Size
) -> list[torch.Tensor]:
    """Per dim of ``tensor``, the index each element of ``tensor[items]`` comes from (indexing
    an expanded arange allocates only the result)."""
    coords = []
    for dim, size in enumerate(tensor.shape):
        view = [1] * tensor.ndim
        view[dim] = size
        grid = torch.arange(size, device=tensor.device).view(view).expand(tensor.shape)
        coords.append(grid[items].expand(shape))
    return coords


def element_positions(tensor: torch.Tensor, items: tuple[Any, ...]) -> torch.Tensor:
    """The flat position in ``tensor`` of each element of ``tensor[items]`` (safe items: in
    range, or masked off). A tensor with no elements has only masked-off lanes: they get 0."""
    numbered = torch.arange(tensor.numel(), device=tensor.device).view(tensor.shape)
    if tensor.numel():
        return numbered[items]
    return _readable(numbered, _check_items(numbered, items))[items]


def checked_access(
    op: str, tensor: torch.Tensor, items: tuple[Any, ...], mask: Any = None
) -> tuple[tuple[Any, ...], Any]:
    """``items`` after the bounds check of an access (atomics), and ``mask`` fitted to
    ``tensor[items]`` (None without one): indices out of range must be masked off."""
    safe, _, fitted = _access(op, tensor, items, mask)
    return safe, fitted

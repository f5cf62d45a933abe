"""Calls device code makes, routed to the code that traces them (stage: frontend; in: a torch
callable or a ``tc.*`` name with its arguments; out: traced values / IR nodes).

Torch functions, ``Tensor`` methods and operators reach :func:`torch_call` through
``__torch_function__`` and are looked up in the one registry (:mod:`~tilecraft.frontend.lowerings`);
``tc.*`` calls (``language/``) reach :func:`call` by name. Anything else is an
``UnsupportedOpError`` naming the op.
"""

from __future__ import annotations

import inspect
import linecache
import os
from typing import TYPE_CHECKING, Any

import torch

import tilecraft
from tilecraft.errors import DeviceCodeError, SourceLoc, UnsupportedOpError
from tilecraft.frontend import dots, extern, indexing, random, scans, views
from tilecraft.frontend.lowerings import lookup
from tilecraft.frontend.values import HostTensor

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer


def torch_call(tr: Tracer, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    handler = lookup(func)
    if args and type(args[0]) is torch.Tensor:  # noqa: E721 - a plain tensor, not a tile
        raise contained_host_tensor(tr, args[0])
    if kwargs.get("out") is not None:  # (lowerings take no out=: it was silently dropped)
        from tilecraft.frontend.catalog import torch_name

        name = torch_name(func)
        raise UnsupportedOpError(
            f"{name}(..., out=...) in device code: tiles are values, an op writes no tensor",
            tr.loc,
            hint=f"store the result: `out[t, :] = {name}(...)`",
        )
    if handler is None:
        from tilecraft.frontend.catalog import torch_name

        name = torch_name(func)
        message = f"torch op '{name}' is not supported in device code"
        loc = tr.loc
        if (inner := _helper_loc(tr.loc)) is not None:
            message += f" (in `{inner[1]}`, called at {tr.loc.short if tr.loc else '?'})"
            loc = inner[0]
        raise UnsupportedOpError(message, loc, hint=_hint_for(name))
    return handler(tr, *args, **kwargs)


_INTERNAL = tuple(os.path.dirname(module.__file__ or "") + os.sep for module in (torch, tilecraft))


def _helper_loc(kernel_loc: SourceLoc | None) -> tuple[SourceLoc, str] | None:
    """The line of the user's function that made the current call and its name, where that is
    a helper the kernel line calls (not the kernel line itself): the innermost frame outside
    torch and tilecraft."""
    frame = inspect.currentframe()
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame = frame.f_back
    if frame is None:
        return None
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    indent = len(line) - len(line.lstrip())
    loc = SourceLoc(frame.f_code.co_filename, frame.f_lineno, indent)
    if kernel_loc is not None and (loc.filename, loc.lineno) == (
        kernel_loc.filename,
        kernel_loc.lineno,
    ):
        return None
    return loc, frame.f_code.co_name


def contained_host_tensor(tr: Tracer, value: Any = None) -> DeviceCodeError:
    """A tensor reached through a Python container (``outs[0][tn]``, ``ins[1][tn]``), an
    attribute or a global: device code reaches a host tensor through the name it has in the
    kernel when the loop starts. One on a real device while tracing (the kernel's own are meta)
    was made in device code from numbers (``torch.tensor(ORDER)``) or is a global."""
    if isinstance(value, torch.Tensor) and value.device.type != "meta":
        return DeviceCodeError(
            f"a {value.dtype} tensor of shape {list(value.shape)} that is not the kernel's: "
            "an attribute of an argument (`p.w`), a global, one a function or lambda closes "
            "over (an epilogue's bias), or one made in device code from numbers "
            "(torch.tensor([...])); device code reads the tensors the kernel's host code holds "
            "by name",
            tr.loc,
            hint="name it in host code before the loop (`w = p.w`, then `w[tn]`), pass it to "
            "the kernel as an argument (an epilogue can take it as a parameter), or make it in "
            "host code with the arguments' device: `order = torch.tensor(ORDER, "
            "device=x.device)`, then `order[col % 8]`",
        )
    return DeviceCodeError(
        "a host tensor inside a Python list, tuple or dict (or an attribute or global) cannot "
        "be loaded or stored in device code",
        tr.loc,
        hint="give it a name before the loop (`out0 = outs[0]`) and index that name "
        "(`out0[tn] = ...`)",
    )


_OPS_HINT = "docs/ops.md lists the supported torch ops and tc.* names; or compute it on the host"


# in-place methods whose name less the underscore is no method
_OUT_OF_PLACE = {
    "zero_": "torch.zeros_like(v)",
    "fill_": "torch.full_like(v, value)",
    "copy_": "other (or other.to(v.dtype))",
    "uniform_": "tc.rand(shape, seed, offset)",
}


# torch functions device code writes another way, in one line
_EQUIVALENTS = {
    "embedding": "a row gather of the host table: `table[ids[tn], :]` (ids a tile of ids)",
    "embedding_bag": "a row gather summed over the bag: `torch.sum(table[ids[tb, :], :], dim=1)`",
    "bincount": "counts added atomically into a zeroed tensor: `tc.atomic_add(counts, [ids[tn]], "
    "1)` (extra_mask= skips padding ids)",
    "histc": "the bin of each value, then `tc.atomic_add(counts, [bin], 1)` into a zeroed tensor",
}


def _hint_for(name: str) -> str:
    short = name.rsplit(".", 1)[-1]
    if short in ("index_select", "take"):
        return (
            "index the host tensor with index tiles instead: tensor indices pair up "
            "elementwise, so one element per row is `logits[tn.index, idx]` (see README.md, "
            f"Indexing); {_OPS_HINT}"
        )
    if short in _EQUIVALENTS:
        return f"write it as {_EQUIVALENTS[short]}; {_OPS_HINT}"
    if short in ("item", "tolist"):
        return (
            "a loaded element is already a scalar value in device code: use `x[i]` (a tile "
            f"of one element, or indexed by a scalar) directly in arithmetic; {_OPS_HINT}"
        )
    if short.endswith("_") and not short.startswith("_"):
        form = _OUT_OF_PLACE.get(short, f"v.{short[:-1]}(...)")
        return (
            f"tiles are values, not memory: write the out-of-place form and rebind the name "
            f"(`v = {form}`; `v += ...` works too); {_OPS_HINT}"
        )
    return _OPS_HINT


def call(tr: Tracer, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``tc.<name>(*args, **kwargs)`` in device code."""
    if name == "full":
        return tr.full(*args, **kwargs)
    if name == "arange":
        return tr.arange(*args, **kwargs)
    if name == "dot":
        return dots.dot(tr, *args, **kwargs)
    if name == "triton_call":
        return extern.triton_call(tr, *args, **kwargs)
    if name == "atomic":
        return indexing.atomic(tr, *args, **kwargs)
    if name == "device_print":
        return tr.device_print(*args)
    if name in ("load", "store"):
        if not isinstance(args[0], HostTensor):
            raise DeviceCodeError(f"tc.{name} needs a host tensor as its first argument")
        return getattr(indexing, name)(tr, *args, **kwargs)
    if name in ("join", "split"):
        return getattr(views, name)(tr, *args, **kwargs)
    if name == "rand":
        return random.rand(tr, *args, **kwargs)
    if name in ("associative_scan", "reduce"):
        return getattr(scans, name)(tr, *args, **kwargs)
    raise UnsupportedOpError(f"tc.{name} is not supported in device code")

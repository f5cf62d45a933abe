"""Argument checks at the call boundary (stage: runtime; in: a kernel's bound arguments; out:
nothing, or one :class:`ArgumentError` that says what to change).

These run once per specialization, before tracing or any candidate config: an environment or input
problem (meta tensors, a dtype device code cannot hold, tensors on several devices, host code that
cannot run on these shapes) is one clear line here, not a table of identical failed candidates.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tilecraft import containers
from tilecraft.errors import ArgumentError, ConfigError, SourceLoc, TilecraftError
from tilecraft.ir.dtypes import TRITON_DTYPES, supported_names


def _describe(value: torch.Tensor) -> str:
    return f"{value.dtype} tensor of shape {list(value.shape)} on {value.device}"


def _conversion_hint(dtype: torch.dtype) -> str:
    """How to bring a tensor of ``dtype`` into a dtype device code has."""
    if dtype.is_complex:
        return "its .real and .imag as two float tensors, or torch.view_as_real(x)"
    if not dtype.is_floating_point and dtype.itemsize >= 2:  # uint16 / uint32 / uint64
        return ".to(torch.int32) or .to(torch.int64), wide enough for its values"
    return ".to(torch.float32), or .view(torch.uint8) for its bytes"


def check_tensor_args(name: str, arguments: dict[str, Any], loc: SourceLoc | None) -> str:
    """Check every tensor argument (those in a list or tuple too); returns the one device
    type they share (``cpu`` if none: a kernel whose tensors all came in a list was taken for
    a CPU one on the GPU)."""
    tensors = dict(_tensor_items(arguments))
    for arg, value in tensors.items():
        if value.dtype not in TRITON_DTYPES:
            supported = supported_names()
            raise ArgumentError(
                f"{name}(): argument '{arg}' is a {_describe(value)}; device code does not "
                f"support {value.dtype}",
                loc,
                hint=f"convert it on the host ({_conversion_hint(value.dtype)}); supported "
                f"dtypes: {supported}",
            )
    devices = {v.device.type for v in tensors.values()}
    if len(devices) > 1:
        raise ArgumentError(
            f"{name}(): tensor arguments are on different devices: "
            + ", ".join(f"{n}={v.device}" for n, v in tensors.items()),
            loc,
            hint="move every tensor argument to the same device",
        )
    return devices.pop() if devices else "cpu"


def _tensor_items(arguments: dict[str, Any]) -> Iterator[tuple[str, torch.Tensor]]:
    """Each tensor argument by name, and each tensor of a list or tuple argument as
    ``name[i]``."""
    for name, value in arguments.items():
        if isinstance(value, torch.Tensor):
            yield name, value
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if isinstance(item, torch.Tensor):
                    yield f"{name}[{i}]", item


def tensor_device(values: Any) -> torch.device | None:
    """The device of the first tensor among ``values``, or in a list or tuple among them;
    None without one."""
    for value in values:
        if isinstance(value, torch.Tensor):
            return value.device
        if isinstance(value, (list, tuple)) and (inner := tensor_device(value)) is not None:
            return inner
    return None


def check_layouts(name: str, arguments: dict[str, Any], loc: SourceLoc | None) -> None:
    """Device code indexes strided tensors: a sparse or nested one is refused by name before
    anything reads its strides (which it has not)."""
    for arg, value in arguments.items():
        if isinstance(value, torch.Tensor) and (value.layout != torch.strided or value.is_nested):
            kind = "nested" if value.is_nested else str(value.layout).removeprefix("torch.")
            raise ArgumentError(
                f"{name}(): argument '{arg}' is a {kind} tensor; kernels index dense (strided) "
                "tensors",
                loc,
                hint="pass its dense form (.to_dense()), or its index and value tensors "
                "(.indices() / .values(), .crow_indices() / .col_indices()) as arguments",
            )


def check_unshared_outputs(
    name: str, arguments: dict[str, Any], stored: set[str], loc: SourceLoc | None
) -> None:
    """A tensor device code stores into must not be an expanded view (a dim of size > 1 and
    stride 0): its programs would all write one element's memory, a race on the GPU (torch
    refuses the write too). ``stored``: the argument names the loops store into (atomics,
    meant to land on shared memory, aside)."""
    expanded = {
        arg: tensor
        for arg, value in arguments.items()
        for tensor in tensors_in(value)
        if any(st == 0 and n > 1 for n, st in zip(tensor.shape, tensor.stride(), strict=True))
    }
    written = [arg for arg in expanded if arg in stored]
    if written:
        value = expanded[written[0]]
        raise ArgumentError(
            f"{name}(): argument '{written[0]}' is written, but it is an expanded view (shape "
            f"{list(value.shape)}, strides {list(value.stride())}): more than one of its "
            "elements is one element of memory, so its stores would race",
            loc,
            hint=f"pass a tensor with memory of its own ({written[0]}.clone() or torch.empty), "
            "and expand it after the kernel",
        )


def check_written_arguments(
    name: str,
    params: tuple[str, ...],
    values: tuple[Any, ...],
    written: tuple[int, ...],
    loc: SourceLoc | None,
) -> None:
    """torch's rules for in-place ops, for the arguments a kernel writes. A written argument
    must not partly overlap another tensor argument (``y = buf[1:]`` written while ``x =
    buf[:-1]`` is read, or ``x`` beside ``x.t()``): which program reads an element before another
    writes it decides the result. The same view passed twice (``axpy_(z, z)``) is fine, and,
    as torch, only dense tensors (contiguous or permuted) are compared (strided views may interleave without sharing an element). An
    inference tensor is written only under ``torch.inference_mode``. Runs on each call of a
    kernel that writes an argument: a data pointer and a size a tensor, then integer compares
    (measured on the CPU at about a third of the fast path's guard key for two tensors and a
    float)."""
    if not torch.is_inference_mode_enabled():
        for i in written:
            if isinstance(values[i], torch.Tensor) and values[i].is_inference():
                raise ArgumentError(
                    f"{name}(): argument '{params[i]}' is an inference tensor (made under "
                    "torch.inference_mode) and the kernel writes it outside inference mode",
                    loc,
                    hint="call the kernel under torch.inference_mode(), or pass a .clone() made "
                    "outside it, as torch refuses in-place updates of inference tensors",
                )
    # (type() first: a plain tensor skips the metaclass's instance check; meta tensors have no
    # memory, each one's data_ptr() is 0)
    tensor = torch.Tensor
    spans = [
        (v.data_ptr(), v.nbytes)
        if (type(v) is tensor or isinstance(v, tensor)) and not v.is_meta
        else (0, 0)
        for v in values
    ]
    for i in written:
        start, size = spans[i]
        for j, (other, other_size) in enumerate(spans):
            if j == i or not (other < start + size and start < other + other_size):
                continue  # (an empty or non-tensor value has no bytes)
            if not partly_overlapping(values[i], values[j]):
                continue
            raise ArgumentError(
                f"{name}(): argument '{params[i]}' is written and partly overlaps argument "
                f"'{params[j]}' (views of one buffer at different offsets or strides): which program "
                "reads an element before another writes it would decide the result",
                loc,
                hint=f"pass '{params[j]}'.clone() (or write into a new tensor), as torch "
                "refuses this for its in-place ops",
            )


def partly_overlapping(w: torch.Tensor, r: torch.Tensor) -> bool:
    """Whether two tensors whose byte spans intersect share memory other than as one view
    (torch's partial overlap: dense ones only, the others may interleave)."""
    same_view = w.data_ptr() == r.data_ptr() and r.shape == w.shape and r.stride() == w.stride()
    return not same_view and dense(w) and dense(r)


def dense(t: torch.Tensor) -> bool:
    """torch's non-overlapping-and-dense: the elements fill ``nbytes`` from the data pointer in
    some order of the dims (a transposed view is; a strided slice is not). Such tensors are
    compared by their spans (``x`` written beside ``x.t()`` read: each program read blocks
    others had written), as torch's in-place ops compare them."""
    if t.is_contiguous():
        return True
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride(), strict=True), key=lambda d: d[1]):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def mark_written(values: tuple[Any, ...], written: tuple[int, ...]) -> None:
    """Bump the version counter of the tensors a call wrote, as torch's in-place ops do:
    autograd then refuses a backward that would read a saved tensor the kernel overwrote
    (without it, the gradient came silently from the new values)."""
    for i in written:
        for tensor in tensors_in(values[i]):  # (a list argument's tensors: each one)
            torch.autograd.graph.increment_version(tensor)


def tensors_in(value: Any) -> list[torch.Tensor]:
    """``value`` if a tensor, else the tensors of a list, tuple, dict, SimpleNamespace or
    dataclass argument (its items, not deeper)."""
    if isinstance(value, torch.Tensor):
        return [value]
    return [v for v in containers.items(value) if isinstance(v, torch.Tensor)]


def check_has_data(name: str, arguments: dict[str, Any], loc: SourceLoc | None) -> None:
    """Running (not inspecting or cross-compiling) needs tensors with data."""
    for arg, value in arguments.items():
        if isinstance(value, torch.Tensor) and value.device.type == "meta":
            raise ArgumentError(
                f"{name}(): argument '{arg}' is a meta tensor (shapes only, no data)",
                loc,
                hint="kernels run on real tensors: pass CPU tensors (with TRITON_INTERPRET=1) or "
                "GPU tensors; to inspect code, kernel.bind(args).to_triton_code() takes meta tensors",
            )


def raised_by_user(exc: Exception, filename: str) -> bool:
    """Whether the kernel's own ``raise`` / ``assert`` statement raised ``exc`` (the user's
    check of an argument): it reaches the caller as it is, on every call (a first call wrapped
    it in an ArgumentError, later ones did not, so ``except ValueError`` worked sometimes)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or frames[-1].filename != filename:
        return False  # raised further in (torch, a helper in another file)
    line = (frames[-1].line or "").lstrip()
    return line.startswith(("raise ", "assert ")) or line == "raise"


def user_frames(exc: BaseException, filename: str) -> list[traceback.FrameSummary]:
    """The frames of ``exc``'s traceback in the kernel's file ``filename``, outermost first."""
    return [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]


def host_code_error(
    name: str, exc: Exception, filename: str, arguments: dict[str, Any], loc: SourceLoc | None
) -> TilecraftError:
    """An exception the user's host code raised while traced on these arguments (e.g. ``m, n =
    x.size()`` with a 3-D ``x``), as an error at the user's line that lists the arguments."""
    frames = user_frames(exc, filename)
    # the outermost frame in the user's file is the host statement (device code is traced
    # from there; its own frames may be numbered relative to the loop)
    where = SourceLoc(filename, frames[0].lineno or 1) if frames else loc
    given = ", ".join(
        f"{n}: {_describe(v)}" if isinstance(v, torch.Tensor) else f"{n}: {type(v).__name__}"
        for n, v in arguments.items()
    )
    if isinstance(exc, NameError) and not isinstance(exc, UnboundLocalError):
        # not an argument's shape: a name the host code reads is not bound there (a device
        # loop's tile used after its loop, a typo)
        return ArgumentError(
            f"{name}(): the kernel's host code failed: {type(exc).__name__}: {exc}",
            where,
            hint="a tile (`for tm in tc.tile(m)`) and the values made from it exist only "
            "inside their device loop: index and store inside the loop",
        )
    return ArgumentError(
        f"{name}(): the kernel's host code failed on these arguments ({given}): "
        f"{type(exc).__name__}: {exc}",
        where,
        hint=_hint_for(exc),
    )


def _hint_for(exc: Exception) -> str:
    if "expected device meta" in str(exc):
        return _DEVICE_HINT
    return _DATA_HINT if _reads_data(exc) else _SHAPE_HINT


# a tensor host code did not make from the arguments, on another device than theirs
_DEVICE_HINT = (
    "host code mixes the arguments with a tensor on another device (a global, a closure's, or "
    "one made without device=): make it on the arguments' device (device=x.device, or "
    "W.to(x.device))"
)
_SHAPE_HINT = "check the arguments' ranks and shapes against what the kernel expects"
_DATA_HINT = (
    "the kernel is traced with host code run on meta tensors (shapes, no data), so host code "
    "cannot read tensor values (.item(), .tolist(), int(t), `if t.sum() > 0:`, nonzero, "
    "masked selection): pass such a value as an int or float argument computed before the "
    "call, or compute with it inside a device loop"
)
_DATA_MARKERS = ("meta tensor", "data-dependent", "no fake impl", "nonzero")


def _reads_data(exc: Exception) -> bool:
    """Whether the host code failed because it read tensor data during the meta trace."""
    text = str(exc).lower()
    return any(marker in text for marker in _DATA_MARKERS)


def call_problem(
    names: tuple[str, ...], defaults: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    """What is wrong with a call's arguments for parameters ``names`` (``defaults``:
    ``inspect.Parameter.empty`` where required), as Python would say ('' if nothing), in plain
    Python that torch.compile traces (``inspect.Signature.bind`` is not traced)."""
    if len(args) > len(names):
        return f"takes {len(names)} arguments but {len(args)} were given"
    for key in kwargs:
        if key not in names:
            return f"got an unexpected keyword argument '{key}'"
        if names.index(key) < len(args):
            return f"got multiple values for argument '{key}'"
    for name, default in zip(names[len(args) :], defaults[len(args) :], strict=True):
        if default is inspect.Parameter.empty and name not in kwargs:
            return f"missing a required argument: '{name}'"
    return ""


def check_a_plain_function(fn: Callable[..., Any], loc: SourceLoc | None) -> None:
    """A generator or coroutine function is no kernel: its body runs when iterated or awaited,
    and its first call said to report a tilecraft bug."""
    if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn):
        kind = "a generator" if inspect.isgeneratorfunction(fn) else "an async function"
        raise ConfigError(
            f"@tc.kernel on {fn.__qualname__}, {kind}: a kernel is a plain function that "
            "returns its outputs",
            loc,
            hint="return the outputs (a tuple for several) instead of yielding or awaiting",
        )


def check_not_a_wrapper(fn: Callable[..., Any], loc: SourceLoc | None) -> None:
    """A kernel compiles its function's source: over a ``functools.wraps`` wrapper (a
    decorator between ``@tc.kernel`` and the ``def``), ``inspect.getsource`` follows
    ``__wrapped__`` to the inner function and the wrapper's own code never ran (a wrapper
    that scaled the result was dropped silently)."""
    inner = getattr(fn, "__wrapped__", None)
    if inner is not None and getattr(fn, "__code__", None) is not getattr(inner, "__code__", 0):
        raise ConfigError(
            f"@tc.kernel on {fn.__qualname__}, a wrapper of another function (functools.wraps): "
            "the kernel compiles the inner function's source, so the wrapper's code would not "
            "run",
            loc,
            hint="put @tc.kernel directly above the def (innermost) and apply the other "
            "decorator to the kernel: `wrapped = times10(kernel)`",
        )


def check_not_a_method(fn: Callable[..., Any], loc: SourceLoc | None) -> None:
    """A kernel is a function: ``obj.k(x)`` of one defined in a class body with ``self`` first
    bound ``x`` to ``self`` and said 'missing a required argument: x'."""
    parent = fn.__qualname__.rpartition(".")[0]
    first = next(iter(inspect.signature(fn).parameters), "")
    if parent and not parent.endswith("<locals>") and first in ("self", "cls"):
        raise ConfigError(
            f"@tc.kernel on the method {fn.__qualname__}({first}, ...): a kernel is a function "
            f"of tensors and numbers, it does not bind '{first}'",
            loc,
            hint="define the kernel at module level and call it from the method, or make it a "
            "@staticmethod without self (put @staticmethod above @tc.kernel)",
        )

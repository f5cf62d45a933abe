"""The accuracy baseline, independent of any config (stage: autotune; see docs/architecture.md).

The baseline is the user's ``baseline=`` callable if the kernel has one, else the kernel run in ref
mode (eager torch on whole tiles, no Triton). It runs on clones of the arguments, so the caller's
inputs are untouched and in-place results (mutated arguments) are recorded for comparison. Ref mode
of a grid with more programs than ``sample_programs`` runs a sample of them
(``language/ref_sample.py``); the baseline then holds the masks of the elements they wrote, and
only those are compared.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from tilecraft import containers, write_guard
from tilecraft.autotune.compare import precise_leaves
from tilecraft.ir.nodes import Op
from tilecraft.language import ref_sample
from tilecraft.language.memory_ops import lane_order
from tilecraft.runtime.kernel import Kernel


@dataclasses.dataclass
class Baseline:
    outputs: Any
    args_after: tuple[Any, ...]  # positional arguments after the run (clones: mutations visible)
    kwargs_after: dict[str, Any]
    source: str  # "the baseline= function", "ref mode" or "the working default config"
    # (outputs, args, kwargs) with each tensor replaced by the mask of the elements a sampled
    # ref-mode run wrote; None: every element is compared
    written: Any = None
    # ref mode again with float arguments in fp64 (see :func:`widened`), made when a config
    # first differs: (outputs, arguments after) of compare.Precise; None until then or on failure
    precise: tuple[Any, tuple[Any, ...]] | None = None
    precise_tried: bool = False


def clone_tensor(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same shape, strides, dtype and device (strides matter: a kernel is
    specialized to them)."""
    if any(s == 0 for s, n in zip(t.stride(), t.shape, strict=True) if n > 1):
        return t  # an expanded (broadcast) view: elements share memory, so no kernel writes it
    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    with torch.no_grad():
        out.copy_(t.detach())
    return out


def clone_args(
    args: Sequence[Any], kwargs: dict[str, Any] | None = None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Clones of every tensor in ``args``/``kwargs``, also inside lists, tuples, dicts,
    SimpleNamespaces and dataclass instances (an optimizer's parameter list written in place:
    its tensors were run on as they were, and the discovery's runs applied one step three
    times); other values as they are. One tensor met twice is cloned once (a parameter in a
    list and as a state dict's key: ``state[p]`` finds its clone), and a leaf's ``.grad`` is
    cloned with it (host code reads ``p.grad``)."""
    memo: dict[int, Any] = {}
    return (
        tuple(containers.copied(a, clone_tensor, memo) for a in args),
        {k: containers.copied(v, clone_tensor, memo) for k, v in (kwargs or {}).items()},
    )


def compute_baseline(
    kernel: Kernel,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    sample_programs: int | None = None,
    sample_budget_s: float | None = None,
) -> Baseline:
    """Run the baseline on clones of the arguments (raises what the baseline raises).
    ``sample_programs``: ref mode runs at most that many programs of a grid, and none after
    ``sample_budget_s`` (the caller knows the programs to be independent of each other)."""
    a, kw = clone_args(args, kwargs)
    fn = kernel.baseline
    if fn is not None:
        with torch.no_grad():
            outputs = fn(*a, **kw)
        return Baseline(_own(outputs, a), a, kw, "the baseline= function")
    budget = sample_budget_s if sample_programs is not None else None
    with (
        torch.no_grad(),
        ref_sample.sampling(sample_programs or sys.maxsize, budget) as sample,
        lane_order(mark=False) as order,
        write_guard.undone((a, kw)) as guard,
    ):
        outputs = guard.handed_back(kernel.run_ref(*a, **kw))
    if order.dependent and not sample.sampled and _uses_atomic_returns(kernel, args, kwargs):
        return _order_free(kernel, args, kwargs, Baseline(_own(outputs, a), a, kw, "ref mode"))
    if not sample.sampled:
        return Baseline(_own(outputs, a), a, kw, "ref mode")
    written = (sample.written(outputs), sample.written(a), sample.written(kw))
    source = f"ref mode ({sample.ran} of {sample.of} programs)"
    return Baseline(_own(outputs, a), a, kw, source, written)


def _order_free(
    kernel: Kernel, args: Sequence[Any], kwargs: dict[str, Any] | None, first: Baseline
) -> Baseline:
    """``first`` (ref mode, an atomic's lanes on one address applied in lane order) compared
    only where ref mode with the returns that order decides marked agrees: a slot allocator's
    ``tc.atomic_add`` return values depend on an order the GPU picks, its counts do not."""
    a, kw = clone_args(args, kwargs)
    with torch.no_grad(), lane_order(mark=True), write_guard.undone((a, kw)) as guard:
        outputs = guard.handed_back(kernel.run_ref(*a, **kw))
    written = (
        _agreeing(first.outputs, outputs),
        _agreeing(first.args_after, a),
        _agreeing(first.kwargs_after, kw),
    )
    source = "ref mode (elements that depend on the order of an atomic's lanes left out)"
    return Baseline(first.outputs, first.args_after, first.kwargs_after, source, written)


def _uses_atomic_returns(
    kernel: Kernel, args: Sequence[Any], kwargs: dict[str, Any] | None
) -> bool:
    """Whether device code uses a value an atomic returned (a histogram's adds return nothing
    it reads: its ref mode need not run again)."""
    try:
        loops = kernel.bind(tuple(args), kwargs or {}).traced.loops
    except Exception:  # the candidates will say what fails; assume the worst here
        return True
    nodes = [n for loop in loops for n in loop.walk()]
    return any(i.op is Op.ATOMIC for n in nodes for i in n.inputs)


def _agreeing(first: Any, second: Any) -> Any:
    """Masks of the elements two runs agree on (NaN with NaN), in their structure; other
    values as they are (:func:`restrict` then compares them whole)."""
    if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor):
        if first.shape != second.shape:
            return first
        same = first == second
        if first.is_floating_point():
            same |= first.isnan() & second.isnan()
        return same
    if isinstance(first, (tuple, list)) and isinstance(second, (tuple, list)):
        return type(first)(_agreeing(x, y) for x, y in zip(first, second, strict=False))
    if isinstance(first, dict) and isinstance(second, dict):
        return {k: _agreeing(v, second.get(k)) for k, v in first.items()}
    return first


_WIDENED = (torch.float32, torch.float16, torch.bfloat16)


def widened(
    baseline: Baseline, kernel: Kernel, args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[Any, tuple[Any, ...]] | None:
    """Ref mode with every fp32 / fp16 / bf16 tensor argument in fp64, twice: as given, and
    moved by one fp32 ulp each (up or down at random), once per baseline. The judge of which
    elements are ill-conditioned (``compare._ill_conditioned``): (outputs, arguments after) with
    each float tensor a ``compare.Precise``. None for a sampled or user baseline, or where ref
    mode fails in fp64 (a dtype check)."""
    if baseline.precise_tried:
        return baseline.precise
    baseline.precise_tried = True
    if baseline.written is not None or baseline.source != "ref mode":
        return None
    runs = []
    for moved in (False, True):
        a, kw = clone_args(args, kwargs)
        wide = tuple(_to_fp64(x, moved) for x in a)
        wide_kw = {k: _to_fp64(v, moved) for k, v in kw.items()}
        try:
            with (
                torch.no_grad(),
                _WideAllocations(),
                write_guard.undone((wide, wide_kw)) as guard,
            ):
                outputs = guard.handed_back(kernel.run_ref(*wide, **wide_kw))
        except Exception:  # the kernel's own checks may refuse fp64: no second opinion then
            return None
        runs.append((_own(outputs, wide), (*wide, *wide_kw.values())))
    (out, after), (moved_out, moved_after) = runs
    baseline.precise = (precise_leaves(out, moved_out), precise_leaves(after, moved_after))
    return baseline.precise


# factories a kernel allocates its own buffers and accumulators with
_FACTORIES = {
    torch.zeros, torch.ones, torch.empty, torch.full, torch.empty_strided, torch.zeros_like,
    torch.ones_like, torch.empty_like, torch.full_like, torch.Tensor.new_zeros,
    torch.Tensor.new_ones, torch.Tensor.new_empty, torch.Tensor.new_full,
}  # fmt: skip


class _WideAllocations(TorchFunctionMode):
    """Buffers and accumulators the kernel allocates as fp32 / fp16 / bf16 are fp64 in the wide
    run: a summed-area table the kernel keeps in an fp32 buffer would round the fp64 run as much
    as the baseline (its casts, ``.float()`` / ``.to(dtype)``, stay: they are the kernel's)."""

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func in _FACTORIES and kwargs.get("dtype") in _WIDENED:
            kwargs["dtype"] = torch.float64
        return func(*args, **kwargs)


def _to_fp64(x: Any, moved: bool = False) -> Any:
    """``x`` in fp64 if it is a float tensor of a narrower dtype; ``moved``: each element also
    one fp32 ulp up or down (a fixed random pattern)."""
    if not (isinstance(x, torch.Tensor) and x.dtype in _WIDENED):
        return x
    wide = x.to(torch.float64)
    if not moved:
        return wide
    g = torch.Generator(device=x.device).manual_seed(0)
    sign = torch.randint(0, 2, x.shape, generator=g, device=x.device) * 2 - 1
    return wide * (1 + sign * torch.finfo(torch.float32).eps)


def _own(outputs: Any, args: Sequence[Any]) -> Any:
    """An in-place kernel returning its argument: the output cloned (the mask stays the
    argument's: :func:`restrict` compares them alike)."""
    if isinstance(outputs, torch.Tensor) and any(outputs is x for x in args):
        return clone_tensor(outputs)
    return outputs


def restrict(actual: Any, expected: Any, mask: Any) -> tuple[Any, Any]:
    """``actual`` and ``expected`` (tensors or nested tuples/lists/dicts of them) cut down to
    the elements ``mask`` (the same structure of bool tensors) marks; where the structures
    differ they stay whole (the comparison reports how)."""
    if isinstance(mask, torch.Tensor):
        tensors = isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)
        if not tensors or actual.shape != mask.shape or expected.shape != mask.shape:
            return actual, expected
        return actual[mask.to(actual.device)], expected[mask.to(expected.device)]
    sequences = all(isinstance(v, (tuple, list)) for v in (actual, expected, mask))
    if sequences and len(actual) == len(expected) == len(mask):
        pairs = [restrict(a, e, m) for a, e, m in zip(actual, expected, mask, strict=True)]
        return type(actual)(p[0] for p in pairs), type(expected)(p[1] for p in pairs)
    mappings = all(isinstance(v, dict) for v in (actual, expected, mask))
    if mappings and set(actual) == set(expected) == set(mask):
        pairs_by_key = {k: restrict(actual[k], expected[k], mask[k]) for k in mask}
        return {k: p[0] for k, p in pairs_by_key.items()}, {
            k: p[1] for k, p in pairs_by_key.items()
        }
    return actual, expected

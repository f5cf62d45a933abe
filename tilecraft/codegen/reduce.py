"""Reductions with PyTorch's NaN semantics (stage: codegen; in: a ``REDUCE`` node, or a reduce
kind with the Triton text of its input, the reduced axis and the input's shape; out: a Triton
expression / assignment).

A reduction over a rolled dim is not emitted here but by the chunk loop of ``schedule.py``, which
combines chunks with :func:`combine_expr` and finishes with :func:`reduce_expr`.

Float max/min and argmax/argmin combine through ``runtime/triton_helpers.py`` (NaN wins, the
first NaN's index for arg-reductions); sums and integer reductions keep Triton's own reductions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from tilecraft.codegen import scans
from tilecraft.codegen.registry import emits
from tilecraft.ir import dtypes, reduce_pairs
from tilecraft.ir.nodes import Node, Op

if TYPE_CHECKING:
    from tilecraft.codegen.context import EmitContext

REDUCE_FN = {
    "sum": "tl.sum",
    "max": "tl.max",
    "min": "tl.min",
    "argmax": "tl.argmax",
    "argmin": "tl.argmin",
}
NAN_COMBINE = {"max": "_tc_max_nan", "min": "_tc_min_nan"}
NAN_ARG_COMBINE = {"argmax": "_tc_argmax_nan", "argmin": "_tc_argmin_nan"}
HELPER_IMPORT = (
    "from tilecraft.runtime.triton_helpers import argmax_nan as _tc_argmax_nan\n"
    "from tilecraft.runtime.triton_helpers import argmin_nan as _tc_argmin_nan\n"
    "from tilecraft.runtime.triton_helpers import max_nan as _tc_max_nan\n"
    "from tilecraft.runtime.triton_helpers import min_nan as _tc_min_nan\n"
    "from tilecraft.runtime.triton_helpers import best_interpreted as _tc_best_interp\n"
    "from tilecraft.runtime.triton_helpers import arg_best_interpreted as _tc_arg_best_interp\n"
    "from tilecraft.runtime.triton_helpers import interpreter_index as _tc_index\n"
    "from tilecraft.runtime.triton_helpers import pow_float as _tc_pow_float\n"
    "from tilecraft.runtime.triton_helpers import pow_int as _tc_pow_int\n"
    "from tilecraft.runtime.triton_helpers import floordiv_float as _tc_floordiv\n"
    "from tilecraft.runtime.triton_helpers import fmod_exact as _tc_fmod\n"
    "from tilecraft.runtime.triton_helpers import sign_bit as _tc_sign_bit\n"
    "from tilecraft.runtime.triton_helpers import copy_sign as _tc_copy_sign\n"
    "from tilecraft.runtime.triton_helpers import bitcast as _tc_bitcast\n"
    "from tilecraft.runtime.triton_helpers import to_fp8e4nv as _tc_to_fp8e4nv\n"
    "from tilecraft.runtime.triton_helpers import to_fp8e4nv_gpu as _tc_to_fp8e4nv_gpu\n"
    "from tilecraft.runtime.triton_helpers import to_fp8e5 as _tc_to_fp8e5\n"
    "from tilecraft.runtime.triton_helpers import to_fp8e4nv_cvt as _tc_to_fp8e4nv_cvt\n"
    "from tilecraft.runtime.triton_helpers import to_fp8e5_cvt as _tc_to_fp8e5_cvt\n"
    "from tilecraft.runtime.triton_helpers import from_fp8_interpreted as _tc_from_fp8\n"
    "from tilecraft.runtime.triton_helpers import to_bf16_interpreted as _tc_to_bf16\n"
    "from tilecraft.runtime.triton_helpers import from_bf16_interpreted as _tc_from_bf16\n"
    "from tilecraft.runtime import triton_math as _tc_math\n"
    "from tilecraft.runtime import triton_sort as _tc_sort\n"
    "from triton.language.extra import libdevice as _tc_libdevice\n"
)


def reduce_expr(
    kind: str,
    text: str,
    axis: int,
    keep: bool,
    dtype: torch.dtype,
    dims: Sequence[str],
    interpret: bool = False,
) -> str:
    """``dims``: the input's block dims as Triton expressions (for the arg-reductions' indices);
    ``interpret``: for Triton's interpreter (NumPy's reductions, not per-pair combines)."""
    keep_arg = ", keep_dims=True" if keep else ""
    if not dtype.is_floating_point or kind == "sum":
        reduced = f"{REDUCE_FN[kind]}({text}, {axis}{keep_arg})"
        if kind in ("max", "min") and dtype.itemsize < 4:
            # tl.max widens to int32 (a bool's too: torch.all's result then fed tl.where an
            # int32 condition, which Triton 3.6 deprecates)
            return f"{reduced}.to({dtypes.triton_dtype(dtype)})"
        return reduced
    if kind in NAN_COMBINE and interpret:
        return f"_tc_best_interp({text}, {axis}, {keep}, {kind == 'max'})"
    if kind in NAN_COMBINE:
        return f"tl.reduce({text}, {axis}, {NAN_COMBINE[kind]}{keep_arg})"
    return arg_reduce_expr(kind, text, _element_indices(axis, dims), axis, keep, interpret)


def _element_indices(axis: int, dims: Sequence[str]) -> str:
    """Each element's index along ``axis`` of a tile of block dims ``dims``."""
    index = along_axis(f"tl.arange(0, {dims[axis]})", axis, len(dims))
    return f"tl.broadcast_to({index}, [{', '.join(dims)}])"


def arg_reduce_expr(
    kind: str, values: str, indices: str, axis: int, keep: bool, interpret: bool = False
) -> str:
    """The index of the first best of ``values`` along ``axis`` (NaN counts as best), given
    each element's index ``indices`` (a rolled reduction passes each lane's best so far)."""
    return f"{best_and_index(kind, values, indices, axis, keep, interpret)}[1]"


def best_and_index(
    kind: str, values: str, indices: str, axis: int, keep: bool, interpret: bool = False
) -> str:
    """The (first best value, its index) tuple of ``values`` along ``axis``."""
    if interpret:
        return f"_tc_arg_best_interp({values}, {indices}, {axis}, {keep}, {kind == 'argmax'})"
    keep_arg = ", keep_dims=True" if keep else ""
    return f"tl.reduce(({values}, {indices}), {axis}, {NAN_ARG_COMBINE[kind]}{keep_arg})"


def along_axis(text: str, axis: int, ndim: int) -> str:
    """A 1-D ``text`` laid along ``axis`` of an ``ndim``-D tile (None for its other dims)."""
    if ndim == 1:
        return text
    return text + "[" + ", ".join(":" if i == axis else "None" for i in range(ndim)) + "]"


def combine_expr(kind: str, acc: str, value: str, dtype: torch.dtype) -> str:
    """One step of a rolled (chunked) reduction: ``acc`` combined with a chunk's ``value``."""
    if kind == "sum":
        return f"{acc} + {value}"
    fn = "tl.maximum" if kind == "max" else "tl.minimum"
    nan = ", propagate_nan=tl.PropagateNan.ALL" if dtype.is_floating_point else ""
    return f"{fn}({acc}, {value}{nan})"


# an arg-reduction's candidate replaces the best so far when strictly better (an earlier chunk
# keeps ties: torch gives the first index) or NaN over a number (torch.argmax picks NaN)
ARG_PICK = {"argmax": ">", "argmin": "<"}


def keep_better(ctx: EmitContext, n: Node, value: str, index: str, best: tuple[str, str]) -> None:
    """One step of the chunked argmax/argmin ``n``: its (best value, its index) accumulators
    ``best`` take the candidate ``value`` / ``index`` where that is better (``ARG_PICK``)."""
    acc, at = best
    take = f"({value} {ARG_PICK[n.attrs['kind']]} {acc})"
    if n.inputs[0].dtype.is_floating_point:
        take = f"({take} | (({value} != {value}) & ({acc} == {acc})))"
    picked = ctx.w.fresh(f"{n.hint}_take")
    ctx.w.line(f"{picked} = {take}")
    ctx.w.line(f"{at} = tl.where({picked}, {index}, {at})")
    ctx.w.line(f"{acc} = tl.where({picked}, {value}, {acc})")


def masked_for_reduce(ctx: EmitContext, node: Node, axis: int, kind: str) -> str:
    """``node``'s value with padded lanes of the reduced dim set to ``kind``'s neutral element."""
    text = ctx.expr(node)
    mask = ctx.mask_at(node.shape[axis], axis, node.ndim)
    if mask is None:
        return text
    return f"tl.where({mask}, {text}, {dtypes.neutral(kind, node.dtype)})"


@emits(Op.REDUCE)
def emit_reduce(ctx: EmitContext, node: Node) -> None:
    kind, axis, keep = node.attrs["kind"], node.attrs["axis"], node.attrs["keepdim"]
    if kind == "combine":
        scans.emit_combine_reduce(ctx, node)
        return
    src = node.inputs[0]
    if ctx.looped is not None and src.shape[axis] is ctx.looped:
        raise AssertionError("rolled reductions are emitted by schedule.emit_chunk_loop")
    if _paired(ctx, node):
        ctx.bind(node, f"{_value_and_index(ctx, node)}[{0 if kind in NAN_COMBINE else 1}]")
        return
    text = masked_for_reduce(ctx, src, axis, kind)
    dims = [ctx.dim_expr(d) for d in src.shape]
    ctx.bind(node, reduce_expr(kind, text, axis, keep, src.dtype, dims, ctx.interpret))


def _paired(ctx: EmitContext, node: Node) -> bool:
    """Whether ``node`` is a float max (min) of a tile whose argmax (argmin) over the same
    axis the loop also takes (``torch.max(x, dim)`` returns both): one tuple reduction then
    gives both, instead of a max and an arg reduction each crossing the warps."""
    if not reduce_pairs.pairable(node):
        return False
    if ctx.reduce_pairs is None:
        ctx.reduce_pairs = reduce_pairs.paired_keys(ctx.loop.walk())
    return reduce_pairs.pair_key(node) in ctx.reduce_pairs


def _value_and_index(ctx: EmitContext, node: Node) -> str:
    """The variable holding the (best value, its first index) tuple of ``node``'s input along
    its axis: emitted once, reused by the partner reduction while its scope is open."""
    src, axis, keep = node.inputs[0], node.attrs["axis"], node.attrs["keepdim"]
    arg = reduce_pairs.ARG_OF[node.attrs["kind"]]

    def reduction() -> str:
        text = masked_for_reduce(ctx, src, axis, arg)
        indices = _element_indices(axis, [ctx.dim_expr(d) for d in src.shape])
        return best_and_index(arg, text, indices, axis, keep, ctx.interpret)

    return ctx.shared_tuple(("arg", *reduce_pairs.pair_key(node)), "best", reduction)

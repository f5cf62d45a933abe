"""Matrix products of tiles (stage: frontend; in: ``tc.dot``, ``@`` / ``torch.matmul`` /
``torch.mm`` / ``torch.addmm`` / ``torch.bmm`` / ``torch.baddbmm`` on traced tiles; out: ``DOT``
nodes).

A ``DOT`` node multiplies two 2-D tiles, or two 3-D tiles with the same leading (batch) dim
(``tl.dot`` takes both), in fp32. Operands keep a common dtype (fp8 operands stay fp8: ``tl.dot``
takes any pair of fp8 formats; whether the target can is checked with the config space). The
shapes a dot cannot take are refused here, at the user's line: ``tl.dot`` needs the inner (K)
dim to be at least 16 elements (32 for 8-bit operands) on NVIDIA GPUs, so a K fixed below that
(a whole small extent, a literal block size) is an error that says what to write instead.

fp32 operands that are exact upcasts of narrower floats (times factors constant along K) feed
the dot in their 16-bit form, the factors applied to the product (``frontend/exact_dots.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tilecraft.errors import DeviceCodeError, ShapeError
from tilecraft.frontend import rdims, views
from tilecraft.frontend.exact_dots import ExactOperands, exact_operands
from tilecraft.frontend.product_sums import product_sum
from tilecraft.ir.dtypes import FP8
from tilecraft.ir.nodes import (
    Dim,
    Node,
    Op,
    Sym,
    SymKind,
    shape_str,
    sized_shape_str,
    whole_length,
)

if TYPE_CHECKING:
    from tilecraft.frontend.tracer import Tracer
    from tilecraft.frontend.values import TileValue


def min_k(dtype: torch.dtype) -> int:
    """The smallest inner dim ``tl.dot`` takes on every target for operands of ``dtype``."""
    return 32 if dtype.itemsize == 1 else 16


def _static_size(d: Dim) -> int | None:
    """The block a dim always has (a literal 1, a whole extent, a fixed block), else None. A
    whole extent known at run time only (static_shapes=False) has its size bucket's block:
    one compile per bucket."""
    if isinstance(d, int):
        return d
    if d.kind is SymKind.RDIM and isinstance(d.extent, int):
        return 1 << max(int(d.extent) - 1, 0).bit_length()  # padded to a power of two
    if d.kind is SymKind.BLOCK and d.fixed_block is not None:
        return d.fixed_block
    return None


def _dims_str(t: Tracer, a: Node, b: Node) -> str:
    """The operands' shapes, whole dims with their sizes (inner dims of 32 and 24 say so)."""
    return f"{sized_shape_str(a.shape)} @ {sized_shape_str(b.shape)}"


def operand_dtype(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """Both fp8 (any pair of formats): each stays as it is; otherwise torch's promotion."""
    if a in FP8 and b in FP8:
        return a
    if a in FP8 or b in FP8:  # fp8 with a wider type: the fp8 side is widened exactly
        return b if a in FP8 else a
    return torch.promote_types(a, b)


def _check_shapes(t: Tracer, op: str, a: Node, b: Node) -> None:
    if a.ndim not in (2, 3) or a.ndim != b.ndim:
        raise ShapeError(
            f"{op} needs two 2-D tiles or two 3-D (batched) tiles, got {_dims_str(t, a, b)}",
            t.loc,
            hint="index the operands to 2-D tiles, or use torch.bmm on [batch, m, k] @ [batch, k, n]",
        )
    if a.ndim == 3 and a.shape[0] is not b.shape[0] and a.shape[0] != b.shape[0]:
        raise ShapeError(
            f"{op}: batch dims differ: {_dims_str(t, a, b)}",
            t.loc,
            hint="index both operands with the same batch tile",
        )
    k_a, k_b = a.shape[-1], b.shape[-2]
    if isinstance(k_a, Sym) and isinstance(k_b, Sym) and rdims.interchangeable(k_a, k_b):
        rdims.unify(k_a, k_b)  # (a no-op when they are one dim)
    elif k_a is not k_b and k_a != k_b:
        raise ShapeError(
            f"{op}: inner dims differ: {_dims_str(t, a, b)}",
            t.loc,
            hint="index both operands with the same k tile",
        )
    k = _static_size(a.shape[-1])
    need = min_k(a.dtype)
    if k is not None and k < need:
        whole = whole_length(a.shape[-1])  # a whole dim's own size, not its padded block
        size = k if whole is None else whole
        written = (
            "(a[:, :, :, None] * b[:, None, :, :]).sum(2)"
            if a.ndim == 3
            else "(a[:, :, None] * b[None, :, :]).sum(1)"
        )
        raise ShapeError(
            f"{op}: the inner (K) dim of {_dims_str(t, a, b)} is {size} elements; tl.dot needs "
            f"K >= {need} for {a.dtype} operands",
            t.loc,
            hint=f"load a K of at least {need} (pad the tensors with zeros), use `a @ b` (a "
            f"whole K this short is summed), or write the product out: {written}",
        )


def dot(
    t: Tracer,
    a: Any,
    b: Any,
    acc: Any = None,
    out_dtype: torch.dtype | None = None,
    op: str = "tc.dot",
) -> TileValue:
    """``a @ b`` (+ ``acc``), accumulated in fp32 (int8 operands: int32, fp64 ones: fp64);
    the result has ``out_dtype``, else ``acc``'s dtype, else the operands' common dtype."""
    an, bn = t.value_node(a), t.value_node(b)
    common = operand_dtype(an.dtype, bn.dtype)
    target = out_dtype or (t.value_node(acc).dtype if acc is not None else None)
    if common.is_floating_point and target is not None and not target.is_floating_point:
        raise DeviceCodeError(
            f"{op} of {_dtype_name(common)} tiles into an integer result "
            f"({_dtype_name(target)} acc= or out_dtype=): each product would be truncated",
            t.loc,
            hint="accumulate in torch.float32 and convert once at the end "
            "(`acc.round().to(torch.int32)`)",
        )
    if _wide_int(common):
        return _int_dot(t, an, bn, common, acc, out_dtype, op)
    if an.dtype not in FP8 or bn.dtype not in FP8:
        an, bn = t.cast(an, common), t.cast(bn, common)
    _check_shapes(t, op, an, bn)
    shape = rdims.distinct(t, (*an.shape[:-1], bn.shape[-1]))
    result = out_dtype or (torch.float32 if common in FP8 else common)
    if out_dtype is None and common == torch.int8 and op == "tc.dot":
        result = torch.int32  # as the eager tc.dot: an int8 result would wrap
    _check_block_wraps(t, op, an, result)
    exact = exact_operands(t, an, bn) if common == torch.float32 else ExactOperands(an, bn, {})
    an, bn, attrs = exact.a, exact.b, exact.attrs
    # int8 products accumulate in int32 (tl.dot's only integer form), fp64 ones in fp64 (as
    # torch; tl.dot returns fp64 for them: typed fp32, the code after it read garbage), all
    # others in fp32
    accum = {torch.int8: torch.int32, torch.float64: torch.float64}.get(common, torch.float32)
    if acc is None:
        product = exact.rescaled(t, t.emit(Op.DOT, [an, bn], shape, accum, **attrs))
        return t.wrap(t.cast(product, result))
    accn = rdims.conform(t, t.value_node(acc), shape)
    if accn.ndim != len(shape) or t.broadcast_shapes(accn.shape, shape) != shape:
        raise ShapeError(
            f"{op}: acc {shape_str(accn.shape)} does not match the product {shape_str(shape)}",
            t.loc,
        )
    accf = t.cast(accn, accum)
    if accf.shape != shape:
        accf = t.emit(Op.VIEW, [accf], shape, accum, expand=True)
    if exact.factors:  # the factors apply to the product alone
        product = exact.rescaled(t, t.emit(Op.DOT, [an, bn], shape, accum, **attrs))
        out = t.emit(Op.BINARY, [accf, product], shape, accum, fn="add")
    else:
        out = t.emit(Op.DOT, [an, bn, accf], shape, accum, **attrs)
    return t.wrap(t.cast(out, out_dtype or accn.dtype))


def _check_same_dtypes(t: Tracer, op: str, an: Node, bn: Node) -> None:
    """torch's matmul family refuses operands of two dtypes (``fp16 @ fp32``, ``int8 @
    bf16``), as ref mode does; ``tc.dot`` promotes them (fp8 joins the other operand)."""
    if an.dtype != bn.dtype and an.dtype not in FP8 and bn.dtype not in FP8:
        raise DeviceCodeError(
            f"{op} of {_dtype_name(an.dtype)} and {_dtype_name(bn.dtype)} tiles: torch needs "
            "both operands of one dtype",
            t.loc,
            hint="cast one (`a.to(b.dtype)`), or use tc.dot(a, b), which promotes them and "
            "accumulates in fp32",
        )


def _check_block_wraps(t: Tracer, op: str, an: Node, result: torch.dtype) -> None:
    """An 8-bit integer product wraps, as torch's ``int8 @ int8`` is int8: over a K tile loop
    each block's sum wraps before the blocks meet a wider accumulator, so the kernel's result
    would follow the block size (the config). (An int16 product summed into an int16
    accumulator wraps alike for any block: not refused.)"""
    k = an.shape[-1]
    narrow = not result.is_floating_point and result.itemsize == 1 and result != torch.bool
    if narrow and isinstance(k, Sym) and k.kind is SymKind.BLOCK and not k.scalar:
        raise DeviceCodeError(
            f"{op} of {_dtype_name(an.dtype)} tiles over the tile dim {k.name}: torch gives "
            f"{_dtype_name(result)} (each product sum wraps), so a sum of the K loop's blocks "
            "would change with the block size",
            t.loc,
            hint="use tc.dot(a, b) (an int32 result for int8 tiles) or cast the tiles "
            "`.to(torch.int32)` before the product",
        )


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _wide_int(dtype: torch.dtype) -> bool:
    """An integer dtype ``tl.dot`` does not take (it takes int8 alone)."""
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.int8


def _int_dot(
    t: Tracer,
    an: Node,
    bn: Node,
    common: torch.dtype,
    acc: Any,
    out_dtype: torch.dtype | None,
    op: str,
) -> TileValue:
    """An integer product ``tl.dot`` has no form for (int32, int64, uint8: the interpreter
    asserted, GPUs refuse): int8 tiles cast up to int32 are an int8 dot with int32
    accumulation (the same wrapping sums); others sum the products in their dtype, exactly."""
    sources = [n.inputs[0] if n.op is Op.CAST else n for n in (an, bn)]
    if common == torch.int32 and all(s.dtype == torch.int8 for s in sources):
        return dot(t, t.wrap(sources[0]), t.wrap(sources[1]), acc, out_dtype or torch.int32, op)
    an, bn = t.cast(an, common), t.cast(bn, common)
    _check_shapes(t, op, an, bn)
    _check_block_wraps(t, op, an, out_dtype or common)
    product = _summed_products(t, t.wrap(an), t.wrap(bn), an.ndim, bn.ndim)
    if acc is not None:
        product = t.pointwise("add", acc, product)
        out_dtype = out_dtype or t.value_node(acc).dtype
    return t.to_dtype(product, out_dtype) if out_dtype is not None else product


def matmul(
    t: Tracer,
    a: Any,
    b: Any,
    op: str = "torch.matmul",
    out_dtype: torch.dtype | None = None,
) -> TileValue:
    """2-D or 3-D (batched) tiles; a 2-D operand of a 3-D product is broadcast over the batch.
    A static inner dim too short for ``tl.dot`` (a 4x4 Kalman covariance, an 8x8 DCT) or
    more than one batch dim is the product summed over K, as einsum writes it.
    ``out_dtype``: the result's dtype (fp32: unrounded, for an epilogue that rounds once)."""
    an, bn = t.value_node(a), t.value_node(b)
    _check_same_dtypes(t, op, an, bn)
    k = _static_size(an.shape[-1]) if min(an.ndim, bn.ndim) >= 2 else None
    short = k is not None and k < min_k(an.dtype)
    if min(an.ndim, bn.ndim) >= 2 and (short or max(an.ndim, bn.ndim) > 3):
        if out_dtype is not None:
            a, b = t.to_dtype(a, out_dtype), t.to_dtype(b, out_dtype)
        return _summed_products(t, a, b, an.ndim, bn.ndim)
    if {an.ndim, bn.ndim} == {2, 3}:
        batch = (an if an.ndim == 3 else bn).shape[0]
        if an.ndim == 2:
            a = _batched(t, an, batch)
        else:
            b = _batched(t, bn, batch)
    return dot(t, a, b, out_dtype=out_dtype, op=op)


def _summed_products(t: Tracer, a: Any, b: Any, rank_a: int, rank_b: int) -> TileValue:
    """``a @ b`` with torch's batch broadcasting as an einsum product sum (``...mk,...kn``)."""
    batch = "abcdefgh"[: max(rank_a, rank_b) - 2]
    subs_a = batch[len(batch) - (rank_a - 2) :] + "mk"
    subs_b = batch[len(batch) - (rank_b - 2) :] + "kn"
    return product_sum(t, (a, subs_a), (b, subs_b), batch + "mn")


def _batched(t: Tracer, node: Node, batch: Dim) -> TileValue:
    view = t.emit(Op.VIEW, [node], (1, *node.shape), node.dtype, spec=(None, ":", ":"))
    return t.wrap(t.emit(Op.VIEW, [view], (batch, *node.shape), node.dtype, expand=True))


def bmm(t: Tracer, a: Any, b: Any) -> TileValue:
    """3-D tiles ``[batch, m, k] @ [batch, k, n]`` (``tl.dot`` on 3-D blocks); fp32 accumulation."""
    an, bn = t.value_node(a), t.value_node(b)
    if an.ndim != 3 or bn.ndim != 3:
        _check_shapes(t, "torch.bmm", an, bn)  # names the shapes
        raise ShapeError("torch.bmm needs 3-D tiles", t.loc, hint="use torch.mm for 2-D tiles")
    return dot(t, a, b, op="torch.bmm")


def baddbmm(
    t: Tracer, inp: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1, op: str = ""
) -> TileValue:
    """``beta * input + alpha * (a @ b)`` on 3-D tiles (``addmm`` on 2-D); with beta = alpha = 1
    and an fp32 ``input`` the sum happens inside ``tl.dot``."""
    op = op or "torch.baddbmm"
    an, bn, base = t.value_node(a), t.value_node(b), t.value_node(inp)
    rank = 3 if op == "torch.baddbmm" else 2
    if an.ndim != rank or bn.ndim != rank:
        raise ShapeError(
            f"{op} needs {rank}-D operands, got {_dims_str(t, an, bn)}",
            t.loc,
            hint="torch.baddbmm takes [batch, m, k] @ [batch, k, n], torch.addmm 2-D tiles",
        )
    for _ in range(rank - base.ndim):  # torch broadcasts input (a 1-D bias of nn.Linear)
        inp = views.unsqueeze(t, inp, 0)
    result = torch.promote_types(base.dtype, operand_dtype(an.dtype, bn.dtype))
    if _is(beta, 1) and _is(alpha, 1) and base.dtype == torch.float32:
        return dot(t, a, b, acc=inp, op=op)
    product = dot(t, a, b, out_dtype=torch.float32, op=op)
    if not _is(alpha, 1):
        product = t.pointwise("mul", product, alpha)
    if _is(beta, 0):  # as in torch: input is ignored (NaN in it does not propagate)
        return t.to_dtype(product, result)
    scaled = t.pointwise("mul", inp, beta) if not _is(beta, 1) else inp
    if not isinstance(beta, (int, float)):  # a run-time beta: 0 ignores input too
        scaled = t.where(t.pointwise("eq", beta, 0), 0.0, scaled)
    return t.to_dtype(t.pointwise("add", t.to_dtype(scaled, torch.float32), product), result)


def _is(scale: Any, value: int) -> bool:
    """Whether ``scale`` is the Python number ``value`` (a run-time float argument is none)."""
    return isinstance(scale, (int, float)) and scale == value


# the torch callables device code writes, each with its lowering (frontend/lowerings.py
# registers them; the docstrings are docs/ops.md's notes)
def matmul_lowering(t: Any, a: Any, b: Any) -> Any:
    """2-D or 3-D (batched) tiles, a 2-D operand broadcast over the batch; fp32 accumulation
    (``tl.dot``). A whole static K under 16 (32 for 8-bit operands) or more batch dims (a 4-D
    tile of 8x8 blocks) is the product summed over K, as einsum writes it. 8-bit integer
    tiles give torch's dtype (``int8 @ int8`` is int8, wrapped): over a K tile loop, where
    each block's sum would wrap, they are refused (``tc.dot`` gives int32)."""
    return matmul(t, a, b)


def mm_lowering(t: Any, a: Any, b: Any) -> Any:
    """2-D tiles, K >= 16 (32 for 8-bit operands); fp32 accumulation (``tl.dot``)."""
    _check_same_dtypes(t, "torch.mm", t.value_node(a), t.value_node(b))
    return dot(t, a, b, op="torch.mm")


def bmm_lowering(t: Any, a: Any, b: Any) -> Any:
    """3-D tiles ``[batch, m, k] @ [batch, k, n]``, K >= 16 (32 for 8-bit); ``tl.dot`` on 3-D blocks."""
    return bmm(t, a, b)


def addmm_lowering(t: Any, acc: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> Any:
    """``beta * input + alpha * (a @ b)`` on 2-D tiles (beta and alpha numbers or float
    arguments); an fp32 ``input`` with beta = alpha = 1 is the accumulator of ``tl.dot``."""
    return baddbmm(t, acc, a, b, beta=beta, alpha=alpha, op="torch.addmm")


def baddbmm_lowering(t: Any, acc: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> Any:
    """``beta * input + alpha * (a @ b)`` on 3-D tiles; an fp32 ``input`` with beta = alpha = 1
    is the accumulator of ``tl.dot``."""
    return baddbmm(t, acc, a, b, beta=beta, alpha=alpha)


T = torch.Tensor
LOWERINGS: list[tuple[tuple[Any, ...], Any]] = [
    (
        (
            torch.matmul,
            T.matmul,
            T.__matmul__,
        ),
        matmul_lowering,
    ),
    (
        (
            T.mm,
            torch.mm,
        ),
        mm_lowering,
    ),
    (
        (
            torch.bmm,
            T.bmm,
        ),
        bmm_lowering,
    ),
    (
        (
            torch.addmm,
            T.addmm,
        ),
        addmm_lowering,
    ),
    (
        (
            torch.baddbmm,
            T.baddbmm,
        ),
        baddbmm_lowering,
    ),
]

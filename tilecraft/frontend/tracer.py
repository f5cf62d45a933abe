"""The device-loop tracer: builds tile IR from the operations device code performs
(stage: frontend; in: proxy operations; out: ir.Node lists).

Shape and dtype rules live here (torch promotion, broadcasting, reduction dims) with the builders
of compute nodes (pointwise, where, reductions, dots, full/arange; subscripts of tiles in
:mod:`~.tile_subscripts`). The seams are
their own modules, each taking the tracer: host-tensor accesses (:mod:`~.indexing`), torch and
``tc.*`` calls (:mod:`~.dispatch`, which looks torch functions up in the registry of
:mod:`~.lowerings`) and tile/grid loops with carried values (:mod:`~.loop_nest`). Proxies
(``values.py``) hold only the tracer, so its ``load``/``store``/``torch_call``/``call`` are their
entry points into those modules.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from tilecraft.errors import DeviceCodeError, ShapeError, SourceLoc, UnsupportedOpError
from tilecraft.frontend import dispatch, indexing, rdims, tile_subscripts
from tilecraft.frontend.positions import positions_widened
from tilecraft.frontend.values import HostTensor, TileProxy, TileValue
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import (
    ELEMENTWISE_OPS,
    Dim,
    Node,
    Op,
    Shape,
    Sym,
    SymKind,
    is_weak,
    shape_str,
    sized_shape_str,
)
from tilecraft.language.tunables import BlockSize, DynamicFlag, DynamicInt


class Tracer:
    """Builds the IR of one device loop. One instance per traced loop."""

    def __init__(self, next_block_slot: int, dynamic: bool = False):
        self.dynamic = dynamic
        self.blocks: list[list[Node]] = [[]]
        self.syms: list[Sym] = []
        # the top-level loop's dims whose block the config alone sets (one program a tile)
        self.grid_syms: list[Sym] = []
        self.rdims: dict[tuple[int, int, bool], Sym] = {}
        self.block_rdims: dict[tuple[int, int], Sym] = {}  # (block slot, occurrence)
        self.loc: SourceLoc | None = None
        self.next_block_slot = next_block_slot
        self.block_slot_syms: dict[int, Sym] = {}
        # the tile dims whose block only the config sets (no literal, no registered block)
        self.config_blocks: set[int] = set()
        self.site_syms: dict[Any, Sym] = {}  # a source loop's first sym (loop_nest.block_sym)
        self.n_rdims = 0
        self._leaf_cache: dict[tuple[int, Op], TileValue] = {}
        self._args: dict[tuple[str, str], Node] = {}
        # loop-carried values started from a Python number and widened in the loop
        # (``far = 0`` then ``far = torch.argmax(...)``): their dtype in a trace again
        self.carry_dtypes: dict[tuple[str, SourceLoc | None], torch.dtype] = {}

    # -- building blocks ------------------------------------------------------------------
    def emit(
        self, op: Op, inputs: list[Node], shape: Shape, dtype: torch.dtype, **attrs: Any
    ) -> Node:
        node = Node(op, inputs, tuple(shape), dtype, attrs, self.loc)
        if op not in _LEAF_OPS:
            self.blocks[-1].append(node)
        return node

    def wrap(self, node: Node) -> TileValue:
        return TileValue(node, self)

    def arg_node(self, name: str, value: int, source: tuple[Any, ...] | None = None) -> Node:
        """A runtime int argument (static_shapes=False); ``source`` says where the launcher gets it."""
        key = ("arg", name)
        if key not in self._args:
            dtype = dtypes.scalar_dtype(int(value))
            node = self.emit(Op.ARG, [], (), dtype, name=name, value=int(value), weak=True)
            node.attrs["source"] = source
            node.hint = name
            self._args[key] = node
        return self._args[key]

    def value_node(self, x: Any) -> Node:
        """Any device operand as a node: tile values, tile loop variables, Python scalars."""
        if isinstance(x, TileValue):
            return x.node
        if isinstance(x, DynamicInt):
            source = ("int", x.arg) if isinstance(x, DynamicFlag) else None
            return self.arg_node(x.arg, int(x), source)
        if isinstance(x, TileProxy):
            return self.tile_leaf(x.sym, Op.TILE_INDEX).node
        if isinstance(x, (bool, int, float)):
            dtype = dtypes.scalar_dtype(x)
            return self.emit(Op.CONST, [], (), dtype, value=dtypes.fit_literal(x, dtype, self.loc))
        if isinstance(x, HostTensor):
            if x.ndim == 0:  # a 0-d tensor (a global norm the host computed): its one element
                return indexing.load(self, x, ()).node
            raise _host_tensor_value(x)
        if isinstance(x, Sym):  # a tile's size along a dim (xt.shape[-1]) used as a number
            return self.value_node(self._dim_length(x))
        raise _not_a_device_value(x)

    def _dim_length(self, sym: Sym) -> Any:
        """How many elements a tile has along ``sym``: a whole dim's extent; a tiled dim's
        length differs at the edge, so it is refused with what to write instead."""
        length = self.extent_value(sym)
        if length is None:
            raise DeviceCodeError(
                "the size of a tile along a tiled dim used as a number: it is the block size "
                "except in the last tile, which may be shorter",
                self.loc,
                hint="use the loop's total size from host code (`n`), or `t.end - t.begin` "
                "for the elements of this tile",
            )
        return length

    def promotion_of(self, x: Any) -> Any:
        """:meth:`dtype_of`, with a 0-d tensor as a :class:`dtypes.ZeroDim`: a 0-d tensor
        argument, or a tile reduced to 0-d (``x[tt].sum()``, 0-d in eager code too: an int32
        ``[1]`` count plus it stays int32, as in torch). Other 0-d device values stay dtypes:
        a load through a tile of block size 1 is a ``[1]`` tensor in eager code."""
        if isinstance(x, HostTensor) and x.ndim == 0:
            return dtypes.ZeroDim(x.dtype)
        if isinstance(x, TileValue) and _reduced_to_0d(x.node):
            return dtypes.ZeroDim(x.node.dtype)
        return self.dtype_of(x)

    def _loop_scalars_weak(self, operands: tuple[Any, ...]) -> list[Any]:
        """Each operand's promotion kind, a tile loop's ``begin`` / ``end`` / ``id`` as the
        Python int it is in eager code where a tensor meets it (``i.to(torch.int16) +
        tk.begin`` is int16, as in ref mode); among themselves they stay int32 (index math)."""
        kinds = [self.promotion_of(o) for o in operands]
        scalar = [
            isinstance(o, TileValue) and self.value_node(o).op in _LOOP_SCALARS for o in operands
        ]
        tensor = any(isinstance(k, torch.dtype) and not s for s, k in zip(scalar, kinds))
        if any(scalar) and tensor:
            kinds = [0 if s else k for s, k in zip(scalar, kinds, strict=True)]
        return kinds

    def dtype_of(self, x: Any) -> Any:
        """A dtype for promotion: tensors give their dtype, Python scalars stay weak (also when
        they arrive as kernel arguments, like ``eps``)."""
        if isinstance(x, (TileValue, TileProxy)):
            node = self.value_node(x)
            if is_weak(node):
                return 0.0 if node.dtype.is_floating_point else 0
            return node.dtype
        if isinstance(x, DynamicInt):
            return 0
        if isinstance(x, (bool, int, float)):
            dtypes.fit_literal(x, torch.int64, self.loc)  # past 64 bits: a located error
            return x
        if isinstance(x, HostTensor):
            if x.ndim == 0:
                return x.dtype
            raise _host_tensor_value(x)
        if isinstance(x, Sym):
            return self.dtype_of(self._dim_length(x))
        raise _not_a_device_value(x)

    # -- syms -----------------------------------------------------------------------------
    def rdim_for(
        self,
        extent: int,
        occurrence: int = 0,
        source: Node | None = None,
        dynamic: bool | None = None,
    ) -> Sym:
        """The reduction dim of a whole extent; with dynamic shapes ``source`` is the ARG node
        holding the extent at run time (every source of one rdim is checked equal at launch).
        Static and run-time dims of one extent are kept apart (``dynamic``: which one is wanted,
        by default whether there is a ``source``): ``torch.arange(20)`` beside a row of 20 at the
        first call must stay 20 when a later call's row is 25."""
        run_time = source is not None if dynamic is None else dynamic
        key = (int(extent), occurrence, run_time)
        sym = self.rdims.get(key)
        if sym is None:
            sym = self.rdims[key] = self._new_rdim(int(extent))
        if source is not None and source not in sym.extent_args:
            sym.extent_args.append(source)
        return sym

    def size_dim(self, d: Any, used: list[Sym]) -> Dim:
        """A dim of a tile shape given by a user: a tile, a sym, or an int (a whole extent)."""
        if isinstance(d, TileProxy):
            return d.sym
        if isinstance(d, Sym):
            return d
        if isinstance(d, TileValue):
            raise DeviceCodeError("tile shapes must be tiles or ints, not computed values")
        n = int(d)
        if n == 1:
            return 1
        if isinstance(d, BlockSize):
            return self._block_lanes(d, used)
        occurrence = sum(1 for s in used if s.kind is SymKind.RDIM and s.extent == n)
        source = self.value_node(d) if isinstance(d, DynamicInt) else None
        return self.rdim_for(n, occurrence, source)

    def _block_lanes(self, block: BlockSize, used: list[Sym]) -> Sym:
        """The whole dim of a registered block size's lanes: a tile of a loop with that block
        fits it (``acc += x[tm, tn]`` into ``hl.zeros([tm, block_n])``; ``rdims.conform``)."""
        occurrence = sum(1 for s in used if s.block_slot == block.slot)
        key = (block.slot, occurrence)
        sym = self.block_rdims.get(key)
        if sym is None:
            sym = self.block_rdims[key] = self._new_rdim(int(block))
            sym.block_slot = block.slot
        return sym

    def _new_rdim(self, extent: int) -> Sym:
        """A new whole dim of ``extent`` with the next reduction_loops slot."""
        sym = Sym(SymKind.RDIM, len(self.syms), extent, 0, config_slot=self.n_rdims)
        self.n_rdims += 1
        self.syms.append(sym)
        return sym

    def tile_leaf(self, sym: Sym, op: Op) -> TileValue:
        key = (id(sym), op)
        if key not in self._leaf_cache:
            if op is Op.TILE_INDEX:
                shape: Shape = () if sym.scalar else (sym,)
                node = self.emit(op, [], shape, torch.int32, sym=sym)
            else:
                node = self.emit(op, [], (), torch.int32, sym=sym)
            node.hint = {Op.TILE_INDEX: "idx", Op.TILE_BEGIN: "begin", Op.TILE_END: "end"}.get(
                op, "t"
            )
            self._leaf_cache[key] = self.wrap(node)
        return self._leaf_cache[key]

    # -- shapes ---------------------------------------------------------------------------
    def broadcast_shapes(self, *shapes: Shape) -> Shape:
        rank = max(len(s) for s in shapes)
        out: list[Dim] = []
        for i in range(rank):
            dim: Dim = 1
            for s in shapes:
                j = i - (rank - len(s))
                if j < 0:
                    continue
                d = s[j]
                if d == 1:
                    continue
                if dim == 1:
                    dim = d
                elif dim is not d and dim != d:
                    raise ShapeError(
                        "shapes "
                        + " and ".join(sized_shape_str(s) for s in shapes)
                        + " do not broadcast",
                        self.loc,
                        hint=rdims.broadcast_hint(dim, d),
                    )
            out.append(dim)
        return tuple(out)

    def expand_rank(self, node: Node, rank: int) -> Node:
        if node.ndim >= rank or node.ndim == 0:
            return node
        pad = rank - node.ndim
        spec = tuple([None] * pad + [":"] * node.ndim)
        return self.emit(Op.VIEW, [node], (1,) * pad + node.shape, node.dtype, spec=spec)

    def cast(self, node: Node, dtype: torch.dtype) -> Node:
        if node.dtype == dtype:
            return node
        if node.op is Op.CONST:
            value = dtypes.fit_literal(node.attrs["value"], dtype, self.loc)
            return self.emit(Op.CONST, [], (), dtype, value=value)
        return self.emit(Op.CAST, [node], node.shape, dtype)

    # -- compute --------------------------------------------------------------------------
    def pointwise(self, name: str, *operands: Any) -> TileValue:
        from tilecraft.ir.pointwise import POINTWISE

        op = POINTWISE[name]
        if op.int_identity and not self.value_node(operands[0]).dtype.is_floating_point:
            return self.wrap(self.value_node(operands[0]))
        operands = positions_widened(self, operands, name)
        kinds = self._loop_scalars_weak(operands)
        result = dtypes.promote(*kinds)
        if op.float_only and not result.is_floating_point:
            result = torch.float32
        # float math of Python numbers alone (``1.0 - alpha`` of a float argument) is a Python
        # float: a double, still weak where it meets a tile (fp32 math gave fp64 tiles a
        # rounded (1 - alpha), 5e-8 off eager; fuzz 54a)
        weak_math = result.is_floating_point and not op.bool_result and not op.logical
        weak_math = weak_math and all(isinstance(k, (bool, int, float)) for k in kinds)
        if weak_math:
            result = torch.float64
        if op.int_only and (result.is_floating_point or result.is_complex):
            raise DeviceCodeError(
                f"'{name}' needs integer or bool tiles (as in torch), got {result}",
                self.loc,
                hint="cast with .to(torch.int32) first, or use the float op you meant",
            )
        if name in ("floordiv", "mod") and not result.is_floating_point:
            name, op = name + "_int", POINTWISE[name + "_int"]
        if name in ("sub", "neg") and result == torch.bool:
            raise DeviceCodeError(
                f"'{name}' of bool tiles: torch refuses subtraction and negation of bools",
                self.loc,
                hint="to invert a mask use ~m or torch.logical_not(m); for arithmetic convert "
                "first: m.to(torch.int32)",
            )
        if name == "copysign" and isinstance(operands[1], (int, float)):
            # a constant sign as a one-element tile, whose bits the helper reads (|x| * -1.0
            # kept a NaN's sign), the magnitude in the float result (an int tile's |x|
            # wrapped: uint8 23 -> 233, int8 -128)
            sign = self.full([], math.copysign(1.0, operands[1]), result)
            return self.pointwise("copysign", self.to_dtype(operands[0], result), sign)
        if op.bool_result and result in (torch.float16, torch.bfloat16):
            # a comparison of a half tile with a Python float compares with the float rounded
            # to the tile's dtype, as torch: fp16 x >= 0.1 was False at x = fp16(0.1)
            operands = tuple(_rounded_to(o, result) for o in operands)
        nodes = [self.value_node(o) for o in operands]
        if name == "add":
            fused = self._fuse_dot_accumulate(nodes)
            if fused is not None:
                return self.wrap(fused)
        if op.logical:  # torch.logical_*: each operand's truth, not its bits
            nodes = [n if n.dtype == torch.bool else self._truth(n) for n in nodes]
            result = torch.bool
        nodes = rdims.conform_all(self, nodes)
        shape = self.broadcast_shapes(*[n.shape for n in nodes])
        # a host float argument joins half-precision math at fp32, as torch's scalar operands do
        # (``x_fp16 / s`` with s = 1e5 rounded s to fp16's inf first)
        scalar = dtypes.compute_dtype(result) if result.is_floating_point else result
        if op.bool_result:  # (a comparison: a float argument rounded as a literal is, above)
            scalar = result
        nodes = [
            self.expand_rank(
                self.cast(n, scalar if _weak_scalar(n, result) else result), len(shape)
            )
            for n in nodes
        ]
        out_dtype = torch.bool if op.bool_result else result
        node = self.emit(Op.UNARY if op.arity == 1 else Op.BINARY, nodes, shape, out_dtype, fn=name)
        if weak_math:
            node.attrs["weak"] = True
        return self.wrap(node)

    def _truth(self, node: Node) -> Node:
        zero = self.emit(Op.CONST, [], (), node.dtype, value=0)
        shape = node.shape
        return self.emit(
            Op.BINARY, [node, self.expand_rank(zero, len(shape))], shape, torch.bool, fn="ne"
        )

    def _fuse_dot_accumulate(self, nodes: list[Node]) -> Node | None:
        """``acc + a @ b`` with an fp32 acc accumulates inside tl.dot (no rounding of a @ b),
        also written ``acc + (a @ b).float()`` (a bf16 product rounded, then widened: each K
        step rounded to bf16, so the result depended on the config's K block)."""
        for acc, other in ((nodes[0], nodes[1]), (nodes[1], nodes[0])):
            dot = other
            while dot.op is Op.CAST and dot.inputs and dot.inputs[0].dtype.is_floating_point:
                dot = dot.inputs[0]
            if (
                dot.op is Op.DOT
                and len(dot.inputs) == 2
                and acc.dtype == torch.float32
                and acc.shape == dot.shape
            ):
                inputs = [dot.inputs[0], dot.inputs[1], acc]
                return self.emit(Op.DOT, inputs, acc.shape, torch.float32, **dot.attrs)
        return None

    def where(self, cond: Any, a: Any, b: Any) -> TileValue:
        result = dtypes.promote(self.promotion_of(a), self.promotion_of(b))
        c, x, y = rdims.conform_all(self, [self.value_node(v) for v in (cond, a, b)])
        shape = self.broadcast_shapes(c.shape, x.shape, y.shape)
        c = self.expand_rank(self.cast(c, torch.bool), len(shape))
        x = self.expand_rank(self.cast(x, result), len(shape))
        y = self.expand_rank(self.cast(y, result), len(shape))
        return self.wrap(self.emit(Op.WHERE, [c, x, y], shape, result))

    def to_dtype(self, x: Any, dtype: torch.dtype) -> TileValue:
        return self.wrap(self.cast(self.value_node(x), dtype))

    def reduce(self, kind: str, x: Any, dim: Any, keepdim: bool = False) -> TileValue:
        node = self.value_node(x)
        if isinstance(dim, (list, tuple)) and not dim:
            dim = None  # torch reduces every dim for an empty list (it reduced none)
        if dim is None and kind in ("argmax", "argmin") and node.ndim > 1:
            # (dim by dim, the second step took the argmax of the first's indices)
            raise UnsupportedOpError(
                f"{kind}() without dim of a {node.ndim}-D tile {shape_str(node.shape)}: torch "
                "gives an index into the flattened tile, which compiled code does not compute",
                self.loc,
                hint=f"give the dim: {kind}(dim=...) per row or column",
            )
        if dim is None:
            out = node
            for _ in range(node.ndim):
                out = self.reduce(kind, self.wrap(out), 0, False).node
            return self.wrap(out)
        if isinstance(dim, (list, tuple)):
            axes = sorted((self._axis(node, d) for d in dim), reverse=True)
            out = node
            for a in axes:
                out = self.reduce(kind, self.wrap(out), a, keepdim).node
            return self.wrap(out)
        axis = self._axis(node, dim)
        if kind in ("argmax", "argmin"):
            result_dtype, compute = torch.int64, dtypes.compute_dtype(node.dtype)
        elif kind == "sum":
            result_dtype = torch.int64 if not node.dtype.is_floating_point else node.dtype
            compute = torch.float32 if node.dtype.is_floating_point else torch.int64
            if node.dtype == torch.float64:
                compute = torch.float64
        else:
            result_dtype, compute = node.dtype, dtypes.compute_dtype(node.dtype)
        inp = self.cast(node, compute)
        shape = list(node.shape)
        if keepdim:
            shape[axis] = 1
        else:
            del shape[axis]
        out_dtype = torch.int32 if kind in ("argmax", "argmin") else compute
        red = self.emit(
            Op.REDUCE, [inp], tuple(shape), out_dtype, kind=kind, axis=axis, keepdim=keepdim
        )
        return self.wrap(self.cast(red, result_dtype))

    def _axis(self, node: Node, dim: Any) -> int:
        d = int(dim)
        if not -node.ndim <= d < max(node.ndim, 1):
            scalar_tiles = any(s.kind is SymKind.BLOCK and s.scalar for s in self.syms)
            raise ShapeError(
                f"dim={d} is out of range for a {node.ndim}-D tile {shape_str(node.shape)}",
                hint=(
                    "a tile of block_size=1 indexes like an int, as tc.grid does (x[t, :] "
                    "has no dim for t): count dims without it, or leave out block_size=1 "
                    "to keep t's dim (the config picks its block)"
                )
                if scalar_tiles
                else None,
            )
        return d % node.ndim

    def extent_value(self, d: Dim) -> Any:
        """The number of valid elements along a dim, as a device value."""
        if isinstance(d, int):
            return d
        if d.kind is SymKind.RDIM:
            return self.wrap(d.extent_args[0]) if d.extent_args else d.extent
        return None

    def element_count(self, node: Node, axes: list[int], keepdim: bool) -> Any:
        """The valid elements of ``node`` over ``axes``: an int (or a run-time size) where each
        extent is known, else a tile's count (a partial last tile's fewer lanes), shaped as a
        reduction over ``axes`` with ``keepdim``."""
        count: Any = 1
        for a in axes:
            n = self.extent_value(node.shape[a])
            if n is None:
                ones = self.wrap(self.emit(Op.FULL, [], node.shape, torch.float32, value=1.0))
                return self.reduce("sum", ones, axes, keepdim)
            count = count * n
        return count

    def mean(self, x: Any, dim: Any, keepdim: bool = False) -> TileValue:
        node = self.value_node(x)
        dims = (
            list(range(node.ndim))
            if dim is None
            else dim
            if isinstance(dim, (list, tuple))
            else [dim]
        )
        axes = [self._axis(node, d) for d in dims]
        # the sum in fp32 (or fp64), divided before the cast back: an fp16 row's sum may pass
        # fp16's 65504 where its mean does not
        wide = node.dtype.is_floating_point and node.dtype.itemsize >= 4
        src = x if wide else self.to_dtype(x, torch.float32)
        total = self.reduce("sum", src, axes, keepdim)
        mean = self.pointwise("truediv", total, self.element_count(node, axes, keepdim))
        return mean if wide or not node.dtype.is_floating_point else self.to_dtype(mean, node.dtype)

    def full(self, shape: Any, value: Any, dtype: torch.dtype) -> TileValue:
        dims = shape if isinstance(shape, (list, tuple)) else [shape]
        used: list[Sym] = []
        out: list[Dim] = []
        for d in dims:
            dim = self.size_dim(d, used)
            if isinstance(dim, Sym) and dim.scalar:
                continue  # a block of one indexes a scalar: x[tp] of it is one element
            if isinstance(dim, Sym):
                used.append(dim)
            out.append(dim)
        if isinstance(value, (TileValue, TileProxy)):
            v = self.value_node(value)
            base = self.emit(Op.FULL, [], tuple(out), dtype, value=0)
            return self.pointwise("add", self.wrap(base), self.wrap(v))
        return self.wrap(self.emit(Op.FULL, [], tuple(out), dtype, value=value))

    def arange(self, *args: Any, dtype: torch.dtype = torch.int32) -> TileValue:
        begin, end, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
        if any(isinstance(a, TileProxy) for a in (begin, end, step)):
            raise DeviceCodeError("tc.arange needs int bounds; use tile.index for a tile's indices")
        # arange(n) of a run-time size n is that size's dim (checked at each launch, as a row
        # loaded whole); other bounds from run-time sizes would give a run-time length
        whole_size = isinstance(end, DynamicInt) and type(begin) is int and begin == 0
        whole_size = whole_size and type(step) is int and step == 1
        run_time = [a for a in (begin, end, step) if isinstance(a, (TileValue, DynamicInt))]
        if run_time and not whole_size:
            raise DeviceCodeError(
                "tc.arange / torch.arange: a bound computed from a run-time size (a tile's "
                "length is part of the compiled kernel)",
                hint="compile for the size: @tc.kernel(static_shapes=True), or "
                "tc.specialize(n) in host code; arange(n) of a size n itself follows it",
            )
        if int(step) < 1:
            raise DeviceCodeError(f"tc.arange: step {int(step)} must be positive")
        length = -(-(int(end) - int(begin)) // int(step))
        sym = self.rdim_for(length, 0, self.value_node(end) if whole_size else None)
        idx = self.emit(Op.TILE_INDEX, [], (sym,), torch.int32, sym=sym)
        idx.hint = "ar"
        out = self.wrap(idx) if int(step) == 1 else self.pointwise("mul", self.wrap(idx), int(step))
        out = self.pointwise("add", out, int(begin)) if int(begin) else out
        return self.to_dtype(out, dtype)

    def view(self, x: TileValue, index: Any) -> TileValue:
        return tile_subscripts.subscript(self, x, index)

    def device_print(self, prefix: str, *values: Any) -> None:
        nodes = [self.value_node(v) for v in values]
        self.emit(Op.PRINT, nodes, (), torch.int32, prefix=str(prefix))

    # -- entry points of proxies (values.py), which reach the tracer, not these modules ----
    def load(self, t: HostTensor, index: Any) -> TileValue:
        return indexing.load(self, t, index)

    def store(self, t: HostTensor, index: Any, value: Any) -> None:
        indexing.store(self, t, index, value)

    def torch_call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return dispatch.torch_call(self, func, args, kwargs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return dispatch.call(self, name, args, kwargs)


_LEAF_OPS = {Op.CONST, Op.ARG, Op.TILE_INDEX, Op.TILE_BEGIN, Op.TILE_END, Op.TILE_ID, Op.BLOCK_SIZE}
_LOOP_SCALARS = (Op.TILE_BEGIN, Op.TILE_END, Op.TILE_ID)


def _reduced_to_0d(node: Node) -> bool:
    """Whether ``node`` is a 0-d tensor in eager code too: a tile reduced to 0-d, or math on
    such values and constants (``x[tt].sum() / n``, ``.float()`` of one)."""
    if node.ndim or node.op not in (Op.REDUCE, *ELEMENTWISE_OPS):
        return False
    if node.op is Op.REDUCE:
        return True
    inputs = [i for i in node.inputs if i.op is not Op.CONST and not is_weak(i)]
    return bool(inputs) and all(_reduced_to_0d(i) for i in inputs)


def _host_tensor_value(x: HostTensor) -> DeviceCodeError:
    if x.ndim and math.prod(x.shape) == 1:  # a step counter or a scale kept as a [1] tensor
        element = f"{x.name}[{', '.join(['0'] * x.ndim)}]"
        hint = f"read its element: {element} (a 0-d tensor is read whole)"
    else:
        hint = f"index it to load a tile, e.g. {x.name}[tile, :] (a 0-d tensor is read whole)"
    return DeviceCodeError(f"host tensor '{x.name}' used as a value in device code", hint=hint)


def _weak_scalar(node: Node, result: torch.dtype) -> bool:
    """A weak number (:func:`is_weak`), or an int scalar (a ``tc.grid`` index, a tile's
    ``.begin``) joining float math: cast to the op's compute dtype, not a half-precision
    result's (the interpreter's int32 -> bf16 cast gave 0.0 for ``x[r, :] + r``)."""
    if is_weak(node):
        return True
    return node.ndim == 0 and not node.dtype.is_floating_point and result.is_floating_point


def _not_a_device_value(x: Any) -> UnsupportedOpError:
    """A value device code cannot hold; a NumPy scalar says so (``float32`` read like torch's)."""
    kind = type(x)
    if kind.__module__ == "numpy":
        return UnsupportedOpError(
            f"cannot use a NumPy {kind.__name__} scalar as a device value",
            hint="pass a Python number (float(x), int(x)) or a torch tensor",
        )
    if isinstance(x, torch.Tensor):  # a global's or a closure's (the kernel's are traced)
        made = " as torch.tensor(0.5)" if x.ndim == 0 else ""
        return UnsupportedOpError(
            f"a {x.dtype} tensor of shape {list(x.shape)} that is not the kernel's (a global, "
            f"one a function closes over, or one made in device code{made}) used as a device "
            "value",
            hint="write a number as itself (0.5, not torch.tensor(0.5)); pass a tensor to the "
            "kernel as an argument and index it there (`w[None, :]` of an argument `w`), or "
            "name it in host code before the loop",
        )
    return UnsupportedOpError(f"cannot use a {kind.__name__} as a device value")


def _rounded_to(value: Any, dtype: torch.dtype) -> Any:
    """A Python float as ``dtype`` holds it (other operands as they are)."""
    if isinstance(value, float) and not isinstance(value, bool):
        return float(torch.tensor(value, dtype=dtype))
    return value

"""Emit the Triton device function of one device loop (stage: codegen; in: DeviceLoop + Config;
out: Triton source text).

Each IR node becomes one assignment. Tile dims get offsets, indices and masks; a reduction dim is
either whole (one power-of-two block with a mask) or, when ``reduction_loops`` chunks it, *rolled*:
values on that dim exist only inside ``for roffset in tl.range(...)`` loops, so each phase of the
computation that needs them (before and after each reduction over the dim) gets its own loop and
recomputes (re-loads) what it needs. See :meth:`Emitter.emit_block`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from tilecraft.codegen import memory, scans, views
from tilecraft.codegen.reduce import combine_expr, reduce_expr
from tilecraft.codegen.writer import CodeWriter
from tilecraft.config.plan import Plan
from tilecraft.errors import UnsupportedOpError
from tilecraft.ir import dtypes
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind
from tilecraft.ir.pointwise import POINTWISE


@dataclasses.dataclass
class SymState:
    block: str  # constexpr name or literal
    index: str = ""
    mask: str | None = None
    offset: str = ""
    begin: str = "0"
    end: str = ""
    tile_id: str = ""


class Emitter:
    def __init__(self, loop: DeviceLoop, plan: Plan, int64: bool, interpret: bool = False):
        self.interpret = interpret
        self.loop = loop
        self.plan = plan
        self.int64 = int64
        self.w = CodeWriter(indent=1)
        self.scopes: list[dict[int, str]] = [{}]
        self.syms: dict[int, SymState] = {}
        self.constexprs: dict[str, int] = {}
        # constexprs the launcher computes per call (interpreter only): name -> launcher expression
        self.launch_constexprs: dict[str, str] = {}
        self.tensors: dict[str, Any] = {}  # param name -> HostTensor
        self.scalars: dict[str, Any] = {}  # param name -> where the launcher gets its value
        self.scalar_types: dict[str, torch.dtype] = {}
        self.looped: Sym | None = None
        self.descriptors: dict[tuple[str, tuple[str, ...]], str] = {}  # (tensor, block) -> name
        self.descriptor_mark = 0
        self.helpers: list[str] = []  # @triton.jit helpers the kernel calls (combine functions)
        self.helper_names: dict[int, str] = {}
        for name in (*loop.tensors, *loop.scalar_args):  # temporaries never shadow parameters
            self.w.reserve(name)
        for sym in loop.syms:
            if plan.looped(sym):
                self.looped = sym

    # -- sizes and syms -------------------------------------------------------------------
    def block_value(self, sym: Sym) -> int:
        return self.plan.block(sym)

    def block_expr(self, sym: Sym) -> str:
        if sym.kind is SymKind.BLOCK and sym.config_slot is None:
            return str(self.block_value(sym))
        prefix = (
            "_BLOCK" if sym.kind is SymKind.BLOCK else "_RBLOCK" if sym is self.looped else "_RDIM"
        )
        name = f"{prefix}_{sym.index}"
        self.constexprs[name] = self.block_value(sym)
        return name

    def dim_expr(self, d: Any) -> str:
        return str(d) if isinstance(d, int) else self.block_expr(d)

    def state(self, sym: Sym) -> SymState:
        return self.syms[id(sym)]

    def bound_expr(self, value: Any) -> str:
        if isinstance(value, int):
            return str(value)
        return self.expr(value.node if hasattr(value, "node") else value)

    def stride_expr(self, tensor: Any, dim: int) -> str:
        """A tensor's stride: a literal, or with dynamic shapes a kernel argument (a stride of 1
        stays literal: the specialization key records which strides are 1)."""
        stride = tensor.stride[dim]
        if not tensor.dynamic or stride == 1:
            return str(stride)
        name = f"{tensor.name}_stride_{dim}"
        self.scalars[name] = ("stride", tensor.name, dim)
        self.scalar_types[name] = torch.int32 if abs(stride) < 2**31 else torch.int64
        return name

    def size_expr(self, tensor: Any, dim: int) -> str:
        """A tensor's size: a literal, or with dynamic shapes a kernel argument."""
        if not tensor.dynamic:
            return str(tensor.shape[dim])
        name = f"{tensor.name}_size_{dim}"
        self.scalars[name] = ("size", tensor.name, dim)
        self.scalar_types[name] = torch.int32
        return name

    def index_cast(self, expr: str) -> str:
        return f"({expr}).to(tl.int64)" if self.int64 else expr

    def mask_at(self, sym: Any, pos: int, rank: int) -> str | None:
        if not isinstance(sym, Sym):
            return None
        mask = self.state(sym).mask
        if mask is None or rank <= 1:
            return mask
        return mask + "[" + ", ".join(":" if i == pos else "None" for i in range(rank)) + "]"

    def value_mask(self, shape: tuple[Any, ...]) -> str | None:
        parts = [m for i, d in enumerate(shape) if (m := self.mask_at(d, i, len(shape)))]
        return " & ".join(parts) if parts else None

    # -- grid setup -----------------------------------------------------------------------
    def tile_vars(self, sym: Sym, st: SymState, pid_var: str, needs_mask: bool) -> None:
        """Offset, indices and mask of a grid dim whose tile number is ``pid_var``."""
        st.tile_id = pid_var
        st.offset = self.w.fresh(f"offset_{sym.index}")
        begin, end = st.begin, st.end
        plus_begin = f" + {begin}" if begin != "0" else ""
        if sym.scalar:
            self.w.line(f"{st.offset} = {self.index_cast(pid_var)}{plus_begin}")
            st.index = st.offset
            return
        self.w.line(f"{st.offset} = {self.index_cast(pid_var)} * {st.block}{plus_begin}")
        st.index = self.w.fresh(f"indices_{sym.index}")
        self.w.line(f"{st.index} = {st.offset} + tl.arange(0, {st.block})")
        if needs_mask:
            st.mask = self.w.fresh(f"mask_{sym.index}")
            self.w.line(f"{st.mask} = {st.index} < {end}")

    def setup_rdims(self) -> None:
        for sym in self.loop.syms:
            if sym.kind is not SymKind.RDIM:
                continue
            st = SymState(block=self.block_expr(sym))
            self.syms[id(sym)] = st
            st.index = f"rindex_{sym.index}"
            st.offset = "0"
            self.w.reserve(st.index)
            st.end = self.expr(sym.extent_args[0]) if sym.extent_args else str(sym.extent)
            extent = 0 if sym.extent_args else int(sym.extent)
            # an empty whole dim (n == 0) is masked too: its block still has lanes
            needs_mask = bool(sym.extent_args) or extent == 0 or extent % self.block_value(sym) != 0
            st.mask = f"rmask_{sym.index}" if needs_mask else None
            if st.mask:
                self.w.reserve(st.mask)
            if sym is not self.looped:
                self.w.line(f"{st.index} = tl.arange(0, {st.block})")
                if st.mask:
                    self.w.line(f"{st.mask} = {st.index} < {st.end}")

    # -- values ---------------------------------------------------------------------------
    def lookup(self, node: Node) -> str | None:
        for scope in reversed(self.scopes):
            if node.id in scope:
                return scope[node.id]
        return None

    def expr(self, node: Node) -> str:
        leaf = self.leaf_expr(node)
        if leaf is not None:
            return leaf
        name = self.lookup(node)
        if name is None:
            self.ensure(node)
            name = self.lookup(node)
            assert name is not None, node
        return name

    def ensure(self, node: Node) -> None:
        if self.leaf_expr(node) is not None or self.lookup(node) is not None:
            return
        for inp in node.inputs:
            self.ensure(inp)
        self.emit_node(node)

    def bind(self, node: Node, text: str) -> str:
        name = self.w.fresh(node.hint)
        self.w.line(f"{name} = {text}")
        self.scopes[-1][node.id] = name
        return name

    def leaf_expr(self, node: Node) -> str | None:
        op = node.op
        if op is Op.CONST:
            value = node.attrs["value"]
            if isinstance(value, bool):
                return "True" if value else "False"
            if node.dtype.is_floating_point:
                return dtypes.float_literal(value)
            return str(int(value))
        if op is Op.ARG:
            name = node.attrs["name"]
            self.scalars[name] = node.attrs.get("source")
            self.scalar_types[name] = node.dtype
            return name
        if op in (Op.TILE_INDEX, Op.TILE_BEGIN, Op.TILE_END, Op.TILE_ID, Op.BLOCK_SIZE):
            st = self.state(node.attrs["sym"])
            sym = node.attrs["sym"]
            if op is Op.TILE_INDEX:
                return st.index
            if op is Op.TILE_BEGIN:
                return st.offset
            if op is Op.BLOCK_SIZE:
                return st.block
            if op is Op.TILE_ID:
                return st.tile_id
            if sym.scalar:
                return f"({st.offset} + 1)"
            return f"tl.minimum({st.offset} + {st.block}, {st.end})"
        return None

    def range_bound(self, text: str) -> str:
        """A ``tl.range`` bound; in the interpreter a computed one goes through ``_tc_index``."""
        if not self.interpret or text.isdigit() or text in self.constexprs:
            return text
        return f"_tc_index({text})"

    def cast_expr(self, text: str, src: torch.dtype, dst: torch.dtype) -> str:
        if src == dst:
            return text
        if dst == torch.bool:
            return f"({text} != 0)"
        if text in self.scalars:  # a scalar argument: a Python number in the interpreter
            return f"tl.cast({text}, {dtypes.triton_dtype(dst)})"
        return f"{text}.to({dtypes.triton_dtype(dst)})"

    # -- statements -----------------------------------------------------------------------
    def emit_node(self, node: Node) -> None:
        self.w.src_comment(node.loc)
        handler = getattr(self, f"emit_{node.op.value}", None)
        if handler is None:
            raise UnsupportedOpError(f"codegen has no emission for {node.op.value}", node.loc)
        handler(node)

    def emit_print(self, node: Node) -> None:
        values = "".join(f", {self.expr(v)}" for v in node.inputs)
        self.w.line(f"tl.device_print({node.attrs['prefix']!r}{values})")
        self.scopes[-1][node.id] = "None"

    def emit_full(self, node: Node) -> None:
        dims = ", ".join(self.dim_expr(d) for d in node.shape)
        value = node.attrs["value"]
        lit = dtypes.float_literal(value) if isinstance(value, float) else str(value)
        self.bind(node, f"tl.full([{dims}], {lit}, {dtypes.triton_dtype(node.dtype)})")

    def emit_cast(self, node: Node) -> None:
        src = node.inputs[0]
        self.bind(node, self.cast_expr(self.expr(src), src.dtype, node.dtype))

    def _pointwise_operands(self, node: Node) -> tuple[list[str], torch.dtype]:
        operand_dtype = node.inputs[0].dtype
        compute = dtypes.compute_dtype(operand_dtype)
        texts = []
        for inp in node.inputs:
            text = self.expr(inp)
            if inp.op is not Op.CONST and inp.dtype != compute:
                text = self.cast_expr(text, inp.dtype, compute)
            texts.append(text)
        return texts, compute

    def emit_unary(self, node: Node) -> None:
        self._emit_pointwise(node)

    def emit_binary(self, node: Node) -> None:
        self._emit_pointwise(node)

    def _emit_pointwise(self, node: Node) -> None:
        op = POINTWISE[node.attrs["fn"]]
        texts, compute = self._pointwise_operands(node)
        text = op.template.format(*texts)
        if node.dtype != compute and node.dtype != torch.bool:
            text = self.cast_expr(text, compute, node.dtype)
        self.bind(node, text)

    def emit_where(self, node: Node) -> None:
        c, a, b = (self.expr(i) for i in node.inputs)
        self.bind(node, f"tl.where({c}, {a}, {b})")

    def emit_view(self, node: Node) -> None:
        views.emit_view(self, node)

    def masked_for_reduce(self, node: Node, axis: int, kind: str) -> str:
        text = self.expr(node)
        mask = self.mask_at(node.shape[axis], axis, node.ndim)
        if mask is None:
            return text
        return f"tl.where({mask}, {text}, {dtypes.neutral(kind, node.dtype)})"

    def emit_reduce(self, node: Node) -> None:
        kind, axis, keep = node.attrs["kind"], node.attrs["axis"], node.attrs["keepdim"]
        if kind == "combine":
            scans.emit_combine_reduce(self, node)
            return
        src = node.inputs[0]
        if self.looped is not None and src.shape[axis] is self.looped:
            raise AssertionError("rolled reductions are emitted by emit_chunk_loop")
        text = self.masked_for_reduce(src, axis, kind)
        dims = [self.dim_expr(d) for d in src.shape]
        self.bind(node, reduce_expr(kind, text, axis, keep, src.dtype, dims))

    def emit_dot(self, node: Node) -> None:
        a, b = node.inputs[0], node.inputs[1]
        at, bt = self.expr(a), self.expr(b)
        k = a.shape[1]
        if a.op is not Op.LOAD and (m := self.mask_at(k, 1, 2)):
            at = f"tl.where({m}, {at}, 0)"
        if b.op is not Op.LOAD and (m := self.mask_at(k, 0, 2)):
            bt = f"tl.where({m}, {bt}, 0)"
        extra = f", input_precision='{self.plan.dot_precision}'" if a.dtype == torch.float32 else ""
        if self.interpret and a.dtype in dtypes.LOW_PRECISION:
            # the interpreter computes half-precision dots wrongly (numpy has no bf16); products
            # of bf16/fp16 values are exact in fp32, so upcasting changes nothing numerically
            at, bt, extra = (
                f"{at}.to(tl.float32)",
                f"{bt}.to(tl.float32)",
                ", input_precision='ieee'",
            )
        if len(node.inputs) == 3:
            self.bind(node, f"tl.dot({at}, {bt}, acc={self.expr(node.inputs[2])}{extra})")
        else:
            self.bind(node, f"tl.dot({at}, {bt}, out_dtype=tl.float32{extra})")

    def emit_scan(self, node: Node) -> None:
        scans.emit_scan(self, node)

    def emit_load(self, node: Node) -> None:
        memory.emit_load(self, node)

    def emit_store(self, node: Node) -> None:
        memory.emit_store(self, node)

    def emit_atomic(self, node: Node) -> None:
        memory.emit_atomic(self, node)

    def emit_loop(self, node: Node) -> None:
        for carry in node.attrs.get("carried", []):
            init = carry.inputs[0]
            text = self.expr(init)
            if init.op is Op.CONST or init.ndim == 0 and init.op in (Op.ARG,):
                text = f"tl.full([], {text}, {dtypes.triton_dtype(carry.dtype)})"
            name = self.w.fresh(carry.hint)
            self.w.line(f"{name} = {text}")
            self.scopes[-1][carry.id] = name
        sym: Sym = node.attrs["sym"]
        st = SymState(block=self.block_expr(sym))
        self.syms[id(sym)] = st
        st.begin, st.end = self.bound_expr(sym.begin), self.bound_expr(sym.extent)
        st.offset = self.w.fresh(f"offset_{sym.index}")
        step = "" if sym.scalar else f", {st.block}"
        self.w.src_comment(node.loc)
        knobs = self.plan.range(node.attrs.get("range_slot", -1)).kwargs()
        begin, end = self.range_bound(st.begin), self.range_bound(st.end)
        self.w.line(f"for {st.offset} in tl.range({begin}, {end}{step}{knobs}):")
        with self.w.indented():
            self.scopes.append({})
            st.tile_id = f"(({st.offset} - {st.begin}) // {st.block})"
            if sym.scalar:
                st.index = st.offset
            else:
                st.index = self.w.fresh(f"indices_{sym.index}")
                self.w.line(f"{st.index} = {st.offset} + tl.arange(0, {st.block})")
                static = isinstance(sym.begin, int) and isinstance(sym.extent, int)
                if not static or (int(sym.extent) - int(sym.begin)) % self.block_value(sym):
                    st.mask = self.w.fresh(f"mask_{sym.index}")
                    self.w.line(f"{st.mask} = {st.index} < {st.end}")
            self.emit_block(node.body or [])
            for carry in node.attrs.get("carry_updates", []):
                nxt = carry.attrs.get("next")
                if nxt is not None and nxt is not carry:
                    self.w.line(f"{self.lookup(carry)} = {self.expr(nxt)}")
            self.scopes.pop()

    # -- scheduling -----------------------------------------------------------------------
    def emit_block(self, nodes: list[Node]) -> None:
        """Emit a block; with a rolled reduction dim, phase by phase (see module docstring)."""
        looped = self.looped
        if looped is None:
            for n in nodes:
                self.ensure(n)
            return
        from tilecraft.codegen.schedule import phases

        phase, maxp = phases(nodes, looped)
        for p in range(maxp + 1):
            for n in nodes:
                if phase[n.id] == p and not _on(n, looped) and not _rolled_reduce(n, looped):
                    self.ensure(n)
            sinks = [
                n
                for n in nodes
                if (_on(n, looped) and n.op in (Op.STORE, Op.ATOMIC) and phase[n.id] == p)
                or (_rolled_reduce(n, looped) and phase[n.inputs[0].id] == p)
            ]
            if sinks:
                self.emit_chunk_loop(sinks, looped)

    def emit_chunk_loop(self, sinks: list[Node], sym: Sym) -> None:
        st = self.state(sym)
        accs: dict[int, str] = {}
        for n in sinks:
            if n.op is Op.REDUCE:
                src = n.inputs[0]
                dims = ", ".join(self.dim_expr(d) for d in src.shape)
                acc = self.w.fresh(f"{n.hint}_acc")
                self.w.line(
                    f"{acc} = tl.full([{dims}], {dtypes.neutral(n.attrs['kind'], src.dtype)}, {dtypes.triton_dtype(src.dtype)})"
                )
                accs[n.id] = acc
        roffset = self.w.fresh(f"roffset_{sym.index}")
        st.offset = roffset
        self.w.line(f"for {roffset} in tl.range(0, {self.range_bound(st.end)}, {st.block}):")
        with self.w.indented():
            self.scopes.append({})
            self.w.line(f"{st.index} = {self.index_cast(roffset)} + tl.arange(0, {st.block})")
            if st.mask:
                self.w.line(f"{st.mask} = {st.index} < {st.end}")
            for n in sinks:
                if n.op is Op.REDUCE:
                    kind, axis = n.attrs["kind"], n.attrs["axis"]
                    value = self.masked_for_reduce(n.inputs[0], axis, kind)
                    acc = accs[n.id]
                    self.w.line(f"{acc} = {combine_expr(kind, acc, value, n.inputs[0].dtype)}")
                else:
                    self.ensure(n)
            self.scopes.pop()
        for n in sinks:
            if n.op is Op.REDUCE:
                src = n.inputs[0]
                src_dims = [self.dim_expr(d) for d in src.shape]
                kind, axis, keep = n.attrs["kind"], n.attrs["axis"], n.attrs["keepdim"]
                self.bind(n, reduce_expr(kind, accs[n.id], axis, keep, src.dtype, src_dims))


def _on(node: Node, sym: Sym) -> bool:
    return any(d is sym for d in node.shape)


def _rolled_reduce(node: Node, sym: Sym) -> bool:
    return node.op is Op.REDUCE and node.inputs[0].shape[node.attrs["axis"]] is sym

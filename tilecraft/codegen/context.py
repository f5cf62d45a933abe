"""What emission functions share while one device loop is emitted (stage: codegen; in: a
:class:`DeviceLoop` and its :class:`Plan`; out: the Triton lines written so far plus what the
launcher needs: tensors, scalar arguments, constexprs, combine helpers).

:class:`EmitContext` holds the writer, the plan, the scopes binding IR nodes to Triton names and
each dim's :class:`SymState` (block, indices, mask, offset), with the helpers every family of
emissions uses (``expr`` / ``bind`` / masks / strides). It never writes an op itself: ``emit_node``
looks the op up in :data:`~tilecraft.codegen.registry.EMISSIONS`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable
from typing import Any

import torch

from tilecraft.codegen import fp8, known
from tilecraft.codegen.homes import Homes
from tilecraft.codegen.registry import emission
from tilecraft.codegen.split import SplitPass
from tilecraft.codegen.writer import CodeWriter
from tilecraft.config.plan import Plan
from tilecraft.ir import dtypes, reduce_pairs
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, on_dim, upstream
from tilecraft.ir.read_after_write import loads_after_stores

_TILE_LEAVES = (Op.TILE_INDEX, Op.TILE_BEGIN, Op.TILE_END, Op.TILE_ID, Op.BLOCK_SIZE)


@dataclasses.dataclass
class SymState:
    """How one dim appears in the kernel at the current point of emission."""

    block: str  # constexpr name or literal
    index: str = ""
    mask: str | None = None
    offset: str = ""
    begin: str = "0"
    end: str = ""
    tile_id: str = ""


class EmitContext:
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
        self.fp64_args = _fp64_float_args(loop)
        # the value each int parameter had in the traced call: a launch specializes ints by
        # value (divisible by 16, equal to 1), so the cross-compile must know them
        self.scalar_values: dict[str, int] = {}
        self.looped: Sym | None = None
        # (id(a), id(b)): every index of tile a is below every index of tile b here (a loop
        # split at a diagonal, codegen/diagonal.py)
        self.ordered: set[tuple[int, int]] = set()
        self.descriptors: dict[tuple[str, tuple[str, ...]], str] = {}  # (tensor, block) -> name
        self.descriptor_mark = 0
        self.helpers: list[str] = []  # @triton.jit helpers the kernel calls (combine functions)
        self.helper_names: dict[Any, str] = {}
        # tuples several nodes index (a tuple scan's outputs; a max/argmax pair, codegen/
        # reduce.py), by a key of what computes them: the scope each was emitted in, its variable
        self.shared_tuples: dict[tuple[Any, ...], tuple[dict[int, str], str]] = {}
        # (input, axis, keepdim, arg kind) of the reductions the loop takes both ways
        self.reduce_pairs: set[reduce_pairs.PairKey] | None = None
        self.split: SplitPass | None = None  # one pass of a split inner loop (codegen/split.py)
        # inside a loop over chunks of a dim (codegen/dot_chunks.py): that dim's chunk block, and
        # (first scope of the loop, dim): values on the dim bound outside it are not its chunk's
        self.block_overrides: dict[int, str] = {}
        self.hidden: list[tuple[int, Sym]] = []
        for name in (*loop.tensors, *loop.scalar_args):  # temporaries never shadow parameters
            self.w.reserve(name)
        # nor run-time scalars that become parameters as they are met (an inner loop's bound
        # `tc.tile(v)` of a dynamic size: a temporary `v = s[:, None]` took its name)
        for name in _arg_names(loop):
            self.w.reserve(name)
        for sym in loop.syms:
            if plan.looped(sym):
                self.looped = sym
        self.homes = Homes(plan, loop)  # carried values kept in memory
        for rows in self.homes.scratch:
            self.w.reserve(rows.name)

    @functools.cached_property
    def loads_after_stores(self) -> set[int]:
        """Loads that may read another thread's earlier store: a barrier first (found when a
        load is first emitted: a combine helper's context emits none)."""
        return loads_after_stores(self.loop)

    def sub_context(self) -> EmitContext:
        """A fresh context over the same loop and plan (the body of a combine helper)."""
        return EmitContext(self.loop, self.plan, self.int64, self.interpret)

    # -- sizes and syms -------------------------------------------------------------------
    def block_value(self, sym: Sym) -> int:
        return self.plan.block(sym)

    def numel(self, shape: tuple[Any, ...]) -> int:
        """Elements of a tile of ``shape`` under the plan's block sizes."""
        return math.prod(d if isinstance(d, int) else self.block_value(d) for d in shape)

    def block_expr(self, sym: Sym) -> str:
        if id(sym) in self.block_overrides:
            return self.block_overrides[id(sym)]
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

    def shape_expr(self, shape: Any) -> str:
        """A tile shape's block sizes as the list items of a Triton shape (``_BLOCK_0, 4``)."""
        return ", ".join(self.dim_expr(d) for d in shape)

    def block_offsets(
        self,
        layout: tuple[Any, ...],
        shape: tuple[Any, ...] | None = None,
        replaced: Callable[[int], str | None] = lambda i: None,
    ) -> str:
        """Element offsets of a tile of ``shape`` (default: ``layout``) in a padded row-major
        block of ``layout`` (the same rank); dim ``i`` at the positions ``replaced(i)`` (an
        index tile of the whole ``shape``) where that is given, else at its own positions."""
        shape = layout if shape is None else shape
        rank = len(shape)
        if rank == 0:
            return "0"
        terms = []
        for i, d in enumerate(shape):
            inner = "".join(f" * {self.dim_expr(x)}" for x in layout[i + 1 :])
            positions = replaced(i)
            if positions is not None:
                terms.append(f"({positions}){inner}")
                continue
            positions = f"tl.arange(0, {self.dim_expr(d)})"
            if rank > 1:
                positions += "[" + ", ".join(":" if j == i else "None" for j in range(rank)) + "]"
            terms.append(positions + inner)
        return "(" + " + ".join(terms) + ")"

    def state(self, sym: Sym) -> SymState:
        return self.syms[id(sym)]

    def _is_loop_offset(self, text: str) -> bool:
        """Whether ``text`` names the offset of a tile loop (a ``tl.range`` variable)."""
        return any(st.offset == text for st in self.syms.values())

    def bound_expr(self, value: Any) -> str:
        if isinstance(value, int):
            return str(value)
        return self.expr(value.node if hasattr(value, "node") else value)

    def stride_expr(self, tensor: Any, dim: int) -> str:
        """A tensor's stride: a literal, or with dynamic shapes a kernel argument (a stride of 1
        stays literal where every launch of the compile has it: ``HostTensor.unit_stride``)."""
        stride = tensor.stride[dim]
        if not tensor.dynamic or tensor.unit_stride(dim):
            return str(stride)
        name = f"{tensor.name}_stride_{dim}"
        self.scalars[name] = ("stride", tensor.name, dim)
        self.scalar_types[name] = torch.int32 if abs(stride) < 2**31 else torch.int64
        self.scalar_values[name] = int(stride)
        return name

    def size_expr(self, tensor: Any, dim: int) -> str:
        """A tensor's size: a literal, or with dynamic shapes a kernel argument."""
        if not tensor.dynamic:
            return str(tensor.shape[dim])
        name = f"{tensor.name}_size_{dim}"
        self.scalars[name] = ("size", tensor.name, dim)
        self.scalar_types[name] = torch.int32
        self.scalar_values[name] = int(tensor.shape[dim])
        return name

    def index_cast(self, expr: str) -> str:
        if not self.int64:
            return expr
        # in the interpreter a loop's offset is a Python int, which has no .to()
        return f"tl.cast({expr}, tl.int64)" if self.interpret else f"({expr}).to(tl.int64)"

    def mask_at(self, sym: Any, pos: int, rank: int) -> str | None:
        """The mask of dim ``sym`` placed at ``pos`` of a ``rank``-D value (None: no mask)."""
        if not isinstance(sym, Sym):
            return None
        mask = self.state(sym).mask
        if mask is None or rank <= 1:
            return mask
        return mask + "[" + ", ".join(":" if i == pos else "None" for i in range(rank)) + "]"

    def value_mask(self, shape: tuple[Any, ...]) -> str | None:
        parts = [m for i, d in enumerate(shape) if (m := self.mask_at(d, i, len(shape)))]
        return " & ".join(parts) if parts else None

    def descriptor(self, tensor: str, blocks: tuple[str, ...], make: str) -> str:
        """The variable holding a tensor descriptor of ``tensor`` with block shape ``blocks``;
        ``make`` (its constructor call) is written once, at the kernel's top, before any loop."""
        key = (tensor, blocks)
        name = self.descriptors.get(key)
        if name is None:
            name = self.w.fresh(f"{tensor}_desc")
            line = "    " + f"{name} = {make}"
            self.w.lines.insert(self.descriptor_mark + len(self.descriptors), line)
            self.descriptors[key] = name
        return name

    # -- values ---------------------------------------------------------------------------
    def lookup(self, node: Node) -> str | None:
        for depth in range(len(self.scopes) - 1, -1, -1):
            if node.id in self.scopes[depth] and not (self.hidden and self._hidden_at(node, depth)):
                return self.scopes[depth][node.id]
        return None

    def _hidden_at(self, node: Node, depth: int) -> bool:
        """Whether ``node``'s binding in scope ``depth`` is the whole of a dim the current
        scope sees in chunks."""
        return any(depth < first and on_dim(node, sym) for first, sym in self.hidden)

    def expr(self, node: Node) -> str:
        """The Triton text of ``node``'s value, emitting it (and its inputs) first if needed."""
        leaf = self.leaf_expr(node)
        if leaf is not None:
            return leaf
        name = self.lookup(node)
        if name is None:
            self.ensure(node)
            name = self.lookup(node)
            assert name is not None, node
        return name

    def mask_expr(self, node: Node) -> str:
        """A bool value to ``&``/``|`` with a tile: Triton 3.6's interpreter cannot combine a
        block with a 0-d bool as computed (``mask & (tl.max(x, 0) > 0)`` raises a numpy
        TypeError), but can with the same bool compared to 0."""
        text = self.expr(node)
        if self.interpret and node.ndim == 0 and node.dtype == torch.bool:
            return f"({text} != 0)"
        return text

    def ensure(self, node: Node) -> None:
        if self.leaf_expr(node) is not None or self.lookup(node) is not None:
            return
        if known.fold_known(self, node):  # a mask the plan makes all true, a count, ...
            return
        # a carry's input is its initial value, used at loop entry; a dot asks for its operands
        # itself (in K chunks they are computed inside its loop: codegen/dot_chunks.py)
        if node.op not in (Op.CARRY, Op.DOT):
            for inp in node.inputs:
                self.ensure(inp)
        self.emit_node(node)

    def emit_node(self, node: Node) -> None:
        self.w.src_comment(node.loc)
        emission(node.op, node.loc)(self, node)

    def shared_tuple(self, key: tuple[Any, ...], hint: str, make: Callable[[], str]) -> str:
        """The variable holding the tuple ``make()`` computes, emitted once under ``key`` and
        reused while the scope it was emitted in is open (each user indexes that one tuple)."""
        name = self.shared(key)
        if name is None:
            text = make()
            name = self.w.fresh(hint)
            self.w.line(f"{name} = {text}")
            self.share(key, name)
        return name

    def shared(self, key: tuple[Any, ...]) -> str | None:
        """The variable shared under ``key`` if the scope it was emitted in is still open."""
        found = self.shared_tuples.get(key)
        if found is not None and any(scope is found[0] for scope in self.scopes):
            return found[1]
        return None

    def share(self, key: tuple[Any, ...], name: str) -> None:
        """Share ``name`` under ``key`` while the current scope is open."""
        self.shared_tuples[key] = (self.scopes[-1], name)

    def bind(self, node: Node, text: str) -> str:
        """Assign ``text`` to a fresh variable named after the node; the node's value is it."""
        name = self.w.fresh(node.hint)
        self.w.line(f"{name} = {text}")
        self.scopes[-1][node.id] = name
        return name

    def leaf_expr(self, node: Node) -> str | None:
        """Constants, scalar arguments and tile attributes are expressions, never assignments."""
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
            if name in self.fp64_args:  # passed as a double, its fp32 uses rounded as before
                self.scalar_types[name] = torch.float64
                return f"tl.cast({name}, tl.float32)"
            self.scalar_types[name] = node.dtype
            if isinstance(node.attrs.get("value"), int):  # a float argument has no traced value
                self.scalar_values[name] = node.attrs["value"]
            return name
        if op in _TILE_LEAVES:
            return self._tile_leaf(node)
        return None

    def wide_arg(self, node: Node, dst: torch.dtype) -> str | None:
        """The double a float argument was passed as, where fp64 math reads it (None: not
        one)."""
        if dst == torch.float64 and node.op is Op.ARG and node.attrs["name"] in self.fp64_args:
            self.expr(node)  # (registers the parameter)
            name = str(node.attrs["name"])
            # (the interpreter passes the Python float, which Triton's ops take as fp32)
            return f"tl.full([], {name}, tl.float64)" if self.interpret else name
        return None

    def _tile_leaf(self, node: Node) -> str:
        op, sym = node.op, node.attrs["sym"]
        st = self.state(sym)
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

    def range_bound(self, text: str) -> str:
        """A ``tl.range`` bound; in the interpreter a computed one goes through ``_tc_index``."""
        if not self.interpret or text.isdigit() or text in self.constexprs:
            return text
        return f"_tc_index({text})"

    def full_expr(self, dims: str, value: object, dtype: torch.dtype) -> str:
        """``tl.full([dims], value, dtype)``; Triton's interpreter builds no bf16 or fp8
        constants (its builder has no ``get_bf16``): there an fp32 one, converted."""
        if self.interpret and (dtype == torch.bfloat16 or dtype in dtypes.FP8):
            return self.cast_expr(f"tl.full([{dims}], {value}, tl.float32)", torch.float32, dtype)
        return f"tl.full([{dims}], {value}, {dtypes.triton_dtype(dtype)})"

    def cast_expr(self, text: str, src: torch.dtype, dst: torch.dtype) -> str:
        if src == dst:
            return text
        if self.interpret and (dst == torch.bfloat16 or dst in dtypes.FP8) and self._scalar(text):
            # a Python number there: tl.cast truncated it to bf16 (0.1 became 0.0996), and fp8's
            # conversions call .to() on it; as an fp32 tile it is rounded as a tile is
            text, src = f"tl.cast({text}, tl.float32)", torch.float32
        if self.interpret and src == torch.bfloat16 and not self._scalar(text):
            text, src = f"_tc_from_bf16({text})", torch.float32  # (subnormals, see the helper)
            if dst == src:
                return text
        if src in dtypes.FP8 or dst in dtypes.FP8:  # PyTorch's rounding and overflow rules
            return fp8.cast_expr(text, src, dst, self.interpret, self.plan.target.fp8_conversions)
        if dst == torch.bool:
            return f"({text} != 0)"
        if self._scalar(text):
            return f"tl.cast({text}, {dtypes.triton_dtype(dst)})"
        if self.interpret and dst == torch.bfloat16:  # the interpreter truncates; torch rounds
            return f"_tc_to_bf16({text})"
        return f"{text}.to({dtypes.triton_dtype(dst)})"

    def _scalar(self, text: str) -> bool:
        """Whether ``text`` is a plain number where the kernel runs: a scalar argument or a
        loop's offset (tile.begin, a Python number in the interpreter), a literal or a
        block-size constexpr (``x * t.block_size``), none of which has .to()."""
        if _CONSTANT.fullmatch(text) is not None or text in self.scalars:
            return True
        return self.interpret and self._is_loop_offset(text)


_CONSTANT = re.compile(r"-?\d+(\.\d*)?|_(BLOCK|RDIM)_\d+")


def _fp64_float_args(loop: DeviceLoop) -> set[str]:
    """Float arguments (fp32 in the IR: Python floats are weak) that fp64 math reads: passed as
    doubles, or ``x * 0.1`` of an fp64 ``x`` multiplied by fp32's 0.1 (1.5e-8 off eager)."""
    names: set[str] = set()
    for node in loop.walk():
        if node.dtype != torch.float64 and all(i.dtype != torch.float64 for i in node.inputs):
            continue
        for i in node.inputs:
            if i.op is Op.ARG and i.dtype == torch.float32 and i.attrs.get("weak"):
                names.add(i.attrs["name"])
    return names


def _arg_names(loop: DeviceLoop) -> set[str]:
    """Names of the ``ARG`` nodes a loop reads: in its body and in its syms' bounds (and in
    what those bounds are computed from)."""
    roots = [n for n in loop.walk() if n.op is Op.ARG]
    for sym in loop.syms:
        roots += [v for v in (sym.extent, sym.begin, *sym.extent_args) if isinstance(v, Node)]
    return {n.attrs["name"] for n in upstream(roots) if n.op is Op.ARG}

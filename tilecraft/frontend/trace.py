"""Trace a kernel for one specialization (stage: frontend; in: the kernel source and example
arguments; out: :class:`TracedKernel` — the IR of every device loop plus host-side tunables).

Host code runs for real on ``meta`` tensors (shapes, no data); each device loop it reaches is
traced into IR by the :class:`Interpreter` with the host's local variables as captures.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from tilecraft import write_guard
from tilecraft.errors import (
    RUN_TIME_COUNT_HINT,
    ArgumentError,
    DeviceCodeError,
    SourceLoc,
    TilecraftError,
    UnsupportedOpError,
)
from tilecraft.frontend import loop_nest
from tilecraft.frontend.glue import GLUE, GLUE_DONE, GlueRun, device_loop, output_name
from tilecraft.frontend.glue_trace import (
    GlueLoop,
    OpCounter,
    eager_glue_functions,
    glue_inputs,
    glue_problem,
)
from tilecraft.frontend.host_meta import MetaHostTensors, ObjectAttributes, meta_arguments
from tilecraft.frontend.interpreter import Interpreter
from tilecraft.frontend.loop_nest import WidenCarry
from tilecraft.frontend.partial_stores import check_partial_stores
from tilecraft.frontend.source import LAUNCH, KernelSource, build_function, launch_tree
from tilecraft.frontend.tile_carries import refuse_tile_carries
from tilecraft.frontend.tracer import Tracer
from tilecraft.frontend.triton_calls import refuse_triton_calls
from tilecraft.frontend.values import HostTensor, TileProxy, TileValue, aligned, memory_owner
from tilecraft.ir.dead_code import assign_config_slots, eliminate_dead_code, without_dead_rdims
from tilecraft.ir.dtypes import TRITON_DTYPES, supported_names
from tilecraft.ir.fuse_loops import fuse_sibling_loops
from tilecraft.ir.hoist import hoist_operands
from tilecraft.ir.int_ranges import narrow_int_accumulations
from tilecraft.ir.masked_loads import mask_loads_by_where
from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind, walk
from tilecraft.ir.promote import promote_small_grids
from tilecraft.ir.tuple_scans import narrow_tuple_scans
from tilecraft.language import _context
from tilecraft.language.loops import TileSpec, grid
from tilecraft.language.tunables import (
    BlockSize,
    DynamicFlag,
    DynamicInt,
    Specialized,
    SpecializeHostInts,
)

PROVISIONAL_BLOCK = 32


@dataclasses.dataclass
class TracedKernel:
    loops: list[DeviceLoop]
    host_slots: dict[int, int]  # config slot -> extent, for register_block_size
    host_slot_order: list[int]  # k-th register_block_size call -> slot
    n_block_slots: int
    tunables: dict[str, tuple[Any, ...]]
    host_block_values: tuple[int, ...]
    specializations: list[int]
    glue: dict[int, GlueLoop] = dataclasses.field(default_factory=dict)  # frontend/glue.py
    glue_problems: dict[int, str | None] = dataclasses.field(default_factory=dict)
    host_tensors: bool = False  # host code makes tensors with tc.arange / tc.zeros / tc.full
    # config slot -> the least block register_block_size(lo, hi) allows
    host_floors: dict[int, int] = dataclasses.field(default_factory=dict)
    # in-place updates host code makes of tensors it does not get as arguments (a global's
    # step counter): tuning would run them once a candidate (frontend/host_meta.py)
    host_writes: tuple[str, ...] = ()

    def ir(self) -> str:
        from tilecraft.ir.printer import format_loop

        return "\n".join(format_loop(loop) for loop in self.loops)


class _TraceHost:
    """Host context while tracing: records block sizes and tunables, traces device loops."""

    mode = "trace"

    def __init__(
        self, src: KernelSource, device_type: str, static_shapes: bool, block_values: dict[Any, Any]
    ):
        self.src = src
        self.device_type = device_type
        self.static_shapes = static_shapes
        self.block_values = block_values
        self.next_slot = 0
        self.host_slots: dict[int, int] = {}
        self.host_floors: dict[int, int] = {}  # slot -> register_block_size's lo (power of 2)
        self.host_slot_order: list[int] = []
        self.tunables: dict[str, tuple[Any, ...]] = {}
        self.loops: dict[int, DeviceLoop] = {}
        self.n_rdims = 0
        self.specializations: list[int] = []
        self.first_env: dict[int, dict[str, Any]] = {}
        self.varying: set[str] = set()  # host ints that change between launches of one loop
        self.force_dynamic: set[str] = set()
        self.force_static: frozenset[str] = frozenset()  # host ints device code needs baked in
        self.arguments: set[int] = set()  # ids of the kernel's tensor arguments (meta copies)
        self.misaligned: set[int] = set()  # ... whose real data pointer is not 16-byte aligned
        # host names of tensors a relaunch (a host loop) gave another 16-byte alignment: seen
        # in this trace, and taken as misaligned in the next
        self.unaligned: set[str] = set()
        self.force_unaligned: set[str] = set()
        self.alias_groups: dict[int, int] = {}  # id of a host-allocated buffer -> its group
        self.glue_fns: list[Callable[[dict[str, Any]], tuple[Any, ...]]] = []  # eager, per run
        self.glue_loops: dict[int, GlueLoop] = {}  # glue run -> its program
        self.glue_problems: dict[int, str | None] = {}  # glue run -> why it stays eager
        self.host_tensors = False

    @property
    def device(self) -> torch.device:
        """Where host code's ``tc.arange`` / ``tc.zeros`` / ``tc.full`` tensors go while tracing
        (with the arguments, on meta); a run then gives them the arguments' device."""
        self.host_tensors = True
        return torch.device("meta")

    def block_size(self, lo: int, hi: int | None) -> int:
        slot = self.next_slot
        self.next_slot += 1
        from tilecraft.config.plan import next_pow2

        self.host_slots[slot] = hi if hi is not None else lo
        if hi is not None:
            if lo > hi:
                raise DeviceCodeError(
                    f"tc.register_block_size({lo}, {hi}): the least block is above the most"
                )
            self.host_floors[slot] = next_pow2(max(lo, 1))
        self.host_slot_order.append(slot)
        value = self.block_values.get(
            slot, min(PROVISIONAL_BLOCK, next_pow2(self.host_slots[slot]))
        )
        return BlockSize(value, slot)

    def tunable(self, name: str, choices: tuple[Any, ...]) -> Any:
        self.tunables[name] = choices
        return self.block_values.get(name, choices[0])

    def specialized(self, value: int) -> None:
        self.specializations.append(value)

    def launch(self, index: int, spec: Any, env: dict[str, Any]) -> None:
        if index in self.loops:
            self._check_relaunch(index, spec, env)  # the same loop reached again (a host loop)
            return
        # only what the loop names: a host loop's other locals (the tensor a view was made
        # from) may change freely
        named = self.src.loops[index].names
        self.first_env[index] = {
            k: _fingerprint(v, self.misaligned) for k, v in env.items() if k in named
        }
        if isinstance(spec, TileSpec):
            self.first_env[index].update(_bound_fingerprints(index, spec))
        source = self.src.loops[index]
        if not isinstance(spec, TileSpec):
            raise DeviceCodeError(
                "a device loop must iterate tc.tile(...) or tc.grid(...)", source.loc
            )
        loop = self._trace_loop(index, source.node, source.loc, spec, env, self.n_rdims)
        self.n_rdims += sum(1 for s in loop.syms if s.kind is SymKind.RDIM)
        self.loops[index] = loop

    def glue(self, index: int, env: dict[str, Any]) -> tuple[Any, ...] | None:
        """Run glue run ``index`` (``frontend/glue.py``) on these meta values, and trace it as
        one program where it may be (``self.glue_loops``); None: it raised (run as written,
        it raises again where the user wrote it)."""
        run = self.src.glue[index]
        counter = OpCounter()
        try:
            with counter:
                outputs = self.glue_fns[index](env)
        except Exception:
            return None
        scope = {**self.src.fn.__globals__, **self.src.closure_values()}
        problem = glue_problem(run, env, scope, outputs, counter)
        if problem is None and self.static_shapes:
            try:
                inputs = glue_inputs(run, env, scope)
                self.glue_loops[index] = self._trace_glue(run, inputs, outputs)
            except Exception as exc:  # any failure leaves the statements to run eagerly
                problem = f"{type(exc).__name__}: {exc}"
        self.glue_problems[index] = problem if self.static_shapes else "static_shapes=False"
        return tuple(outputs)

    def _trace_glue(
        self, run: GlueRun, inputs: dict[str, Any], outputs: tuple[Any, ...]
    ) -> GlueLoop:
        """The run as one program: floats are launch arguments, other host values (ints,
        bools, dtypes) baked in and compared at each call (``runtime/glue.py``)."""
        whole = {n: v.dim() for n, v in inputs.items() if isinstance(v, torch.Tensor) and v.dim()}
        node = device_loop(run, whole, [o.dim() for o in outputs])
        env = dict(inputs)
        for k, out in enumerate(outputs):
            env[output_name(k)] = torch.empty(out.shape, dtype=out.dtype, device="meta")
        slot = self.next_slot
        loop = self._trace_loop(run.index, node, run.loc, grid(1), env, 0, glue=True)
        self.next_slot = slot  # (one program: no block sizes)
        loop = narrow_int_accumulations(mask_loads_by_where(loop))
        loop.body = eliminate_dead_code(narrow_tuple_scans(eliminate_dead_code(loop.body)))
        assign_config_slots([loop])
        shapes = tuple((tuple(o.shape), o.dtype) for o in outputs)
        floats = tuple(n for n, v in inputs.items() if isinstance(v, float))
        baked = tuple((n, v) for n, v in inputs.items() if not isinstance(v, (float, torch.Tensor)))
        return GlueLoop(loop, shapes, run.outputs, tuple(inputs), floats, baked)

    def _trace_loop(
        self,
        index: int,
        node: ast.For,
        loc: SourceLoc,
        spec: TileSpec,
        env: dict[str, Any],
        first_rdim_slot: int,
        glue: bool = False,
    ) -> DeviceLoop:
        """Trace one device loop's body over ``spec``'s grid with ``env`` as captures; its
        reduction dims take config slots from ``first_rdim_slot`` on. ``glue``: a glue run's
        program (``index`` numbers the runs), launched once a call."""
        widened: dict[Any, torch.dtype] = {}
        while True:  # again while a carry started from a Python number widens (WidenCarry)
            try:
                tracer, captures, grid_syms = self._trace_body(
                    index, node, loc, spec, env, glue, widened
                )
                break
            except WidenCarry as widen:
                widened[widen.key] = widen.dtype
        self.next_slot = tracer.next_block_slot
        body = eliminate_dead_code(tracer.blocks[0])
        _check_devices(env, body, loc, self.device_type)
        check_partial_stores(tracer, grid_syms, body)
        syms = without_dead_rdims(tracer.syms, body)
        rdims = [s for s in syms if s.kind is SymKind.RDIM]
        for slot, sym in enumerate(rdims, start=first_rdim_slot):
            sym.config_slot = slot
        tensors = {name: v for name, v in captures.items() if isinstance(v, HostTensor)}
        scalars = {
            name: v.node
            for name, v in captures.items()
            if isinstance(v, TileValue) and v.node.op is Op.ARG
        }
        loop = DeviceLoop(index, grid_syms, body, tensors, scalars, loc, syms)
        loop.host_bounds = tuple(
            None if isinstance(s.begin, Node) or isinstance(s.extent, Node) else (b, e)
            for s, b, e in zip(grid_syms, spec.begins, spec.ends, strict=True)
        )
        read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        loop.host_scalars = tuple(
            (name, value)
            for name, value in env.items()
            if name in read and type(value) in (int, bool) and type(captures[name]) in (int, bool)
        )
        return loop

    def _trace_body(
        self,
        index: int,
        node: ast.For,
        loc: SourceLoc,
        spec: TileSpec,
        env: dict[str, Any],
        glue: bool,
        widened: dict[Any, torch.dtype],
    ) -> tuple[Tracer, dict[str, Any], list[Sym]]:
        """One trace of a device loop's body: (the tracer, its captures, the grid's syms)."""
        tracer = Tracer(self.next_slot, dynamic=not self.static_shapes)
        tracer.loc = loc
        tracer.carry_dtypes = widened
        captures = {name: self._capture(name, value, tracer) for name, value in env.items()}
        try:
            grid_syms = []
            bounds = zip(spec.begins, spec.ends, spec.block_sizes, strict=True)
            for i, (begin, end, block) in enumerate(bounds):
                if not isinstance(begin, int) or not isinstance(end, int):
                    raise _bounds_error(begin if not isinstance(begin, int) else end)
                varies = not glue and self._varies(index, i)
                lo, hi = (
                    loop_nest.grid_bound(tracer, int(begin), "begin", i, varies),
                    loop_nest.grid_bound(tracer, int(end), "end", i, varies),
                )
                grid_syms.append(
                    loop_nest.block_sym(tracer, hi, lo, block, scalar=spec.kind == "grid")
                )
            # the grid dims whose block only the config sets (not a literal block_size, not
            # one the host registered and combines per block: tc.register_block_size)
            tracer.grid_syms = [
                s for s, b in zip(grid_syms, spec.block_sizes, strict=True) if b is None
            ]
            scope = {**self.src.fn.__globals__, **self.src.closure_values()}
            scope.setdefault("print", traced_print)
            interp = Interpreter(tracer, captures, scope, self.src.filename, self.src.line_offset)
            refuse_tile_carries(node, env, interp.loc)
            refuse_triton_calls(node, scope, interp.loc)
            proxies = [TileProxy(s, tracer) for s in grid_syms]
            interp.assign(node.target, tuple(proxies) if spec.multi else proxies[0])
            interp.run(node.body)
        except TilecraftError as exc:
            raise exc.with_loc(tracer.loc) from None
        return tracer, captures, grid_syms

    def _varies(self, index: int, dim: int) -> bool:
        """Whether grid dim ``dim`` of loop ``index`` had other bounds on a later launch."""
        return _bound_name(index, dim) in self.force_dynamic

    def _check_relaunch(self, index: int, spec: Any, env: dict[str, Any]) -> None:
        """A loop launched again (from a host loop) must see the same shapes; host ints and
        bools that changed, and grid bounds that did (``tc.tile(m - off)``), are re-traced as
        runtime arguments instead of baked constants."""
        now_env = {k: _fingerprint(v, self.misaligned) for k, v in env.items()}
        if isinstance(spec, TileSpec):
            now_env.update(_bound_fingerprints(index, spec))
        for name, first in self.first_env[index].items():
            now: Any = now_env.get(name)
            if now == first:
                continue
            if isinstance(first, tuple) and first[:1] == ("tensor",):
                if isinstance(now, tuple) and now[:-1] == first[:-1]:
                    # only its alignment differs (a host loop's views at 100-byte steps of
                    # one buffer): no tensor descriptor may assume it
                    self.unaligned.add(name)
                    continue
                raise _relaunch_error(name, first, now, self.src.loops[index].loc)
            if isinstance(first, int) or name.startswith("<bounds"):  # (bools too: a flag)
                self.varying.add(name)

    def _alias_group(self, value: torch.Tensor) -> int:
        """0 for an argument or a view of one (arguments may alias each other), else a number
        per buffer the host code allocated, numbered in capture order (views share it)."""
        base = memory_owner(value)
        if id(base) in self.arguments:
            return 0
        return self.alias_groups.setdefault(id(base), len(self.alias_groups) + 1)

    def _capture(self, name: str, value: Any, tracer: Tracer) -> Any:
        if isinstance(value, torch.Tensor):
            _check_dtype(name, value, tracer)
            shape, stride = tuple(value.shape), tuple(value.stride())
            dynamic = not self.static_shapes
            argument = id(value) in self.arguments
            foreign = not argument and value.device.type != "meta"  # (the caller's own)
            if foreign:
                write_guard.note_foreign(value)  # tuning runs undo their writes into it
            group = self._alias_group(value)
            offset = value.storage_offset() * value.element_size()
            on_boundary = (
                id(memory_owner(value)) not in self.misaligned
                and offset % 16 == 0
                and name not in self.force_unaligned
            )
            return HostTensor(
                name,
                value.dtype,
                shape,
                stride,
                self.device_type,
                tracer,
                dynamic,
                argument,
                group,
                on_boundary,
                foreign,
            )
        if isinstance(value, bool) and name in self.force_dynamic:
            return DynamicFlag(int(value), name)  # a flag that changes between launches
        if isinstance(value, (BlockSize, Specialized, bool)):
            return value
        if isinstance(value, int):
            static = self.static_shapes and name not in self.force_dynamic
            static = static or name in self.force_static
            return value if static else DynamicInt(value, name)
        if isinstance(value, float):
            node = Node(
                Op.ARG, [], (), torch.float32, {"name": name, "weak": True}, None, hint=name
            )
            return TileValue(node, tracer)
        return value


def _bound_name(index: int, dim: int) -> str:
    """The name a grid dim's bounds vary under (not an identifier host code can bind)."""
    return f"<bounds of loop {index} dim {dim}>"


def _bound_fingerprints(index: int, spec: TileSpec) -> dict[str, Any]:
    return {
        _bound_name(index, i): (begin, end)
        for i, (begin, end) in enumerate(zip(spec.begins, spec.ends, strict=True))
    }


_RELAUNCH_FIXES = {  # in _fingerprint's order of a tensor's parts
    "shape": "launch it on tensors of one shape (slice or pad to one size; or call the kernel "
    "once per tensor from a host loop outside it: each shape is a specialization of its own)",
    "strides": "give it one layout on every launch (e.g. .contiguous() where it is made)",
    "dtype": "cast it to one dtype",
}


def _relaunch_error(name: str, first: Any, now: Any, loc: Any) -> DeviceCodeError:
    """A device loop a host loop launches again sees ``name`` differ from its first launch:
    the error names what differs (shape, strides, dtype; a loop is traced and compiled once)."""
    if not (isinstance(now, tuple) and now[:1] == ("tensor",)):
        return DeviceCodeError(
            f"device loop launched again with '{name}' no longer a tensor ({type(now).__name__})",
            loc,
            hint="pass a tensor of one shape, layout and dtype on every launch",
        )
    changed = [(p, a, b) for p, a, b in zip(_RELAUNCH_FIXES, first[1:], now[1:]) if a != b]
    seen = "; ".join(f"{p} {a} then {b}" for p, a, b in changed)
    return DeviceCodeError(
        f"device loop launched again with '{name}' changed: {seen}",
        loc,
        hint="a device loop is compiled once for the tensors of its first launch; "
        + "; ".join(_RELAUNCH_FIXES[p] for p, _, _ in changed)
        + ", or move the host loop's repeated work into the device loop",
    )


def _fingerprint(value: Any, misaligned: set[int]) -> Any:
    """What a relaunch must repeat of a value: a tensor's shape, strides, dtype and 16-byte
    alignment (of its real data: ``misaligned`` holds the meta copies of misaligned arguments,
    list items too), an int's value."""
    if isinstance(value, torch.Tensor):
        offset = value.storage_offset() * value.element_size()
        on_boundary = offset % 16 == 0 and id(memory_owner(value)) not in misaligned
        return ("tensor", tuple(value.shape), tuple(value.stride()), value.dtype, on_boundary)
    if isinstance(value, int):
        return value
    return None


def trace_kernel(
    src: KernelSource,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    device_type: str,
    static_shapes: bool,
    block_values: dict[Any, Any] | None = None,
    wave: int = 0,
    hoist: bool = True,
) -> TracedKernel:
    """Trace the host code on meta tensors; each device loop it reaches becomes a DeviceLoop.
    ``wave``: programs one wave of the target runs; a device loop whose grid is smaller gets its
    independent inner loop promoted into the grid (``ir/promote.py``). ``hoist``: compute dot
    operands that programs would recompute in a pre-pass loop (``ir/hoist.py``)."""
    current: list[_TraceHost] = []
    hooks = {
        LAUNCH: lambda *a: current[-1].launch(*a),
        GLUE: lambda *a: current[-1].glue(*a),
        GLUE_DONE: lambda *a: None,
    }
    fn = build_function(src, launch_tree(src), hooks)
    glue_fns = eager_glue_functions(src)
    force_dynamic: set[str] = set()
    force_static: frozenset[str] = frozenset()
    force_unaligned: set[str] = set()
    while True:
        # fresh copies each trace: host code may update a state dict it is given
        meta_args, meta_kwargs, pairs = meta_arguments(args, kwargs)
        arguments = {id(m) for m, _ in pairs}
        misaligned = {id(m) for m, v in pairs if not aligned(v)}
        host = _TraceHost(src, device_type, static_shapes, block_values or {})
        host.arguments = arguments
        host.misaligned = misaligned
        host.glue_fns = glue_fns
        current.append(host)
        host.force_dynamic, host.force_static = force_dynamic, force_static
        host.force_unaligned = force_unaligned
        mode = MetaHostTensors(device_type)
        attributes = ObjectAttributes((*args, *kwargs.values()))
        try:
            with _context.host_context(host), mode:
                fn(*meta_args, **meta_kwargs)
        except SpecializeHostInts as need:
            if need.names <= force_static:  # baked in, and still not an int: not a host int's
                raise DeviceCodeError(
                    "tc.static_range needs int bounds known when the kernel compiles",
                    hint=RUN_TIME_COUNT_HINT,
                ) from None
            force_static = force_static | need.names  # re-trace with those ints baked in
            continue
        finally:
            attribute_writes = attributes.restore()
        if host.varying <= force_dynamic and host.unaligned <= force_unaligned:
            break
        force_dynamic = force_dynamic | host.varying  # re-trace with those ints as arguments
        force_unaligned = force_unaligned | host.unaligned  # ... those tensors misaligned
    loops = [fuse_sibling_loops(host.loops[i]) for i in sorted(host.loops)]
    loops = promote_small_grids(loops, wave)
    if hoist:
        loops = hoist_operands(loops)
        for loop in loops:
            loop.body = eliminate_dead_code(loop.body)
    loops = [narrow_int_accumulations(mask_loads_by_where(loop)) for loop in loops]
    for loop in loops:  # the widening casts narrowing bypassed, the members scans drop
        loop.body = eliminate_dead_code(narrow_tuple_scans(eliminate_dead_code(loop.body)))
    assign_config_slots(loops)
    values = tuple(host.block_values.get(s, 0) for s in host.host_slot_order)
    return TracedKernel(
        loops,
        host.host_slots,
        host.host_slot_order,
        host.next_slot,
        host.tunables,
        values,
        host.specializations,
        host.glue_loops,
        host.glue_problems,
        host.host_tensors,
        host_floors=host.host_floors,
        host_writes=tuple(dict.fromkeys([*mode.host_writes, *attribute_writes])),
    )


def traced_print(*args: Any, **kwargs: Any) -> None:
    """``print`` in device code: of host values it prints while tracing; of a tile it would
    print a tracer's placeholder once (not the values, which exist only when the kernel runs)."""
    if any(isinstance(a, (TileValue, TileProxy)) for a in args):
        raise DeviceCodeError(
            "print() of a tile in device code: device code is traced once, before any value exists",
            hint="tc.device_print('x =', v) prints from the kernel as it runs; or run "
            "kernel.run_ref(...), where print shows the eager tiles",
        )
    print(*args, **kwargs)


def _check_devices(env: dict[str, Any], body: list[Node], loc: SourceLoc, device_type: str) -> None:
    """Every tensor device code reads or writes lives where the arguments do. While tracing,
    tensors made from the arguments are meta; one on a real device was made without their
    device (``torch.arange(k)`` in host code): on a GPU the kernel cannot read it."""
    used = {n.attrs["tensor"].name for n in walk(body) if n.op in (Op.LOAD, Op.STORE, Op.ATOMIC)}
    for name in sorted(used):
        value = env.get(name)
        if not isinstance(value, torch.Tensor) or value.device.type in ("meta", device_type):
            continue
        raise ArgumentError(
            f"'{name}' is on {value.device}, but the kernel's tensors are on {device_type}: "
            "host code made it without their device",
            loc,
            hint=f"create it with device=x.device (x a tensor argument), or use tc.arange / "
            f"tc.zeros / tc.full, which follow the kernel's device; or move it: "
            f"{name}.to(x.device)",
        )


def _check_dtype(name: str, value: torch.Tensor, tracer: Tracer) -> None:
    """A tensor device code cannot hold (one the host code made: arguments are checked on the
    call) is one error at the loop that reads it, not a failed compile per candidate config."""
    if value.dtype not in TRITON_DTYPES:
        supported = supported_names()
        raise UnsupportedOpError(
            f"'{name}' is a {value.dtype} tensor, which device code does not support",
            tracer.loc,
            hint=f"make it in one of: {supported} (and convert on the host after the kernel)",
        )


def _bounds_error(bound: Any) -> DeviceCodeError:
    """A top-level loop bound that is not a host int."""
    return DeviceCodeError(
        f"the bounds of a top-level device loop must be host ints, got a {type(bound).__name__}",
        hint="pass sizes as ints (x.size(0), an int argument), not tensors",
    )

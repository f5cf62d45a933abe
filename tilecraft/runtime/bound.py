"""A kernel specialized for one set of argument kinds and shapes (stage: runtime; in: a
:class:`~tilecraft.runtime.kernel.Kernel` and bound arguments; out: traced IR, generated code
and compiled programs per config, and the program a plain call runs)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from tilecraft import settings, write_guard
from tilecraft.codegen.kernel import HEADER, GeneratedKernel, generate
from tilecraft.config.config import Config
from tilecraft.config.plan import Plan
from tilecraft.config.spec import ConfigSpec
from tilecraft.errors import ArgumentError, ConfigError, TilecraftError
from tilecraft.frontend.glue import GLUE, GLUE_DONE
from tilecraft.frontend.source import (
    LAUNCH,
    build_function,
    launch_tree,
)
from tilecraft.frontend.trace import TracedKernel, trace_kernel
from tilecraft.ir.nodes import Op
from tilecraft.language import _context
from tilecraft.runtime import direct_launch, hooks
from tilecraft.runtime.device import capturing
from tilecraft.runtime.export import standalone_source
from tilecraft.runtime.glue import GlueRunner
from tilecraft.runtime.host_paths import (
    HostLayouts,
    host_path_changed,
    same_bounds,
    same_scalars,
)
from tilecraft.runtime.launch_overlaps import (
    check_foreign_grads,
    check_overlaps,
    foreign_tensors,
    foreign_writes,
    overlap_pairs,
)
from tilecraft.runtime.module import load_source
from tilecraft.runtime.program import CompiledProgram
from tilecraft.runtime.program import RunHost as _RunHost
from tilecraft.runtime.signature import signature_of
from tilecraft.runtime.validate import (
    check_has_data,
    check_tensor_args,
    host_code_error,
    raised_by_user,
    tensor_device,
)
from tilecraft.targets.target import Target, check_runnable, detect

if TYPE_CHECKING:
    from tilecraft.runtime.kernel import Kernel


class BoundKernel:
    """A kernel specialized to one argument signature: traced IR, config space, compiled code."""

    def __init__(self, kernel: Kernel, bound: inspect.BoundArguments, target: Target | None = None):
        """``target``: generate for this target instead of the arguments' device (code and
        config space only; running needs the target of the arguments)."""
        self.kernel = kernel
        self.arg_signatures = [
            signature_of(n, v, kernel.static_shapes) for n, v in bound.arguments.items()
        ]
        self.device_type = check_tensor_args(kernel.__name__, bound.arguments, kernel.def_loc)
        self.target: Target = target or detect(self.device_type)
        self._example = (tuple(bound.args), dict(bound.kwargs))
        self.traced = self._trace({})
        traced = self.traced
        self.spec = ConfigSpec(
            traced.loops,
            traced.n_block_slots,
            traced.host_slots,
            traced.tunables,
            self.target,
            kernel.dot_precision,
            traced.host_floors,
        )
        self._traces: dict[tuple[Any, ...], TracedKernel] = {}
        self._programs: dict[str, CompiledProgram] = {}
        self._glue: dict[int, GlueRunner] = {}  # id of a trace -> its glue programs
        self._default: CompiledProgram | None = None

    def example_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The (args, kwargs) this specialization was bound to (an export checks its values)."""
        return self._example

    def _trace(self, block_values: dict[Any, Any]) -> TracedKernel:
        args, kwargs = self._example
        src = self.kernel.source
        try:
            return trace_kernel(
                src, args, kwargs, self.device_type, self.kernel.static_shapes, block_values,
                wave=self.target.limits.num_sms, hoist=self.kernel.hoist_operands,
            )  # fmt: skip
        except TilecraftError:
            raise
        except Exception as exc:  # the user's host code raised on these arguments
            if raised_by_user(exc, src.filename):
                raise
            arguments = self.kernel.bind_arguments(args, kwargs).arguments
            raise host_code_error(
                self.kernel.__name__, exc, src.filename, arguments, self.kernel.def_loc
            ) from exc

    def _trace_for(self, config: Config) -> TracedKernel:
        """Host code may size buffers from registered block sizes, and device code may branch on
        tunables: trace with the config's values of both (cached per distinct values)."""
        host_values: dict[Any, Any] = {
            s: config.block_sizes[s] for s in self.traced.host_slot_order
        }
        user = config.user_values
        host_values.update({n: user.get(n, c[0]) for n, c in self.traced.tunables.items()})
        if not host_values:
            return self.traced
        key = tuple(sorted(host_values.items(), key=repr))
        if key not in self._traces:
            self._traces[key] = self._trace(host_values)
        return self._traces[key]

    # -- inspection -----------------------------------------------------------------------
    def ir(self) -> str:
        return self.traced.ir()

    @property
    def config_spec(self) -> ConfigSpec:
        return self.spec

    def to_triton_code(self, config: Config | None = None, standalone: bool = False) -> str:
        """The generated Triton source; ``standalone=True``: a module that also holds the host
        code and runs without tilecraft installed (see ``runtime/export.py``)."""
        config = config or self.spec.default()
        return standalone_source(self, config) if standalone else self.generate(config)[1]

    # -- compile --------------------------------------------------------------------------
    def generate(self, config: Config) -> tuple[Plan, str, TracedKernel, list[GeneratedKernel]]:
        """Resolve ``config`` into a plan and generate the Triton source it describes."""
        plan = self.spec.resolve(config)
        traced = self._trace_for(plan.config)
        if traced is not self.traced and _structure(traced) != _structure(self.traced):
            raise self._structure_error(plan.config, traced)
        kernels = [
            generate(
                loop, plan, self.kernel.__name__,
                tuple(p for p in traced.loops if p.prepass_for == loop.index),
            )
            for loop in traced.loops
        ]  # fmt: skip
        source = HEADER + "".join(
            "\n\n" + k.device_source + "\n\n" + k.launcher_source for k in kernels
        )
        return plan, source, traced, kernels

    def _structure_error(self, config: Config, traced: TracedKernel) -> ConfigError:
        """A tunable value whose trace has other tile loops or accesses than the default's
        (the config space, and so ``config``'s per-loop fields, are the default's): an
        IndexError in plan.py named nothing."""
        chosen = {
            name: config.user_values.get(name, choices[0])
            for name, choices in self.traced.tunables.items()
            if config.user_values.get(name, choices[0]) != choices[0]
        }
        slots = (self.traced.n_block_slots, traced.n_block_slots)
        return ConfigError(
            f"{self.kernel.__name__}: tunable value(s) {chosen} change the kernel's tile loops "
            f"or memory accesses ({slots[1]} block sizes where the first choices give "
            f"{slots[0]}); the config space is the first choices' loops",
            self.kernel.def_loc,
            hint="a tunable may pick block-independent values (constants, a branch's math), "
            "not add tc.tile loops or loads: make the choice a kernel argument "
            "(tc.specialize) or write one kernel per structure",
        )

    def compile_config(self, config: Config | None = None) -> CompiledProgram:
        """The whole compile: resolve -> trace -> generate -> load. Cached per config."""
        config = config or self.spec.default()
        cached = self._programs.get(config.key())
        if cached is not None:
            return cached
        check_runnable(self.target)
        plan, source, traced, kernels = self.generate(config)
        if settings.debug():
            print(source)
        module = load_source(source)
        names = [c.kernel_name for k in kernels for c in (k, *k.companions)]
        direct_launch.wrap_for_target(module, names, self.target.backend)
        launchers = [getattr(module, k.launcher_name) for k in kernels]
        by_index = {
            loop.index: launcher for loop, launcher in zip(traced.loops, launchers, strict=True)
        }

        bounds = {loop.index: loop.host_bounds for loop in traced.loops}
        scalars = {loop.index: loop.host_scalars for loop in traced.loops}
        layouts = {loop.index: HostLayouts(loop.tensors) for loop in traced.loops}
        overlaps = {loop.index: overlap_pairs(loop) for loop in traced.loops}
        foreign = {loop.index: foreign_writes(loop) for loop in traced.loops}
        elsewhere = {loop.index: foreign_tensors(loop) for loop in traced.loops}
        loop_locs = {loop.index: loop.loc for loop in traced.loops}

        launched = [0]  # device loops this call has launched (the fast path has no context)

        def launch(index: int, spec: Any, env: dict[str, Any]) -> None:
            launcher = by_index.get(index)
            if (
                launcher is None
                or not same_bounds(bounds[index], spec)
                or not same_scalars(scalars[index], env)
                or not layouts[index].hold(env)
            ):
                host_path_changed(self.kernel, index, launched[0])
            if overlaps[index]:
                check_overlaps(self.kernel.__name__, overlaps[index], env, loop_locs[index])
            if elsewhere[index]:  # (the writes are among them: one test on the hot path)
                check_foreign_grads(self.kernel.__name__, elsewhere[index], env, loop_locs[index])
                if (guard := write_guard.active()) is not None:
                    for name in foreign[index]:
                        guard.before_write(env[name])
            launcher(env, spec)
            launched[0] += 1

        glue = self._glue_runner(traced)
        hooks = {LAUNCH: launch, GLUE: glue.glue, GLUE_DONE: glue.done}
        # the runs the trace left eager run as written, without the hooks' cost per call
        tree = launch_tree(self.kernel.source, glue=traced.glue.keys())
        host_code = build_function(self.kernel.source, tree, hooks)

        def host_fn(*args: Any, **kwargs: Any) -> Any:
            launched[0] = 0
            return host_code(*args, **kwargs)

        program = CompiledProgram(plan, traced, kernels, host_fn, module)
        self._programs[config.key()] = program
        return program

    def _glue_runner(self, traced: TracedKernel) -> GlueRunner:
        """The glue programs of ``traced`` (``runtime/glue.py``), shared by its configs."""
        runner = self._glue.get(id(traced))
        if runner is None:
            kernel = self.kernel
            runner = GlueRunner(
                traced, self.target, kernel.__name__, kernel.dot_precision, kernel.source.free_value
            )
            self._glue[id(traced)] = runner
        return runner

    def default_program(
        self, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> CompiledProgram:
        """The program a plain call runs: the kernel's ``config=``, else a config the autotuner
        discovers (and, with ``autotune_effort`` quick/full, tunes) on these arguments — cached on
        disk — else, with no arguments to try, the heuristic default."""
        if self._default is None:
            if capturing(self.device_type):
                raise ArgumentError(
                    f"{self.kernel.__name__}(): first call for these arguments inside CUDA graph "
                    "capture; choosing a config (cache lookup, discovery or tuning) and compiling "
                    "cannot happen during a capture",
                    self.kernel.def_loc,
                    hint="warm up first: call the kernel once with the same arguments (shapes, "
                    "dtypes) before torch.cuda.graph(...)",
                )
            config = self.kernel.config
            if args or kwargs:  # input causes: one clear line before any candidate runs
                check_has_data(
                    self.kernel.__name__,
                    self.kernel.bind_arguments(args, kwargs or {}).arguments,
                    self.kernel.def_loc,
                )
            if config is None and (args or kwargs):
                check_runnable(self.target)
                config = hooks.select_config(self, args, kwargs or {})
            self._default = self.compile_config(config or self.spec.default())
        return self._default

    def use_config(self, config: Config) -> None:
        """Run ``config`` from now on (``Kernel.autotune``'s result)."""
        self._default = self.compile_config(config)
        self.kernel._fast.clear()  # prebuilt launchers hold the previous program

    # -- run ------------------------------------------------------------------------------
    def check_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        bound = self.kernel.bind_arguments(args, kwargs)
        for expected, (name, value) in zip(
            self.arg_signatures, bound.arguments.items(), strict=True
        ):
            got = signature_of(name, value, self.kernel.static_shapes)
            if got != expected:
                raise ArgumentError(
                    f"{self.kernel.__name__}(): argument '{name}' is {got.describe()}, but this "
                    f"specialization was compiled for {expected.describe()}",
                    self.kernel.def_loc,
                    hint="call the kernel itself (not a BoundKernel) to specialize for new arguments",
                )

    def run(self, program: CompiledProgram, *args: Any, **kwargs: Any) -> Any:
        host = _RunHost(program.config, program.traced, tensor_device((*args, *kwargs.values())))
        with _context.host_context(host):
            return program.host_fn(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.check_args(args, kwargs)
        return self.run(self.default_program(args, kwargs), *args, **kwargs)


_MEMORY_OPS = (Op.LOAD, Op.STORE, Op.ATOMIC)


def _structure(traced: TracedKernel) -> tuple[Any, ...]:
    """What a config's per-slot and per-access fields are numbered by."""
    accesses = tuple(sum(1 for n in loop.walk() if n.op in _MEMORY_OPS) for loop in traced.loops)
    return traced.n_block_slots, len(traced.loops), accesses

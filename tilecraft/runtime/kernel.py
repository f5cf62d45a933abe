"""``@tc.kernel``: specialization, compilation and launch (stage: runtime; the compile driver).

:func:`BoundKernel.compile_config` is the whole compile, one stage after another:
trace (frontend) -> ConfigSpec.resolve -> Plan (config; launch options filtered by the target)
-> generate (codegen) -> load (runtime).
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from collections.abc import Callable
from typing import Any

import torch

from tilecraft import settings
from tilecraft.codegen.kernel import HEADER, GeneratedKernel, generate
from tilecraft.config.compat_names import check_kernel_options
from tilecraft.config.config import Config
from tilecraft.config.fp32_dots import DOT_PRECISIONS
from tilecraft.config.kernel_options import check_option_values
from tilecraft.config.plan import Plan
from tilecraft.config.spec import ConfigSpec
from tilecraft.errors import ArgumentError, ConfigError, TilecraftError
from tilecraft.frontend.glue import GLUE, GLUE_DONE
from tilecraft.frontend.source import (
    LAUNCH,
    KernelSource,
    build_function,
    launch_tree,
    parse_kernel,
)
from tilecraft.frontend.trace import TracedKernel, trace_kernel
from tilecraft.language import _context
from tilecraft.runtime import direct_launch, fastpath, hooks, torch_op
from tilecraft.runtime.device import capturing
from tilecraft.runtime.export import standalone_source
from tilecraft.runtime.global_guard import GlobalGuard, describe
from tilecraft.runtime.glue import GlueRunner
from tilecraft.runtime.host_paths import Respecialize as _Respecialize
from tilecraft.runtime.host_paths import host_path_changed, same_bounds, same_scalars
from tilecraft.runtime.module import load_source
from tilecraft.runtime.program import CompiledProgram
from tilecraft.runtime.program import RunHost as _RunHost
from tilecraft.runtime.ref import build_ref
from tilecraft.runtime.signature import signature_of, value_key
from tilecraft.runtime.validate import (
    check_has_data,
    check_layouts,
    check_no_partial_overlap,
    check_tensor_args,
    check_unshared_outputs,
    host_code_error,
    tensor_device,
)
from tilecraft.targets.target import Target, check_runnable, detect


def _user_facing(err: TilecraftError) -> TilecraftError:
    """``err`` without tilecraft's frames (tracer, compiler, runtime): the traceback a user
    reads ends at their call, and the message carries their kernel's file:line and a caret.
    ``TILECRAFT_FULL_TRACEBACK=1`` keeps every frame (for reports against tilecraft)."""
    if settings.full_tracebacks():
        return err
    return err.with_traceback(None)


class Kernel:
    """A tilecraft kernel: call it like the function it decorates."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        config: Config | None = None,
        configs: list[Config] | None = None,
        static_shapes: bool = True,
        baseline: Callable[..., Any] | None = None,
        autotune_effort: str = "none",
        autotune_budget_s: float | None = None,
        autotune_tolerances: dict[Any, tuple[float, float]] | None = None,
        dot_precision: str | None = None,
        config_table: str | os.PathLike[str] | None = None,
        hoist_operands: bool = True,
        **options: Any,
    ):
        """``config``: use this config (no autotuning). ``configs``: benchmark these per
        specialization and keep the fastest that works. ``autotune_effort``: ``none`` (discover a
        working config), ``quick`` or ``full`` (also search, within ``autotune_budget_s``).
        ``autotune_tolerances``: per-dtype (rtol, atol) for the accuracy check against ``baseline``
        (default: the kernel run eagerly in ref mode). ``dot_precision``: ``tl.dot``'s input
        precision for fp32 operands ("ieee", "tf32" or "tf32x3"; default: follow
        ``torch.get_float32_matmul_precision()`` when the kernel is compiled). ``config_table``: a
        JSON table written by ``tilecraft tune`` (default: ``<module>.tilecraft.json`` beside the
        kernel's module, if present); its entries are used before any tuning.
        ``hoist_operands``: a matmul operand computed in its k loop (a dequantized weight) that
        every program along the other dim would recompute is computed once, by a pre-pass
        launch, into a scratch buffer (``ir/hoist.py``); False keeps it in the loop."""
        if dot_precision is not None and dot_precision not in DOT_PRECISIONS:
            raise ConfigError(
                f"dot_precision={dot_precision!r}: expected one of {DOT_PRECISIONS}",
                hint="or leave it out to follow torch.set_float32_matmul_precision()",
            )
        self.dot_precision = dot_precision
        if autotune_effort not in ("none", "quick", "full"):
            raise ConfigError(
                f"autotune_effort={autotune_effort!r}: expected 'none', 'quick' or 'full'"
            )
        self.source: KernelSource = parse_kernel(fn)
        self.def_loc = self.source.loc(self.source.tree)
        options = check_kernel_options(
            options, EXTRA_KERNEL_OPTIONS | _named_options(), self.def_loc
        )
        check_option_values(config, configs, autotune_budget_s, autotune_tolerances, self.def_loc)
        if autotune_budget_s is not None:
            options["autotune_budget_s"] = autotune_budget_s
        if autotune_tolerances is not None:
            options["autotune_tolerances"] = autotune_tolerances
        self.fn = fn
        self.config = config
        self.configs = list(configs or [])
        self.config_table = config_table
        self.static_shapes = static_shapes
        self.hoist_operands = hoist_operands
        self.baseline = baseline
        self.autotune_effort = autotune_effort
        self.options = options
        self.signature = inspect.signature(fn)
        self._bound: dict[Any, list[BoundKernel]] = {}
        self._ref: Callable[..., Any] | None = None
        params = list(self.signature.parameters.values())
        simple = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
        # fast path of __call__: positional calls need no inspect.bind (defaults appended)
        self._n_params = len(params) if simple else -1
        self._defaults = tuple(p.default for p in params)
        self._param_names = tuple(p.name for p in params)
        self._ops = torch_op.KernelOps(self)
        self._runner: torch_op.HostRunner | None = None
        self._fast: dict[Any, fastpath.Launcher] = {}  # guard key -> prebuilt launcher
        # constants device code names (baked in when traced)
        self._globals = GlobalGuard(fn, self.source.loops)
        stored = self._plain_stores()  # parameters device loops write: checked per call
        self._written_params = tuple(i for i, n in enumerate(self._param_names) if n in stored)
        self.__name__: str = fn.__name__
        self.__qualname__: str = fn.__qualname__
        # also doc, module, annotations and __wrapped__: a function-like object (custom_op takes it)
        functools.update_wrapper(self, fn)

    @property
    def __globals__(self) -> dict[str, Any]:
        return self.fn.__globals__

    @property
    def __code__(self) -> Any:
        return self.fn.__code__

    @property
    def __defaults__(self) -> tuple[Any, ...] | None:
        return self.fn.__defaults__

    @property
    def __kwdefaults__(self) -> dict[str, Any] | None:
        return self.fn.__kwdefaults__

    def register_backward(
        self,
        backward: Callable[..., Any],
        setup_context: Callable[..., Any] | None = None,
    ) -> Kernel:
        """Pair this kernel with a backward, as ``torch.library.register_autograd`` does:
        ``setup_context(ctx, inputs, output)`` saves what ``backward(ctx, *grads)`` needs (default:
        every tensor input, then every tensor output, in ``ctx.saved_tensors``); ``grads`` has one
        entry per returned value; ``backward`` returns one gradient (or None) per parameter."""
        self._ops.register_backward(backward, setup_context)
        return self

    def host_runner(self) -> torch_op.HostRunner:
        """The host code with device loops skipped (for fake tensors and the op's layout)."""
        if self._runner is None:
            self._runner = torch_op.HostRunner(self)
        return self._runner

    def positional(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Every parameter's value in order (simple Python that ``torch.compile`` can trace)."""
        values = self._positional_values(args, kwargs)
        if values is not None:
            return values
        if self._n_params < 0:
            return tuple(self.bind_arguments(args, kwargs).arguments.values())
        out = list(args)
        for name, default in zip(
            self._param_names[len(args) :], self._defaults[len(args) :], strict=True
        ):
            value = kwargs.get(name, default)
            if value is inspect.Parameter.empty:
                self.bind_arguments(args, kwargs)  # raises the usual message
            out.append(value)
        return tuple(out)

    def bind_arguments(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> inspect.BoundArguments:
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(f"{self.__name__}(): {exc}", self.def_loc) from None
        bound.apply_defaults()
        return bound

    def specialization_key(self, bound: inspect.BoundArguments) -> tuple[Any, ...]:
        return self._key_of(tuple(bound.arguments.values()))

    def _key_of(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """What selects a compiled specialization (cheap: it runs on every call)."""
        key = [value_key(v, self.static_shapes) for v in values]
        key.append(settings.target_override())
        return tuple(key)

    def _plain_stores(self) -> set[str]:
        """The host names any device loop stores into (atomics aside)."""
        return set().union(*torch_op.stored_names(self.source, atomics=False).values())

    def _positional_values(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Any, ...] | None:
        n = len(args)
        if kwargs or n > self._n_params:
            return None
        if n == self._n_params:
            return args
        rest = self._defaults[n:]
        return None if any(d is inspect.Parameter.empty for d in rest) else args + rest

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> BoundKernel:
        """The kernel specialized for arguments like ``args`` (traced on first use)."""
        self._drop_if_globals_changed()
        return self._candidates(tuple(args), kwargs or {})[0]

    def _candidates(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[BoundKernel]:
        values = self._positional_values(args, kwargs)
        bound = None
        if values is None:
            bound = self.bind_arguments(args, kwargs)
            values = tuple(bound.arguments.values())
        try:
            key = self._key_of(values)
        except RuntimeError:  # a sparse or nested tensor has no strides: say which argument
            check_layouts(self.__name__, self.bind_arguments(args, kwargs).arguments, self.def_loc)
            raise
        found = self._bound.get(key)
        if found is None:
            bound = bound or self.bind_arguments(args, kwargs)
            check_layouts(self.__name__, bound.arguments, self.def_loc)
            check_unshared_outputs(self.__name__, bound.arguments, self._plain_stores, self.def_loc)
            found = self._bound[key] = [BoundKernel(self, bound)]
        return found

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._dispatch(args, kwargs)
        except TilecraftError as err:
            raise _user_facing(err) from err.__cause__

    def _dispatch(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call from user code: the fast path, torch.compile / autograd, or a plain call."""
        compiling = torch.compiler.is_compiling()
        if not compiling and self._globals.active:
            self._drop_if_globals_changed()
        if self._written_params and not compiling:
            check_no_partial_overlap(
                self.__name__,
                self._param_names,
                self.positional(args, kwargs),
                self._written_params,
                self.def_loc,
            )
        if not compiling and not kwargs and self._fast and not settings.ref_mode():
            # (no key for tensor subclasses: fake/functional tensors of a tracer go on below)
            launcher = self._fast.get(fastpath.guard_key(args))
            if launcher is not None:
                try:
                    return launcher(args)
                except _Respecialize:
                    pass  # another variant: the ordinary path finds (or traces) it
                except (RuntimeError, NotImplementedError):
                    if not torch_op.storage_less(args):
                        raise
                    return self._ops.call(self.positional(args, {}))  # torch.vmap: the op
        if compiling or torch_op.traced(args, kwargs):
            values = self.positional(args, kwargs)
            if torch_op.needs_grad(values):
                torch_op.check_autograd(self._ops, values, compiling)
            return torch_op.compiled_call(self._ops, values)
        if torch_op.needs_grad(args) or (kwargs and torch_op.needs_grad(tuple(kwargs.values()))):
            values = self.positional(args, kwargs)
            torch_op.check_autograd(self._ops, values, False)
            return self._ops.call(values)
        if torch_op.storage_less((*args, *kwargs.values())):  # torch.vmap's: as the op
            return self._ops.call(self.positional(args, kwargs))
        return self.call_eager(args, kwargs)

    def call_eager(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A plain call: specialize (trace and compile on first use) and launch."""
        if settings.ref_mode():
            return self.run_ref(*args, **kwargs)
        self._drop_if_globals_changed()  # (also reached from torch.compile's op, not _dispatch)
        candidates = self._candidates(args, kwargs)
        for bound in candidates:
            try:
                # the key matched: the arguments fit this specialization, no need to re-check
                program = bound.default_program(args, kwargs)
                result = bound.run(program, *args, **kwargs)
            except _Respecialize:
                continue  # tc.specialize saw another value: try (or trace) another variant
            if not kwargs and self.static_shapes:
                self._remember(args, program)
            return result
        fresh = BoundKernel(self, self.bind_arguments(args, kwargs))
        candidates.append(fresh)
        return fresh(*args, **kwargs)

    def autotune(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None = None,
        *,
        effort: str = "quick",
        budget_s: float | None = None,
    ) -> Config:
        """Search for the fastest working config on ``args`` (``effort``: quick | full, within
        ``budget_s`` seconds) and return it; later calls with arguments like these run it.
        Save it with ``config.save(path)`` and ship it with ``@tc.kernel(config=Config.load(path))``
        (or tune many shapes at once into a config table: ``tilecraft tune PLAN``)."""
        if effort not in ("quick", "full"):
            raise ConfigError(
                f"{self.__name__}.autotune(effort={effort!r}): expected 'quick' or 'full'"
            )
        args, kwargs = tuple(args), dict(kwargs or {})
        bound = self.bind(args, kwargs)
        config = hooks.tune(bound, args, kwargs, effort, budget_s)
        bound.use_config(config)
        return config

    def run_ref(self, *args: Any, **kwargs: Any) -> Any:
        """Run the kernel eagerly with torch ops (no Triton): the reference semantics."""
        if self._ref is None:
            self._ref = build_ref(self.source)
        return self._ref(*args, **kwargs)

    def _drop_if_globals_changed(self) -> None:
        """Forget every specialization when a global or closure constant the kernel's code
        names changed since it was traced (``runtime/global_guard.py``): the next call traces
        with the new value instead of running the old one baked in."""
        changes = self._globals.changed()
        if not changes:
            return
        warnings.warn(
            f"kernel '{self.__name__}' ({self.def_loc.short}): {describe(changes)} since it "
            "was traced; tracing it again (pass a value that changes as an argument: a float "
            "argument does not retrace)",
            stacklevel=4,
        )
        self._bound.clear()
        self._fast.clear()
        self._runner = None

    def _remember(self, args: tuple[Any, ...], program: CompiledProgram) -> None:
        key = fastpath.guard_key(args)
        if key is not None and key not in self._fast:
            traced = program.traced
            needs_host = (
                traced.host_slot_order
                or traced.specializations
                or traced.tunables
                or traced.host_tensors
            )
            device = tensor_device(args)
            make_host = (
                functools.partial(_RunHost, program.config, traced, device) if needs_host else None
            )
            self._fast[key] = fastpath.Launcher(program.host_fn, make_host)

    def reset(self) -> None:
        self._bound.clear()
        self._fast.clear()


# options read from ``Kernel.options`` by later stages without a named parameter of their own
EXTRA_KERNEL_OPTIONS: frozenset[str] = frozenset()


def _named_options() -> set[str]:
    params = inspect.signature(Kernel.__init__).parameters.values()
    return {p.name for p in params if p.kind is p.KEYWORD_ONLY}


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
        )
        self._traces: dict[tuple[Any, ...], TracedKernel] = {}
        self._programs: dict[str, CompiledProgram] = {}
        self._glue: dict[int, GlueRunner] = {}  # id of a trace -> its glue programs
        self._default: CompiledProgram | None = None

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

        launched = [0]  # device loops this call has launched (the fast path has no context)

        def launch(index: int, spec: Any, env: dict[str, Any]) -> None:
            launcher = by_index.get(index)
            if (
                launcher is None
                or not same_bounds(bounds[index], spec)
                or not same_scalars(scalars[index], env)
            ):
                host_path_changed(self.kernel, index, launched[0])
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


def kernel(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Decorator: ``@tc.kernel`` or ``@tc.kernel(config=..., static_shapes=...)``."""
    if fn is None:
        return lambda f: Kernel(f, **options)
    return Kernel(fn, **options)


__all__ = ["BoundKernel", "Kernel", "TilecraftError", "kernel"]

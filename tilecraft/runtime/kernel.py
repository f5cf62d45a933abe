"""``@tc.kernel``: specialization, compilation and launch (stage: runtime; the compile driver).

:func:`BoundKernel.compile_config` is the whole compile, one stage after another:
trace (frontend) -> ConfigSpec.resolve -> Plan (config; launch options filtered by the target)
-> generate (codegen) -> load (runtime).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import pickle
import warnings
from collections.abc import Callable
from typing import Any

import torch

from tilecraft import settings
from tilecraft.config.compat_names import check_kernel_options
from tilecraft.config.config import Config
from tilecraft.config.fp32_dots import DOT_PRECISIONS
from tilecraft.config.kernel_options import (
    check_budget,
    check_choice,
    check_option_kinds,
    check_option_values,
)
from tilecraft.errors import (
    ArgumentError,
    ConfigError,
    DeviceCodeError,
    SourceLoc,
    TilecraftError,
    user_stacklevel,
)
from tilecraft.frontend.host_aliases import host_view_roots
from tilecraft.frontend.source import (
    KernelSource,
    parse_kernel,
)
from tilecraft.language import _context
from tilecraft.runtime import compiled_calls, fastpath, hooks, retraces, torch_op
from tilecraft.runtime.bound import BoundKernel
from tilecraft.runtime.global_guard import GlobalGuard, argument_chains, describe
from tilecraft.runtime.host_paths import Respecialize as _Respecialize
from tilecraft.runtime.program import CompiledProgram
from tilecraft.runtime.program import RunHost as _RunHost
from tilecraft.runtime.ref import build_ref
from tilecraft.runtime.signature import chain_key, value_key
from tilecraft.runtime.validate import (
    call_problem,
    check_a_plain_function,
    check_layouts,
    check_not_a_method,
    check_not_a_wrapper,
    check_unshared_outputs,
    check_written_arguments,
    mark_written,
    tensor_device,
    user_frames,
)


def _user_facing(err: TilecraftError) -> TilecraftError:
    """``err`` without tilecraft's frames (tracer, compiler, runtime): the traceback a user
    reads ends at their call, and the message carries their kernel's file:line and a caret.
    ``TILECRAFT_FULL_TRACEBACK=1`` keeps every frame (for reports against tilecraft)."""
    if settings.full_tracebacks():
        return err
    return err.with_traceback(None)


def _innermost_user_line(err: Exception, filename: str) -> SourceLoc | None:
    """The last line of the kernel's file that ``err``'s traceback passes (None: none)."""
    frames = user_frames(err, filename)
    return SourceLoc(filename, frames[-1].lineno or 1) if frames else None


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
        self.source: KernelSource = parse_kernel(fn)
        self.def_loc = self.source.loc(self.source.tree)
        check_choice("dot_precision", dot_precision, DOT_PRECISIONS, self.def_loc)
        self.dot_precision = dot_precision
        check_choice("autotune_effort", autotune_effort, ("none", "quick", "full"), self.def_loc)
        self._where = f"{self.def_loc}: " if self.def_loc else ""  # (errors under torch.compile)
        check_not_a_method(fn, self.def_loc)
        check_not_a_wrapper(fn, self.def_loc)
        check_a_plain_function(fn, self.def_loc)
        options = check_kernel_options(
            options, EXTRA_KERNEL_OPTIONS | _named_options(), self.def_loc
        )
        check_option_values(
            config, configs, autotune_budget_s, autotune_tolerances, self.def_loc, baseline
        )
        check_option_kinds(static_shapes, hoist_operands, config_table, self.def_loc)
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
        # and those it reads from an argument's attributes or items (``cfg.opt.lr``)
        self._arg_chains = argument_chains(
            self.source.tree, self._param_names, [loop.node for loop in self.source.loops]
        )
        # the host names device loops write, with the parameters they view (one AST walk)
        stored = self._stores = self._find_plain_stores()
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

    # a kernel copies and pickles as a function does, by reference: a module holding one
    # (``self.act = kernel``) deep-copies (an EMA model) and saves with torch.save
    def __copy__(self) -> Kernel:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Kernel:
        return self

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        if _kernel_named(self.__module__, self.__qualname__) is not self:
            raise pickle.PicklingError(
                f"cannot pickle kernel {self.__qualname__}: it is not importable as "
                f"{self.__module__}.{self.__qualname__} (pickle stores a kernel by name, as a "
                "function); define it at module level"
            )
        return _kernel_named, (self.__module__, self.__qualname__)

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
        problem = call_problem(self._param_names, self._defaults, args, kwargs)
        if problem:
            if torch.compiler.is_compiling():  # (Dynamo shows a plain exception's message)
                raise TypeError(f"{self._where}{self.__name__}(): {problem}")
            raise ArgumentError(f"{self.__name__}(): {problem}", self.def_loc)
        # (call_problem found every parameter without a default among args and kwargs)
        rest = zip(self._param_names[len(args) :], self._defaults[len(args) :], strict=True)
        return (*args, *(kwargs.get(name, default) for name, default in rest))

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
        for index, steps in self._arg_chains:  # (within the argument's entry: retraces name it)
            key[index] = (key[index], chain_key(values[index], steps))
        key.append(settings.target_override())
        return tuple(key)

    def _find_plain_stores(self) -> set[str]:
        """The host names any device loop stores into (atomics aside), with the parameter each
        one that is a host view of a parameter views (``flat = x.view(-1)``, ``for g in
        grads``: x and grads are written)."""
        stored = set().union(*torch_op.stored_names(self.source, atomics=False).values())
        loops = [loop.node for loop in self.source.loops]
        roots = host_view_roots(self.source.tree, self._param_names, loops)
        return stored | {roots[name] for name in stored if name in roots}

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
            check_unshared_outputs(self.__name__, bound.arguments, self._stores, self.def_loc)
            found = self._bound[key] = [BoundKernel(self, bound)]
            self._warn_if_retracing(tuple(bound.arguments.values()))
        return found

    def _warn_if_retracing(self, values: tuple[Any, ...]) -> None:
        text = retraces.retrace_warning(
            self.__name__, list(self._bound), self._param_names, values, self.static_shapes
        )
        if text is not None:
            warnings.warn(text, RuntimeWarning, stacklevel=user_stacklevel())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._dispatch(args, kwargs)
        except TilecraftError as err:
            if err.loc is None:  # raised by a tc.* call of the host code (tc.grid(step=2))
                err.with_loc(_innermost_user_line(err, self.source.filename))
            if err.loc is None and isinstance(err, ConfigError):  # the kernel's config=
                err.with_loc(self.def_loc)
            raise _user_facing(err) from err.__cause__

    def _dispatch(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call from user code: the fast path, torch.compile / autograd, or a plain call."""
        compiling = torch.compiler.is_compiling()
        if not compiling and torch.jit.is_tracing():
            # as its op, which the trace records (a launch, fast path or not, it would not:
            # the traced module ran without the kernel)
            return self._ops.call(self.positional(args, kwargs))
        if not compiling and self._globals.active:
            self._drop_if_globals_changed()
        written: tuple[Any, ...] = ()  # the values of a kernel that writes an argument
        if self._written_params and not compiling:
            written = self.positional(args, kwargs)
            check_written_arguments(
                self.__name__, self._param_names, written, self._written_params, self.def_loc
            )
        if not compiling and not kwargs and self._fast and not settings.ref_mode():
            # (no key for tensor subclasses: fake/functional tensors of a tracer go on below)
            launcher = self._fast.get(fastpath.guard_key(args))
            if launcher is not None:
                try:
                    result = launcher(args)
                    if written:
                        mark_written(written, self._written_params)
                    return result
                except _Respecialize:
                    pass  # another variant: the ordinary path finds (or traces) it
                except (RuntimeError, NotImplementedError):
                    if not compiled_calls.storage_less(args):
                        raise
                    return self._ops.call(self.positional(args, {}))  # torch.vmap: the op
        # a device loop of another kernel being traced (tiles miss the fast path above; Dynamo
        # cannot read the context var)
        if not compiling and _context.device() is not None:
            raise DeviceCodeError(
                f"kernel '{self.__name__}' called from device code: a kernel launches device "
                "loops of its own, which cannot run inside another's",
                hint=f"call {self.__name__} from host code (before or after the device loop), "
                "or write what it computes as a plain helper function of tiles",
            )
        if compiling or compiled_calls.traced(args, kwargs):
            values = compiled_calls.plain_numbers(self.positional(args, kwargs))
            grad = compiled_calls.needs_grad(values)
            if grad:
                compiled_calls.check_autograd(self._ops, values, compiling)
            return compiled_calls.compiled_call(self._ops, values, grad)
        if compiled_calls.needs_grad(args) or (
            kwargs and compiled_calls.needs_grad(tuple(kwargs.values()))
        ):
            values = self.positional(args, kwargs)
            compiled_calls.check_autograd(self._ops, values, False)
            return self._ops.call(values)
        if compiled_calls.storage_less((*args, *kwargs.values())):  # torch.vmap's: as the op
            return self._ops.call(self.positional(args, kwargs))
        if _all_meta((*args, *kwargs.values())):
            # shapes only, as torch's ops on meta tensors: the host code with its device loops
            # skipped (another kernel's host code calls this one while it is traced on meta),
            # after the checks a call on real tensors makes (torch's meta ops check shapes too:
            # a [4, 7] beside a [5, 7] returned a meta output that failed only at run time)
            self.bind(args, kwargs)
            return self.host_runner().run(self.positional(args, kwargs))[0]
        result = self.call_eager(args, kwargs)
        if written:
            mark_written(written, self._written_params)
        return result

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
        check_budget(budget_s, f"{self.__name__}.autotune(budget_s)")
        args, kwargs = tuple(args), dict(kwargs or {})
        bound = self.bind(args, kwargs)
        config = hooks.tune(bound, args, kwargs, effort, budget_s)
        bound.use_config(config)
        return config

    def run_ref(self, *args: Any, **kwargs: Any) -> Any:
        """Run the kernel eagerly with torch ops (no Triton): the reference semantics."""
        self.bind_arguments(args, kwargs)  # (a wrong call names the kernel, not ref's wrapper)
        if self._ref is None:
            self._ref = build_ref(self.source)
        return self._ref(*args, **kwargs)

    def constants_fingerprint(self) -> str:
        """The module constants and closure values device code reads, as text (a cache key
        part)."""
        return self._globals.fingerprint()

    def constants_snapshot(self) -> list[Any]:
        """The module constants and closure values device code reads, for
        :meth:`restore_constants` in another process."""
        return self._globals.snapshot()

    def restore_constants(self, values: list[Any]) -> None:
        """Assign the constants a :meth:`constants_snapshot` of this kernel in the calling
        process holds (a tuning worker imports the module with its source's values: a global
        the caller changed made every config 'differ' from the caller's baseline)."""
        self._globals.restore(values)

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
            stacklevel=user_stacklevel(),
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


def _all_meta(values: tuple[Any, ...]) -> bool:
    """Every tensor argument is a meta tensor (a mix is refused by the device check)."""
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    return bool(tensors) and all(t.is_meta for t in tensors)


def _kernel_named(module: str, qualname: str) -> Any:
    """The object ``module.qualname`` names (a pickled kernel, loaded)."""
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def kernel(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Decorator: ``@tc.kernel`` or ``@tc.kernel(config=..., static_shapes=...)``."""
    if fn is None:
        return lambda f: kernel(f, **options)
    if not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
        what = "a lambda" if inspect.isfunction(fn) else f"{type(fn).__name__} {fn!r}"
        raise ArgumentError(
            f"@tc.kernel decorates a Python function written with def, got {what}",
            hint="def my_kernel(x): ... with @tc.kernel above it (the compiler reads its source)",
        )
    return Kernel(fn, **options)


__all__ = ["BoundKernel", "Kernel", "TilecraftError", "kernel"]

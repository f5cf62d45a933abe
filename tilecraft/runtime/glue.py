"""Glue programs at run time (stage: runtime; in: a trace's glue loops, ``frontend/glue.py``;
out: the two hooks the launch version calls, ``__tc_glue__`` and ``__tc_glue_done__``).

A glue run's program is compiled on its first use with the heuristic default of its own one-loop
config space (one program: warps and the chunking of its whole dims; the kernel's own config
does not describe it). The first call runs both: the program, then the statements as written,
and keeps the program only where each output agrees with eager (dtype and shape exactly,
values within a few ulps of the dtype: a sum in another order); any failure to compile or
launch, or a disagreement, leaves the statements to run eagerly for this specialization."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tilecraft import settings
from tilecraft.codegen.kernel import HEADER, GeneratedKernel, generate
from tilecraft.config.spec import ConfigSpec
from tilecraft.frontend.glue import output_name
from tilecraft.frontend.glue_trace import GlueLoop
from tilecraft.frontend.trace import TracedKernel
from tilecraft.ir.nodes import DeviceLoop
from tilecraft.language.loops import grid
from tilecraft.runtime import direct_launch
from tilecraft.runtime.module import load_source
from tilecraft.targets.target import Target

_ONE_PROGRAM = grid(1)
_RTOL = {torch.float64: 1e-9, torch.float32: 1e-4}  # else (16- and 8-bit floats): 2e-2


class GlueRunner:
    """The glue programs of one trace (one specialization's host code)."""

    def __init__(
        self,
        traced: TracedKernel,
        target: Target,
        name: str,
        dot_precision: Any,
        free_value: Callable[[str], Any],
    ):
        """``free_value``: a global's or closure variable's value now (a run's numbers)."""
        self.traced = traced
        self.free_value = free_value
        self.target = target
        self.name = name
        self.dot_precision = dot_precision
        self.launchers: dict[int, Any] = {}
        self.checked: set[int] = set()  # runs whose program agreed with eager
        self.eager: dict[int, str] = {}  # runs left to eager, and why
        self.pending: dict[int, tuple[torch.Tensor, ...]] = {}  # first results to compare

    def glue(self, index: int, env: dict[str, Any]) -> tuple[torch.Tensor, ...] | None:
        """``__tc_glue__``: the run's outputs from its program, or None to run it as written
        (always where the trace left it eager; for this call where a value it baked in, an
        int, bool or dtype, differs now, or a float input is not a float)."""
        if index in self.eager or index not in self.traced.glue:
            return None
        if not self._same_values(self.traced.glue[index], env):
            return None
        if index in self.checked:
            return self._run(index, env)
        try:
            self.pending[index] = self._run(index, env)
        except Exception as exc:  # a compile or launch failure: eager from now on
            self._leave(index, f"{type(exc).__name__}: {exc}")
        return None

    def done(self, index: int, env: dict[str, Any]) -> None:
        """``__tc_glue_done__``: after the statements ran as written, compare the first
        program results with theirs."""
        fused = self.pending.pop(index, None)
        if fused is None:
            return
        names = self.traced.glue[index].names
        for name, got in zip(names, fused, strict=True):
            problem = _disagreement(got, env.get(name))
            if problem:
                self._leave(index, f"'{name}' {problem}")
                return
        self.checked.add(index)

    def _value(self, name: str, env: dict[str, Any]) -> Any:
        return env[name] if name in env else self.free_value(name)

    def _same_values(self, glue: GlueLoop, env: dict[str, Any]) -> bool:
        for name, traced in glue.baked:
            now = self._value(name, env)
            if type(now) is not type(traced) or now != traced:
                return False
        return all(isinstance(self._value(name, env), float) for name in glue.floats)

    def _leave(self, index: int, why: str) -> None:
        self.eager[index] = why
        if settings.debug():
            print(f"tilecraft: {self.name}: glue run {index} stays eager: {why}")

    def _run(self, index: int, env: dict[str, Any]) -> tuple[torch.Tensor, ...]:
        glue = self.traced.glue[index]
        launcher = self.launchers.get(index) or self._compile(index)
        args = {name: self._value(name, env) for name in glue.inputs}
        args.update({name: float(args[name]) for name in glue.floats})
        device = next(v.device for v in args.values() if isinstance(v, torch.Tensor))
        outputs = tuple(torch.empty(s, dtype=d, device=device) for s, d in glue.outputs)
        for k, out in enumerate(outputs):
            args[output_name(k)] = out
        launcher(args, _ONE_PROGRAM)
        return outputs

    def _compile(self, index: int) -> Any:
        loop = self.traced.glue[index].loop
        kernel = generate_glue(loop, self.target, self.name, self.dot_precision)
        module = load_source(f"{HEADER}\n\n{kernel.device_source}\n\n{kernel.launcher_source}")
        names = [c.kernel_name for c in (kernel, *kernel.companions)]
        direct_launch.wrap_for_target(module, names, self.target.backend)
        self.launchers[index] = getattr(module, kernel.launcher_name)
        return self.launchers[index]


def generate_glue(
    loop: DeviceLoop, target: Target, name: str, dot_precision: Any = None
) -> GeneratedKernel:
    """A glue loop's kernel and launcher, with the default of its own config space."""
    spec = ConfigSpec([loop], 0, {}, {}, target, dot_precision)
    return generate(loop, spec.resolve(spec.default()), f"{name}_glue")


def _disagreement(got: torch.Tensor, want: Any) -> str | None:
    """How the program's output differs from eager's, or None."""
    if not isinstance(want, torch.Tensor):
        return f"is a {type(want).__name__} when run as written"
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"is {got.dtype} {list(got.shape)}, eager {want.dtype} {list(want.shape)}"
    if not got.dtype.is_floating_point:
        return None if torch.equal(got, want) else "differs from eager"
    rtol = _RTOL.get(got.dtype, 2e-2)
    wide = torch.float64 if got.dtype == torch.float64 else torch.float32
    a, b = got.to(wide), want.to(wide)
    scale = float(b.abs().nan_to_num(0.0, 0.0, 0.0).amax()) if b.numel() else 0.0
    close = torch.allclose(a, b, rtol, rtol * max(scale, 1e-30), True)
    return None if close else "differs from eager"

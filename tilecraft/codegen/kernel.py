"""Generate one Triton kernel and its launcher for a device loop (stage: codegen).

In: a :class:`DeviceLoop` and the :class:`Plan` resolved for it (rendered as given: codegen decides
nothing the plan has not).
Out: :class:`GeneratedKernel` — Python source of a module holding the ``@triton.jit`` function and a
``launch_<i>(env)`` function that the runtime calls with the host code's local variables.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from tilecraft.codegen import grid
from tilecraft.codegen.emitter import emit_device_loop
from tilecraft.codegen.guards import arg_expr, launch_guards
from tilecraft.codegen.reduce import HELPER_IMPORT
from tilecraft.config.plan import Plan
from tilecraft.ir.index_width import needs_int64
from tilecraft.ir.nodes import DeviceLoop

HEADER = (
    "from __future__ import annotations\n\nimport triton\nimport triton.language as tl\n\n"
    "from tilecraft.errors import ShapeError\n"
    "from tilecraft.runtime.device import ensure_allocator, sm_count\n" + HELPER_IMPORT
)
TYPE_NAMES = {
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float64: "fp64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "i1",
}


@dataclasses.dataclass
class GeneratedKernel:
    kernel_name: str
    launcher_name: str
    device_source: str  # the @triton.jit function
    launcher_source: str  # the host launch function
    params: list[str]  # names of the host values passed, in order
    param_types: dict[str, str]  # Triton signature types: "*bf16", "i32", "fp32"
    constexprs: dict[str, int]
    grid: str
    launch_options: dict[str, Any]

    @property
    def module_source(self) -> str:
        return HEADER + "\n\n" + self.device_source + "\n\n" + self.launcher_source


def _needs_int64(loop: DeviceLoop) -> bool:
    return any(needs_int64(t.shape, t.stride) for t in loop.tensors.values())


def generate(loop: DeviceLoop, plan: Plan, fn_name: str) -> GeneratedKernel:
    """The kernel and launcher of ``loop`` under ``plan`` (for the interpreter target: code that
    Triton's CPU interpreter runs, e.g. bf16/fp16 dots upcast)."""
    interpret = plan.target.backend == "interpret"
    launch_options = plan.options
    em, tiles = emit_device_loop(loop, plan, _needs_int64(loop), interpret)
    kernel_name = f"_tc_{fn_name}_{loop.index}"
    params = list(em.tensors) + [name for name in em.scalars if name not in em.tensors]
    param_types = {name: "*" + TYPE_NAMES[t.dtype] for name, t in em.tensors.items()}
    param_types.update(
        {name: TYPE_NAMES[em.scalar_types[name]] for name in params if name not in em.tensors}
    )
    constexprs = dict(sorted(em.constexprs.items()))
    computed = em.launch_constexprs
    signature = ", ".join(params + [f"{name}: tl.constexpr" for name in [*constexprs, *computed]])
    helpers = "".join(h + "\n\n" for h in em.helpers)
    device_source = f"{helpers}@triton.jit\ndef {kernel_name}({signature}):\n{em.w.text()}"
    launcher_name = f"launch_{loop.index}"
    call_args = [arg_expr(p, em.scalars.get(p)) for p in params]
    call_args += [f"{k}={v}" for k, v in constexprs.items()]
    call_args += [f"{k}={v}" for k, v in computed.items()]
    call_args += [f"{k}={v!r}" for k, v in launch_options.items()]
    prologue = launch_guards(loop)
    if "num_programs" in em.scalars:
        first = next(iter(em.tensors))
        prologue.append(f"    num_programs = sm_count(env[{first!r}]) * {plan.num_sm_multiplier}\n")
    if em.descriptors:
        prologue.append("    ensure_allocator()\n")
    launch_grid = grid.host_grid(em, tiles)
    launcher_source = (
        f"def {launcher_name}(env, spec):\n"
        + "".join(prologue)
        + f"    {kernel_name}[({launch_grid},)](\n"
        + "".join(f"        {a},\n" for a in call_args)
        + "    )\n"
    )
    return GeneratedKernel(
        kernel_name,
        launcher_name,
        device_source,
        launcher_source,
        params,
        param_types,
        constexprs,
        launch_grid,
        dict(launch_options),
    )

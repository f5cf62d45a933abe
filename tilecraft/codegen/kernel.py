"""Generate one Triton kernel and its launcher for a device loop (stage: codegen).

In: a :class:`DeviceLoop`, a normalized :class:`Config`, the launch keywords the target accepts.
Out: :class:`GeneratedKernel` — Python source of a module holding the ``@triton.jit`` function and a
``launch_<i>(env)`` function that the runtime calls with the host code's local variables.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tilecraft.codegen.emitter import Emitter
from tilecraft.config.config import Config
from tilecraft.ir.nodes import DeviceLoop

HEADER = "from __future__ import annotations\n\nimport triton\nimport triton.language as tl\n"


@dataclasses.dataclass
class GeneratedKernel:
    kernel_name: str
    launcher_name: str
    device_source: str  # the @triton.jit function
    launcher_source: str  # the host launch function
    params: list[str]  # names of the host values passed, in order
    constexprs: dict[str, int]
    grid: str
    launch_options: dict[str, Any]

    @property
    def module_source(self) -> str:
        return HEADER + "\n\n" + self.device_source + "\n\n" + self.launcher_source


def _needs_int64(loop: DeviceLoop) -> bool:
    for t in loop.tensors.values():
        reach = (
            sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride, strict=True))
            if t.shape
            else 0
        )
        if reach >= 2**31 - 1:
            return True
    return False


def generate(
    loop: DeviceLoop, config: Config, fn_name: str, launch_options: dict[str, Any]
) -> GeneratedKernel:
    em = Emitter(loop, config, _needs_int64(loop))
    kernel_name = f"_tc_{fn_name}_{loop.index}"
    em.w.src_comment(loop.loc)
    grid = em.setup_grid()
    em.setup_rdims()
    em.emit_block(loop.body)
    tensor_params = list(em.tensors)
    scalar_params = [name for name in em.scalars if name not in em.tensors]
    params = tensor_params + scalar_params
    constexprs = dict(sorted(em.constexprs.items()))
    signature = ", ".join(params + [f"{name}: tl.constexpr" for name in constexprs])
    body = em.w.text()
    device_source = f"@triton.jit\ndef {kernel_name}({signature}):\n{body}"
    launcher_name = f"launch_{loop.index}"
    call_args = [f"env[{p!r}]" for p in params]
    call_args += [f"{k}={v}" for k, v in constexprs.items()]
    call_args += [f"{k}={v!r}" for k, v in launch_options.items()]
    launcher_source = (
        f"def {launcher_name}(env):\n"
        f"    {kernel_name}[({grid},)](\n"
        + "".join(f"        {a},\n" for a in call_args)
        + "    )\n"
    )
    return GeneratedKernel(
        kernel_name,
        launcher_name,
        device_source,
        launcher_source,
        params,
        constexprs,
        grid,
        dict(launch_options),
    )

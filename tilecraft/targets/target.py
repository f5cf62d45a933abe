"""Target and Capabilities (stage: targets; in: the device or a name; out: what may be emitted).

A :class:`Target` is (backend, arch, warp size). Its :class:`Capabilities` come from the installed
Triton backend's own options dataclass, so an option exists for a target only if that backend
declares it — never guessed from ``torch.version``. :func:`launch_options` is the single place
where launch keywords are built; it passes only declared options.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any

from tilecraft import settings
from tilecraft.config.config import Config
from tilecraft.errors import ArgumentError, ConfigError

_BACKEND_OPTIONS = {
    "cuda": ("triton.backends.nvidia.compiler", "CUDAOptions"),
    "hip": ("triton.backends.amd.compiler", "HIPOptions"),
    "xpu": ("triton.backends.intel.compiler", "XPUOptions"),
}


@dataclasses.dataclass(frozen=True)
class Target:
    backend: str  # "cuda", "hip", "xpu" or "interpret"
    arch: Any = None  # 90 for sm_90, "gfx942", ...
    warp_size: int = 32

    @property
    def key(self) -> str:
        return f"{self.backend}:{self.arch}:{self.warp_size}"

    @classmethod
    def parse(cls, name: str) -> Target:
        """``"cuda:90"``, ``"hip:gfx942"``, ``"xpu"``, ``"interpret"``."""
        backend, _, arch = name.partition(":")
        if backend == "cuda":
            digits = arch.lower().removeprefix("sm").lstrip("_")
            if digits and not digits.isdigit():
                raise ConfigError(
                    f"unknown CUDA arch {arch!r} in target {name!r}; expected e.g. cuda:90"
                )
            return cls("cuda", int(digits or 90), 32)
        if backend == "hip":
            return cls("hip", arch or "gfx942", 64 if (arch or "gfx942").startswith("gfx9") else 32)
        if backend in ("xpu", "interpret"):
            return cls(backend, arch or None, 32)
        raise ConfigError(f"unknown target {name!r}; expected cuda:SM, hip:GFX, xpu or interpret")

    @property
    def capabilities(self) -> Capabilities:
        return capabilities_for(self.backend)


@dataclasses.dataclass(frozen=True)
class Capabilities:
    launch_options: frozenset[str]


@functools.cache
def capabilities_for(backend: str) -> Capabilities:
    if backend == "interpret":
        return Capabilities(frozenset({"num_warps", "num_stages"}))
    module_name, cls_name = _BACKEND_OPTIONS.get(backend, ("", ""))
    fields: set[str] = {"num_warps", "num_stages"}
    try:
        import importlib

        options_cls = getattr(importlib.import_module(module_name), cls_name)
        fields = {f.name for f in dataclasses.fields(options_cls)}
    except (ImportError, AttributeError, TypeError, ValueError):
        pass  # unknown backend: only the options every backend has
    return Capabilities(frozenset(fields))


def detect(device: Any = None) -> Target:
    """The target for tensors on ``device`` (the interpreter for CPU tensors)."""
    override = settings.target_override()
    if override:
        return Target.parse(override)
    if settings.triton_interpret() or device is None or getattr(device, "type", device) == "cpu":
        return Target("interpret")
    from triton.runtime import driver

    current = driver.active.get_current_target()
    return Target(current.backend, current.arch, current.warp_size)


def check_runnable(target: Target) -> None:
    """CPU tensors run only in Triton's interpreter, which must be chosen before triton loads."""
    if target.backend == "interpret" and not settings.triton_interpret():
        raise ArgumentError(
            "the kernel's tensors are on the CPU, which needs Triton's interpreter",
            hint="set TRITON_INTERPRET=1 before Python starts (or TILECRAFT_REF=1 for eager torch), "
            "or move the tensors to a GPU",
        )


def launch_options(target: Target, config: Config) -> dict[str, Any]:
    """The launch keywords for ``config`` on ``target``: only options the backend declares.

    An option the config sets but the target lacks is dropped with one warning naming both, or
    rejected in strict mode (``TILECRAFT_STRICT=1``).
    """
    wanted = {
        "num_warps": config.num_warps,
        "num_stages": config.num_stages,
        "maxnreg": config.maxnreg,
    }
    declared = target.capabilities.launch_options
    out: dict[str, Any] = {}
    for name, value in wanted.items():
        if value is None:
            continue
        if name not in declared:
            message = (
                f"{name}={value} is not supported by the {target.backend} backend; dropping it"
            )
            if settings.strict():
                raise ConfigError(
                    message.replace("; dropping it", ""), hint="remove it from the config"
                )
            if target.backend != "interpret":
                warnings.warn(message, stacklevel=3)
            continue
        out[name] = value
    return out

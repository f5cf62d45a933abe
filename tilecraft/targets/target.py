"""Target and Capabilities (stage: targets; in: the device or a name; out: what may be emitted).

A :class:`Target` is (backend, arch, warp size). Its :class:`Capabilities` come from the installed
Triton backend's own options dataclass, so an option exists for a target only if that backend
declares it — never guessed from ``torch.version``. :func:`filter_launch_options` is the single
place that decides which launch keywords a backend gets (``ConfigSpec.resolve`` calls it).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from tilecraft import settings
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
            if digits and not (digits.isdigit() and 70 <= int(digits) < 200):
                raise ConfigError(
                    f"unknown CUDA arch {arch!r} in target {name!r}; expected a compute "
                    "capability Triton compiles for, e.g. cuda:80, cuda:90, cuda:100"
                )
            return cls("cuda", int(digits or 90), 32)
        if backend == "hip":
            if arch and not re.fullmatch(r"gfx[0-9]{2,4}[a-f]?", arch):
                raise ConfigError(
                    f"unknown AMD arch {arch!r} in target {name!r}; expected e.g. hip:gfx942, "
                    "hip:gfx90a, hip:gfx1100"
                )
            return cls("hip", arch or "gfx942", 64 if (arch or "gfx942").startswith("gfx9") else 32)
        if backend in ("xpu", "interpret"):
            return cls(backend, arch or None, 32)
        raise ConfigError(f"unknown target {name!r}; expected cuda:SM, hip:GFX, xpu or interpret")

    @property
    def capabilities(self) -> Capabilities:
        return capabilities_for(self.backend)

    @property
    def limits(self) -> Limits:
        return limits_for(self)

    @property
    def tensor_descriptors(self) -> bool:
        """TMA tensor descriptors: Hopper and newer on CUDA; the interpreter emulates them."""
        if not self.capabilities.tensor_descriptors:
            return False
        return self.backend != "cuda" or int(self.arch) >= 90

    @property
    def max_warps(self) -> int:
        """Warps one program may have: 1024 threads on NVIDIA (32 warps), 16 wave64s on AMD;
        Config allows at most 32."""
        return max(1, min(32, self.limits.max_threads_per_block // self.warp_size))

    @property
    def dot_precisions(self) -> tuple[str, ...]:
        """``input_precision`` values of ``tl.dot`` on fp32 operands (Triton 3.6: NVIDIA has
        tf32 and tf32x3; AMD has tf32 on CDNA3 only; the interpreter computes in fp32)."""
        if self.backend == "cuda":
            return ("ieee", "tf32", "tf32x3")
        if self.backend == "hip" and str(self.arch).startswith("gfx94"):
            return ("ieee", "tf32")
        return ("ieee",)

    @property
    def fp8_dots(self) -> bool:
        """``tl.dot`` on OCP fp8 operands (float8_e4m3fn / e5m2): fp8 tensor-core MMA exists from
        sm_89 on NVIDIA; AMD's backend declares both formats in ``supported_fp8_dtypes``; the
        interpreter computes them exactly. (Loads, stores and casts of fp8 work everywhere.)"""
        if self.backend == "cuda":
            return int(self.arch) >= 89
        if self.backend == "hip":
            return {"fp8e4nv", "fp8e5"} <= self.capabilities.fp8_formats
        return self.backend == "interpret"

    @property
    def fp8_conversions(self) -> bool:
        """A hardware fp32 -> e4m3 / e5m2 conversion rounding to nearest even (NVIDIA sm_89+:
        ``cvt.rn.satfinite``); elsewhere casts to fp8 compute the bits in integer arithmetic."""
        return self.backend == "cuda" and int(self.arch) >= 89

    @property
    def warp_specialize(self) -> bool:
        return self.capabilities.warp_specialize and self.backend == "cuda" and int(self.arch) >= 90

    @property
    def arrival_counters(self) -> bool:
        """Programs can count their arrivals with a ``gpu``-scope acq_rel ``tl.atomic_add`` and
        read each other's stores with volatile loads, so the last program of a split tile can
        combine the partials in the same launch (``codegen/split.py``). Measured on NVIDIA; the
        interpreter runs programs one after another. AMD keeps the second kernel (the same code
        compiles for gfx942, but it has not run on an AMD GPU)."""
        return self.backend in ("cuda", "interpret")


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a backend's Triton accepts (from its options dataclass and the installed Triton)."""

    launch_options: frozenset[str]
    range_kwargs: frozenset[str] = frozenset()  # keywords the installed tl.range accepts
    tensor_descriptors: bool = False
    block_pointers: bool = True
    eviction_policies: bool = False
    warp_specialize: bool = False
    fp8_formats: frozenset[str] = frozenset()  # the options' supported_fp8_dtypes default


@dataclasses.dataclass(frozen=True)
class Limits:
    """Hardware limits of an arch (a table; unknown archs get safe small values)."""

    max_shared_bytes: int
    registers_per_sm: int
    max_threads_per_block: int
    num_sms: int
    # threads one SM (CU) holds at once: 64 warps on sm_80/sm_90+, 48 on sm_86/89, 32 wave64s
    # (8 per SIMD) on CDNA
    max_threads_per_sm: int = 2048
    # the device's L2 in bytes (0: not known; config/eviction.py then sets no policies)
    l2_bytes: int = 0


_LIMITS: dict[tuple[str, Any], Limits] = {
    ("cuda", 80): Limits(166912, 65536, 1024, 108, l2_bytes=40 << 20),
    ("cuda", 86): Limits(101376, 65536, 1024, 84, 1536, l2_bytes=6 << 20),
    ("cuda", 89): Limits(101376, 65536, 1024, 128, 1536, l2_bytes=48 << 20),
    ("cuda", 90): Limits(232448, 65536, 1024, 132, l2_bytes=50 << 20),
    ("cuda", 100): Limits(232448, 65536, 1024, 148),
    ("hip", "gfx90a"): Limits(65536, 131072, 1024, 104),
    ("hip", "gfx942"): Limits(65536, 131072, 1024, 304),
    ("hip", "gfx950"): Limits(163840, 131072, 1024, 256),
}
_SAFE_LIMITS = Limits(49152, 65536, 1024, 16)


def limits_for(target: Target) -> Limits:
    if target.backend == "interpret":
        return Limits(1 << 30, 1 << 30, 1 << 20, 4)
    return _LIMITS.get((target.backend, target.arch), _SAFE_LIMITS)


def _range_kwargs() -> frozenset[str]:
    import inspect

    import triton.language as tl

    params = inspect.signature(tl.range.__init__).parameters
    return frozenset(p for p in params if p not in ("self", "arg1", "arg2", "step"))


@functools.cache
def capabilities_for(backend: str) -> Capabilities:
    ranges = _range_kwargs()
    if backend == "interpret":
        return Capabilities(
            frozenset({"num_warps", "num_stages"}),
            ranges,
            tensor_descriptors=True,
            eviction_policies=True,
        )
    module_name, cls_name = _BACKEND_OPTIONS.get(backend, ("", ""))
    fields: set[str] = {"num_warps", "num_stages"}
    try:
        import importlib

        options_cls = getattr(importlib.import_module(module_name), cls_name)
        fields = {f.name for f in dataclasses.fields(options_cls)}
    except (ImportError, AttributeError, TypeError, ValueError):
        return Capabilities(frozenset(fields), ranges)  # unknown backend: the common options only
    fp8 = getattr(options_cls, "supported_fp8_dtypes", ())
    return Capabilities(
        frozenset(fields),
        ranges,
        fp8_formats=frozenset(fp8 if isinstance(fp8, tuple) else ()),
        tensor_descriptors=backend == "cuda",
        eviction_policies=backend == "cuda",
        warp_specialize=backend == "cuda" and "warp_specialize" in ranges,
    )


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


def filter_launch_options(
    target: Target, wanted: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Split launch keywords into those ``target``'s backend declares (kept) and messages for
    those it does not (dropped): the one place that decides what may reach a launcher.
    ``None`` values are not options at all (Triton's own default applies)."""
    declared = target.capabilities.launch_options
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in wanted.items():
        if value is None:
            continue
        if name in declared:
            kept[name] = value
        else:
            dropped.append(
                f"{name}={value} is not supported by the {target.backend} backend; dropping it"
            )
    return kept, dropped

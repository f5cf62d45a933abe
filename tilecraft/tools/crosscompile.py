"""Cross-compile generated kernels for a real GPU target without a GPU (stage: tools).

``triton.compile(ASTSource(...), target=GPUTarget(...))`` runs the whole Triton pipeline on the CPU
and gives cubin / hsaco plus metadata. Register and spill counts come from ``cuobjdump
--dump-resource-usage`` (shipped in the triton wheel) for CUDA and from the AMDGPU metadata for HIP.
This is the static validator: it tells whether a config compiles and fits a target. Pointer
parameters are compiled as 16-byte aligned, as a launch specializes them for tensors whose
``data_ptr()`` is: without that Triton cannot vectorize a load and the registers differ from the
kernel that runs (seed 000's LayerNorm backward at 16 x 2 rows x 2048, 8 warps: 188 registers
unaligned, 80 aligned). Int parameters (a dynamic-shape kernel's sizes and strides) are compiled
as the launch at the traced call's values specializes them (:func:`launch_int_kind`): without it
a [4096, 4096] bf16 fused add + RMSNorm compiled to scalar 2-byte loads in 128 registers where
the launched kernel has 16-byte loads in 48.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tilecraft.codegen.kernel import HEADER, GeneratedKernel
from tilecraft.ir.nodes import DeviceLoop
from tilecraft.targets.target import Target


@dataclasses.dataclass
class CompileReport:
    target: Target
    ok: bool
    error: str = ""
    error_class: str = ""
    shared_bytes: int | None = None
    registers: int | None = None
    spills: int | None = None  # CUDA: bytes of stack + local memory per thread; HIP: VGPR spills
    max_shared: int | None = None
    num_warps: int | None = None  # warps the program runs (a warp-specialized one adds a group)
    ptx: str = ""  # CUDA: the PTX ptxas compiled (tests check which instructions it chose)
    ttgir: str = ""  # the TritonGPU IR (tests check the layouts Triton chose)

    @property
    def fits(self) -> bool:
        return self.ok and (self.max_shared is None or (self.shared_bytes or 0) <= self.max_shared)


def signature_for(kernel: GeneratedKernel) -> tuple[dict[str, str], dict[str, Any]]:
    signature = {name: kernel.param_types[name] for name in kernel.params}
    for name in kernel.constexprs:
        signature[name] = "constexpr"
    return signature, dict(kernel.constexprs)


_TRITON_BACKENDS = {"cuda": "nvidia", "hip": "amd", "xpu": "intel"}


def missing_backend(target: Target) -> str | None:
    """Why ``target`` cannot be cross-compiled here (None when it can)."""
    if target.backend == "interpret":
        return (
            "the interpreter compiles nothing, so there is nothing to check; cross-compile for "
            "cuda:SM or hip:GFX, or run the kernel with TRITON_INTERPRET=1"
        )
    from triton.backends import backends

    name = _TRITON_BACKENDS.get(target.backend, target.backend)
    if name not in backends:
        return (
            f"this Triton has no {name!r} backend (it has: {', '.join(sorted(backends))}); "
            f"install Triton with the {target.backend} backend to cross-compile for it"
        )
    return None


_I32_MIN, _I32_END, _I64_END = -(2**31), 2**31, 2**63


def launch_int_kind(value: int) -> tuple[str, bool]:
    """How a Triton 3.6 launch specializes an int argument of ``value`` (its binder's
    ``native_specialize_impl``, the same on every backend): its signature type — ``constexpr``
    for the value 1, else the narrowest of i32 / i64 / u64 that holds it — and whether it is
    marked divisible by 16 (``tt.divisibility``; 0 is). ``tests/test_crosscompile_specialization
    .py`` checks this against Triton's own."""
    if value == 1:
        return "constexpr", False
    kind = "i32" if _I32_MIN <= value < _I32_END else "i64" if value < _I64_END else "u64"
    return kind, value % 16 == 0


@dataclasses.dataclass
class CompileJob:
    """Everything a compile needs, picklable so a worker process can run it."""

    source: str  # module source holding the @triton.jit function
    kernel_name: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    options: dict[str, Any]
    target: Target
    # parameters compiled as divisible by 16: every pointer, as a launch specializes a tensor
    # whose data_ptr() is 16-byte aligned (torch's allocations are), and each int parameter
    # whose traced value is a multiple of 16; without it loads are not vectorized
    aligned: tuple[int, ...] = ()

    @classmethod
    def of(cls, kernel: GeneratedKernel, loop: DeviceLoop, target: Target) -> CompileJob:
        """The compile a launch of ``kernel`` at its traced call's arguments runs."""
        signature, constexprs = signature_for(kernel)
        divisible = _specialize_ints(signature, constexprs, kernel.traced_ints)
        source = HEADER + "\n\n" + kernel.device_source
        aligned = tuple(
            i
            for i, (name, kind) in enumerate(signature.items())
            if kind.startswith("*") or name in divisible
        )
        return cls(
            source,
            kernel.kernel_name,
            signature,
            constexprs,
            dict(kernel.launch_options),
            target,
            aligned,
        )


def _specialize_ints(
    signature: dict[str, str], constexprs: dict[str, Any], traced: dict[str, int]
) -> set[str]:
    """Give each int parameter with a traced value the type Triton's launch gives it (in
    place: a value of 1 becomes a constexpr); the names it marks divisible by 16."""
    divisible = set()
    for name, value in traced.items():
        if name not in signature or signature[name] == "constexpr":
            continue
        kind, by16 = launch_int_kind(value)
        signature[name] = kind
        if kind == "constexpr":
            constexprs[name] = value
        elif by16:
            divisible.add(name)
    return divisible


def _jit_function(job: CompileJob, folder: Path) -> Any:
    from triton.runtime.jit import JITFunction

    tmp = folder / f"{job.kernel_name}.py"
    tmp.write_text(job.source)
    spec = importlib.util.spec_from_file_location(f"tc_xc_{job.kernel_name}", tmp)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, job.kernel_name)
    return fn if isinstance(fn, JITFunction) else JITFunction(getattr(fn, "fn", fn))


def compile_job(job: CompileJob) -> CompileReport:
    """Run a compile in this process (must not be in interpreter mode)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = job.target
    report = CompileReport(target, ok=False)
    try:
        # the source file lives only while Triton compiles it (no temp folders left behind)
        with tempfile.TemporaryDirectory(prefix="tc_xc_") as folder:
            attrs = {(i,): [["tt.divisibility", 16]] for i in job.aligned}
            src = ASTSource(_jit_function(job, Path(folder)), job.signature, job.constexprs, attrs)
            compiled = triton.compile(
                src,
                target=GPUTarget(target.backend, target.arch, target.warp_size),
                options=dict(job.options),
            )
    except Exception as exc:  # classified, never raised: this is a validator
        report.error = f"{type(exc).__name__}: {exc}"
        report.error_class = classify_compile_error(report.error)
        return report
    report.ok = True
    report.shared_bytes = int(getattr(compiled.metadata, "shared", 0) or 0)
    report.max_shared = target.limits.max_shared_bytes
    report.num_warps = getattr(compiled.metadata, "num_warps", None)
    report.ttgir = compiled.asm.get("ttgir", "")
    if target.backend == "cuda":
        report.ptx = compiled.asm.get("ptx", "")
        report.registers, report.spills = _cuda_resources(compiled.asm.get("cubin"), report.ptx)
    elif target.backend == "hip":
        report.registers, report.spills = _hip_resources(compiled.asm.get("amdgcn", ""))
    return report


def classify_compile_error(text: str) -> str:
    lowered = text.lower()
    if "numel" in lowered and "exceeds" in lowered:
        return "resource:numel"
    if "shared memory" in lowered or "out of resource: shared" in lowered:
        return "resource:shared_memory"
    if "register" in lowered:
        return "resource:registers"
    if "unrecognised" in lowered or "unrecognized" in lowered:
        return "unsupported_option"
    return "compile_error"


def _cuobjdump() -> str | None:
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(path) if path.exists() else None


def _cuda_resources(cubin: bytes | None, ptx: str = "") -> tuple[int | None, int | None]:
    tool = _cuobjdump()
    if not cubin or tool is None:
        return None, None
    fd, path = tempfile.mkstemp(suffix=".cubin")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        out = subprocess.run(
            [tool, "--dump-resource-usage", path], capture_output=True, text=True, timeout=60
        ).stdout
    finally:
        os.unlink(path)
    regs = re.search(r"REG:(\d+)", out)
    # spilled values live in the thread's stack frame (STACK:) or in local memory (LOCAL:);
    # ptxas reports Triton's spills under STACK, so reading LOCAL alone reports 0 for them
    spill = [int(m) for m in re.findall(r"(?:STACK|LOCAL):(\d+)", out)]
    if not spill:
        return (int(regs.group(1)) if regs else None, None)
    return (int(regs.group(1)) if regs else None, max(0, sum(spill) - _ptx_local_bytes(ptx)))


def _ptx_local_bytes(ptx: str) -> int:
    """The stack frame the PTX itself declares (``__local_depot`` arrays, each rounded up to
    8 bytes): not spills. libdevice's sin / cos keep their slow path's argument reduction in a
    28-byte local array: 32 bytes of STACK at 48 registers in every rotary kernel."""
    sizes = re.findall(r"\.local\s+\.align\s+\d+\s+\.b8\s+__local_depot\d+\[(\d+)\]", ptx)
    return sum(-(-int(n) // 8) * 8 for n in sizes)


def _hip_resources(asm: str) -> tuple[int | None, int | None]:
    vgpr = re.search(r"\.vgpr_count:\s+(\d+)", asm)
    spill = re.search(r"\.vgpr_spill_count:\s+(\d+)", asm)
    return (int(vgpr.group(1)) if vgpr else None, int(spill.group(1)) if spill else None)

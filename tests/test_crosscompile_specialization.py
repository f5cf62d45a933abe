"""The cross-compile validator compiles what a launch at the traced call's arguments runs.

Triton's launcher specializes every int argument by value: a multiple of 16 is compiled as
divisible by 16 (``tt.divisibility``), the value 1 as a constexpr. A ``static_shapes=False``
kernel passes its sizes and strides as ints, so a validator that marked only its pointers
measured another kernel: vLLM's fused add + RMSNorm at [4096, 4096] bf16 reported scalar 2-byte
loads in 128 registers where the launched kernel has 16-byte loads in 48 (sm_90).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
import torch
from triton._C.libtriton import native_specialize_impl
from triton.backends.amd.compiler import HIPBackend
from triton.backends.nvidia.compiler import CUDABackend

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s42a import fused_add_rms_norm
from tilecraft.codegen.kernel import GeneratedKernel
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel
from tilecraft.tools.crosscompile import CompileJob, launch_int_kind, signature_for
from tilecraft.tools.worker import run_compile_jobs

SM90 = Target.parse("cuda:90")
INT_KINDS = ("i32", "i64", "u64")


def _fused_add_rms_norm(static_shapes: bool) -> tc.Kernel:
    """vLLM's fused residual add + RMSNorm (the held-out kernel the bug was found with)."""
    return tc.kernel(fused_add_rms_norm.fn, static_shapes=static_shapes)


def _args(m: int, n: int) -> tuple[Any, ...]:
    """Meta tensors: shapes and strides only, nothing runs."""
    rows = [torch.empty(m, n, dtype=torch.bfloat16, device="meta") for _ in range(2)]
    return (*rows, torch.empty(n, dtype=torch.bfloat16, device="meta"), 1e-6)


def _default_kernel(kernel: tc.Kernel, args: tuple[Any, ...]) -> tuple[GeneratedKernel, Any]:
    """The first kernel of the sm_90 default config for ``args`` and its device loop."""
    bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=SM90)
    _, _, traced, kernels = bound.generate(bound.config_spec.default())
    return kernels[0], traced.loops[0]


def _memory_ops(ptx: str) -> list[str]:
    return re.findall(r"(?:ld|st)\.global[\w.]*", ptx)


def test_int_kinds_are_tritons() -> None:
    """``launch_int_kind`` agrees with Triton's own binder on every backend (type, the value 1
    as a constexpr, divisibility by 16 of negative and wide values too)."""
    values = [0, 1, 2, 15, 16, 17, 32, 4095, 4096, -1, -16, -17, 2**31 - 16, 2**31 - 1, 2**31]
    values += [2**31 + 16, -(2**31), -(2**31) - 16, 2**63 - 16, 2**63, 2**63 + 16]
    for backend in (CUDABackend, HIPBackend):
        for value in values:
            kind, divisible = native_specialize_impl(backend, value, False, True, True)
            if kind == "constexpr":
                assert launch_int_kind(value) == ("constexpr", False), value
            else:
                assert launch_int_kind(value) == (kind, divisible == "D"), (backend, value)


@pytest.mark.crosscompile
def test_dynamic_shapes_compile_as_launched() -> None:
    """At [4096, 4096] every size and stride is a multiple of 16: the validator's compile has
    the registers of a compile with every int marked divisible (the launched kernel's, 48, not
    the unspecialized 128) and 16-byte loads."""
    kernel, args = _fused_add_rms_norm(static_shapes=False), _args(4096, 4096)
    (row,) = check_kernel(kernel, args, [SM90], lambda b: [b.config_spec.default()])
    checked = row.report
    assert checked is not None and checked.ok and checked.registers is not None, checked

    generated, loop = _default_kernel(kernel, args)
    job = CompileJob.of(generated, loop, SM90)
    assert generated.traced_ints and all(v % 16 == 0 for v in generated.traced_ints.values())
    # the reference, as the bug report built it: every int parameter marked divisible by 16
    ints = tuple(i for i, kind in enumerate(job.signature.values()) if kind in INT_KINDS)
    assert ints and set(ints) <= set(job.aligned)  # the validator marked them all itself
    reference = dataclasses.replace(job, aligned=tuple(sorted({*job.aligned, *ints})))
    (real,) = run_compile_jobs([reference], 300)
    assert real.ok and real.registers is not None, real.error
    assert abs(checked.registers - real.registers) <= 0.1 * real.registers, (
        checked.registers,
        real.registers,
    )
    ops = _memory_ops(checked.ptx)
    assert any(op.startswith(("ld.global.v4", "ld.global.v2")) for op in ops), ops


@pytest.mark.crosscompile
def test_sizes_off_16_are_not_divisible() -> None:
    """4095 columns: the column count and the row strides are not multiples of 16, so they are
    not marked divisible (a launch does not mark them); the row count 4096 still is."""
    kernel, args = _fused_add_rms_norm(static_shapes=False), _args(4096, 4095)
    generated, loop = _default_kernel(kernel, args)
    job = CompileJob.of(generated, loop, SM90)
    names = list(job.signature)
    odd = {name for name, value in generated.traced_ints.items() if value % 16}
    even = {name for name, value in generated.traced_ints.items() if value % 16 == 0}
    assert odd and even, generated.traced_ints  # 4095 (size, strides) and 4096 (row end)
    marked = {names[i] for i in job.aligned}
    assert not odd & marked, (odd, marked)
    assert even <= marked, (even, marked)
    (report,) = run_compile_jobs([job], 300)
    assert report.ok and report.ptx and report.registers is not None, report.error
    assert _memory_ops(report.ptx), report.ptx[:2000]


@pytest.mark.crosscompile
def test_an_int_of_one_is_a_constexpr() -> None:
    """One row: the row end 1 is passed as a constexpr by Triton's launch, so the validator
    compiles it as one too (and the compile still succeeds)."""
    kernel, args = _fused_add_rms_norm(static_shapes=False), _args(1, 4096)
    generated, loop = _default_kernel(kernel, args)
    ones = [name for name, value in generated.traced_ints.items() if value == 1]
    assert ones, generated.traced_ints
    job = CompileJob.of(generated, loop, SM90)
    for name in ones:
        assert job.signature[name] == "constexpr" and job.constexprs[name] == 1
        assert list(job.signature).index(name) not in job.aligned
    (report,) = run_compile_jobs([job], 300)
    assert report.ok, report.error


@pytest.mark.parametrize("shape", [(4096, 4096), (4096, 4095)])
def test_static_shapes_job_unchanged(shape: tuple[int, int]) -> None:
    """Static shapes bake sizes and strides in as constexprs: no traced int parameter, and the
    job is the pointers-only one the validator always built."""
    kernel = _fused_add_rms_norm(static_shapes=True)
    generated, loop = _default_kernel(kernel, _args(*shape))
    assert generated.traced_ints == {}
    job = CompileJob.of(generated, loop, SM90)
    signature, constexprs = signature_for(generated)
    assert job.signature == signature and job.constexprs == constexprs
    pointers = tuple(i for i, kind in enumerate(signature.values()) if kind.startswith("*"))
    assert job.aligned == pointers

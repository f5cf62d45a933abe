"""Direct launches (runtime/direct_launch.py): the cheap key determines Triton's specialization
exactly, hits launch the compiled kernel with every parameter in order, anything unmodelled or
hooked goes through Triton's own path; on the GPU, repeated calls with differently aligned views
stay correct."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from kernels import rms_norm, rms_norm_ref
from triton._C.libtriton import native_specialize_impl
from triton.backends.nvidia.compiler import CUDABackend
from triton.knobs import HookChain

import tilecraft as tc
from tilecraft.codegen.kernel import HEADER
from tilecraft.runtime import direct_launch
from tilecraft.runtime.direct_launch import DirectKernel, arg_key
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.runtime.module import load_source
from tilecraft.targets.target import Target


def _values() -> list[Any]:
    base = torch.randn(64)
    ints = [0, 1, 2, 15, 16, 17, 32, -1, -16, -17, 2**31 - 16, 2**31 - 1, 2**31, 2**31 + 16]
    ints += [-(2**31), -(2**31) - 1, -(2**31) - 16, 2**63 - 16, 2**63 - 1, 2**63, 2**63 + 16]
    tensors = [base, base[1:], base[4:], base[3:], torch.nn.Parameter(torch.randn(8))]
    tensors += [torch.randn(8, dtype=torch.bfloat16), torch.randn(9, dtype=torch.bfloat16)[1:]]
    tensors += [torch.zeros(4, dtype=torch.int32), torch.zeros(5, dtype=torch.int8)[1:]]
    return [*ints, *tensors, 1.0, 0.5, 1e300, True, False, None]


def test_key_determines_tritons_specialization() -> None:
    """Values with the same key get the same specialization from Triton's own function (so a
    compiled kernel found by key is the one Triton's binder would have picked)."""
    by_key: dict[Any, set[Any]] = defaultdict(set)
    for value in _values():
        spec = native_specialize_impl(CUDABackend, value, False, True, True)  # Triton's binder
        by_key[arg_key(value)].add(spec)
    assert len(by_key) >= 12  # the values really spread over many keys
    for key, specs in by_key.items():
        assert len(specs) == 1, (key, specs)
    assert arg_key(object()) is ...  # unmodelled: Triton's path


@dataclass
class _Compiled:
    runs: list[tuple[Any, ...]] = field(default_factory=list)
    function: str = "fn"
    packed_metadata: str = "meta"

    def run(self, *args: Any) -> None:
        self.runs.append(args)


class _Jit:
    """Stands in for a @triton.jit kernel (x, n, BLOCK: constexpr, R: constexpr)."""

    arg_names = ["x", "n", "BLOCK", "R"]

    def __init__(self) -> None:
        self.slow_calls = 0
        self.compiled = _Compiled()

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> _Compiled:
            self.slow_calls += 1
            return self.compiled

        return launch


class _Driver:
    class active:  # noqa: N801 - mirrors triton.runtime.driver.active
        @staticmethod
        def get_current_device() -> int:
            return 0

        @staticmethod
        def get_current_stream(device: int) -> int:
            return 1234


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(direct_launch, "driver", _Driver)


def test_hits_launch_directly_with_every_parameter(fake_driver: None) -> None:
    jit = _Jit()
    kernel = DirectKernel(jit)
    x = torch.randn(64)
    for _ in range(3):
        kernel[(4,)](x, 4096, BLOCK=8, R=64, num_warps=4)
    assert jit.slow_calls == 1  # the first call compiles through Triton, the rest go direct
    assert len(jit.compiled.runs) == 2
    run = jit.compiled.runs[0]
    assert run[:4] == (4, 1, 1, 1234) and run[4:7] == ("fn", "meta", None)
    assert run[9] is x and run[10:] == (4096, 8, 64)


def test_misses_hooks_and_unmodelled_arguments_take_tritons_path(
    fake_driver: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    jit = _Jit()
    kernel = DirectKernel(jit)
    x = torch.randn(64)
    kernel[(4,)](x, 4096, BLOCK=8, R=64)
    kernel[(4,)](x[1:], 4096, BLOCK=8, R=64)  # misaligned: another specialization
    kernel[(4,)](x, 4097, BLOCK=8, R=64)  # 4097 is not a multiple of 16
    kernel[(4,)](x, 4096, BLOCK=16, R=64)  # another constexpr
    assert jit.slow_calls == 4 and not jit.compiled.runs
    kernel[(4,)](x, 4096, BLOCK=8, R=64)
    assert jit.slow_calls == 4 and len(jit.compiled.runs) == 1
    for _ in range(2):
        kernel[(4,)](x, "not modelled", BLOCK=8, R=64)
    assert jit.slow_calls == 6
    hooks = HookChain()
    hooks.add(lambda metadata: None)
    monkeypatch.setattr(direct_launch.knobs.runtime, "launch_enter_hook", hooks)
    kernel[(4,)](x, 4096, BLOCK=8, R=64)  # a profiler's hook must see the launch
    assert jit.slow_calls == 7


@pytest.mark.gpu
def test_repeated_gpu_calls_with_views_stay_correct() -> None:
    """Aligned and misaligned views of one buffer alternate: each call is right, and most of
    them went direct."""
    base = torch.randn(4 * 256 + 8, device="cuda")
    w = torch.randn(256, device="cuda")
    for offset in (0, 1, 0, 4, 1, 0) * 3:
        x = base[offset : offset + 4 * 256].view(4, 256)
        torch.testing.assert_close(rms_norm(x, w), rms_norm_ref(x, w))
    program = rms_norm.bind((x, w)).default_program()
    wrapped = [getattr(program.module, k.kernel_name) for k in program.kernels]
    assert all(isinstance(k, DirectKernel) and k.compiled for k in wrapped)


@tc.kernel(static_shapes=True)
def binder_names(
    params: torch.Tensor, options: torch.Tensor, backend: float, default_lr: float
) -> torch.Tensor:
    """Parameters named like the locals of Triton's generated argument binder."""
    (n,) = params.size()
    out = torch.empty_like(params)
    for t in tc.tile(n):
        out[t] = params[t] * backend + options[t] * default_lr
    return out


def test_parameters_named_like_tritons_binder_locals_reach_the_specializer(device: str) -> None:
    """SGD's ``params`` tensor met the binder's own ``params`` dict: "failed to specialize
    argument of type: dict" for every config on the H200. Generated kernels rename them."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature

    args = (torch.randn(64, device=device), torch.randn(64, device=device), 0.5, 2.0)
    bound = BoundKernel(
        binder_names, binder_names.bind_arguments(args, {}), Target.parse("cuda:90")
    )
    _, _, _, kernels = bound.generate(tc.Config(block_sizes=[32]))
    module = load_source(f"{HEADER}\n\n{kernels[0].device_source}")
    loaded = getattr(module, kernels[0].kernel_name)
    jit = JITFunction(getattr(loaded, "fn", loaded))  # (the interpreter's wraps the function)
    assert "params" not in jit.arg_names and "params_arg" in jit.arg_names
    backend = make_backend(GPUTarget("cuda", 90, 32))
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    out = torch.empty(64, device=device)
    launch_args = (args[0], args[1], out, 0.5, 2.0)  # (params, options, out, ...)
    _, specialization, _ = binder(*launch_args, _BLOCK_0=32)  # Triton's binder, as a launch
    assert [s[0] for s in specialization[:5]] == ["*fp32", "*fp32", "*fp32", "fp32", "fp32"]
    assert "# src[test_direct_launch.py" in kernels[0].device_source  # the user's text kept:
    assert "out[t] = params[t] * backend" in kernels[0].device_source
    torch.testing.assert_close(binder_names(*args), args[0] * 0.5 + args[1] * 2.0)

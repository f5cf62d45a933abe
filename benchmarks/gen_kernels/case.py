"""What the generalization benchmark knows about one user-style kernel: how to make its inputs,
its eager PyTorch reference, how to run it through tilecraft, and its GPU and CPU shapes.

Input: nothing (a plain record). Output: :class:`Case` objects the registry in
``benchmarks.gen_kernels`` collects and ``benchmarks.generalize`` and the tests consume.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

import tilecraft as tc

Inputs = tuple[torch.Tensor, ...]
# make_inputs(shape, device, seed)
MakeInputs = Callable[[tuple[int, ...], str, int], Inputs]
# run(kernels, inputs): kernels maps each of the case's kernel names to what to launch (the case's
# own decorated kernel, a re-decorated variant with other options, e.g. quick tuning, or a wrapper)
Runner = Callable[[Mapping[str, Callable[..., Any]], Inputs], Any]


@dataclasses.dataclass(frozen=True)
class Case:
    """One benchmark kernel. ``make_inputs(shape, device, seed)`` returns random (never zero)
    inputs; ``reference(*inputs)`` is the eager PyTorch a user would write (fp32 math where the
    kernel upcasts), also what eager and ``torch.compile`` are timed on; ``atol`` bounds the max
    absolute error of tilecraft's outputs against it at the CPU shapes.

    An in-place kernel's ``run`` and ``reference`` copy the state first (the inputs must stay
    as they were), so each timed call would pay the copy: tilecraft's as separate copy
    kernels, ``torch.compile``'s fused into its update. ``timed_run`` / ``timed_reference``
    then update the state in place on both sides, with no copy, and are what the benchmark
    times (on a copy of the inputs that the correctness checks never read)."""

    name: str
    kernels: tuple[tc.Kernel, ...]
    make_inputs: MakeInputs
    reference: Callable[..., Any]
    run: Runner
    gpu_shapes: tuple[tuple[int, ...], ...]
    cpu_shapes: tuple[tuple[int, ...], ...]
    atol: float
    timed_run: Runner | None = None
    timed_reference: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if not self.kernels or not self.gpu_shapes or not self.cpu_shapes:
            raise ValueError(f"case {self.name!r}: needs kernels, GPU shapes and CPU shapes")
        if self.atol <= 0:
            raise ValueError(f"case {self.name!r}: atol must be positive")
        if (self.timed_run is None) != (self.timed_reference is None):
            raise ValueError(f"case {self.name!r}: timed_run and timed_reference go together")

    def variants(self, **options: Any) -> dict[str, tc.Kernel]:
        """The case's kernels by name, re-decorated with ``options`` (none: the kernels as
        written). A fresh Kernel object each call, so nothing compiled or tuned is shared."""
        return {
            k.__name__: tc.kernel(k.fn, static_shapes=k.static_shapes, **options)
            for k in self.kernels
        }


def assert_matches_reference(case: Case, shape: tuple[int, ...], device: str) -> None:
    """Run ``case`` at ``shape`` on ``device`` (its kernels as written: discovery picks the
    config) and check every output against the eager reference within ``case.atol``; a bf16
    output may also sit one bf16 ulp away (2**-7 of the value: an fp32 sum in another order
    rounded to bf16)."""
    inputs = case.make_inputs(shape, device, 0)
    got = case.run({k.__name__: k for k in case.kernels}, inputs)
    want = case.reference(*inputs)
    got, want = (x if isinstance(x, tuple) else (x,) for x in (got, want))
    for g, w in zip(got, want, strict=True):
        rtol = 2.0**-7 if g.dtype == torch.bfloat16 else 0.0
        torch.testing.assert_close(g.float(), w.float(), rtol=rtol, atol=case.atol)


def one_kernel_case(
    name: str,
    kernel: tc.Kernel,
    make_inputs: MakeInputs,
    reference: Callable[..., Any],
    gpu_shapes: tuple[tuple[int, ...], ...],
    cpu_shapes: tuple[tuple[int, ...], ...],
    atol: float,
) -> Case:
    """A case of one kernel launched on the inputs as they come."""
    return Case(
        name=name,
        kernels=(kernel,),
        make_inputs=make_inputs,
        reference=reference,
        run=lambda k, inp: k[kernel.__name__](*inp),
        gpu_shapes=gpu_shapes,
        cpu_shapes=cpu_shapes,
        atol=atol,
    )


def copy_state(name: str, mutated: tuple[int, ...]) -> Runner:
    """A runner for an in-place kernel: copy the mutated inputs first, so the inputs stay."""
    return with_args(name, mutated=mutated)


def with_args(name: str, *extra: Any, mutated: tuple[int, ...] = ()) -> Runner:
    """A runner that appends the case's Python-number arguments ``extra`` to its inputs
    (copying the ``mutated`` inputs first)."""

    def run(kernels: Mapping[str, Callable[..., Any]], inputs: Inputs) -> Any:
        args = [x.clone() if i in mutated else x for i, x in enumerate(inputs)]
        return kernels[name](*args, *extra)

    return run


def ref_args(fn: Callable[..., Any], *extra: Any) -> Callable[..., Any]:
    """A reference that appends the case's Python-number arguments ``extra``."""
    return lambda *inputs: fn(*inputs, *extra)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(
    shape: tuple[int, ...], dtype: torch.dtype, device: str, g: torch.Generator
) -> torch.Tensor:
    """Normal data drawn on the CPU (same values on every device), moved to ``device``; on
    ``meta`` (shapes only) nothing is drawn."""
    if device == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    return torch.randn(shape, generator=g, dtype=torch.float32).to(device=device, dtype=dtype)


def meta_tensors(*shapes: tuple[int, ...], dtype: torch.dtype = torch.float32) -> Inputs:
    """Empty ``meta`` tensors of ``shapes`` (an input maker's shapes-only answer for ``meta``)."""
    return tuple(torch.empty(sh, dtype=dtype, device="meta") for sh in shapes)


def randint(
    low: int, high: int, shape: tuple[int, ...], device: str, g: torch.Generator
) -> torch.Tensor:
    """int64 uniform in [low, high), drawn on the CPU (meta: shapes only)."""
    if device == "meta":
        return torch.empty(shape, dtype=torch.int64, device=device)
    return torch.randint(low, high, shape, generator=g).to(device)

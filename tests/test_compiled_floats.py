"""Float arguments under torch.compile (runtime/op_floats.py): a learning rate that changes
every step no longer recompiles the caller every step (fuzz round 52c: 8 steps, then the
recompile limit; fullgraph failed at step 9). Floats that size an output stay constants, and
kernels with a backward still read their floats as numbers."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch

import tilecraft as tc
from tilecraft.frontend.host_aliases import host_reads
from tilecraft.runtime import op_floats


@tc.kernel(static_shapes=True)
def sgd_step(p: torch.Tensor, g: torch.Tensor, lr: float, decay: float) -> torch.Tensor:
    (n,) = p.size()
    out = torch.empty_like(p)
    for tn in tc.tile(n):
        out[tn] = p[tn] * (1.0 - lr * decay) - lr * g[tn]
    return out


@tc.kernel(static_shapes=True)
def ceil_repeat(x: torch.Tensor, r: float) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty([n * math.ceil(r)], dtype=x.dtype, device=x.device)
    for t in tc.tile(out.size(0)):
        out[t] = x[t % n] * r
    return out


@tc.kernel(static_shapes=True)
def keep_head(x: torch.Tensor, fraction: float) -> torch.Tensor:
    (n,) = x.size()
    keep = max(1, int(n * fraction))
    out = torch.empty([keep], dtype=x.dtype, device=x.device)
    for tk in tc.tile(keep):
        out[tk] = x[tk] * fraction
    return out


@pytest.fixture
def dynamo_stats() -> Iterator[dict[str, int]]:
    import torch._dynamo

    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    yield counters["stats"]
    torch._dynamo.reset()


def test_a_float_changing_every_step_compiles_twice(
    device: str, dynamo_stats: dict[str, int]
) -> None:
    """As torch does for its own ops: the first graph specializes, the second takes the float
    as an input. Was one graph per value, and fullgraph raised at step 9."""
    p, g = torch.randn(300, device=device), torch.randn(300, device=device)
    step = torch.compile(lambda p, g, lr: sgd_step(p, g, lr, 0.01) + 0.0, fullgraph=True)
    for i in range(12):
        lr = 0.1 / (i + 1)
        torch.testing.assert_close(step(p, g, lr), p * (1.0 - lr * 0.01) - lr * g)
        if i == 0:  # the first compile keeps floats constants (a CPU tensor in the graph
            # made inductor skip CUDA graphs): the op takes floats
            assert [info.float_tensors for info, _ in sgd_step._ops.ops.values()] == [()]
    assert dynamo_stats["unique_graphs"] <= 2, dict(dynamo_stats)
    assert sorted(info.float_tensors for info, _ in sgd_step._ops.ops.values()) == [(), (2, 3)]


def test_a_float_that_sizes_an_output_stays_a_constant(
    device: str, dynamo_stats: dict[str, int]
) -> None:
    x = torch.randn(64, device=device)
    head = torch.compile(lambda x, f: keep_head(x, f) + 0.0)
    for fraction in (0.5, 0.25, 0.75):
        got = head(x, fraction)
        keep = int(64 * fraction)
        assert got.shape == (keep,)
        torch.testing.assert_close(got, x[:keep] * fraction)
    repeat = torch.compile(lambda x, r: (ceil_repeat(x, r), ceil_repeat(x, r).shape[0]))
    for r in (1.0, 0.5, 2.5):
        got, traced = repeat(x, r)
        assert traced == got.shape[0] == 64 * math.ceil(r)
        torch.testing.assert_close(got, x.repeat(math.ceil(r)) * r)


def test_which_floats_travel_as_tensors() -> None:
    """Floats host code never reads (device loops alone do). Two probe values (1.0, 0.625)
    once decided it: ``math.ceil(r)`` agreed on both and sized the output wrong from the
    stand-in after a recompile (aot_eager 8 elements for 24; inductor's size assert)."""

    def tensor_floats(kernel: tc.Kernel, kinds: tuple[tuple[object, ...], ...]) -> tuple[int, ...]:
        src = kernel.source
        host = host_reads(src.tree, [loop.node for loop in src.loops])
        return op_floats.device_only_floats(kinds, list(kernel.signature.parameters), host)

    tensor, number, integer = ("Tensor", "torch.float32", 1, "cpu"), ("float",), ("int",)
    assert tensor_floats(sgd_step, (tensor, tensor, number, number)) == (2, 3)
    assert tensor_floats(keep_head, (tensor, number)) == ()  # int(n * fraction) in host code
    assert tensor_floats(ceil_repeat, (tensor, number)) == ()  # math.ceil(r) in host code
    assert tensor_floats(sgd_step, (tensor, tensor, integer, integer)) == ()  # no floats


def test_the_op_reads_a_tensor_float_back_exactly() -> None:
    value = 0.1 + 1e-17 * 3  # not an fp32 value: the float64 carrier must keep every bit
    carried = op_floats.to_tensors((value, 3), (0,))
    assert isinstance(carried[0], torch.Tensor) and carried[0].dtype == torch.float64
    assert carried[1] == 3
    back = op_floats.to_floats(carried, (0,))
    assert back[0] == value and type(back[0]) is float


def test_a_backward_registered_after_a_compiled_call_sees_floats(
    device: str, dynamo_stats: dict[str, int]
) -> None:
    """The op made before the backward carried ``s`` as a tensor; the backward reads it as a
    number (``g * s``), so the kernel's next op with autograd takes it as a float again."""

    @tc.kernel(static_shapes=True)
    def scale_late(x: torch.Tensor, s: float) -> torch.Tensor:
        (n,) = x.size()
        out = torch.empty_like(x)
        for tn in tc.tile(n):
            out[tn] = x[tn] * s
        return out

    x = torch.randn(40, device=device)
    torch.testing.assert_close(torch.compile(lambda a: scale_late(a, 1.5))(x), x * 1.5)
    scale_late.register_backward(lambda ctx, g: (g * ctx.s, None), _save_s)
    leaf = x.clone().requires_grad_()
    compiled = torch.compile(lambda a, s: scale_late(a, s).sum(), fullgraph=True)
    for s in (2.0, 3.0):
        leaf.grad = None
        compiled(leaf, s).backward()
        assert leaf.grad is not None
        torch.testing.assert_close(leaf.grad, torch.full_like(x, s))


def _save_s(ctx: object, inputs: tuple[object, ...], output: object) -> None:
    assert type(inputs[1]) is float, type(inputs[1])
    ctx.s = inputs[1]  # type: ignore[attr-defined]


def test_a_changing_float_under_dynamic_true_compiles_once(
    device: str, dynamo_stats: dict[str, int]
) -> None:
    """``dynamic=True`` makes floats graph inputs from the first compile: with them kept
    constants there, every value recompiled (fullgraph failed at step 9; fuzz 53c)."""
    p, g = torch.randn(33, device=device), torch.randn(33, device=device)
    step = torch.compile(
        lambda p, g, lr: sgd_step(p, g, lr, 0.0), fullgraph=True, backend="aot_eager", dynamic=True
    )
    for i in range(10):
        lr = 0.1 / (i + 1)
        torch.testing.assert_close(step(p, g, lr), p - lr * g)
    assert dynamo_stats["unique_graphs"] == 1, dict(dynamo_stats)


def test_a_numpy_float_argument_under_torch_compile(
    device: str, dynamo_stats: dict[str, int]
) -> None:
    """Dynamo traces a ``numpy.float64`` as an array: the op had no schema type for it
    ("argument 'lr' is a ndarray"). It is taken as the Python float it holds (through a graph
    break: Dynamo's .item() of it ends the graph; fullgraph=True still refuses it)."""
    import numpy as np

    p, g = torch.randn(33, device=device), torch.randn(33, device=device)
    step = torch.compile(lambda p, g, lr: sgd_step(p, g, lr, 0.0), backend="aot_eager")
    torch.testing.assert_close(step(p, g, np.float64(0.25)), p - 0.25 * g)


@tc.kernel(static_shapes=True)
def scaled(x: torch.Tensor, s: float) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn] = x[tn] * s
    return out


scaled.register_backward(lambda ctx, g: (g * ctx.s, None), _save_s)


def test_a_kernel_with_a_backward_takes_changing_floats_without_grad(
    device: str, dynamo_stats: dict[str, int]
) -> None:
    """A kernel with a backward recompiled the caller for every new float even under no_grad
    (fuzz 53c): its one op read floats as numbers for the user's setup_context. Calls autograd
    need not see take the op without a backward, floats as tensors; calls needing gradients
    still see floats as numbers."""
    x = torch.randn(50, device=device)
    infer = torch.compile(lambda a, s: scaled(a, s) + 1.0, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        for i in range(10):
            s = 0.5 + i / 8
            torch.testing.assert_close(infer(x, s), x * s + 1.0)
    assert dynamo_stats["unique_graphs"] <= 2, dict(dynamo_stats)
    leaf = x.clone().requires_grad_()
    train = torch.compile(lambda a, s: scaled(a, s).sum(), backend="aot_eager")
    for s in (2.0, 3.0):
        leaf.grad = None
        train(leaf, s).backward()
        assert leaf.grad is not None
        torch.testing.assert_close(leaf.grad, torch.full_like(x, s))

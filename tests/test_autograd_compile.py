"""Autograd and torch.compile at their edges: errors that name the kernel under tracing, kernels
that write their arguments, value-dependent returns, argument kinds an op cannot take, and the
ops a compiled backward calls in a later process (runtime/torch_op.py, runtime/op_records.py).
Found by fuzzing autograd x torch.compile (session 35)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import ArgumentError


@tc.kernel
def double(x: torch.Tensor) -> torch.Tensor:
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] * 2
    return out


def test_compile_dynamic_of_the_kernel_itself_and_of_a_closure(device: str) -> None:
    """The op registry's id was an int, which dynamic=True made a dynamic int that op_for's
    constant folding refused (only a module-global lookup worked)."""
    x = torch.arange(6.0, device=device)
    torch.testing.assert_close(torch.compile(double, dynamic=True, backend="eager")(x), x * 2)
    closure = torch.compile(lambda a: double(a) + 1, dynamic=True, backend="eager")
    torch.testing.assert_close(closure(x), x * 2 + 1)


def test_no_backward_under_fullgraph_names_the_kernel_and_the_fix(device: str) -> None:
    """Building the error under the trace read linecache: the user got dynamo's 'getline should
    not be traced' instead."""
    x = torch.arange(6.0, device=device, requires_grad=True)
    full = torch.compile(lambda a: double(a).sum(), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="has no backward") as info:
        full(x)
    assert "double.register_backward" in str(info.value) and "getline" not in str(info.value)
    broken = torch.compile(lambda a: double(a).sum(), backend="aot_eager")  # a graph break
    # (once dynamo's recompile limit for Kernel._dispatch is reached, earlier tests' compiles
    # count, the call runs eagerly: the eager path's wording, naming the argument)
    with pytest.raises(
        ArgumentError, match=r"double\(\): (an input|argument 'x') requires grad"
    ) as info:
        broken(x)
    assert "double.register_backward" in str(info.value)


@tc.kernel
def double_(x: torch.Tensor) -> torch.Tensor:
    (m,) = x.size()
    for tm in tc.tile(m):
        x[tm] = x[tm] * 2
    return x


double_.register_backward(lambda ctx, g: g * 2)


def test_a_kernel_that_writes_its_argument_refuses_autograd_every_time(device: str) -> None:
    """The first call raised torch's 'non-functional operator' (a hashed op name), the second
    ran without autograd: wrong gradients, a leaf mutated in place."""
    a = torch.arange(1.0, 5.0, device=device, requires_grad=True)
    for _ in range(2):
        with pytest.raises(ArgumentError, match=r"double_\(\): .* writes into its argument 'x'"):
            double_(a * 1)
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0]
    with torch.no_grad():  # and without gradients it runs, eager and compiled
        assert double_(torch.ones(4, device=device)).tolist() == [2.0] * 4
    compiled = torch.compile(lambda t: double_(t), fullgraph=True, backend="aot_eager")
    assert compiled(torch.ones(4, device=device)).tolist() == [2.0] * 4


@tc.kernel
def scale_by(x: torch.Tensor, factors: tuple[int, int]) -> torch.Tensor:
    (m,) = x.size()
    f = factors[0] * factors[1]
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] * f
    return out


scale_by.register_backward(lambda ctx, g: (g * 6, None))


def test_an_argument_an_op_cannot_take_is_named_before_the_host_code_runs(device: str) -> None:
    """The host code ran on a None stand-in first: "'NoneType' object is not subscriptable"."""
    assert scale_by(torch.arange(4.0, device=device), (2, 3)).tolist() == [0.0, 6.0, 12.0, 18.0]
    with pytest.raises(ArgumentError, match="argument 'factors' is a tuple") as info:
        scale_by(torch.arange(4.0, device=device, requires_grad=True), (2, 3))
    assert "separate arguments" in str(info.value)


@tc.kernel
def drop(x: torch.Tensor, p: float) -> torch.Tensor:
    if p == 0.0:
        return x
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] / (1.0 - p)
    return out


drop.register_backward(lambda ctx, g: (g, None))


@pytest.mark.parametrize("p", [0.0, 0.5])
def test_an_argument_returned_for_some_values_is_copied_by_the_op(p: float, device: str) -> None:
    """The layout read with p = 1.0 says "new tensor"; at p = 0.0 the kernel returns x, which an
    op may not return (torch: 'must not also be an input')."""
    x = torch.arange(4.0, device=device, requires_grad=True)
    y = drop(x, p)
    y.sum().backward()
    assert y.tolist() == (x / (1 - p)).tolist() and x.grad is not None
    assert x.grad.tolist() == [1.0] * 4
    compiled = torch.compile(lambda t: drop(t, p), fullgraph=True, backend="aot_eager")
    assert compiled(x.detach()).tolist() == (x / (1 - p)).tolist()


@tc.kernel
def scaled(x: torch.Tensor, s: float) -> torch.Tensor:
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] * s
    return out


scaled.register_backward(lambda ctx, g: g * 3.0)  # forgot the None for s


def test_a_backward_returning_too_few_gradients_says_which(device: str) -> None:
    x = torch.arange(4.0, device=device, requires_grad=True)
    with pytest.raises(ArgumentError, match=r"returned 1 gradient\(s\) for 2 parameters \(x, s\)"):
        scaled(x, 3.0).sum().backward()


def test_host_code_failing_under_compile_says_so_as_eager_does(device: str) -> None:
    from examples.cross_entropy import cross_entropy

    logits = torch.randn(6, 4, device=device).t()  # view(-1) fails
    labels = torch.tensor([0, 1, 2, 3], device=device)
    with pytest.raises(ArgumentError, match="host code failed on these arguments"):
        cross_entropy(logits, labels)
    compiled = torch.compile(cross_entropy, fullgraph=True, backend="eager")
    with pytest.raises(Exception, match=r"cross_entropy\(\): the kernel's host code failed"):
        compiled(logits, labels)


_TRAIN_STEP = """
import sys
import torch, tilecraft as tc

@tc.kernel
def square(x):
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] * x[tm]
    return out

@tc.kernel
def square_bwd(g, x):
    (m,) = x.size()
    gx = torch.empty_like(x)
    for tm in tc.tile(m):
        gx[tm] = 2 * g[tm] * x[tm]
    return gx

square.register_backward(lambda ctx, g: square_bwd(g, ctx.saved_tensors[0]))
x = torch.arange(8.0, device=sys.argv[1], requires_grad=True)
torch.compile(lambda a: square(a).sum(), fullgraph=True)(x).backward()
print("grad", x.grad.tolist())
"""


def test_a_second_process_with_warm_inductor_caches_defines_the_backward_ops(
    tmp_path: Path, device: str
) -> None:
    """The second run's compiled backward came from inductor's disk cache and called
    ``tilecraft.square_bwd_<digest>_0``, which only tracing the backward had defined."""
    script = tmp_path / "train_step.py"
    script.write_text(textwrap.dedent(_TRAIN_STEP))
    env: dict[str, Any] = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "TILECRAFT_CACHE_DIR": str(tmp_path / "tilecraft"),
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path]),
    }
    want = f"grad {[2.0 * i for i in range(8)]}"
    for run in (1, 2):
        done = subprocess.run(
            [sys.executable, str(script), device],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0 and want in done.stdout, (run, done.stderr[-2000:])
    assert list((tmp_path / "tilecraft" / "ops").glob("square_*.json"))


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_vmap_runs_the_kernel_as_its_op_per_example(device: str) -> None:
    """torch.vmap's BatchedTensors have no memory: Triton's launcher failed on them ("Cannot
    access storage of BatchedTensorImpl"), also after a plain call made the fast path."""
    xs = torch.arange(12.0, device=device).reshape(3, 4)
    fresh = tc.kernel(double.fn)
    torch.testing.assert_close(torch.vmap(fresh)(xs), xs * 2)  # the first call: vmap's
    torch.testing.assert_close(fresh(xs[0]), xs[0] * 2)  # a plain call: the fast path exists
    torch.testing.assert_close(torch.vmap(fresh)(xs), xs * 2)


@tc.kernel(static_shapes=True)
def gate_row_sums(w: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """w [3H, I] holds three gates' rows (nn.GRUCell's weight_ih), viewed by h's H."""
    hd = h.size(1)
    w3 = w.view(3, hd, w.size(1))
    out = torch.empty([3, hd], dtype=torch.float32, device=w.device)
    for tg, th in tc.tile([3, hd]):
        out[tg, th] = torch.sum(w3[tg, th, :], dim=-1)
    return out


@tc.kernel(static_shapes=True)
def group_absmax(x: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    xg = x.view(m, k // 128, 128)
    out = torch.empty([m, k // 128], dtype=torch.float32, device=x.device)
    for tm, tg in tc.tile([m, k // 128]):
        out[tm, tg] = torch.amax(xg[tm, tg, :].abs(), dim=-1)
    return out


def test_host_code_needing_its_sizes_relations_compiles_with_fullgraph(device: str) -> None:
    """The op's layout was read only on stand-ins whose dims are all one extent: a [3 H, I]
    weight viewed by another argument's H, or groups of 128, failed on every one ("shape
    '[720, 5, 128]' is invalid") inside torch.compile; now the call's own sizes are used."""
    w, h = torch.randn(18, 10, device=device), torch.randn(2, 6, device=device)
    compiled = torch.compile(gate_row_sums, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(w, h), w.view(3, 6, 10).sum(-1))
    x = torch.randn(4, 384, device=device)
    grouped = torch.compile(group_absmax, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(grouped(x), x.view(4, 3, 128).abs().amax(-1))


def test_host_code_needing_its_sizes_relations_compiles_with_dynamic_sizes(device: str) -> None:
    """With symbolic sizes (dynamic=True, or sizes a recompile made dynamic: the GPU run of
    the test above, after another kernel's call compiled) the sizes handed to the op's
    definition stayed symbolic, which a traced constant cannot take (a dynamo internal error)."""
    w, h = torch.randn(18, 10, device=device), torch.randn(2, 6, device=device)
    compiled = torch.compile(gate_row_sums, fullgraph=True, backend="aot_eager", dynamic=True)
    torch.testing.assert_close(compiled(w, h), w.view(3, 6, 10).sum(-1))
    x = torch.randn(4, 384, device=device)
    grouped = torch.compile(group_absmax, fullgraph=True, backend="aot_eager", dynamic=True)
    torch.testing.assert_close(grouped(x), x.view(4, 3, 128).abs().amax(-1))


@tc.kernel
def scale_bias(x: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    (m,) = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm] = x[tm] * alpha + b[tm]
    return out


def test_a_gradient_returned_for_a_number_names_the_parameter(device: str) -> None:
    """torch's own error said 'a gradient different than None at position 3' of a generated
    class; the parameter is named, with the fix."""
    fresh = tc.kernel(scale_bias.fn)
    fresh.register_backward(lambda ctx, g: (g * 2.0, g, g.sum()))
    x = torch.randn(5, device=device, requires_grad=True)
    with pytest.raises(ArgumentError, match=r"gradient of 'alpha'.*non-tensor") as info:
        fresh(x, torch.zeros(5, device=device), 2.0).sum().backward()
    assert "return None for 'alpha'" in str(info.value)


@tc.kernel
def scale_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    (m,) = x.size()
    for tm in tc.tile(m):
        out[tm] = x[tm] * 2
    return out


def test_a_writing_kernel_says_so_before_asking_for_a_backward(device: str) -> None:
    """Without a backward, a kernel writing into an argument was told to register one, which
    could not help; the argument needing grad is named; under torch.compile the reason
    follows a backward registered later (the first reason was kept)."""
    fresh = tc.kernel(scale_into.fn)
    x = torch.randn(4, device=device, requires_grad=True)
    with pytest.raises(ArgumentError, match=r"argument 'x' requires grad, .* writes into its "):
        fresh(x, torch.empty(4, device=device))
    with pytest.raises(ArgumentError, match=r"arguments 'x', 'b' require grad, but this kernel "):
        scale_bias(x, torch.zeros(4, device=device, requires_grad=True), 2.0)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a: double(a * 1.0), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="has no backward"):
        compiled(x)
    again = tc.kernel(double.fn)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a: again(a * 1.0), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="has no backward"):
        compiled(x)
    again.register_backward(lambda ctx, g: g * 2)
    torch._dynamo.reset()
    assert torch.equal(compiled(x), x.detach() * 2)


@tc.kernel
def linear_relu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x @ w  # host code: autocast makes it bf16
    out = torch.empty_like(h)
    for tm in tc.tile(h.shape[0]):
        out[tm, :] = torch.relu(h[tm, :])
    return out


def _linear_relu_backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x, w, out = ctx.saved_tensors
    gh = (g * (out > 0)).float()
    return gh @ w.float().t(), x.float().t() @ gh


linear_relu.register_backward(_linear_relu_backward)


def test_autocast_reaches_host_code_under_compile_and_autograd(device: str) -> None:
    """A compiled graph runs its ops with autocast off: the host code's matmul returned fp32 under
    torch.compile where eager returned bf16 (session 49). The op carries the autocast state."""
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(8, 16, generator=gen), torch.randn(16, 32, generator=gen)
    x, w = x.to(device), w.to(device)
    compiled = torch.compile(lambda a, b: linear_relu(a, b), fullgraph=True, backend="aot_eager")
    with torch.autocast(device, dtype=torch.bfloat16):
        eager = linear_relu(x, w)
        got = compiled(x, w)
        leaf = x.clone().requires_grad_()
        with_grad = compiled(leaf, w)
    assert eager.dtype == got.dtype == with_grad.dtype == torch.bfloat16
    torch.testing.assert_close(got, eager)
    torch.testing.assert_close(with_grad, eager)
    with_grad.float().sum().backward()
    assert leaf.grad is not None and leaf.grad.dtype == torch.float32
    plain = compiled(x, w)  # autocast off again: a new graph, fp32
    assert plain.dtype == torch.float32
    torch.testing.assert_close(plain, torch.relu(x @ w))
    for _ in range(2):  # eager calls alternating (the fast path keeps each call's dtypes)
        torch.testing.assert_close(linear_relu(x, w), torch.relu(x @ w))
        with torch.autocast(device, dtype=torch.bfloat16):
            torch.testing.assert_close(linear_relu(x, w), eager)


def test_isolated_candidates_run_the_host_code_under_the_calls_autocast(device: str) -> None:
    """On GPUs candidates run in worker processes, which ran the host code without the caller's
    autocast: every config's fp32 output 'differed' from the bf16 ref-mode baseline and the
    first call under autocast raised NoWorkingConfigError (seen on an H100)."""
    from tilecraft.autotune.baseline import compute_baseline
    from tilecraft.autotune.candidates import candidates
    from tilecraft.autotune.isolate import IsolatedRunner

    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(8, 16, generator=gen), torch.randn(16, 32, generator=gen)
    x, w = x.to(device), w.to(device)
    with torch.autocast(device, dtype=torch.bfloat16):
        bound = linear_relu.bind((x, w))
        baseline = compute_baseline(linear_relu, (x, w))
        runner = IsolatedRunner(bound, (x, w), {}, baseline, workers=1)
    assert baseline.outputs.dtype == torch.bfloat16
    try:
        config = candidates(bound.config_spec)[0][0]
        result = runner.workers[0].request("check", config, timeout_s=120)
        assert result.get("ok"), result
    finally:
        runner.close()


@tc.kernel
def halves(x: torch.Tensor) -> list[torch.Tensor]:
    a, b = torch.empty_like(x), torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        a[tm] = x[tm] * 0.5
        b[tm] = x[tm] - x[tm] * 0.5
    return [a, b]


halves.register_backward(lambda ctx, ga, gb: ga * 0.5 + gb * 0.5)


def test_a_list_return_stays_a_list_as_an_op(device: str) -> None:
    """``return [a, b]`` came back a tuple under torch.compile and through autograd."""
    x = torch.arange(4.0, device=device)
    compiled = torch.compile(lambda t: halves(t), fullgraph=True, backend="aot_eager")
    for got in (halves(x), compiled(x), halves(x.clone().requires_grad_())):
        assert isinstance(got, list) and len(got) == 2
        torch.testing.assert_close(got[0].detach(), x * 0.5)
    leaf = x.clone().requires_grad_()
    a, b = compiled(leaf)
    (a + b).sum().backward()
    assert leaf.grad is not None and torch.allclose(leaf.grad, torch.ones_like(x))


@tc.kernel(static_shapes=True)
def shift_(x: torch.Tensor, mode: int, out: torch.Tensor) -> torch.Tensor:
    for t in tc.tile(x.size(0)):
        x[t] = x[t] + 10.0 * mode
    for t in tc.tile(x.size(0)):
        out[t] = x[t] * 2
    return out


def test_parameters_named_like_torchs_own_arguments_work_as_an_op(device: str) -> None:
    """A kernel writing an argument with a parameter called `mode` failed under torch.compile:
    auto_functionalized passes the op's arguments as keywords beside its own `mode`."""
    x = torch.arange(4.0, device=device)

    def step(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        written = t.clone()
        return shift_(written, 2, torch.empty_like(t)), written

    out, written = torch.compile(step, fullgraph=True, backend="aot_eager")(x)
    torch.testing.assert_close(written, x + 20)
    torch.testing.assert_close(out, (x + 20) * 2)


@tc.kernel(static_shapes=True)
def same_output_twice(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = x[tm, :] * 3.0
    return out, out


def test_an_op_refusal_under_compile_is_tilecrafts_own_error(device: str) -> None:
    """Outputs sharing memory under torch.compile reached the user as
    InternalTorchDynamoError, which ``except tc.TilecraftError`` missed; with fullgraph the
    graph break names the reason."""
    x = torch.randn(4, 6, device=device)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a: same_output_twice(a)[1] + 1, backend="aot_eager")
    with pytest.raises(tc.TilecraftError, match="return values 0 and 1 share memory"):
        compiled(x)
    torch._dynamo.reset()
    whole = torch.compile(
        lambda a: same_output_twice(a)[1] + 1, backend="aot_eager", fullgraph=True
    )
    with pytest.raises(Exception, match="return values 0 and 1 share memory") as info:
        whole(x)
    assert "InternalTorchDynamoError" not in type(info.value).__name__

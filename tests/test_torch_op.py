"""Kernels as PyTorch ops: torch.compile (fullgraph, dynamic shapes), custom ops by hand, mutation."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import tilecraft as tc
from examples.rms_norm import EPS, rms_norm_fwd
from examples.swiglu import swiglu
from tilecraft.runtime import compiled_calls, torch_op


@pytest.fixture(autouse=True)
def _on_test_device(device: str) -> Iterator[None]:
    """Tensors made without a device land on the GPU when there is one, else the interpreter."""
    with torch.device(device):
        yield


@tc.kernel
def scale_(x: torch.Tensor, s: float) -> torch.Tensor:
    """Scales ``x`` in place and returns it."""
    (m,) = x.size()
    for tm in tc.tile(m):
        x[tm] = x[tm] * s
    return x


@tc.kernel(static_shapes=False)
def row_scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] * w[tn][None, :]
    return out


def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def _counting_backend() -> tuple[list[torch.fx.GraphModule], Any]:
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    return graphs, backend


def test_fullgraph_aot_eager_matches_eager() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, rstd = rms_norm_fwd(x * 2, w, EPS)
        return out.relu() + 1, rstd

    x, w = torch.randn(8, 32), torch.randn(32)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, w)
    want = f(x, w)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    torch.testing.assert_close(got[0], (_rms(x * 2, w)).relu() + 1, rtol=1e-4, atol=1e-4)


def test_model_with_two_kernels_is_one_graph_with_two_ops() -> None:
    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm_w = torch.nn.Parameter(torch.ones(16))
            self.up = torch.nn.Linear(16, 64)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h, _ = rms_norm_fwd(x, self.norm_w, EPS)
            gate, up = self.up(h).chunk(2, dim=-1)
            return swiglu(gate.contiguous(), up.contiguous()).sum(-1)

    model = Block()
    x = torch.randn(4, 16)
    graphs, backend = _counting_backend()
    with torch.no_grad():
        got = torch.compile(model, fullgraph=True, backend=backend)(x)
        want = model(x)
    torch.testing.assert_close(got, want)
    assert len(graphs) == 1
    targets = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert sum(t.startswith("tilecraft.") for t in targets) == 2, targets


def test_dynamic_batch_compiles_once() -> None:
    graphs, backend = _counting_backend()
    f = torch.compile(lambda x, w: row_scale(x, w) + 1, backend=backend, dynamic=True)
    w = torch.randn(24)
    for batch in (3, 5, 9, 17):
        x = torch.randn(batch, 24)
        torch.testing.assert_close(f(x, w), x * w + 1)
    assert len(graphs) == 1


def test_mutated_argument_is_declared_and_applied() -> None:
    x = torch.randn(40)
    expect = x * 3
    got = torch.compile(lambda t: scale_(t, 3.0) + 0, fullgraph=True, backend="aot_eager")(x)
    torch.testing.assert_close(x, expect)  # the input was written, as in eager
    torch.testing.assert_close(got, expect)
    info, _ = scale_._ops.ops[(torch_op.arg_kind(x), torch_op.arg_kind(3.0)), "", False]
    assert info.mutated == ("x",)
    assert info.layout == ("arg", 0)  # the argument itself, not a new op output


def test_generated_modules_are_importable() -> None:
    x, w = torch.randn(4, 8), torch.randn(8)
    rms_norm_fwd(x, w, EPS)
    program = rms_norm_fwd.bind((x, w, EPS)).default_program()
    assert sys.modules[program.module.__name__] is program.module


def test_custom_op_by_hand() -> None:
    op = torch.library.custom_op("tctest::swiglu_by_hand", mutates_args=())(swiglu)
    op.register_fake(lambda gate, up: torch.empty_like(gate))
    gate, up = torch.randn(5, 12), torch.randn(5, 12)
    want = torch.nn.functional.silu(gate) * up
    torch.testing.assert_close(op(gate, up), want)
    compiled = torch.compile(lambda a, b: op(a, b) * 2, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(gate, up), want * 2)
    assert swiglu.__name__ == "swiglu" and swiglu.__wrapped__ is swiglu.fn
    assert swiglu.__globals__ is swiglu.fn.__globals__


def test_schema_names_parameters_and_kinds() -> None:
    x = torch.randn(4, 8)
    kinds = (torch_op.arg_kind(x), torch_op.arg_kind(x[0]), torch_op.arg_kind(EPS))
    text = torch_op.schema(rms_norm_fwd, kinds, set(), 2)
    assert text == "(Tensor x, Tensor w, float eps) -> (Tensor, Tensor)"
    assert "Tensor(a!) x" in torch_op.schema(scale_, kinds[::2], {0}, 0)


@pytest.mark.gpu
def test_inductor_fullgraph_forward_and_backward_on_gpu() -> None:
    from examples.swiglu import swiglu as swiglu_kernel

    def loss(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = rms_norm_fwd(x, w, EPS)[0]
        return swiglu_kernel(h, h * 2).float().pow(2).mean()

    compiled = torch.compile(loss, fullgraph=True)  # inductor
    x = torch.randn(64, 256, device="cuda", requires_grad=True)
    w = torch.randn(256, device="cuda", requires_grad=True)
    got = compiled(x, w)
    got_grads = torch.autograd.grad(got, (x, w))
    want = loss(x, w)
    want_grads = torch.autograd.grad(want, (x, w))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    for g, r in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)


def test_import_does_not_load_dynamo_and_marks_like_the_public_decorator() -> None:
    import subprocess

    code = "import sys, tilecraft; assert 'torch._dynamo' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    marked = torch.compiler.assume_constant_result(lambda: 0)
    assert marked._dynamo_marked_constant is True  # what mark_constant sets without dynamo
    assert compiled_calls.op_for._dynamo_marked_constant is True  # type: ignore[attr-defined]


def test_call_on_fake_tensors_outside_dynamo_records_the_op() -> None:
    """AOT autograd traces a backward with functional/fake tensors after dynamo has finished
    (``is_compiling()`` is False by then, as under inductor): the kernel must become its op in the
    graph, never try to launch on tensors without memory."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from examples.swiglu import swiglu_bwd

    g, a, b = (torch.randn(8, 32) for _ in range(3))
    graph = make_fx(lambda *t: swiglu_bwd(*t), tracing_mode="fake")(g, a, b)
    assert f"torch.ops.{torch_op.NAMESPACE}.swiglu_bwd" in graph.code
    for got, want in zip(graph(g, a, b), swiglu_bwd(g, a, b), strict=True):
        torch.testing.assert_close(got, want)


@tc.kernel
def double_into(out: torch.Tensor, x: torch.Tensor) -> None:
    """Writes ``out`` only through ``tc.store``."""
    for t in tc.tile(x.size(0)):
        tc.store(out, [t], x[t] * 2)


def test_tc_store_is_a_mutation_and_the_op_name_follows_its_schema() -> None:
    """A kernel writing only through ``tc.store`` had ``mutates_args=()``: torch.compile's
    functionalization dropped the writes (zeros). And the op's name now digests its schema, so
    inductor's on-disk graph cache cannot serve a graph built for an older schema (it did
    after the fix, until the cache was cleared)."""
    x = torch.arange(6, dtype=torch.float32)

    def f(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        double_into(out, x)
        return out

    graphs, backend = _counting_backend()
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend=backend)(x), 2 * x)
    ops = [n for g in graphs for n in g.graph.nodes if n.op == "call_function"]
    assert any("Tensor(a!) out" in str(getattr(n.target, "_schema", "")) for n in ops), ops
    assert torch_op.op_base_name(double_into, "(Tensor(a!) out) -> ()") != torch_op.op_base_name(
        double_into, "(Tensor out) -> ()"
    )


@tc.kernel(static_shapes=True)
def scaled_dropout_like(x: torch.Tensor, p: float) -> torch.Tensor:
    """Host code that divides by ``1 - p`` and views sizes in threes."""
    n, c = x.size()
    triples = x.view(n, c // 3, 3)
    scale = 1.0 / (1.0 - p)
    out = torch.empty([n, c // 3], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        out[tn, :] = torch.sum(triples[tn, :, :], dim=-1) * scale
    return out


def test_the_op_layout_is_read_from_stand_ins_the_host_code_runs_on() -> None:
    """torch.compile read the output layout from stand-ins with every float 1.0 and every
    size 16: ``1 / (1 - p)`` raised ZeroDivisionError and ``x.view(n, c // 3, 3)`` an invalid
    shape, though the call's own values were fine (fuzzing, session 34)."""
    x = torch.randn(4, 6)
    graphs, backend = _counting_backend()
    got = torch.compile(lambda t: scaled_dropout_like(t, 0.25), fullgraph=True, backend=backend)(x)
    torch.testing.assert_close(got, x.view(4, 2, 3).sum(-1) / 0.75)
    assert graphs


@tc.kernel(static_shapes=False)
def block_sums(x: torch.Tensor) -> torch.Tensor:
    mb = tc.register_block_size(x.size(0))
    m = x.size(0)
    partial = torch.zeros([(m + mb - 1) // mb], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m, block_size=mb):
        partial[tm.id] = torch.sum(x[tm].to(torch.float32), dim=0)
    return partial.sum()


def test_host_arithmetic_of_a_size_and_a_block_size_under_dynamic_compile() -> None:
    """``m + mb - 1`` with a SymInt size and a registered block size raised TypeError in the
    fake implementation (SymInt refuses int subclasses) under torch.compile(dynamic=True)."""
    x = torch.randn(37)
    graphs, backend = _counting_backend()
    got = torch.compile(lambda t: block_sums(t) * 2, fullgraph=True, dynamic=True, backend=backend)(
        x
    )
    torch.testing.assert_close(got, x.sum() * 2, rtol=1e-5, atol=1e-5)
    assert graphs


@tc.kernel
def temperature_scaled(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    if temperature == 1.0:  # host code returns its argument for one value only
        return logits
    out = torch.empty_like(logits)
    for t in tc.tile(logits.size(0)):
        out[t] = logits[t] / temperature
    return out


@tc.kernel
def decayed_(p: torch.Tensor, decay: float) -> None:
    if decay == 1.0:  # writes its argument for other values only
        return
    for t in tc.tile(p.size(0)):
        p[t] = p[t] * decay


def test_the_op_serves_each_path_host_code_takes_for_a_number() -> None:
    """The op's layout was read on the stand-in 1.0 alone: ``if temperature == 1.0: return
    logits`` made the op return its input for every temperature, under torch.compile and with
    autograd (fuzz round 55b); a write only other values make was missing from the schema."""
    x = torch.randn(8)
    compiled = torch.compile(lambda t, s: temperature_scaled(t, s), fullgraph=True)
    torch.testing.assert_close(compiled(x, 0.5), x / 0.5)
    torch.testing.assert_close(compiled(x, 1.0), x)
    info, _ = temperature_scaled._ops.get(
        (("Tensor", "torch.float32", 1, x.device.type), ("float",))
    )
    assert info.layout == ("out", 0)
    p = torch.randn(8)
    want = p * 0.5
    torch.compile(lambda t: decayed_(t, 0.5), fullgraph=True)(p)
    torch.testing.assert_close(p, want)
    info, _ = decayed_._ops.get((("Tensor", "torch.float32", 1, p.device.type), ("float",)))
    assert info.mutated == ("p",)

"""Dot operands that programs would recompute are computed once by a pre-pass (ir/hoist.py):
hoisted only where the operand is elementwise over its own two tiles and recomputed along another
grid dim; the pre-pass runs before the matmul in its launcher; numerics unchanged."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_dots import int8_weight_gemm
from tilecraft.ir import hoist
from tilecraft.ir.hoist import SCRATCH_PREFIX
from tilecraft.ir.nodes import Op
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

# ``a @ (w * scale)`` with an int8 weight dequantized in the k loop (the right operand), as a
# user wrote it (a held-out benchmark kernel), and the same source kept in the loop
dequant_matmul = int8_weight_gemm
dequant_matmul_in_loop = tc.kernel(static_shapes=True, hoist_operands=False)(int8_weight_gemm.fn)


@tc.kernel(static_shapes=True)
def scaled_rows_matmul(x: torch.Tensor, s: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``(x * s[k]) @ w`` with the left operand computed per k column (recomputed along n)."""
    m, kk = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(kk):
            xt = torch.relu(x[tm, tk] * s[tk][None, :]).to(w.dtype)
            acc = tc.dot(xt, w[tk, tn], acc=acc)
        out[tm, tn] = acc
    return out


@tc.kernel(static_shapes=True)
def lower_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``tril(a) @ b``: the left operand's mask reads the row tile's index (not hoistable)."""
    m, kk = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(kk):
            at = torch.where(tm.index[:, None] >= tk.index[None, :], a[tm, tk], 0.0)
            acc = tc.dot(at, b[tk, tn], acc=acc)
        out[tm, tn] = acc
    return out


@pytest.fixture(autouse=True)
def _small_operands_hoist(monkeypatch: pytest.MonkeyPatch) -> None:
    """Interpreter-sized operands: hoisted from 1 element (the real floor is in its own test)."""
    monkeypatch.setattr(hoist, "MIN_ELEMENTS", 1)


def _dequant_inputs(m: int, k: int, n: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    w = torch.randint(-127, 128, (k, n), generator=g, dtype=torch.int8)
    scale = (0.5 + torch.rand(n, generator=g)) / (127 * k**0.5)
    return tuple(t.to(device) for t in (a, w, scale))


def _dequant_reference(a: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (a.float() @ (w.float() * scale).to(a.dtype).float()).to(a.dtype)


def _loops(kernel: tc.Kernel, *args: torch.Tensor) -> list:
    return kernel.bind(args).traced.loops


def test_a_recomputed_right_operand_is_loaded_from_a_prepass_buffer() -> None:
    pre, main = _loops(dequant_matmul, *_dequant_inputs(600, 70, 90))
    assert pre.prepass_for == main.index and main.prepass_for is None
    (store,) = [n for n in pre.walk() if n.op is Op.STORE]
    scratch = store.attrs["tensor"]
    assert scratch.name.startswith(SCRATCH_PREFIX)
    assert scratch.shape == (70, 90) and scratch.dtype == torch.bfloat16
    (dot,) = [n for n in main.walk() if n.op is Op.DOT]
    operand = dot.inputs[1]
    assert operand.op is Op.LOAD and operand.attrs["tensor"] is scratch
    # the dequantization left the matmul: no int8 load, no cast of one
    assert not any(n.op is Op.LOAD and n.attrs["tensor"].name == "w" for n in main.walk())
    assert {n.attrs["tensor"].name for n in pre.walk() if n.op is Op.LOAD} == {"w", "wscale"}


@pytest.mark.parametrize("m", [600, 1000])
def test_hoisted_matmul_matches_eager(m: int) -> None:
    args = _dequant_inputs(m, 70, 90)
    want = _dequant_reference(*args)
    torch.testing.assert_close(dequant_matmul(*args), want, rtol=2e-2, atol=2e-2)
    bound = dequant_matmul.bind(args)
    for blocks in ([32, 32, 16], [64, 16, 32]):
        config = bound.config_spec.default().replace(block_sizes=blocks)
        program = bound.compile_config(config)
        torch.testing.assert_close(bound.run(program, *args), want, rtol=2e-2, atol=2e-2)


def test_a_recomputed_left_operand_is_hoisted_too() -> None:
    g = torch.Generator().manual_seed(1)
    x, s, w = torch.randn(40, 50, generator=g), torch.randn(50, generator=g), torch.randn(50, 600)
    loops = _loops(scaled_rows_matmul, x, s, w)
    assert len(loops) == 2 and loops[0].prepass_for == loops[1].index
    (dot,) = [n for n in loops[1].walk() if n.op is Op.DOT]
    assert dot.inputs[0].op is Op.LOAD
    assert dot.inputs[0].attrs["tensor"].name.startswith(SCRATCH_PREFIX)
    want = torch.relu(x * s) @ w
    torch.testing.assert_close(scaled_rows_matmul(x, s, w), want, rtol=1e-4, atol=1e-4)


def test_operands_that_are_not_recomputed_or_not_elementwise_stay_in_the_loop() -> None:
    # three programs along m (in blocks of 128): the pre-pass would not win its bytes back
    assert len(_loops(dequant_matmul, *_dequant_inputs(384, 70, 90))) == 1
    # the mask reads the row tile: every program computes a different operand
    a, b = torch.randn(600, 60), torch.randn(60, 40)
    assert len(_loops(lower_matmul, a, b)) == 1
    torch.testing.assert_close(lower_matmul(a, b), a.tril() @ b, rtol=1e-4, atol=1e-4)
    # the user's opt-out
    args = _dequant_inputs(600, 70, 90)
    assert len(_loops(dequant_matmul_in_loop, *args)) == 1
    want = _dequant_reference(*args)
    torch.testing.assert_close(dequant_matmul_in_loop(*args), want, rtol=2e-2, atol=2e-2)


def test_small_operands_stay_in_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hoist, "MIN_ELEMENTS", 1 << 21)
    assert len(_loops(dequant_matmul, *_dequant_inputs(4096, 4096, 4096, "meta"))) == 2
    assert len(_loops(dequant_matmul, *_dequant_inputs(4096, 256, 4096, "meta"))) == 1  # 1M
    x, s, w = (torch.empty(shape, device="meta") for shape in ((64, 4096), (4096,), (4096, 4096)))
    assert len(_loops(scaled_rows_matmul, x, s, w)) == 1  # 64x4096 (32 programs along n)
    x = torch.empty(512, 4096, device="meta")
    assert len(_loops(scaled_rows_matmul, x, s, w)) == 2


def test_the_matmul_launcher_runs_the_prepass_first() -> None:
    args = _dequant_inputs(600, 70, 90)
    pre, main = _loops(dequant_matmul, *args)
    code = dequant_matmul.bind(args).to_triton_code()
    launcher = code[code.index(f"def launch_{main.index}(") :]
    assert launcher.index(f"launch_{pre.index}(env, spec)") < launcher.index("[(")
    prepass = code[code.index(f"def launch_{pre.index}(") :]
    assert f"env['{SCRATCH_PREFIX}{pre.index}'] = torch.empty([70, 90]" in prepass


def test_hoisted_matmul_cross_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    args = _dequant_inputs(640, 256, 256)
    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:90")
    dequant_matmul.reset()
    code = dequant_matmul.bind(args).to_triton_code()
    # the matmul streams both operands by TMA once the weight is a plain load
    assert code.count("_desc.load(") >= 3, code
    monkeypatch.delenv("TILECRAFT_TARGET")
    dequant_matmul.reset()
    rows = check_kernel(dequant_matmul, args, targets, lambda b: [b.config_spec.default()])
    assert len(rows) == 4  # the pre-pass and the matmul, on each target
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@pytest.mark.gpu
def test_hoisted_matmul_on_gpu() -> None:
    # operands of at least the real MIN_ELEMENTS: the autotuner's workers import the kernel
    # afresh, without this file's patched floor, and must trace the same two loops
    for shape in ((512, 2048, 1024), (4096, 1024, 2100)):
        args = _dequant_inputs(*shape, device="cuda")
        assert len(_loops(dequant_matmul, *args)) == 2
        torch.testing.assert_close(
            dequant_matmul(*args), _dequant_reference(*args), rtol=2e-2, atol=2e-2
        )


@tc.kernel(static_shapes=True)
def matmul_then_scale_weight(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Reads ``w * 2`` as its operand and writes it back to ``w`` in the same loop: not
    hoisted (a pre-pass reads ``w`` before any program wrote it)."""
    m, kk = a.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(kk):
            wt = w[tk, tn] * 2.0
            acc = tc.dot(a[tm, tk], wt, acc=acc)
            w[tk, tn] = wt
        out[tm, tn] = acc
    return out


def test_an_operand_read_from_a_tensor_the_loop_writes_stays_in_the_loop() -> None:
    a, w = torch.randn(600, 20), torch.randn(20, 30)
    assert len(_loops(matmul_then_scale_weight, a, w)) == 1

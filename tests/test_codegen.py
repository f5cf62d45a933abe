"""Codegen: targeted checks on ``bound.to_triton_code(cfg)`` plus results of the code it makes."""

from __future__ import annotations

import inspect
import re

import pytest
import torch
from kernels import matmul, rms_norm

import tilecraft as tc


def _rand(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(shape[0] * 13 + len(shape))
    return (torch.randn(*shape, generator=g) + 0.3).to(device=device, dtype=dtype)


def _device_fn(code: str) -> str:
    """The @triton.jit function(s) only, without the launcher."""
    return code.split("@triton.jit", 1)[1].split("\ndef launch_0", 1)[0]


def _line_of(kernel: tc.Kernel, needle: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    (idx,) = [i for i, ln in enumerate(lines) if needle in ln]
    return first + idx


@tc.kernel
def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        mx = torch.amax(xt, dim=-1, keepdim=True)
        e = torch.exp(xt - mx)
        out[tm, :] = (e / e.sum(-1, keepdim=True)).to(out.dtype)
    return out


@tc.kernel
def matmul_plus(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    _, n = b.size()
    out = torch.empty(m, n, dtype=torch.float32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc = acc + a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc
    return out


@tc.kernel
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] + y[t]
    return out


def _rms_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-5) * w.float()).to(x.dtype)


# ----------------------------------------------------------------------------------------------
# source comments
# ----------------------------------------------------------------------------------------------


def test_src_comments_point_at_user_lines() -> None:
    x, w = _rand(37, 100), _rand(100)
    code = rms_norm.bind((x, w)).to_triton_code(tc.Config(block_sizes=[8]))
    for needle in (
        "for tm in tc.tile(m):",
        "xt = x[tm, :].to(torch.float32)",
        "inv = torch.rsqrt(",
        "out[tm, :] = (xt * inv",
    ):
        line = _line_of(rms_norm, needle)
        assert f"# src[kernels.py:{line}]: {needle}" in code, (needle, line, code)
    # every comment names the kernel's file and a line inside the kernel
    lines, first = inspect.getsourcelines(rms_norm.fn)
    for n in re.findall(r"# src\[kernels\.py:(\d+)\]", code):
        assert first <= int(n) < first + len(lines)
    assert not re.findall(r"# src\[(?!kernels\.py)", code)


def test_src_comments_in_nested_loops() -> None:
    a, b = _rand(37, 50), _rand(50, 45)
    code = matmul.bind((a, b)).to_triton_code(tc.Config(block_sizes=[16, 16, 16]))
    line = _line_of(matmul, "acc = torch.addmm(")
    assert f"# src[kernels.py:{line}]:" in code
    line = _line_of(matmul, "for tk in tc.tile(k):")
    assert f"# src[kernels.py:{line}]: for tk in tc.tile(k):" in code


# ----------------------------------------------------------------------------------------------
# masks
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "masked"), [(1024, False), (1000, True), (128, False)])
def test_mask_only_when_extent_not_divisible(n: int, masked: bool) -> None:
    x, y = _rand(n), _rand(n)
    code = _device_fn(add.bind((x, y)).to_triton_code(tc.Config(block_sizes=[128])))
    assert ("mask_0" in code) is masked, code
    assert ("other=0" in code) is masked
    if masked:
        assert f"mask_0 = indices_0 < {n}" in code
    else:
        assert re.search(r"tl\.load\(x \+ \(indices_0\)\)", code), code
    torch.testing.assert_close(add(x, y), x + y)


@pytest.mark.parametrize(
    ("m", "n", "row_mask", "col_mask"),
    [
        (64, 128, False, False),
        (37, 128, True, False),
        (64, 100, False, True),
        (37, 100, True, True),
    ],
)
def test_masks_per_dim(m: int, n: int, row_mask: bool, col_mask: bool) -> None:
    x, w = _rand(m, n), _rand(n)
    bound = rms_norm.bind((x, w))
    code = _device_fn(bound.to_triton_code(tc.Config(block_sizes=[16], reduction_loops=[None])))
    assert ("mask_0" in code) is row_mask, code
    assert ("rmask_1" in code) is col_mask, code
    program = bound.compile_config(tc.Config(block_sizes=[16], reduction_loops=[None]))
    torch.testing.assert_close(bound.run(program, x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)


def test_reduction_mask_uses_neutral_values() -> None:
    x = _rand(37, 100) - 5.0  # all negative: a 0 in masked lanes would win the max
    code = _device_fn(softmax.bind((x,)).to_triton_code(tc.Config(block_sizes=[8])))
    assert "float('-inf')" in code
    assert re.search(r"tl\.where\(rmask_1\[None, :\], \w+, float\('-inf'\)\)", code), code
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1))


def test_nested_tile_masked_by_both_bounds() -> None:
    @tc.kernel
    def colsum(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        m_block = tc.register_block_size(m)
        partial = torch.empty((m + m_block - 1) // m_block, n, dtype=torch.float32)
        for cta in tc.tile(m, block_size=m_block):
            acc = x.new_zeros(n, dtype=torch.float32)
            for mb in tc.tile(cta.begin, cta.end):
                acc += x[mb, :].sum(0)
            partial[cta.id, :] = acc
        return partial.sum(0)

    x = _rand(37, 100)
    bound = colsum.bind((x,))
    code = bound.to_triton_code(tc.Config(block_sizes=[8, 16]))
    assert re.search(r"mask_2 = indices_2 < tl\.minimum\(offset_0 \+ _BLOCK_0, 37\)", code), code
    # inner blocks dividing the outer block are whole but for the last one: masked at 37 only
    aligned = bound.to_triton_code(tc.Config(block_sizes=[16, 8]))
    assert "mask_2 = indices_2 < 37" in aligned, aligned
    for blocks in ([8, 16], [16, 8]):
        program = bound.compile_config(tc.Config(block_sizes=blocks))
        torch.testing.assert_close(bound.run(program, x), x.sum(0), rtol=1e-5, atol=1e-4)


# ----------------------------------------------------------------------------------------------
# looped (rolled) reductions
# ----------------------------------------------------------------------------------------------


def test_looped_rms_norm_recomputes_in_second_loop() -> None:
    x, w = _rand(37, 100), _rand(100)
    bound = rms_norm.bind((x, w))
    cfg = tc.Config(block_sizes=[8], reduction_loops=[32])
    code = _device_fn(bound.to_triton_code(cfg))
    loops = re.findall(r"for (roffset_\w+) in tl\.range\(0, 100, _RBLOCK_1\):", code)
    assert len(loops) == 2, code
    first, second = code.split(f"for {loops[1]} in", 1)
    assert "tl.load(x" in first.split(f"for {loops[0]} in", 1)[1]
    assert "tl.load(x" in second  # x is re-loaded, not kept over the whole row
    assert "tl.store(out" in second and "tl.store(out" not in first
    assert "_RBLOCK_1=32" in bound.to_triton_code(cfg)
    program = bound.compile_config(cfg)
    torch.testing.assert_close(bound.run(program, x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)


def test_looped_softmax_has_one_loop_per_phase() -> None:
    x = _rand(37, 100)
    bound = softmax.bind((x,))
    cfg = tc.Config(block_sizes=[8], reduction_loops=[32])
    code = _device_fn(bound.to_triton_code(cfg))
    loops = re.findall(r"for (roffset_\w+) in tl\.range\(0, 100, _RBLOCK_1\):", code)
    # max, then sum of exp(x - max), then the store of exp(x - max) / sum
    assert len(loops) >= 2
    assert code.count("tl.load(x") == len(loops)
    assert code.count("tl.exp(") == len(loops) - 1
    program = bound.compile_config(cfg)
    torch.testing.assert_close(bound.run(program, x), torch.softmax(x, -1))


@pytest.mark.parametrize("chunk", [16, 64])
def test_looped_reduction_with_divisible_chunk_has_no_mask(chunk: int) -> None:
    x, w = _rand(37, 256), _rand(256)
    bound = rms_norm.bind((x, w))
    cfg = tc.Config(block_sizes=[8], reduction_loops=[chunk])
    code = _device_fn(bound.to_triton_code(cfg))
    assert "rmask_1" not in code
    program = bound.compile_config(cfg)
    torch.testing.assert_close(bound.run(program, x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)


def test_unlooped_reduction_has_no_roffset_loop() -> None:
    x, w = _rand(37, 100), _rand(100)
    code = rms_norm.bind((x, w)).to_triton_code(tc.Config(block_sizes=[8], reduction_loops=[None]))
    assert "roffset" not in code and "_RDIM_1=128" in code


# ----------------------------------------------------------------------------------------------
# dot
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kern", [matmul, matmul_plus], ids=["addmm", "acc_plus_matmul"])
def test_matmul_uses_dot_with_acc(kern: tc.Kernel) -> None:
    a, b = _rand(37, 50), _rand(50, 45)
    bound = kern.bind((a, b))
    cfg = tc.Config(block_sizes=[16, 32, 16])
    code = _device_fn(bound.to_triton_code(cfg))
    assert re.search(r"tl\.dot\([^)]*acc=", code), code
    assert code.count("tl.dot(") == 1
    assert "input_precision='ieee'" in code  # fp32 inputs: no tf32 rounding
    program = bound.compile_config(cfg)
    torch.testing.assert_close(bound.run(program, a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_half_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _rand(37, 50, dtype=torch.float16), _rand(50, 45, dtype=torch.float16)
    cfg = tc.Config(block_sizes=[16, 16, 32])
    monkeypatch.setenv(
        "TILECRAFT_TARGET", "cuda:90"
    )  # code for a GPU: fp16 operands go to tl.dot as is
    code = _device_fn(matmul.bind((a, b)).to_triton_code(cfg))
    assert (
        "input_precision" not in code
        and ".to(tl.float32)" not in code.split("tl.dot(")[1].split(")")[0]
    )
    monkeypatch.delenv("TILECRAFT_TARGET")
    bound = matmul.bind((a, b))
    # the interpreter computes half-precision dots wrongly: its code upcasts the operands (exact)
    assert "load.to(tl.float32), load_1.to(tl.float32)" in _device_fn(bound.to_triton_code(cfg))
    program = bound.compile_config(cfg)
    want = (a.float() @ b.float()).half()
    torch.testing.assert_close(bound.run(program, a, b), want, rtol=2e-3, atol=2e-3)


# ----------------------------------------------------------------------------------------------
# launcher
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("warps", "stages"), [(2, 1), (8, 3)])
def test_launcher_passes_num_warps_and_stages(warps: int, stages: int) -> None:
    x, w = _rand(37, 100), _rand(100)
    code = rms_norm.bind((x, w)).to_triton_code(
        tc.Config(block_sizes=[8], num_warps=warps, num_stages=stages)
    )
    launcher = re.split(r"\ndef launch_0\(", code, maxsplit=1)[1]
    assert f"num_warps={warps}," in launcher
    assert f"num_stages={stages}," in launcher
    assert "maxnreg" not in launcher  # the interpreter declares no maxnreg
    assert "_tc_rms_norm_0[(5,)](" in launcher  # ceil(37 / 8) programs
    assert "env['x']" in launcher and "env['w']" in launcher and "env['eps']" in launcher


def test_default_config_launcher() -> None:
    x, w = _rand(37, 100), _rand(100)
    bound = rms_norm.bind((x, w))
    default = bound.config_spec.default()
    code = bound.to_triton_code()
    assert f"num_warps={default.num_warps}," in code
    assert f"_BLOCK_0={default.block_sizes[0]}," in code


def test_generated_module_is_valid_python() -> None:
    x, w = _rand(37, 100), _rand(100)
    code = rms_norm.bind((x, w)).to_triton_code(tc.Config(block_sizes=[8], reduction_loops=[32]))
    compile(code, "<generated>", "exec")
    assert code.startswith("from __future__ import annotations")


# ----------------------------------------------------------------------------------------------
# pointwise ops: interpreter-compatible and torch semantics
# ----------------------------------------------------------------------------------------------

POINTWISE = {
    "exp": lambda a, b: torch.exp(a),
    "exp2": lambda a, b: torch.exp2(a),
    "log": lambda a, b: torch.log(b),
    "log2": lambda a, b: torch.log2(b),
    "log1p": lambda a, b: torch.log1p(b),
    "sqrt": lambda a, b: torch.sqrt(b),
    "rsqrt": lambda a, b: torch.rsqrt(b),
    "sin": lambda a, b: torch.sin(a),
    "cos": lambda a, b: torch.cos(a),
    "tanh": lambda a, b: torch.tanh(a),
    "sigmoid": lambda a, b: torch.sigmoid(a),
    "erf": lambda a, b: torch.erf(a),
    "gelu": lambda a, b: torch.nn.functional.gelu(a),
    "gelu_tanh": lambda a, b: torch.nn.functional.gelu(a, approximate="tanh"),
    "silu": lambda a, b: torch.nn.functional.silu(a),
    "relu": lambda a, b: torch.relu(a),
    "abs": lambda a, b: torch.abs(a),
    "neg": lambda a, b: -a,
    "floor": lambda a, b: torch.floor(a),
    "ceil": lambda a, b: torch.ceil(a),
    "clamp": lambda a, b: torch.clamp(a, -1.0, 1.0),
    "where": lambda a, b: torch.where(a > 0, a, b),
    "maximum": lambda a, b: torch.maximum(a, b),
    "div": lambda a, b: a / b,
    "pow_2": lambda a, b: a**2,
    "pow_half": lambda a, b: b**0.5,
    "pow_3": lambda a, b: a**3,
    "pow_tensor": lambda a, b: b**a,
    "mod_float": lambda a, b: a % b,
    "mod_scalar": lambda a, b: a % 3,
    "floordiv_float": lambda a, b: a // b,
}

KNOWN_BAD: dict[str, str] = {}  # op -> "tilecraft bug N: ..." while a known bug stands


@tc.kernel
def pointwise_zoo(x: torch.Tensor, y: torch.Tensor, op: str) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    for t in tc.tile(n):
        a = x[t]
        b = y[t]
        if op == "exp":
            r = torch.exp(a)
        elif op == "exp2":
            r = torch.exp2(a)
        elif op == "log":
            r = torch.log(b)
        elif op == "log2":
            r = torch.log2(b)
        elif op == "log1p":
            r = torch.log1p(b)
        elif op == "sqrt":
            r = torch.sqrt(b)
        elif op == "rsqrt":
            r = torch.rsqrt(b)
        elif op == "sin":
            r = torch.sin(a)
        elif op == "cos":
            r = torch.cos(a)
        elif op == "tanh":
            r = torch.tanh(a)
        elif op == "sigmoid":
            r = torch.sigmoid(a)
        elif op == "erf":
            r = torch.erf(a)
        elif op == "gelu":
            r = torch.nn.functional.gelu(a)
        elif op == "gelu_tanh":
            r = torch.nn.functional.gelu(a, approximate="tanh")
        elif op == "silu":
            r = torch.nn.functional.silu(a)
        elif op == "relu":
            r = torch.relu(a)
        elif op == "abs":
            r = torch.abs(a)
        elif op == "neg":
            r = -a
        elif op == "floor":
            r = torch.floor(a)
        elif op == "ceil":
            r = torch.ceil(a)
        elif op == "clamp":
            r = torch.clamp(a, -1.0, 1.0)
        elif op == "where":
            r = torch.where(a > 0, a, b)
        elif op == "maximum":
            r = torch.maximum(a, b)
        elif op == "div":
            r = a / b
        elif op == "pow_2":
            r = a**2
        elif op == "pow_half":
            r = b**0.5
        elif op == "pow_3":
            r = a**3
        elif op == "pow_tensor":
            r = b**a
        elif op == "mod_float":
            r = a % b
        elif op == "mod_scalar":
            r = a % 3
        else:
            r = a // b
        out[t] = r.to(torch.float32)
    return out


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(op, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BAD[op]))
        if op in KNOWN_BAD
        else op
        for op in POINTWISE
    ],
)
def test_pointwise_matches_torch(op: str) -> None:
    a = torch.linspace(-3.0, 3.0, 100)
    b = torch.linspace(0.5, 2.5, 100).flip(0)
    bound = pointwise_zoo.bind((a, b, op))
    code = bound.to_triton_code().split("@triton.jit")[1]
    assert "libdevice" not in code
    want = POINTWISE[op](a, b).float()
    torch.testing.assert_close(pointwise_zoo(a, b, op), want, rtol=1e-5, atol=1e-5)


@tc.kernel
def int_zoo(x: torch.Tensor, y: torch.Tensor, op: str) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty(n, dtype=x.dtype, device=x.device)
    for t in tc.tile(n):
        a = x[t]
        b = y[t]
        if op == "add":
            r = a + b * 3
        elif op == "mul":
            r = a * b
        elif op == "max":
            r = torch.maximum(a, b)
        elif op == "mod":
            r = a % b
        elif op == "floordiv":
            r = a // b
        else:
            r = a**3
        out[t] = r
    return out


INT_OPS = {
    "add": lambda a, b: a + b * 3,
    "mul": lambda a, b: a * b,
    "max": lambda a, b: torch.maximum(a, b),
    "mod": lambda a, b: a % b,
    "floordiv": lambda a, b: a // b,
    "pow": lambda a, b: a**3,
}
INT_BAD: dict[str, str] = {}


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(op, marks=pytest.mark.xfail(strict=True, reason=INT_BAD[op]))
        if op in INT_BAD
        else op
        for op in INT_OPS
    ],
)
def test_int_pointwise_matches_torch(op: str) -> None:
    a = torch.arange(-50, 50, dtype=torch.int32)
    b = (torch.arange(100, dtype=torch.int32) % 7) - 3
    b[b == 0] = 2
    torch.testing.assert_close(int_zoo(a, b, op), INT_OPS[op](a, b))


def test_no_libdevice_in_generated_code() -> None:
    x, w = _rand(37, 100), _rand(100)
    for code in (
        rms_norm.bind((x, w)).to_triton_code(tc.Config(block_sizes=[8], reduction_loops=[32])),
        softmax.bind((x,)).to_triton_code(),
    ):  # (the module imports it for the ops that need it: atan2, lgamma...)
        body = code.split("@triton.jit")[1]
        assert "libdevice" not in body and "tl.extra" not in body


@tc.kernel(static_shapes=True)
def _round_rows(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = torch.round(x[t])
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_round_is_half_to_even_and_exact(dtype: torch.dtype) -> None:
    """torch.round rounds ties to even; the emission uses floor and exact arithmetic only, so
    ties, negatives, -0.0, infinities and integers past 2^23 (where x + 0.5 would round in
    fp32) come out as torch's."""
    ties = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, 2.4999, 2.5001, -2.7, -0.0]
    big = [8388609.0, -8388609.0, 16777215.0, float("inf"), float("-inf")]
    x = torch.tensor(ties + big).to(dtype)
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([x, (torch.randn(500, generator=gen) * 200).to(dtype)])
    x = torch.cat([x, (torch.randint(-300, 300, (500,), generator=gen) / 2).to(dtype)])
    got = _round_rows(x)
    assert torch.equal(got, torch.round(x.float()).to(dtype))
    assert "tl.floor(" in _round_rows.bind((x,)).to_triton_code(tc.Config(block_sizes=[64]))


@pytest.mark.gpu
def test_round_on_gpu() -> None:
    ties = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, 2.4999, 2.5001, -2.7, -0.0]
    big = [8388609.0, -8388609.0, 16777215.0, float("inf"), float("-inf")]
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = torch.tensor(ties + big, device="cuda").to(dtype)
        x = torch.cat([x, (torch.randn(1 << 20, device="cuda") * 200).to(dtype)])
        assert torch.equal(_round_rows(x), torch.round(x.float()).to(dtype))


@pytest.mark.crosscompile
def test_round_compiles_for_sm90_and_gfx942() -> None:
    from tilecraft.runtime.kernel import BoundKernel
    from tilecraft.targets.target import Target
    from tilecraft.tools.crosscompile import CompileJob
    from tilecraft.tools.worker import run_compile_jobs

    jobs = []
    for key in ("cuda:90", "hip:gfx942"):
        target = Target.parse(key)
        x = torch.empty(1 << 20, dtype=torch.bfloat16)
        bound = BoundKernel(_round_rows, _round_rows.bind_arguments((x,), {}), target=target)
        _, _, traced, generated = bound.generate(bound.config_spec.default())
        jobs += [CompileJob.of(g, loop, target) for g, loop in zip(generated, traced.loops)]
    reports = run_compile_jobs(jobs, 300.0)
    assert len(reports) == 2 and all(r.ok and r.spills == 0 for r in reports), reports


@tc.kernel(static_shapes=True)
def expert_histogram(ids: torch.Tensor, n_experts: int) -> torch.Tensor:
    """Tokens per expert: ``torch.ones_like`` of an int32 tile added atomically."""
    t, k = ids.size()
    counts = torch.zeros([n_experts], dtype=torch.int32, device=ids.device)
    for tt in tc.tile(t):
        chosen = ids[tt, :]
        tc.atomic_add(counts, [chosen], torch.ones_like(chosen))
    return counts


def test_integer_fills_are_integer_literals_and_compile_for_gpus() -> None:
    """``tl.full([...], 1.0, tl.int32)`` runs in the interpreter but does not compile for a GPU
    (Triton's get_int32 takes no float): every candidate config of a histogram failed there."""
    from tilecraft.targets.target import Target
    from tilecraft.tools.check import check_kernel

    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 37, (100, 3), generator=g, dtype=torch.int32)
    want = torch.bincount(ids.flatten().long(), minlength=37).to(torch.int32)
    torch.testing.assert_close(expert_histogram(ids, 37), want)
    code = expert_histogram.bind((ids, 37)).to_triton_code()
    assert re.search(r"tl\.full\(\[[^\]]*\], 1, tl\.int32\)", code), code
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    rows = check_kernel(expert_histogram, (ids, 37), targets, lambda b: [b.config_spec.default()])
    assert len(rows) == 2
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@tc.kernel(static_shapes=True)
def positive_and_mask(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """A bool tile stored into (and a bool tensor loaded from) memory."""
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.bool, device=x.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = (x[tm, tn] > 0) & keep[tm, tn]
    return out


@pytest.mark.parametrize(
    "indexing",
    [["pointer", "pointer", "block_ptr"], ["block_ptr", "block_ptr", "block_ptr"]],
)
def test_bool_tiles_store_through_block_pointers(indexing: list[str]) -> None:
    """A block pointer to a bool tensor holds int8: storing the int1 tile unconverted failed in
    the interpreter and in every GPU compile ("Block element type(int8) and value element
    type(int1) mismatch")."""
    from tilecraft.targets.target import Target
    from tilecraft.tools.check import check_kernel

    g = torch.Generator().manual_seed(5)
    x, keep = torch.randn(37, 100, generator=g), torch.rand(37, 100, generator=g) > 0.3
    bound = positive_and_mask.bind((x, keep))
    config = tc.Config(block_sizes=[8, 32], indexing=indexing)
    assert torch.equal(bound.run(bound.compile_config(config), x, keep), (x > 0) & keep)
    (row,) = check_kernel(
        positive_and_mask, (x, keep), [Target.parse("cuda:90")], lambda b: [config]
    )
    assert row.report is not None and row.report.ok, (row.status, row.report)

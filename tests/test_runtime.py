"""Runtime: ref mode, specialization and program caches, generated-source files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import kernels
import pytest
import torch

import tilecraft as tc
from tilecraft.runtime import module as runtime_module


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(shape[0] * 19 + len(shape))
    return (torch.randn(*shape, generator=g) + 0.2).to(dtype)


def _make_rms_norm() -> tc.Kernel:
    """A fresh kernel object (its own specialization cache) per test, over the shared
    tests/kernels.py function."""
    return tc.kernel(kernels.rms_norm.fn)


def _rms_ref(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


@tc.kernel
def colsum_partials(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    m_block = tc.register_block_size(m)
    partial = torch.empty((m + m_block - 1) // m_block, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=m_block):
        acc = x.new_zeros(n, dtype=torch.float32)
        for mb in tc.tile(cta.begin, cta.end):
            acc += x[mb, :].to(torch.float32).sum(0)
        partial[cta.id, :] = acc
    return partial.sum(0)


@tc.kernel
def softmax_then_scale(x: torch.Tensor, scale: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.softmax(x[tm, :].to(torch.float32), dim=-1).to(out.dtype)
    return out * scale


# ----------------------------------------------------------------------------------------------
# ref mode
# ----------------------------------------------------------------------------------------------


def test_ref_mode_env_matches_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_REF", "1")
    k = _make_rms_norm()
    x, w = _rand(37, 100), _rand(100)
    torch.testing.assert_close(k(x, w), _rms_ref(x, w))
    assert len(k._bound) == 0  # nothing was traced or compiled
    x16 = _rand(37, 100, dtype=torch.bfloat16)
    torch.testing.assert_close(k(x16, w), _rms_ref(x16, w))


def test_run_ref_matches_eager() -> None:
    x = _rand(37, 100)
    torch.testing.assert_close(colsum_partials.run_ref(x), x.sum(0), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(
        softmax_then_scale.run_ref(x, 2.0), torch.softmax(x, -1) * 2.0, rtol=1e-5, atol=1e-6
    )


def test_ref_mode_agrees_with_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _rand(37, 100)
    compiled = softmax_then_scale(x, 0.5)
    monkeypatch.setenv("TILECRAFT_REF", "1")
    torch.testing.assert_close(softmax_then_scale(x, 0.5), compiled, rtol=1e-5, atol=1e-6)


def test_ref_mode_off_values(monkeypatch: pytest.MonkeyPatch) -> None:
    k = _make_rms_norm()
    x, w = _rand(37, 100), _rand(100)
    monkeypatch.setenv("TILECRAFT_REF", "0")
    torch.testing.assert_close(k(x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)
    assert len(k._bound) == 1  # compiled, not ref


# ----------------------------------------------------------------------------------------------
# caches
# ----------------------------------------------------------------------------------------------


def test_same_shapes_reuse_compiled_program() -> None:
    k = _make_rms_norm()
    x, w = _rand(37, 100), _rand(100)
    torch.testing.assert_close(k(x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)
    assert len(k._bound) == 1
    bound = k.bind((x, w))
    program = bound.default_program()
    assert len(bound._programs) == 1
    loaded = len(runtime_module._loaded)
    # new tensors with the same signature (and another eps value: floats are runtime args)
    x2, w2 = _rand(37, 100) * 3, _rand(100) - 1
    torch.testing.assert_close(k(x2, w2, 1e-3), _rms_ref(x2, w2, 1e-3), rtol=1e-5, atol=1e-5)
    assert len(k._bound) == 1
    assert k.bind((x2, w2, 1e-3)) is bound
    assert bound.default_program() is program
    assert len(bound._programs) == 1
    assert len(runtime_module._loaded) == loaded


def test_compile_config_is_cached_per_config() -> None:
    k = _make_rms_norm()
    x, w = _rand(37, 100), _rand(100)
    bound = k.bind((x, w))
    p1 = bound.compile_config(tc.Config(block_sizes=[8], reduction_loops=[None]))
    p2 = bound.compile_config(tc.Config(reduction_loops=[None], block_sizes=[8]))
    p3 = bound.compile_config(tc.Config(block_sizes=[16], reduction_loops=[None]))
    assert p1 is p2 and p1 is not p3
    assert len(bound._programs) == 2
    for p in (p1, p3):
        torch.testing.assert_close(bound.run(p, x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)


def test_new_shapes_respecialize() -> None:
    k = _make_rms_norm()
    w = _rand(100)
    shapes = [(37, 100), (5, 100), (37, 100)]
    for m, n in shapes:
        x = _rand(m, n)
        torch.testing.assert_close(k(x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)
    assert len(k._bound) == 2
    # a new dtype, a new width (w changes too) and a new stride are new specializations
    k(_rand(37, 100, dtype=torch.bfloat16), w)
    k(_rand(37, 64), _rand(64))
    k(_rand(100, 37).t(), w)
    assert len(k._bound) == 5
    k.reset()
    assert len(k._bound) == 0


def test_register_block_size_kernel_caches_per_config() -> None:
    x = _rand(37, 100)
    bound = colsum_partials.bind((x,))
    before = len(bound._traces)
    bound.compile_config(tc.Config(block_sizes=[8, 4]))
    bound.compile_config(tc.Config(block_sizes=[8, 8]))  # same host block size: same trace
    bound.compile_config(tc.Config(block_sizes=[16, 4]))
    assert len(bound._traces) - before <= 2


def test_kernel_config_option_is_used() -> None:
    cfg = tc.Config(block_sizes=[16], reduction_loops=[32], num_warps=2)

    @tc.kernel(config=cfg)
    def rowmax(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty(m, dtype=x.dtype)
        for tm in tc.tile(m):
            out[tm] = torch.amax(x[tm, :], dim=-1)
        return out

    x = _rand(37, 100)
    torch.testing.assert_close(rowmax(x), x.amax(-1))
    assert len(rowmax._bound) == 1
    bound = rowmax.bind((x,))
    program = bound.default_program()
    assert program.config.block_sizes == (16,)
    assert program.config.reduction_loops == (32,)
    assert program.config.num_warps == 2
    assert "for roffset" in program.source


@tc.kernel(static_shapes=False)
def add_dynamic(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] + y[t]
    return out


def test_dynamic_shapes_new_shape_is_correct() -> None:
    for n in (100, 1000):
        x, y = _rand(n), _rand(n)
        torch.testing.assert_close(add_dynamic(x, y), x + y)


@tc.kernel(static_shapes=False)
def rms_norm_dynamic(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        xt = x[tm, :].to(torch.float32)
        inv = torch.rsqrt(torch.mean(xt * xt, dim=-1) + eps)
        out[tm, :] = (xt * inv[:, None] * w[None, :].to(torch.float32)).to(out.dtype)
    return out


def test_dynamic_shapes_share_one_specialization() -> None:
    rms_norm_dynamic.reset()
    for m, n in ((37, 100), (50, 100), (60, 120), (33, 97)):  # one power-of-two size bucket
        x, w = _rand(m, n), _rand(n)
        torch.testing.assert_close(rms_norm_dynamic(x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)
        bound = rms_norm_dynamic.bind((x, w))
        program = bound.compile_config(tc.Config(block_sizes=[8], reduction_loops=[32]))
        torch.testing.assert_close(bound.run(program, x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)
    assert len(rms_norm_dynamic._bound) == 1
    code = rms_norm_dynamic.bind((x, w)).to_triton_code(tc.Config(block_sizes=[8]))
    assert "< 37" not in code and "< 100" not in code  # extents are arguments, not constants


@tc.kernel(static_shapes=False)
def spread_rows(x: torch.Tensor) -> torch.Tensor:
    """out [4, n] made by the host code: its dim 0 has stride 1 when n is 1, n otherwise."""
    n = x.size(0) // 8
    out = torch.empty([4, n], dtype=x.dtype, device=x.device)
    for t in tc.tile(n):
        for r in tc.static_range(4):
            out[r, t] = x[t] + r
    return out


@tc.kernel(static_shapes=False)
def transposed_output(x: torch.Tensor) -> torch.Tensor:
    """out = empty([4, n]).t(): its last dim has stride 1 only when n is 1."""
    n = x.size(0) // 8
    out = torch.empty([4, n], dtype=x.dtype, device=x.device).t()
    for t in tc.tile(n):
        for r in tc.static_range(4):
            out[t, r] = x[t] + r
    return out


@tc.kernel(static_shapes=False)
def doubled_transpose(w: torch.Tensor) -> torch.Tensor:
    """A transposed view made on the host: its dim 0 has stride 1 whatever the sizes."""
    wt = w.t()
    out = torch.empty(wt.size(), dtype=w.dtype, device=w.device)
    for ti, tj in tc.tile([wt.size(0), wt.size(1)]):
        out[ti, tj] = wt[ti, tj] * 2
    return out


def test_dynamic_unit_strides_of_host_views_without_unit_dims_stay_literal() -> None:
    """A host-made tensor with no dim of size 1 keeps its strides of 1 in the code (Triton
    vectorizes along them), guarded at launch."""
    w = torch.randn(6, 5)
    code = doubled_transpose.bind((w,)).to_triton_code(tc.Config(block_sizes=[8, 8]))
    assert "wt_stride_0" not in code and "out_stride_1" not in code, code
    assert "env['wt'].stride(0) != 1" in code, code
    for shape in ((6, 5), (7, 3)):
        w = torch.randn(shape)
        torch.testing.assert_close(doubled_transpose(w), w.t() * 2)


def test_dynamic_strides_of_host_made_tensors_follow_the_launch() -> None:
    """Two calls in one size bucket (9 and 16 elements) make out [4, 1] then [4, 2]: the
    first call's stride of 1 along dim 0 was compiled in and the second call wrote every row
    over the first. A host-made tensor's strides are arguments except its last dim's 1, which
    each launch checks: another stride traces another variant (it raised, session 52)."""
    spread_rows.reset()
    for n in (9, 16):
        x = torch.arange(float(n))
        want = x[: n // 8][None, :] + torch.arange(4.0)[:, None]
        torch.testing.assert_close(spread_rows(x), want)
    assert len(spread_rows._bound) == 1
    transposed_output.reset()
    torch.testing.assert_close(transposed_output(torch.arange(9.0))[:, 1], torch.ones(1))
    x = torch.arange(16.0)
    want = x[:2][:, None] + torch.arange(4.0)[None, :]
    torch.testing.assert_close(transposed_output(x), want)
    assert len(transposed_output._bound[next(iter(transposed_output._bound))]) == 2


def test_dynamic_shapes_mismatched_extents_raise() -> None:
    x, w = _rand(37, 100), _rand(100)
    rms_norm_dynamic(x, w)
    with pytest.raises(tc.TilecraftError, match=r"x\.shape\[1\] and w\.shape\[0\] must be equal"):
        rms_norm_dynamic(x, _rand(120))  # same size bucket as 100: a launch-time check catches it


def test_dynamic_shapes_wider_reduction() -> None:
    rms_norm_dynamic.reset()
    for m, n in ((37, 100), (5, 1000)):
        x, w = _rand(m, n), _rand(n)
        torch.testing.assert_close(rms_norm_dynamic(x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=False)
def poly_dynamic(x: torch.Tensor, coeffs: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    k = tc.specialize(coeffs.size(0))
    out = torch.empty_like(x)
    for t in tc.tile(n):
        xt = x[t]
        acc = tc.zeros([t], dtype=torch.float32)
        for j in tc.static_range(k):
            acc = acc * xt + coeffs[j]
        out[t] = acc
    return out


def test_specialize_respecializes_dynamic_kernel() -> None:
    x = _rand(100)
    for k in (5, 7, 5):  # one size bucket (8), two values of the specialized k
        c = _rand(k)
        want = torch.zeros_like(x)
        for j in range(k):
            want = want * x + c[j]
        torch.testing.assert_close(poly_dynamic(x, c), want, rtol=1e-5, atol=1e-5)
    assert len(poly_dynamic._bound) == 1  # one key, two variants (k=3, k=5)


# ----------------------------------------------------------------------------------------------
# generated source on disk
# ----------------------------------------------------------------------------------------------


def test_generated_source_written_under_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(runtime_module, "_loaded", {})  # force a fresh load
    k = _make_rms_norm()
    x, w = _rand(37, 100), _rand(100)
    torch.testing.assert_close(k(x, w), _rms_ref(x, w), rtol=1e-5, atol=1e-5)
    files = sorted((tmp_path / "code").glob("*.py"))
    assert len(files) == 1, files
    program = k.bind((x, w)).default_program()
    assert files[0].read_text() == program.source
    assert files[0].name.startswith("tc_")
    # the module Triton runs is that file
    (launcher_module,) = runtime_module._loaded.values()
    assert Path(launcher_module.__file__) == files[0]
    # a second compile of the same source does not write another file
    k.reset()
    k(x, w)
    assert sorted((tmp_path / "code").glob("*.py")) == files
    # no stray temporary files are left
    assert [p for p in (tmp_path / "code").iterdir() if p.suffix != ".py"] == []


def test_different_configs_write_different_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(runtime_module, "_loaded", {})
    k = _make_rms_norm()
    x, w = _rand(37, 100), _rand(100)
    bound = k.bind((x, w))
    bound.compile_config(tc.Config(block_sizes=[8]))
    bound.compile_config(tc.Config(block_sizes=[16]))
    assert len(list((tmp_path / "code").glob("tc_*.py"))) == 2


def test_debug_prints_source(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("TILECRAFT_DEBUG", "1")
    k = _make_rms_norm()
    x, w = _rand(37, 100), _rand(100)
    k(x, w)
    printed = capsys.readouterr().out
    assert "@triton.jit" in printed and "def launch_0(" in printed


def test_a_folder_in_place_of_a_generated_file_leaves_no_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failed rename left a tmpXXXX.py in <cache>/code on every process."""
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    source = "VALUE = 41 + 1  # a folder in place of the file test\n"
    code = runtime_module.code_dir()
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    (code / f"tc_{digest}.py").mkdir(parents=True)
    assert runtime_module.load_source(source).VALUE == 42
    assert list(code.glob("tmp*.py")) == []

"""Paired stride-2 slices (``x[t, 0::2]`` with ``x[t, 1::2]``) become one contiguous access: the
pairs the analysis finds (and those it refuses), the generated code (one unit-stride load split in
two, one joined store), numerics in the interpreter against eager PyTorch (whole and rolled slice
dims, masked blocks), cross-compiles for cuda:90 and hip:gfx942, and the same kernels on a GPU.
Element pairs (``x2[t, 0]`` with ``x2[t, 1]`` of a size-2 last dim) too, and ``tc.split`` of a
whole dim of 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import default_memory_ops
from tilecraft.errors import ShapeError
from tilecraft.ir.paired_slices import SlicePair
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `examples` lives at the repo root
from examples import rope  # noqa: E402

HAS_CUDA = torch.cuda.is_available()


def _rand(*shape: int, device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randn(*shape, generator=g).to(device)


@tc.kernel(static_shapes=True)
def mix_pairs(x: torch.Tensor) -> torch.Tensor:
    """Loads and stores pair: (x[2i], x[2i+1]) -> (2 x[2i+1], x[2i] + x[2i+1])."""
    m, _ = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        even = x[tm, 0::2]
        odd = x[tm, 1::2]
        out[tm, 0::2] = odd * 2.0
        out[tm, 1::2] = even + odd
    return out


def _mix_ref(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    out[:, 0::2] = x[:, 1::2] * 2.0
    out[:, 1::2] = x[:, 0::2] + x[:, 1::2]
    return out


@tc.kernel(static_shapes=True)
def pair_difference(x: torch.Tensor) -> torch.Tensor:
    """Only loads pair (starts 2 and 3); the one store is a whole row."""
    m, n = x.size()
    out = x.new_empty([m, (n - 2) // 2])
    for tm in tc.tile(m):
        out[tm, :] = x[tm, 3::2] - x[tm, 2::2] * 0.5
    return out


def _difference_ref(x: torch.Tensor) -> torch.Tensor:
    return x[:, 3::2] - x[:, 2::2] * 0.5


@tc.kernel(static_shapes=True)
def other_rows(x: torch.Tensor) -> torch.Tensor:
    """The two loads index different rows: they do not pair."""
    m, n = x.size()
    out = x.new_empty([m, n // 2])
    for tm in tc.tile(m):
        out[tm, :] = x[tm, 0::2] + x[0, 1::2][None, :]
    return out


@tc.kernel(static_shapes=True)
def store_between(x: torch.Tensor) -> torch.Tensor:
    """A store to ``x`` sits between the loads, a load of it between the stores: nothing pairs."""
    m, n = x.size()
    out = x.new_empty([m, n // 2])
    for tm in tc.tile(m):
        even = x[tm, 0::2]
        x[tm, 1::2] = even * 3.0
        odd = x[tm, 1::2]
        out[tm, :] = even + odd
        x[tm, 0::2] = odd + 1.0
        again = x[tm, 0::2]
        x[tm, 1::2] = again * 0.5
    return out


def _store_between_ref(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.clone()
    even = x[:, 0::2].clone()
    x[:, 1::2] = even * 3.0
    out = even + x[:, 1::2]
    x[:, 0::2] = x[:, 1::2] + 1.0
    x[:, 1::2] = x[:, 0::2] * 0.5
    return out, x


@tc.kernel(static_shapes=True)
def centered_pairs(x: torch.Tensor) -> torch.Tensor:
    """The even store needs a sum over the slice dim, the odd one does not: with the dim rolled
    they fall in different chunk loops and stay apart; whole, they pair."""
    m, _ = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        even = x[tm, 0::2]
        odd = x[tm, 1::2]
        out[tm, 1::2] = odd * 2.0
        out[tm, 0::2] = even - even.sum(-1, keepdim=True)
    return out


def _centered_ref(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    out[:, 1::2] = x[:, 1::2] * 2.0
    out[:, 0::2] = x[:, 0::2] - x[:, 0::2].sum(-1, keepdim=True)
    return out


@tc.kernel(static_shapes=True)
def complex_mul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x [M, N] holds N // 2 complex numbers per row (re, im interleaved), w [N // 2, 2] one
    per column: their products, interleaved the same way, by int indices of a size-2 dim."""
    m, n = x.size()
    xc = x.view(m, n // 2, 2)
    out = torch.empty([m, n // 2, 2], dtype=x.dtype, device=x.device)
    for tm, tk in tc.tile([m, n // 2]):
        re, im = xc[tm, tk, 0], xc[tm, tk, 1]
        wr, wi = w[tk, 0][None, :], w[tk, 1][None, :]
        out[tm, tk, 0] = re * wr - im * wi
        out[tm, tk, 1] = re * wi + im * wr
    return out.view(m, n)


def _complex_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    got = torch.view_as_complex(x.float().reshape(m, n // 2, 2).contiguous())
    prod = got * torch.view_as_complex(w.float().contiguous())[None, :]
    return torch.view_as_real(prod).reshape(m, n).to(x.dtype)


def _split_view(width: int) -> tc.Kernel:
    """``tc.split`` of a whole (``:``) dim of ``x.view(m, n // width, width)``."""

    @tc.kernel(static_shapes=True)
    def split_view(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        xp = x.view(m, n // width, width)
        out = torch.empty([m, n // width], dtype=x.dtype, device=x.device)
        for tm, tk in tc.tile([m, n // width]):
            a, b = tc.split(xp[tm, tk, :])
            out[tm, tk] = a - 2.0 * b
        return out

    return split_view


def _pairs(kernel: tc.Kernel, args: tuple[torch.Tensor, ...], config: tc.Config) -> list[str]:
    plan = kernel.bind(args).config_spec.resolve(config)
    return [p.op for p in plan.slice_pairs]


def test_analysis_pairs_loads_and_stores() -> None:
    x = _rand(9, 20)
    plan = mix_pairs.bind((x,)).config_spec.resolve(tc.Config(block_sizes=[4]))
    assert plan.slice_pairs == (SlicePair("load", 0, 1, 1), SlicePair("store", 2, 3, 1))
    assert "paired slices: stores 2 (even) + 3 (odd)" in plan.describe()
    assert _pairs(pair_difference, (_rand(7, 22),), tc.Config(block_sizes=[4])) == ["load"]
    # unpaired, each stride-2 load is a lone span (its odd half unread)
    for kernel, loads in ((other_rows, 2), (store_between, 3)):
        plan = kernel.bind((x,)).config_spec.resolve(tc.Config(block_sizes=[4]))
        assert [(p.op, p.kind) for p in plan.slice_pairs] == [("load", "lone")] * loads


def test_rolled_dim_keeps_stores_of_different_phases_apart() -> None:
    x = _rand(9, 40)
    whole, rolled = tc.Config(block_sizes=[4]), tc.Config(block_sizes=[4], reduction_loops=[8])
    assert _pairs(centered_pairs, (x,), whole) == ["load", "store"]
    assert _pairs(centered_pairs, (x,), rolled) == ["load"]
    bound = centered_pairs.bind((x,))
    for config in (whole, rolled):
        got = bound.run(bound.compile_config(config), x)
        torch.testing.assert_close(got, _centered_ref(x), rtol=1e-5, atol=1e-5)


def test_paired_code_is_one_contiguous_access() -> None:
    bound = mix_pairs.bind((_rand(9, 20),))
    code = bound.to_triton_code(tc.Config(block_sizes=[4]))
    assert code.count("tl.load(") == 1 and code.count("tl.store(") == 1, code
    assert "span_1 = tl.arange(0, 32)" in code and "span_mask_1 = span_1 < 20" in code, code
    assert "tl.split(tl.reshape(" in code and "tl.reshape(tl.join(" in code, code
    assert "* 2)" not in code, code
    code = pair_difference.bind((_rand(7, 22),)).to_triton_code(tc.Config(block_sizes=[4]))
    assert "(2 + span_1)" in code and code.count("tl.load(") == 1, code


def test_rope_interleaved_code() -> None:
    x, c, s = rope.make_inputs((37, 3, 64), torch.bfloat16, "cpu", 0)
    bound = rope.rope_interleaved.bind((x, c, s))
    for config in (bound.config_spec.default(), tc.Config(block_sizes=[2, 2], reduction_loops=[8])):
        code = bound.to_triton_code(config)
        assert "tl.split(" in code and "tl.join(" in code, code
        memory = [line for line in code.splitlines() if "tl.load(x" in line or "tl.store(" in line]
        assert len(memory) == 2 and not any("* 2)" in line for line in memory), code


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_interleaved_numerics(dtype: torch.dtype) -> None:
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    for shape in (*rope.TEST_SHAPES, (6, 2, 80)):
        x, c, s = rope.make_inputs(shape, dtype, "cpu", 0)
        expected = rope.reference(x, c, s)[1]
        bound = rope.rope_interleaved.bind((x, c, s))
        for config in (
            bound.config_spec.default(),
            tc.Config(block_sizes=[2, 2], reduction_loops=[8]),
            tc.Config(block_sizes=[4, 1]),
        ):
            got = bound.run(bound.compile_config(config), x, c, s)
            torch.testing.assert_close(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("config", [tc.Config(block_sizes=[4]), tc.Config(block_sizes=[1])])
def test_paired_numerics(config: tc.Config) -> None:
    for n in (20, 32, 6):
        x = _rand(9, n)
        bound = mix_pairs.bind((x,))
        torch.testing.assert_close(bound.run(bound.compile_config(config), x), _mix_ref(x))
        x = _rand(7, n + 2)
        bound = pair_difference.bind((x,))
        torch.testing.assert_close(bound.run(bound.compile_config(config), x), _difference_ref(x))
        x = _rand(9, n)
        bound = other_rows.bind((x,))
        expected = x[:, 0::2] + x[0, 1::2][None, :]
        torch.testing.assert_close(bound.run(bound.compile_config(config), x), expected)


def test_store_between_loads_keeps_program_order() -> None:
    x = _rand(9, 20)
    bound = store_between.bind((x,))
    got_x = x.clone()
    got = bound.run(bound.compile_config(tc.Config(block_sizes=[4])), got_x)
    expected, expected_x = _store_between_ref(x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got_x, expected_x)


@tc.kernel(static_shapes=True)
def write_through_another_name(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Writes the odd elements through ``y2`` between reading the even and odd ones of ``x2``:
    ``y`` may be ``x`` (one tensor passed twice), and a host view of one buffer is too."""
    m, n2 = x.size()
    x2, y2 = x.view(m, n2 // 2, 2), y.view(m, n2 // 2, 2)
    out = torch.empty([m, n2 // 2], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n2 // 2]):
        re = x2[tm, tn, 0]
        y2[tm, tn, 1] = re * 2.0
        out[tm, tn] = re + x2[tm, tn, 1]
    return out


@tc.kernel(static_shapes=True)
def write_through_a_second_view(x: torch.Tensor) -> torch.Tensor:
    m, n2 = x.size()
    x2, y2 = x.view(m, n2 // 2, 2), x.view(m, n2 // 2, 2)
    out = torch.empty([m, n2 // 2], dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n2 // 2]):
        re = x2[tm, tn, 0]
        y2[tm, tn, 1] = re * 2.0
        out[tm, tn] = re + x2[tm, tn, 1]
    return out


def test_a_pair_is_not_merged_across_a_store_through_another_name() -> None:
    """The odd load moved up to the even one read the old odd values (found by fuzzing); a
    buffer the host code allocated cannot be another name's, so stores to it do not split
    pairs (pixel unshuffle's loads stay one access)."""
    x = _rand(4, 6)
    config = tc.Config(block_sizes=[2, 2])
    for kernel, args in ((write_through_another_name, 2), (write_through_a_second_view, 1)):
        a = x.clone()
        bound = kernel.bind((a,) * args)
        got = bound.run(bound.compile_config(config), *(a,) * args)
        torch.testing.assert_close(got, 3 * x.view(4, 3, 2)[:, :, 0])
        assert "tl.join" not in bound.to_triton_code(config)
    from benchmarks.gen_kernels.heldout_s30b import pixel_unshuffle_2x

    image = torch.randn(2, 3, 8, 8).to(torch.bfloat16)
    bound = pixel_unshuffle_2x.bind((image,))
    code = bound.to_triton_code(bound.config_spec.default())
    assert code.count("tl.split(") == 2, code


@tc.kernel(static_shapes=True)
def grid_swap(x: torch.Tensor) -> torch.Tensor:
    """Scalar rows (tc.grid): the values are 1-D."""
    out = torch.empty_like(x)
    for i in tc.grid(x.size(0)):
        a = x[i, 0::2]
        b = x[i, 1::2]
        out[i, 0::2] = b
        out[i, 1::2] = a * 2.0
    return out


@tc.kernel(static_shapes=False)
def dynamic_swap(x: torch.Tensor) -> torch.Tensor:
    """Dynamic shapes: the slices have constant bounds, the row stride is an argument."""
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        a = x[tm, 0:20:2]
        b = x[tm, 1:20:2]
        out[tm, 0:20:2] = b
        out[tm, 1:20:2] = a * 2.0
    return out


@tc.kernel(static_shapes=True)
def broadcast_store(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The even store's value is a column broadcast along the slice."""
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, 0::2] = y[tm, None]
        out[tm, 1::2] = x[tm, 1::2] + 1.0
    return out


def test_scalar_rows_dynamic_shapes_and_broadcast_values() -> None:
    x, y = _rand(7, 20), _rand(7)
    swapped = torch.empty_like(x)
    swapped[:, 0::2], swapped[:, 1::2] = x[:, 1::2], x[:, 0::2] * 2.0
    filled = torch.empty_like(x)
    filled[:, 0::2], filled[:, 1::2] = y[:, None], x[:, 1::2] + 1.0
    for kernel, args, expected in (
        (grid_swap, (x,), swapped),
        (dynamic_swap, (x,), swapped),
        (broadcast_store, (x, y), filled),
    ):
        bound = kernel.bind(args)
        config = bound.config_spec.default()
        code = bound.to_triton_code(config)
        assert "tl.reshape(tl.join(" in code and code.count("tl.store(") == 1, code
        torch.testing.assert_close(bound.run(bound.compile_config(config), *args), expected)


def test_element_pairs_of_consecutive_pairs_are_one_contiguous_access_each_way() -> None:
    """``xc[tm, tk, 0]`` with ``tk`` over a dim of stride 2 (and ``w[tk, 0]`` of a [K, 2]
    table): both items are one span of 2 * BK elements, loaded as a slice pair's (a trailing
    dim of 2 left Triton's lanes down the rows, heldout_s28's complex multiply)."""
    x, w = _rand(9, 38), _rand(19, 2)
    bound = complex_mul.bind((x, w))
    config = tc.Config(block_sizes=[4, 8])
    plan = bound.config_spec.resolve(config)
    assert [(p.op, p.kind) for p in plan.slice_pairs] == [
        ("load", "merged"),
        ("load", "merged"),
        ("store", "merged"),
    ]
    assert "one contiguous load" in plan.describe()
    code = bound.to_triton_code(config)
    assert code.count("tl.load(") == 2 and code.count("tl.store(") == 1, code
    assert "tl.arange(0, 2)" not in code and code.count("tl.split(tl.reshape(span") == 2, code
    assert code.count("2 * offset_1 + tl.arange(0, 16)") == 3, code  # the span of 8 pairs
    assert "tl.reshape(tl.join(" in code, code
    for each in (config, tc.Config(block_sizes=[16, 32])):  # masked rows and pairs
        got = bound.run(bound.compile_config(each), x, w)
        torch.testing.assert_close(got, _complex_ref(x, w), rtol=1e-5, atol=1e-5)


def test_element_pairs_of_rows_apart_load_a_trailing_dim_of_two() -> None:
    """The pairs of a [19, 3] tensor's first two columns lie 3 elements apart: one load of
    ``[..., 2]`` each (``tl.arange(0, 2)``), no span."""
    x, base = _rand(9, 38), _rand(19, 3)
    w = base[:, :2]
    bound = complex_mul.bind((x, w))
    config = tc.Config(block_sizes=[4, 8])
    kinds = [(p.op, p.kind) for p in bound.config_spec.resolve(config).slice_pairs]
    assert kinds == [("load", "merged"), ("load", "element"), ("store", "merged")]
    code = bound.to_triton_code(config)
    assert code.count("tl.arange(0, 2)") == 1 and code.count("tl.split(span") == 1, code
    assert "one load of both elements" in bound.config_spec.resolve(config).describe()
    got = bound.run(bound.compile_config(config), x, w)
    torch.testing.assert_close(got, _complex_ref(x, w), rtol=1e-5, atol=1e-5)


def test_element_pairs_need_a_contiguous_dim_of_two() -> None:
    x = _rand(6, 12)
    w = _rand(2, 6).t()  # [6, 2] with its pair dim strided: w's loads stay apart
    kinds = [
        (p.op, p.kind)
        for p in complex_mul.bind((x, w)).config_spec.resolve(tc.Config()).slice_pairs
    ]
    assert kinds == [("load", "merged"), ("store", "merged")]
    torch.testing.assert_close(complex_mul(x, w), _complex_ref(x, w), rtol=1e-5, atol=1e-5)

    @tc.kernel(static_shapes=True)
    def first_two_channels(x: torch.Tensor) -> torch.Tensor:
        m, n, _ = x.size()
        out = torch.empty([m, n], dtype=x.dtype, device=x.device)
        for tm, tn in tc.tile([m, n]):
            out[tm, tn] = x[tm, tn, 0] - x[tm, tn, 1]
        return out

    rgb = _rand(5, 7, 3)
    assert first_two_channels.bind((rgb,)).config_spec.resolve(tc.Config()).slice_pairs == ()
    torch.testing.assert_close(first_two_channels(rgb), rgb[..., 0] - rgb[..., 1])


def test_split_of_a_whole_dim_of_two() -> None:
    x = _rand(7, 22)
    torch.testing.assert_close(_split_view(2)(x), x[:, 0::2] - 2.0 * x[:, 1::2])


def test_split_of_another_dim_names_what_to_do() -> None:
    with pytest.raises(ShapeError, match="view the tensor with a last dim of 2"):
        _split_view(3)(_rand(4, 9))


def test_pairs_with_64_bit_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rolled loop's offset is a Python int in the interpreter: the span's 64-bit cast must
    take it (``(offset).to(tl.int64)`` raised AttributeError there)."""
    from tilecraft.ir import index_width

    monkeypatch.setattr(index_width, "INT32_LIMIT", 100)
    x = _rand(9, 40)
    bound = centered_pairs.bind((x,))
    for config in (tc.Config(block_sizes=[4]), tc.Config(block_sizes=[4], reduction_loops=[8])):
        assert "tl.int64)" in bound.to_triton_code(config)
        got = bound.run(bound.compile_config(config), x)
        torch.testing.assert_close(got, _centered_ref(x), rtol=1e-5, atol=1e-5)
    x, w = _rand(9, 38), _rand(19, 2)
    bound = complex_mul.bind((x, w))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=[4, 8])), x, w)
    torch.testing.assert_close(got, _complex_ref(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.crosscompile
def test_paired_slices_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    x = torch.randn(512, 160, dtype=torch.bfloat16)
    configs = [tc.Config(block_sizes=[8]), tc.Config(block_sizes=[8], reduction_loops=[32])]
    rows = check_kernel(centered_pairs, (x,), targets, lambda b: configs)
    rows += check_kernel(mix_pairs, (x,), targets, lambda b: configs[:1])
    w = torch.randn(80, 2, dtype=torch.bfloat16)
    rows += check_kernel(complex_mul, (x, w), targets, lambda b: [tc.Config(block_sizes=[8, 32])])
    assert len(rows) == 8
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_paired_slices_on_gpu() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        x = _rand(1000, 160).to("cuda", dtype)
        torch.testing.assert_close(mix_pairs(x), _mix_ref(x))
        torch.testing.assert_close(pair_difference(x), _difference_ref(x))
        w = _rand(80, 2).to("cuda", dtype)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(complex_mul(x, w), _complex_ref(x, w), rtol=tol, atol=tol)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        for shape in ((8192, 32, 128), (1000, 40, 80)):
            x3, c, s = rope.make_inputs(shape, dtype, "cuda", 0)
            got = rope.rope_interleaved(x3, c, s)
            torch.testing.assert_close(got, rope.reference(x3, c, s)[1], rtol=tol, atol=tol)


def _ptx_memory_ops(kernel: tc.Kernel, args: tuple[torch.Tensor, ...]) -> set[str]:
    return set(default_memory_ops(kernel, args))


@pytest.mark.crosscompile
def test_rope_interleaved_vectorizes_like_rotate_half() -> None:
    """Stride-2 accesses were one 2-byte instruction per element; the paired span is 16-byte
    vectors, the same instructions as the rotate-half kernel."""
    args = rope.make_inputs((8192, 32, 128), torch.bfloat16, "meta", 0)
    interleaved = _ptx_memory_ops(rope.rope_interleaved, args)
    assert "ld.global.v4.b32" in interleaved and "st.global.v4.b32" in interleaved, interleaved
    assert not any(op.endswith(".b16") for op in interleaved), interleaved
    assert interleaved == _ptx_memory_ops(rope.rope_rotate_half, args)


@pytest.mark.crosscompile
def test_consecutive_element_pairs_vectorize() -> None:
    """A [4096, 2048, 2] bf16 view's pairs (and a [2048, 2] table's) were 4-byte loads, one row
    per lane; merged into spans, x's loads and the stores are 16-byte vectors (the table's
    row, broadcast down the tile, may load narrower)."""
    x = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    w = torch.empty(2048, 2, dtype=torch.bfloat16, device="meta")
    ops = _ptx_memory_ops(complex_mul, (x, w))
    assert "ld.global.v4.b32" in ops and "st.global.v4.b32" in ops, ops
    assert "st.global.b32" not in ops, ops

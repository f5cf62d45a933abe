"""Element groups: ``a[t, 0]``, ``a[t, 1]``, ``a[t, 2]``, ``a[t, 3]`` of a contiguous dim of 4
(or 8) are one access of ``[..., 4]`` split by even and odd elements (``ir/paired_slices.py``,
``codegen/paired.py``), as element pairs are: the analysis (groups found, partial or strided
ones refused), the generated code, numerics in the interpreter for loads and stores, and the
16-byte vectors compiled for sm_90."""

from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.heldout_s28c import bbox_iou_pairs, bbox_iou_pairs_reference
from tests.cross_targets import TARGETS, default_memory_ops
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.tools.crosscompile import CompileJob
from tilecraft.tools.worker import run_compile_jobs


@tc.kernel(static_shapes=True)
def rotate_quaternions(q: torch.Tensor) -> torch.Tensor:
    """(w, x, y, z) -> (w, -y, x, 2 z + w): four loads and four stores of q [N, 4]."""
    n, _ = q.size()
    out = torch.empty_like(q)
    for tn in tc.tile(n):
        w, x, y, z = q[tn, 0], q[tn, 1], q[tn, 2], q[tn, 3]
        out[tn, 2] = x
        out[tn, 0] = w
        out[tn, 3] = z * 2.0 + w
        out[tn, 1] = -y
    return out


def _rotate_ref(q: torch.Tensor) -> torch.Tensor:
    w, x, y, z = q.unbind(-1)
    return torch.stack([w, -y, x, z * 2.0 + w], dim=-1)


@tc.kernel(static_shapes=True)
def sum_of_eight(x: torch.Tensor) -> torch.Tensor:
    """x [N, 8]: a weighted sum of the eight columns, each indexed with a constant."""
    n, _ = x.size()
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        acc = x[tn, 0] * 1.0
        for k in range(1, 8):
            acc = acc + x[tn, k] * float(k + 1)
        out[tn] = acc
    return out


@tc.kernel(static_shapes=True)
def sum_of_four(x: torch.Tensor) -> torch.Tensor:
    """x [N, 4]: the sum of a row's four elements, each indexed with a constant."""
    n, _ = x.size()
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        out[tn] = (x[tn, 0] + x[tn, 1]) + (x[tn, 2] + x[tn, 3])
    return out


@tc.kernel(static_shapes=True)
def three_of_four(x: torch.Tensor) -> torch.Tensor:
    """Three of a row's four elements: no group (the fourth is never read)."""
    n, _ = x.size()
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        out[tn] = x[tn, 0] + x[tn, 1] * x[tn, 3]
    return out


def _groups(
    kernel: tc.Kernel, *args: torch.Tensor, blocks: tuple[int, ...] = (16,)
) -> list[tuple[str, str, int]]:
    plan = kernel.bind(args).config_spec.resolve(tc.Config(block_sizes=list(blocks)))
    return [(p.op, p.kind, len(p.slots)) for p in plan.slice_pairs]


def test_groups_of_four_and_eight_are_found() -> None:
    q = torch.randn(37, 4)
    # rows of 4 (8) one after the other: the row tile's span holds the groups (merged)
    assert _groups(rotate_quaternions, q) == [("load", "merged", 4), ("store", "merged", 4)]
    a, b = torch.randn(37, 4), torch.randn(37, 4)
    assert _groups(bbox_iou_pairs, a, b) == [("load", "merged", 4)] * 2
    assert _groups(sum_of_eight, torch.randn(37, 8)) == [("load", "merged", 8)]
    # rows 6 apart: the group of 4 is a trailing dim of the access
    assert _groups(sum_of_four, torch.randn(37, 6)[:, :4]) == [("load", "element", 4)]
    plan = rotate_quaternions.bind((q,)).config_spec.resolve(tc.Config(block_sizes=[16]))
    assert "stores 5 + 7 + 4 + 6: one store of all 4 elements" in plan.describe()


def test_partial_strided_or_odd_sized_rows_stay_apart() -> None:
    assert _groups(three_of_four, torch.randn(37, 4)) == []
    strided = torch.randn(4, 37).t()  # [37, 4] whose element dim has stride 37
    assert _groups(rotate_quaternions, strided) == []
    assert _groups(three_of_four, torch.randn(37, 6)[:, :4]) == []  # a dim of 4 in rows of 6


def test_group_code_is_one_access_split_by_even_and_odd_elements() -> None:
    code = rotate_quaternions.bind((torch.randn(37, 4),)).to_triton_code(
        tc.Config(block_sizes=[16])
    )
    assert code.count("tl.load(") == 1 and code.count("tl.store(") == 1, code
    assert code.count("4 * offset_0 + tl.arange(0, 64)") == 2, code
    assert "tl.split(tl.reshape(span, [_BLOCK_0, 2, 2]))" in code, code
    assert re.search(r"\bw, y = tl\.split\(even\)", code), code
    assert "tl.reshape(tl.join(tl.join(" in code, code
    code = sum_of_eight.bind((torch.randn(37, 8),)).to_triton_code(tc.Config(block_sizes=[16]))
    assert code.count("tl.load(") == 1 and "8 * offset_0 + tl.arange(0, 128)" in code, code
    assert code.count("tl.split(") == 7, code
    code = sum_of_four.bind((torch.randn(37, 6)[:, :4],)).to_triton_code(
        tc.Config(block_sizes=[16])
    )
    assert code.count("tl.load(") == 1 and "tl.arange(0, 4)[None, :]" in code, code


@pytest.mark.parametrize("block", [16, 64])
def test_groups_compute_the_same_in_the_interpreter(block: int) -> None:
    config = tc.Config(block_sizes=[block])
    q = torch.randn(37, 4)
    bound = rotate_quaternions.bind((q,))
    torch.testing.assert_close(bound.run(bound.compile_config(config), q), _rotate_ref(q))
    x = torch.randn(37, 8)
    bound = sum_of_eight.bind((x,))
    weights = torch.arange(1, 9, dtype=torch.float32)
    got = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(got, x @ weights, rtol=1e-5, atol=1e-5)
    x = torch.randn(37, 6)[:, :4]
    bound = sum_of_four.bind((x,))
    got = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(got, (x[:, 0] + x[:, 1]) + (x[:, 2] + x[:, 3]))
    a, b = torch.rand(37, 2) * 10, torch.rand(37, 2) * 10
    boxes_a, boxes_b = torch.cat([a, a + 5], 1), torch.cat([b, b + 3], 1)
    bound = bbox_iou_pairs.bind((boxes_a, boxes_b))
    got = bound.run(bound.compile_config(config), boxes_a, boxes_b)
    torch.testing.assert_close(got, bbox_iou_pairs_reference(boxes_a, boxes_b))


@pytest.mark.crosscompile
def test_groups_of_four_fp32_are_16_byte_vectors_on_sm90() -> None:
    """Paired boxes [N, 4] fp32 were four 4-byte loads a row, lanes 16 bytes apart (H200:
    0.27 ms for 16.7M box pairs against torch.compile's 0.147)."""
    a = torch.empty(1 << 24, 4, device="meta")
    ops = default_memory_ops(bbox_iou_pairs, (a, a))
    assert ops and all(op == "ld.global.v4.b32" for op in ops if op.startswith("ld")), ops
    ops = default_memory_ops(rotate_quaternions, (a,))
    assert "st.global.v4.b32" in ops and "st.global.b32" not in ops, ops


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_groups_on_gpu() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        q = torch.randn(100003, 4, device="cuda").to(dtype)
        torch.testing.assert_close(rotate_quaternions(q), _rotate_ref(q))
        x = torch.randn(100003, 8, device="cuda").to(dtype)
        weights = torch.arange(1, 9, dtype=torch.float32, device="cuda")
        tol = 1e-4 if dtype == torch.float32 else 0.5
        want = (x.float() @ weights).to(dtype)
        torch.testing.assert_close(sum_of_eight(x), want, rtol=tol, atol=tol)
    a, b = torch.rand(100003, 2, device="cuda") * 10, torch.rand(100003, 2, device="cuda") * 10
    boxes_a, boxes_b = torch.cat([a, a + 5], 1), torch.cat([b, b + 3], 1)
    got = bbox_iou_pairs(boxes_a, boxes_b)
    torch.testing.assert_close(got, bbox_iou_pairs_reference(boxes_a, boxes_b))


@tc.kernel(static_shapes=True)
def windows_of_four(x: torch.Tensor) -> torch.Tensor:
    """x.unfold(-1, 4, 1) of x [B, L]: out[b, w, k] = x[b, w + k], four shifted loads stored
    to the four elements of each window (a group merged with the tile before it)."""
    b, length = x.size()
    out = torch.empty([b, length - 3, 4], dtype=x.dtype, device=x.device)
    for tb, tw in tc.tile([b, length - 3]):
        for k in tc.static_range(4):
            out[tb, tw, k] = x[tb, tw.index + k]
    return out


@tc.kernel(static_shapes=True)
def swizzle_rgba(x: torch.Tensor) -> torch.Tensor:
    """x [N, P, 4] (r, g, b, a) -> (b, g, r, a * 0.5): a merged group of four loads and one of
    four stores over the pixels' tile."""
    n, p, _ = x.size()
    out = torch.empty_like(x)
    for tn, tp in tc.tile([n, p]):
        r, g, b, a = x[tn, tp, 0], x[tn, tp, 1], x[tn, tp, 2], x[tn, tp, 3]
        out[tn, tp, 0] = b
        out[tn, tp, 1] = g
        out[tn, tp, 2] = r
        out[tn, tp, 3] = a * 0.5
    return out


def test_groups_after_a_tile_of_their_stride_merge_into_its_span() -> None:
    """A group of 4 whose previous item is a tile over a dim of stride 4 is one contiguous
    span of 4 x BLOCK elements, as a merged pair's is of 2 x BLOCK."""
    x = torch.randn(3, 37)
    assert _groups(windows_of_four, x, blocks=(2, 16)) == [("store", "merged", 4)]
    code = windows_of_four.bind((x,)).to_triton_code(tc.Config(block_sizes=[2, 16]))
    assert re.search(r"span_\d+ = 4 \* offset_\d+ \+ tl\.arange\(0, 64\)", code), code
    assert "< 136" in code, code  # 34 windows of 4 elements: the span's mask
    assert "tl.arange(0, 4)" not in code, code  # no trailing dim of 4
    rgba = torch.randn(3, 10, 4)
    assert _groups(swizzle_rgba, rgba, blocks=(2, 16)) == [
        ("load", "merged", 4),
        ("store", "merged", 4),
    ]
    code = swizzle_rgba.bind((rgba,)).to_triton_code(tc.Config(block_sizes=[2, 16]))
    assert code.count("tl.load(") == 1 and code.count("tl.store(") == 1, code
    assert "tl.split(tl.reshape(span, [_BLOCK_0, _BLOCK_1, 2, 2]))" in code, code


@pytest.mark.parametrize("blocks", [[1, 16], [2, 64], [4, 8]])
def test_merged_groups_compute_the_same_in_the_interpreter(blocks: list[int]) -> None:
    config = tc.Config(block_sizes=blocks)
    x = torch.randn(3, 37)
    bound = windows_of_four.bind((x,))
    torch.testing.assert_close(bound.run(bound.compile_config(config), x), x.unfold(-1, 4, 1))
    rgba = torch.randn(3, 10, 4)
    bound = swizzle_rgba.bind((rgba,))
    want = torch.stack([rgba[..., 2], rgba[..., 1], rgba[..., 0], rgba[..., 3] * 0.5], -1)
    torch.testing.assert_close(bound.run(bound.compile_config(config), rgba), want)


@pytest.mark.crosscompile
def test_merged_group_store_lays_a_warp_along_the_windows_on_sm90() -> None:
    """The window store's layout puts a warp's lanes along the contiguous span (stored with a
    trailing dim of 4 it was threadsPerWarp [4, 8, 1, 1] over a 3-D unfold's batches and
    channels, 8 bytes a row each: 4x slower on an H200, heldout_s30b)."""
    x = torch.empty(64, 4096, dtype=torch.bfloat16, device="meta")
    bound = BoundKernel(windows_of_four, windows_of_four.bind_arguments((x,), {}), TARGETS[0])
    config = bound.config_spec.normalize(tc.Config(block_sizes=[8, 128], num_warps=8))
    _, _, traced, kernels = bound.generate(config)
    (report,) = run_compile_jobs([CompileJob.of(kernels[0], traced.loops[0], TARGETS[0])], 300)
    assert report.ok, report.error
    stored = re.search(r"tt\.store %\w+, %\w+(?:, %\w+)? : tensor<[^,]*, #(\w+)>", report.ttgir)
    assert stored, report.ttgir
    layout = re.search(rf"#{stored.group(1)} = .*threadsPerWarp = \[([\d, ]+)\]", report.ttgir)
    assert layout, report.ttgir
    lanes = [int(v) for v in layout.group(1).split(",")]
    assert lanes[-1] >= 16, (lanes, report.ttgir)


@tc.kernel(static_shapes=True)
def mixed_group_store(x: torch.Tensor) -> torch.Tensor:
    """Stores of one group from a constant, a computed value (fp32 for half inputs), a copy
    and a scalar read from the tensor: joined in the tensor's dtype."""
    n, _ = x.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        out[tn, 0] = 0
        out[tn, 1] = x[tn, 1] * 2
        out[tn, 2] = x[tn, 2]
        out[tn, 3] = x[0, 3]
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_a_group_store_joins_constants_scalars_and_computed_values(dtype: torch.dtype) -> None:
    """A constant (``out[tn, 0] = 0``) was ``tl.broadcast_to(0.0, ...)``, which Triton cannot
    build, and a half tile computed in fp32 met a half copy in one ``tl.join``."""
    x = (torch.randn(37, 4) * 10).to(dtype)
    want = torch.stack([torch.zeros_like(x[:, 0]), x[:, 1] * 2, x[:, 2], x[0, 3].expand(37)], 1)
    assert _groups(mixed_group_store, x) == [("store", "merged", 4)]
    for blocks in ([16], [64]):
        bound = mixed_group_store.bind((x,))
        got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
        torch.testing.assert_close(got, want)


@tc.kernel(static_shapes=False)
def weighted_quads(x: torch.Tensor) -> torch.Tensor:
    """A group of four read with dynamic shapes: rows back to back in one call, a view of
    wider rows in the next (one compile: the same size buckets and unit strides)."""
    n, _ = x.size()
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        out[tn] = x[tn, 0] + x[tn, 1] * 2.0 + x[tn, 2] * 3.0 + x[tn, 3] * 4.0
    return out


def test_dynamic_shapes_never_merge_a_group_with_its_row_stride() -> None:
    """The row stride is a kernel argument with dynamic shapes: a span that assumed rows of
    4 read a [5, 4] view of [5, 6] rows wrong on the second call."""
    w = torch.tensor([1.0, 2.0, 3.0, 4.0])
    packed = torch.randn(5, 4)
    torch.testing.assert_close(weighted_quads(packed), packed @ w)
    view = torch.randn(5, 6)[:, :4]
    torch.testing.assert_close(weighted_quads(view), view @ w)
    assert _groups(weighted_quads, view) == [("load", "element", 4)]


@tc.kernel(static_shapes=True)
def rotate_groups_(x: torch.Tensor) -> torch.Tensor:
    """In place: each row of four rotated left by one (the first element read before its
    store, stored last)."""
    n, _ = x.size()
    for tn in tc.tile(n):
        first = x[tn, 0]
        x[tn, 0] = x[tn, 1]
        x[tn, 1] = x[tn, 2]
        x[tn, 2] = x[tn, 3]
        x[tn, 3] = first
    return x


def test_in_place_rotation_reads_values_not_views() -> None:
    """Ref mode took ``first = x[tn, 0]`` as torch's view, which the next store overwrote:
    every compiled config "differed from ref mode" and a plain call found none. A load in ref
    mode is a value, as compiled (copy on write, ``language/ref_views.py``)."""
    x = torch.randn(37, 4)
    want = x.roll(-1, 1)
    torch.testing.assert_close(rotate_groups_.run_ref(x.clone()), want)
    torch.testing.assert_close(rotate_groups_(x.clone()), want)

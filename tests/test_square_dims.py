"""Whole dims of equal extent are interchangeable (frontend/rdims.py): kernels whose ``:`` dims
share a size, as square matrices and tiny batched products have, trace and compute what torch
computes. Before, ``x[tm, :] @ h[:, :]`` with a square ``h`` failed with "value ... does not fit
the indexed shape", and ``torch.bmm`` of ``[B, 32, 32]`` tiles with "inner dims differ"."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.conftest import HAS_CUDA
from tilecraft.errors import DeviceCodeError
from tilecraft.targets.target import Target
from tilecraft.tools.check import check_kernel


@tc.kernel(static_shapes=True)
def bmm_whole(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    bsz = a.size(0)
    out = torch.empty([bsz, a.size(1), b.size(2)], dtype=a.dtype, device=a.device)
    for tb in tc.tile(bsz):
        out[tb, :, :] = torch.bmm(a[tb, :, :], b[tb, :, :]).to(out.dtype)
    return out


@tc.kernel(static_shapes=True)
def rotate_residual(x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """x @ h + x with a square h (a Hadamard-style rotation)."""
    m, d = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        y = tc.dot(x[tm, :], h[:, :], out_dtype=torch.float32)
        out[tm, :] = (y + x[tm, :].to(torch.float32)).to(x.dtype)
    return out


@tc.kernel(static_shapes=True)
def square_column_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(1)], dtype=torch.float32, device=x.device)
    for _ in tc.tile(1):
        out[:] = x[:, :].to(torch.float32).sum(0)
    return out


@tc.kernel(static_shapes=True)
def symmetric_part(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for _ in tc.tile(1):
        v = x[:, :].to(torch.float32)
        out[:, :] = ((v + v.T) * 0.5).to(x.dtype)
    return out


@tc.kernel(static_shapes=True)
def uses_a_property(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        v = x[tm, :]
        out[tm, :] = v * v.is_cuda
    return out


@tc.kernel(static_shapes=True)
def rotate_points(rots: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """``[BP, 3]`` points times a ``[3, 3]`` tile broadcast by position, points first: the
    points' 3 shares its name with the rotation's first dim, not its last."""
    n, p, _ = points.size()
    out = torch.empty_like(points)
    for tn, tp in tc.tile([n, p], block_size=[1, None]):
        rot = rots[tn.begin, :, :]
        pts = points[tn.begin, tp, :]
        out[tn.begin, tp, :] = torch.sum(pts[:, None, :] * rot[None, :, :], dim=-1)
    return out


@tc.kernel(static_shapes=True)
def rotate_points_sliced(transforms: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """The same with the rotation sliced out of ``[N, 4, 4]`` and the sum taken with ``where``
    (a three-operand broadcast)."""
    n, p, _ = points.size()
    out = torch.empty_like(points)
    for tn, tp in tc.tile([n, p], block_size=[1, None]):
        rot = transforms[tn.begin, :3, :3]
        pts = points[tn.begin, tp, :]
        prod = torch.where(pts[:, None, :] > 100.0, 0.0, pts[:, None, :] * rot[None, :, :])
        out[tn.begin, tp, :] = torch.sum(prod, dim=-1)
    return out


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("sizes", [(3, 32, 64, 32), (3, 32, 32, 32), (2, 16, 32, 48)])
def test_batched_products_of_equal_sized_dims(sizes: tuple[int, ...], device: str) -> None:
    bsz, m, k, n = sizes
    a, b = _rand(bsz, m, k).to(device), _rand(bsz, k, n, seed=1).to(device)
    torch.testing.assert_close(bmm_whole(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("d", [32, 64])
def test_a_square_matrix_times_a_row_tile_stores_into_the_row(d: int, device: str) -> None:
    x, h = _rand(8, d).to(device), _rand(d, d, seed=1).to(device)
    torch.testing.assert_close(rotate_residual(x, h), x @ h + x, rtol=1e-4, atol=1e-4)


def test_a_reduction_of_a_square_tile_and_its_transpose(device: str) -> None:
    x = _rand(16, 16).to(device)
    torch.testing.assert_close(square_column_sum(x), x.sum(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(symmetric_part(x), (x + x.T) / 2)


def test_a_tensor_property_that_is_not_a_view_is_a_clear_error() -> None:
    with pytest.raises(DeviceCodeError, match="no attribute 'is_cuda'") as info:
        uses_a_property(_rand(4, 16))
    assert "test_square_dims.py" in str(info.value)  # the user's line


def test_equal_sized_dims_relabel_by_a_view_that_stays_whole() -> None:
    """The relabel is a reshape view: it keeps both dims whole (never looped in chunks)."""
    from tilecraft.ir.nodes import Op
    from tilecraft.ir.phases import rdim_loopable

    bound = rotate_residual.bind((_rand(8, 64), _rand(64, 64)))
    (loop,) = bound.config_spec.loops
    views = [n for n in loop.walk() if n.op is Op.VIEW and n.attrs.get("reshape")]
    assert views, "expected a relabeling view"
    assert all(not rdim_loopable(loop, d)[0] for v in views for d in v.shape if d != 1)


@pytest.mark.crosscompile
def test_equal_sized_dims_crosscompile() -> None:
    targets = [Target.parse("cuda:90"), Target.parse("hip:gfx942")]
    a = _rand(64, 32, 64).to(torch.bfloat16)
    b = _rand(64, 64, 32).to(torch.bfloat16)
    rows = check_kernel(bmm_whole, (a, b), targets, lambda bound: [bound.config_spec.default()])
    x, h = _rand(256, 64).to(torch.bfloat16), _rand(64, 64).to(torch.bfloat16)
    rows += check_kernel(
        rotate_residual, (x, h), targets, lambda bound: [bound.config_spec.default()]
    )
    assert len(rows) == 4
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status, row.report)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_equal_sized_dims_on_gpu() -> None:
    a = _rand(4096, 32, 64).to(torch.bfloat16).cuda()
    b = _rand(4096, 64, 32, seed=1).to(torch.bfloat16).cuda()
    want = torch.bmm(a.float(), b.float())
    torch.testing.assert_close(bmm_whole(a, b).float(), want, rtol=2e-2, atol=5e-2)
    x = _rand(4096, 64).to(torch.bfloat16).cuda()
    h = _rand(64, 64, seed=1).to(torch.bfloat16).cuda()
    want = x.float() @ h.float() + x.float()
    torch.testing.assert_close(rotate_residual(x, h).float(), want, rtol=2e-2, atol=0.25)


@tc.kernel(static_shapes=False)
def rotate_dynamic(x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = tc.dot(x[tm, :], h[:, :], out_dtype=torch.float32).to(x.dtype)
    return out


def test_run_time_sizes_interchange_and_are_checked_at_launch() -> None:
    """With dynamic shapes the relabeled dim takes the other's size sources: the launch checks
    that they still agree, and a call whose sizes fit runs on the same trace."""
    from tilecraft.errors import ShapeError

    x, h = _rand(8, 32), _rand(32, 32, seed=1)
    torch.testing.assert_close(rotate_dynamic(x, h), x @ h, rtol=1e-4, atol=1e-4)
    x, h = _rand(5, 64), _rand(64, 64, seed=1)  # other sizes, the same trace
    torch.testing.assert_close(rotate_dynamic(x, h), x @ h, rtol=1e-4, atol=1e-4)
    with pytest.raises(ShapeError, match="must be equal"):
        rotate_dynamic(_rand(5, 64), _rand(64, 48))  # out's 64 columns, h's 48


@tc.kernel(static_shapes=True)
def rotate_accumulate(x: torch.Tensor, h: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
    """The rotation's result added atomically, and assigned in a branch over a row tile."""
    m, _ = x.size()
    out = torch.zeros_like(x, dtype=torch.float32)
    for tm in tc.tile(m):
        y = x[tm, :].to(torch.float32)
        if flag[0] > 0:
            y = tc.dot(x[tm, :], h[:, :], out_dtype=torch.float32)
        tc.atomic_add(out, [tm, slice(None)], y)
    return out


@pytest.mark.parametrize("flag", [1, 0])
def test_equal_sized_dims_in_atomics_and_branches(flag: int, device: str) -> None:
    x, h = _rand(8, 32).to(device), _rand(32, 32, seed=1).to(device)
    want = x @ h if flag else x
    got = rotate_accumulate(x, h, torch.tensor([flag], device=device))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_a_broadcast_whose_first_operand_names_a_place_like_another_dim(device: str) -> None:
    """torch broadcasts by position: ``pts[:, None, :] * rot[None, :, :]`` is ``R @ p`` for each
    point whichever operand comes first (it raised ShapeError ... do not broadcast)."""
    tf, pts = _rand(2, 4, 4), _rand(2, 37, 3, seed=1)
    want = pts @ tf[:, :3, :3].transpose(1, 2)
    rots = tf[:, :3, :3].contiguous()
    torch.testing.assert_close(rotate_points(rots.to(device), pts.to(device)).cpu(), want)
    got = rotate_points_sliced(tf.to(device), pts.to(device)).cpu()
    torch.testing.assert_close(got, want)

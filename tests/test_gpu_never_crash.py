"""GPU checks of issue 12 (skipped without CUDA): size-0 launches, int64 offsets past 2^31 on real
memory, NaN-propagating reductions, bitwise ops and fmod compiled for the device, and a shorter
second tensor rejected before launch."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from examples.add import add
from examples.softmax import softmax
from tests.kernels import rms_norm
from tests.test_semantics import _eager_stats, _with_nans, int_ops, row_max_looped, row_stats
from tilecraft.errors import ShapeError

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape", [(0, 64), (64, 0), (0, 0)])
def test_gpu_size_zero(shape: tuple[int, int]) -> None:
    x = torch.randn(shape, device="cuda")
    assert add(x, x).shape == shape
    assert softmax(x).shape == shape
    assert rms_norm(x, torch.ones(shape[1], device="cuda")).shape == shape
    torch.cuda.synchronize()


@tc.kernel(config=tc.Config(block_sizes=[4, 16]), static_shapes=False)
def copy_plus_one(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] + 1
    return out


def test_gpu_offsets_past_2_31_after_a_small_call() -> None:
    small = torch.zeros(3, 16, dtype=torch.uint8, device="cuda")
    assert torch.equal(copy_plus_one(small), small + 1)
    storage = torch.zeros(2 * 2**30 + 16, dtype=torch.uint8, device="cuda")
    storage[2 * 2**30 : 2 * 2**30 + 16] = 7
    wide = storage.as_strided((3, 16), (2**30, 1))  # same size buckets as `small`
    out = copy_plus_one(wide)
    torch.cuda.synchronize()
    assert torch.equal(out, wide + 1)
    assert int(out[2, 0]) == 8


def test_gpu_nan_reductions() -> None:
    x = _with_nans().cuda()
    torch.testing.assert_close(row_stats(x), _eager_stats(x), equal_nan=True)
    torch.testing.assert_close(row_max_looped(x), x.amax(-1), equal_nan=True)


def test_gpu_integer_ops() -> None:
    a = torch.randint(-1000, 1000, (37,), dtype=torch.int32, device="cuda")
    b = torch.randint(1, 50, (37,), dtype=torch.int32, device="cuda")
    want = torch.stack(
        [~a, a ^ b, a & b, a | b, a << 3, a >> 2, torch.bitwise_xor(~a, b), torch.fmod(a, b)]
    )
    assert torch.equal(int_ops(a, b), want)


def test_gpu_short_tensor_is_rejected_before_launch() -> None:
    @tc.kernel(config=tc.Config(block_sizes=[16, 16]))
    def axpy(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty_like(x)
        for tm, tn in tc.tile([m, n]):
            out[tm, tn] = x[tm, tn] * a + y[tm, tn]
        return out

    with pytest.raises(ShapeError, match="'y'"):
        axpy(torch.ones(512, 512, device="cuda"), torch.zeros(2, 2, device="cuda"), 1.0)

"""Fixes from session 39's held-out kernels: the index of a block-size-1 tile (or of ``tc.grid``)
is one scalar in both modes (ref mode gave a one-element vector, so code that indexed it ran
there and failed to compile) and indexing it as a vector says why; ``arange(n)`` of a run-time
size follows it; device code's factories without a device follow the kernel in ref mode; a
``range()`` over a run-time size says what to do."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError, ShapeError


@tc.kernel(static_shapes=True)
def per_head_decay(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for th, tn in tc.tile(x.size(), block_size=[1, None]):
        decay = 1.0 - torch.exp2(-5.0 - th.index.to(torch.float32))  # one per head
        out[th, tn] = x[th, tn] * decay
    return out


@tc.kernel(static_shapes=True)
def per_head_decay_as_vector(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for th, tn in tc.tile(x.size(), block_size=[1, None]):
        decay = 1.0 - torch.exp2(-5.0 - th.index.to(torch.float32))
        out[th, tn] = x[th, tn] * decay[:, None]
    return out


def test_a_block_size_1_tiles_index_is_a_scalar_in_both_modes(device: str) -> None:
    x = torch.rand(3, 10, device=device)
    want = x * (1.0 - torch.exp2(-5.0 - torch.arange(3, device=device).float()))[:, None]
    torch.testing.assert_close(per_head_decay.run_ref(x), want)
    torch.testing.assert_close(per_head_decay(x), want)


def test_indexing_that_scalar_as_a_vector_fails_alike_and_says_why() -> None:
    x = torch.rand(3, 10)
    with pytest.raises(IndexError):
        per_head_decay_as_vector.run_ref(x)
    with pytest.raises(ShapeError, match="too many indices") as info:
        per_head_decay_as_vector(x)
    assert "block_size=1" in str(info.value)
    assert "test_heldout_s39_fixes.py" in str(info.value)


@tc.kernel(static_shapes=False)
def capped_lengths(lengths: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    b, t = x.size()
    out = torch.empty([b], dtype=torch.int32, device=x.device)
    for tb in tc.tile(b):
        pos = tc.arange(t)
        out[tb] = torch.sum((pos[None, :] < lengths[tb][:, None]).to(torch.int32), dim=1).to(
            torch.int32
        )
    return out


@tc.kernel(static_shapes=False)
def weighted_positions(x: torch.Tensor) -> torch.Tensor:
    b, t = x.size()
    out = torch.empty([b], dtype=x.dtype, device=x.device)
    for tb in tc.tile(b):
        pos = torch.arange(t, device=x.device).to(x.dtype)
        out[tb] = torch.sum(x[tb, :] * pos[None, :], dim=1)  # meets the row's own dim
    return out


def test_arange_of_a_run_time_size_follows_it_from_call_to_call(device: str) -> None:
    """arange(t) of a run-time size baked the first call's t: 50 then 64 gave 50 for the second."""
    lengths = torch.tensor([3, 40, 100, 7], device=device)
    for t in (50, 64):
        got = capped_lengths(lengths, torch.randn(4, t, device=device))
        assert torch.equal(got, torch.clamp(lengths, max=t).to(torch.int32))
    for t in (50, 64):
        x = torch.randint(-4, 5, (4, t), device=device).float()  # small ints: exact sums
        want = (x * torch.arange(t, device=device)).sum(1)
        assert torch.equal(weighted_positions(x), want)


@tc.kernel(static_shapes=True)
def ramp_weighted(x: torch.Tensor) -> torch.Tensor:
    b, n = x.size()
    out = torch.empty_like(x)
    for tb in tc.tile(b):
        ramp = torch.arange(n)[None, :] + torch.ones([1, n])  # no device=: the kernel's
        out[tb, :] = x[tb, :] * ramp
    return out


@pytest.mark.parametrize("where", ["meta", "device"])
def test_device_code_factories_without_a_device_follow_the_kernel_in_ref_mode(
    where: str, device: str
) -> None:
    """On a GPU, ref mode made them CPU tensors: the accuracy baseline (and run_ref) failed
    with "Expected all tensors to be on the same device" (the STFT's torch.arange(n_fft))."""
    x = torch.rand(3, 10, device=device if where == "device" else "meta")
    got = ramp_weighted.run_ref(x)
    assert got.device == x.device
    if where == "device":
        want = x * (torch.arange(10, device=device) + 1.0)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(ramp_weighted(x), want)


@tc.kernel(static_shapes=False)
def horner(coef: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    n, k = coef.size()
    out = torch.empty_like(x)
    for tn in tc.tile(n):
        acc = coef[tn, k - 1]
        for j in range(k - 2, -1, -1):  # a run-time k: no Python range
            acc = acc * x[tn] + coef[tn, j]
        out[tn] = acc
    return out


def test_range_over_a_run_time_size_says_what_to_do() -> None:
    """Was "UnsupportedOpError: TypeError: 'TileValue' object cannot be interpreted as an
    integer" (an internal class name, no hint)."""
    with pytest.raises(DeviceCodeError, match="known only at run time") as info:
        horner(torch.rand(8, 4), torch.rand(8))
    text = str(info.value)
    assert "TileValue" not in text and "tc.specialize" in text and "tc.grid" in text
    assert "test_heldout_s39_fixes.py" in text

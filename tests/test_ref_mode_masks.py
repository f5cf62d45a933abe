"""Ref mode keeps to the elements compiled code touches: a masked load's masked-off indices may
lie outside the tensor (a shifted 3x3 window's column -1 and ``w``) and read 0, a masked store
writes nothing there, and no out-of-range index ever reaches the tensor (on a GPU it would be a
device-side assert). An index out of range that no mask covers is a located error naming the op,
the tensor and what to write instead; negative tensor indices do not wrap."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import tilecraft as tc
from tests.test_losses import row_cross_entropy
from tilecraft.errors import IndexOutOfBoundsError, ShapeError


@tc.kernel(static_shapes=True)
def depthwise3x3(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x [N, H, W, C], weight [3, 3, C]: a depthwise 3x3 convolution with zero padding, the
    nine taps shifted loads; tap rows outside the image are skipped by an `if`, tap columns
    outside it masked off (no clamp of the column index)."""
    n, h, w, c = x.size()
    out = torch.empty_like(x)
    for tn, th, tw, tch in tc.tile([n, h, w, c], block_size=[1, 1, None, None]):
        ni = tn.begin
        hi = th.begin
        acc = tc.zeros([tw, tch], dtype=torch.float32)
        for dy in tc.static_range(3):
            row = hi + dy - 1
            if (row >= 0) & (row < h):
                for dx in tc.static_range(3):
                    cols = tw.index + dx - 1
                    valid = (cols >= 0) & (cols < w)
                    xv = tc.load(x, [ni, row, cols, tch], extra_mask=valid[:, None])
                    wt = weight[dy, dx, tch].to(torch.float32)
                    acc = acc + xv.to(torch.float32) * wt[None, :]
        out[ni, hi, tw, tch] = acc.to(out.dtype)
    return out


def _depthwise_eager(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    w = weight.float().permute(2, 0, 1)[:, None]  # [C, 1, 3, 3]
    y = torch.nn.functional.conv2d(x.float().permute(0, 3, 1, 2), w, padding=1, groups=x.shape[3])
    return y.permute(0, 2, 3, 1).contiguous().to(x.dtype)


@tc.kernel(static_shapes=True)
def box3x3(x: torch.Tensor) -> torch.Tensor:
    """x [H, W]: the sum of each element's 3x3 neighbourhood (zeros outside), every tap one
    masked gather whose rows and columns both pass the edges (two broadcast index tiles)."""
    h, w = x.size()
    out = torch.empty_like(x)
    for th, tw in tc.tile([h, w]):
        acc = tc.zeros([th, tw], dtype=torch.float32)
        for dy in tc.static_range(3):
            rows = th.index + dy - 1
            for dx in tc.static_range(3):
                cols = tw.index + dx - 1
                inside = ((rows >= 0) & (rows < h))[:, None] & ((cols >= 0) & (cols < w))[None, :]
                acc = acc + tc.load(x, [rows[:, None], cols[None, :]], extra_mask=inside)
        out[th, tw] = acc
    return out


def _box_eager(x: torch.Tensor) -> torch.Tensor:
    ones = torch.ones(1, 1, 3, 3, dtype=x.dtype, device=x.device)
    return torch.nn.functional.conv2d(x[None, None], ones, padding=1)[0, 0]


class _IndexGuard(TorchFunctionMode):
    """Fails a test where an index tensor out of its dim's range reaches a tensor's
    ``__getitem__`` / ``__setitem__`` / ``index_put_`` (a device-side assert on a GPU)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__, torch.Tensor.index_put_):
            _assert_in_range(args[0], args[1])
        return func(*args, **(kwargs or {}))


def _assert_in_range(tensor: torch.Tensor, index: Any) -> None:
    items = index if isinstance(index, tuple) else (index,)
    if any(i is Ellipsis for i in items):
        return
    dim = 0
    for item in items:
        if item is None:
            continue
        is_mask = isinstance(item, torch.Tensor) and item.dtype == torch.bool
        if isinstance(item, torch.Tensor) and not is_mask and item.numel():
            size = tensor.shape[dim]
            assert -size <= int(item.min()) and int(item.max()) < size, (item, tensor.shape)
        dim += item.ndim if is_mask else 1


@contextmanager
def _guarded() -> Iterator[None]:
    with _IndexGuard():
        yield


def _run(kernel: Any, config: tc.Config, *args: Any) -> Any:
    bound = kernel.bind(args)
    return bound.run(bound.compile_config(config), *args)


@pytest.mark.parametrize("shape", [(2, 5, 7, 3), (1, 3, 9, 5)])
def test_shifted_window_masked_load_matches_in_both_modes(
    shape: tuple[int, ...], device: str
) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(device)
    weight = torch.randn(3, 3, shape[3], generator=g).to(device)
    want = _depthwise_eager(x, weight)
    with _guarded():
        ref = depthwise3x3.run_ref(x, weight)
    torch.testing.assert_close(ref, want, rtol=1e-5, atol=1e-5)
    for config in (tc.Config(block_sizes=[4, 2]), tc.Config(block_sizes=[8, 4])):
        got = _run(depthwise3x3, config, x, weight)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_masked_gather_past_every_edge_matches_in_both_modes(device: str) -> None:
    x = torch.randn(9, 13, generator=torch.Generator().manual_seed(1)).to(device)
    with _guarded():
        ref = box3x3.run_ref(x)
    torch.testing.assert_close(ref, _box_eager(x), rtol=1e-5, atol=1e-5)
    got = _run(box3x3, tc.Config(block_sizes=[4, 8]), x)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def shifted_store(x: torch.Tensor, shift: int) -> torch.Tensor:
    """out[i + shift] = x[i] where i + shift is inside; the rest keeps the fill (-7)."""
    n = x.size(0)
    out = torch.full_like(x, -7.0)
    for tm in tc.tile(n):
        dst = tm.index + shift
        tc.store(out, [dst], x[tm], extra_mask=(dst >= 0) & (dst < n))
    return out


@tc.kernel(static_shapes=True)
def row_shift_store(x: torch.Tensor) -> torch.Tensor:
    """Row r of x into row r + 1 of out, the last row's store masked off by a scalar mask (its
    int row index is past the end), the columns by a tile."""
    m, n = x.size()
    out = torch.full_like(x, -7.0)
    for tb, tn in tc.tile([m, n], block_size=[1, None]):
        row = tb.begin + 1
        tc.store(out, [row, tn], x[tb.begin, tn], extra_mask=row < m)
    return out


@pytest.mark.parametrize("shift", [2, -3])
def test_masked_stores_write_nothing_off_the_mask(shift: int, device: str) -> None:
    x = torch.randn(11, device=device)
    want = torch.full_like(x, -7.0)
    if shift > 0:
        want[shift:] = x[:-shift]
    else:
        want[:shift] = x[-shift:]
    with _guarded():
        ref = shifted_store.run_ref(x, shift)
    # the masked-off lanes' safe index is 0, where a kept lane also writes: they must not
    assert torch.equal(ref, want)
    assert torch.equal(_run(shifted_store, tc.Config(block_sizes=[4]), x, shift), want)


def test_masked_store_of_a_row_past_the_end_writes_nothing(device: str) -> None:
    x = torch.randn(5, 9, device=device)
    want = torch.full_like(x, -7.0)
    want[1:] = x[:-1]
    with _guarded():
        assert torch.equal(row_shift_store.run_ref(x), want)
    assert torch.equal(_run(row_shift_store, tc.Config(block_sizes=[4]), x), want)


@tc.kernel(static_shapes=True)
def unmasked_load(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for tm in tc.tile(n):
        cols = tm.index + 1
        out[tm] = tc.load(x, [cols])
    return out


@tc.kernel(static_shapes=True)
def unmasked_subscript(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for tm in tc.tile(n):
        prev = tm.index - 1
        out[tm] = x[prev]  # -1 would wrap to the last element in eager torch
    return out


@tc.kernel(static_shapes=True)
def mask_misses_an_edge(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for tm in tc.tile(n):
        cols = tm.index + 1
        out[tm] = tc.load(x, [cols], extra_mask=cols >= 0)  # forgets cols < n
    return out


@tc.kernel(static_shapes=True)
def unmasked_store(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.zeros_like(x)
    for tm in tc.tile(n):
        tc.store(out, [tm.index + 3], x[tm])
    return out


@tc.kernel(static_shapes=True)
def unmasked_atomic(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.zeros_like(x)
    for tm in tc.tile(n):
        tc.atomic_add(out, [tm.index + 1], x[tm])
    return out


@tc.kernel(static_shapes=True)
def int_past_the_end(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for tb in tc.grid(n):
        out[tb] = tc.load(x, [tb.begin + 1])
    return out


@tc.kernel(static_shapes=True)
def mask_of_another_shape(x: torch.Tensor) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for tm in tc.tile(n):
        out[tm] = tc.load(x, [tm.index], extra_mask=(tm.index < n)[:, None])
    return out


def _line_of(kernel: Any, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn if hasattr(kernel, "fn") else kernel)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize(
    ("kernel", "op", "line", "bad"),
    [
        (unmasked_load, "tc.load of 'x'", "tc.load(x, [cols])", "7 is not in [0, 7)"),
        (unmasked_subscript, "subscript load of 'x'", "out[tm] = x[prev]", "-1 is not in"),
        (mask_misses_an_edge, "tc.load of 'x'", "extra_mask=cols >= 0", "where extra_mask"),
        (unmasked_store, "tc.store of 'out'", "tc.store(out", "is not in [0, 7)"),
        (unmasked_atomic, "tc.atomic_add of 'out'", "tc.atomic_add(out", "7 is not in"),
        (int_past_the_end, "tc.load of 'x'", "tc.load(x, [tb.begin", "7 is not in [-7, 7)"),
    ],
)
def test_unmasked_out_of_range_index_is_a_located_error(
    kernel: Any, op: str, line: str, bad: str
) -> None:
    x = torch.randn(7)
    with _guarded(), pytest.raises(IndexOutOfBoundsError) as info:
        kernel.run_ref(x)
    text = str(info.value)
    assert op in text and bad in text, text
    assert f"test_ref_mode_masks.py:{_line_of(kernel, line)}" in text, text
    assert "extra_mask=" in text and "torch.clamp" in text, text  # what to write instead
    assert isinstance(info.value, IndexError)  # code catching torch's IndexError still does


def test_in_range_gathers_and_ints_keep_their_meaning() -> None:
    """Negative Python ints still count from the end (as a compiled literal does), gathers in
    range and bool-mask indexing are untouched."""
    from tilecraft.language import ref_access

    x = torch.arange(12.0).view(3, 4)
    assert torch.equal(ref_access.load("t", x, (-1, slice(None))), x[-1])
    idx = torch.tensor([[0, 2], [1, 1]])
    assert torch.equal(ref_access.load("t", x, (idx, slice(1, 3))), x[idx, 1:3])
    assert torch.equal(ref_access.load("t", x, (x > 5,)), x[x > 5])
    masked = ref_access.load("t", x, (idx, torch.tensor([4, 3])), torch.tensor([False, True]))
    assert torch.equal(masked, torch.tensor([[0.0, 11.0], [0.0, 7.0]]))


def test_a_mask_that_does_not_fit_the_access_is_located() -> None:
    with pytest.raises(ShapeError, match=r"extra_mask of shape \[7, 1\] does not fit") as info:
        mask_of_another_shape.run_ref(torch.randn(7))
    line = _line_of(mask_of_another_shape, "extra_mask=(tm.index")
    assert f"test_ref_mode_masks.py:{line}" in str(info.value)


@pytest.mark.gpu
def test_ref_mode_on_cuda_tensors_never_asserts_on_the_device() -> None:
    """On the GPU an out-of-range index would be a device-side assert that poisons the CUDA
    context: masked borders read 0 in ref mode, an unmasked one is a located error, and the
    context still works afterwards (a compiled run and a synchronize)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 9, 11, 20, generator=g).to("cuda", torch.bfloat16)
    weight = torch.randn(3, 3, 20, generator=g).to("cuda", torch.bfloat16)
    want = _depthwise_eager(x, weight)
    got = depthwise3x3.run_ref(x, weight)
    torch.testing.assert_close(got.float(), want.float(), rtol=2**-7, atol=6.25e-2)
    with pytest.raises(IndexOutOfBoundsError):
        unmasked_load.run_ref(torch.randn(37, device="cuda"))
    torch.cuda.synchronize()
    compiled = depthwise3x3(x, weight)
    torch.testing.assert_close(compiled.float(), want.float(), rtol=2**-7, atol=6.25e-2)


@tc.kernel
def masked_rows_whole_dim(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """docs/ops.md's tc.load / tc.store with a whole dim written ``slice(None)`` in the list."""
    m, n = x.size()
    out = torch.zeros_like(x)
    for tm in tc.tile(m):
        rows = tc.load(x, [tm, slice(None)], extra_mask=(keep[tm] > 0)[:, None])
        tc.store(out, [tm, slice(None)], rows * 2, extra_mask=(keep[tm] > 0)[:, None])
    return out


def test_a_whole_dim_in_a_load_or_store_index_list_is_slice_none(device: str) -> None:
    x = torch.randn(37, 20, device=device)
    keep = (torch.arange(37, device=device) % 3 == 0).to(torch.int32)
    want = torch.where(keep[:, None] > 0, x * 2, 0.0)
    torch.testing.assert_close(masked_rows_whole_dim(x, keep), want)
    torch.testing.assert_close(masked_rows_whole_dim.run_ref(x, keep), want)


@tc.kernel(static_shapes=True)
def two_stores_at_once(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tuple-unpacking stores and a chained store, in a tile loop whose last tile is partial."""
    (n,) = x.size()
    doubled, shifted, same = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    for tn in tc.tile(n, block_size=8):
        doubled[tn], shifted[tn] = x[tn] * 2.0, x[tn] + 1.0
        same[tn] = doubled[tn] = x[tn] * 2.0
    return doubled, shifted, same


def test_tuple_and_chained_stores_are_masked_in_ref_mode(device: str) -> None:
    """`a[t], b[t] = v, w` in ref mode stored unmasked (an IndexError past the end of a
    partial tile); each store now goes through the masked ref store."""
    x = torch.randn(13, device=device)
    want = (x * 2.0, x + 1.0, x * 2.0)
    for got in (two_stores_at_once.run_ref(x), two_stores_at_once(x)):
        for have, expect in zip(got, want, strict=True):
            torch.testing.assert_close(have, expect)


@tc.kernel(static_shapes=True)
def weighted_bag_sums(
    table: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor, offsets: torch.Tensor
) -> torch.Tensor:
    """Per bag, the weighted sum of its rows; the bags' bounds come from ``offsets``."""
    bags, d = offsets.size(0) - 1, table.size(1)
    out = torch.zeros([bags, d], dtype=torch.float32, device=table.device)
    for bag, td in tc.tile([bags, d], block_size=[1, None]):
        acc = tc.zeros([td], dtype=torch.float32)
        for tt in tc.tile(offsets[bag.begin], offsets[bag.begin + 1]):
            acc = acc + torch.sum(table[indices[tt], td] * weights[tt][:, None], dim=0)
        out[bag.begin, td] = acc
    return out


def test_a_tile_past_a_tensors_end_names_the_tensor() -> None:
    """weights 3 shorter than indices (the bags' offsets count indices): ref mode sliced it
    short and failed later with torch's broadcast error, naming nothing; compiled code reads 0
    there (documented)."""
    table, indices = torch.randn(10, 4), torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9])
    offsets = torch.tensor([0, 4, 9])
    with pytest.raises(IndexOutOfBoundsError, match=r"'weights': the tile along dim 0 covers"):
        weighted_bag_sums.run_ref(table, indices, torch.ones(6), offsets)
    want = torch.stack([table[indices[:4]].sum(0), table[indices[4:]].sum(0)])
    torch.testing.assert_close(
        weighted_bag_sums.run_ref(table, indices, torch.ones(9), offsets), want
    )


@tc.kernel(static_shapes=True)
def picked(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty([m, idx.size(1)], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = torch.take_along_dim(x[tm, :], idx[tm, :], dim=1)
    return out


@tc.kernel(static_shapes=True)
def first_above(x: torch.Tensor, threshold: float) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty([m], dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        out[tm] = torch.argmax(x[tm, :] > threshold, dim=1)
    return out


def test_ref_mode_takes_the_dtypes_compiled_code_takes(device: str) -> None:
    """int32 class labels, int32 gather indices and a bool tile's argmax compile; ref mode
    raised torch's refusal (no file:line), so the tuner checked configs for running only
    (fuzz 53b)."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 30, generator=g).to(device)
    labels = torch.randint(0, 30, (8,), generator=g, dtype=torch.int32).to(device)
    want = F.cross_entropy(logits, labels.long(), reduction="none")
    torch.testing.assert_close(row_cross_entropy.run_ref(logits, labels), want)
    x = torch.randn(6, 40, generator=g).to(device)
    idx = torch.randint(0, 40, (6, 5), generator=g, dtype=torch.int32).to(device)
    assert torch.equal(picked.run_ref(x, idx), torch.take_along_dim(x, idx.long(), dim=1))
    want_first = torch.argmax((x > 1.0).to(torch.uint8), dim=1)
    assert torch.equal(first_above.run_ref(x, 1.0), want_first)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.equal(first_above(x, 1.0), want_first)
    assert not [w for w in caught if "running only" in str(w.message)]


@tc.kernel(static_shapes=True)
def padded_rows_gather(vals: torch.Tensor, starts: torch.Tensor, counts: torch.Tensor, width: int):
    """CSR-style rows of up to ``width`` values from ``vals`` at ``starts``, lanes past each
    row's count masked off; each gathered value written back tripled (a store, an atomic)."""
    (m,) = starts.size()
    y = torch.empty([m], dtype=torch.float32, device=vals.device)
    for tr in tc.tile(m):
        acc = tc.zeros([tr], dtype=torch.float32)
        for tk in tc.tile(width):
            live = tk.index[None, :] < counts[tr][:, None]
            pos = starts[tr][:, None] + tk.index[None, :]
            got = tc.load(vals, [pos], extra_mask=live)
            tc.store(vals, [pos], got * 2, extra_mask=live)
            tc.atomic_add(vals, [pos], got, extra_mask=live)
            acc = acc + got.sum(1)
        y[tr] = acc
    return y


def test_masked_accesses_of_an_empty_tensor_touch_nothing() -> None:
    """A matrix with no nonzeros: every lane is masked off and the tensor has no elements.
    Ref mode indexed it at the masked lanes' safe index 0, which a dim of size 0 lacks (a bare
    IndexError; the tuner then called the data out of range and checked configs for running
    only; fuzz 54b)."""
    starts, counts = torch.zeros(4, dtype=torch.int64), torch.zeros(4, dtype=torch.int64)
    vals = torch.empty(0)
    assert torch.equal(padded_rows_gather.run_ref(vals, starts, counts, 4), torch.zeros(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no out-of-range warning from the accuracy baseline
        assert torch.equal(padded_rows_gather(vals, starts, counts, 4), torch.zeros(4))
    vals = torch.arange(1.0, 7.0)  # and the same kernel on data it reads
    starts, counts = torch.tensor([0, 2, 5, 6]), torch.tensor([2, 3, 1, 0])
    written = vals.clone()
    got = padded_rows_gather.run_ref(written, starts, counts, 4)
    assert torch.equal(got, torch.tensor([3.0, 12.0, 6.0, 0.0]))
    assert torch.equal(written, vals * 3)

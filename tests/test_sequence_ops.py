"""torch.outer, torch.diff, torch.searchsorted / torch.bucketize, torch.repeat_interleave and
Tensor.unfold on tiles (frontend/sequences.py): the kernels (on the GPU, in the interpreter on a
CPU) against eager PyTorch on lengths that are not powers of two (padded lanes), the generated
code's form, the errors that name an argument form device code cannot take, and cross-compiles
of the defaults for sm_90 and gfx942."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import ShapeError, UnsupportedOpError


def _code(kernel: tc.Kernel, args: tuple[torch.Tensor, ...]) -> str:
    bound = kernel.bind(args)
    return bound.to_triton_code(bound.config_spec.default())


@tc.kernel(static_shapes=True)
def outers(
    a: torch.Tensor, b: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A tile's rows times a whole vector, an int vector times a float one, and bools."""
    m, n = a.size(0), b.size(0)
    prod = torch.empty(m, n, dtype=a.dtype, device=a.device)
    mixed = torch.empty(n, n, dtype=torch.float32, device=a.device)
    both = torch.empty(m, n, dtype=torch.bool, device=a.device)
    for tm in tc.tile(m):
        prod[tm, :] = torch.outer(a[tm], b[:])
        mixed[:, :] = k[:].outer(b[:])
        both[tm, :] = torch.outer(a[tm] > 0, b[:] > 0)
    return prod, mixed, both


def test_outer_matches_eager(device: str) -> None:
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(13, generator=g).to(device), torch.randn(7, generator=g).to(device)
    k = torch.arange(7, device=device) - 3
    prod, mixed, both = outers(a, b, k)
    assert torch.equal(prod, torch.outer(a, b))
    assert torch.equal(mixed, torch.outer(k, b))
    assert torch.equal(both, torch.outer(a > 0, b > 0))
    code = _code(outers, (a, b, k))
    assert "[:, None]" in code and "[None, :]" in code and "tl.dot" not in code


def test_outer_of_a_2d_tile_names_the_argument(device: str) -> None:
    @tc.kernel(static_shapes=True)
    def bad(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.size(0), 4, 4, device=x.device)
        for tm in tc.tile(x.size(0)):
            out[tm, :, :] = torch.outer(x[tm, :], x[0, :])
        return out

    with pytest.raises(UnsupportedOpError, match=r"torch\.outer: input is a 2-D tile"):
        bad(torch.randn(8, 4, device=device))


@tc.kernel(static_shapes=True)
def diffs(
    x: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """First and second differences along a row, along a middle dim, of ints and of bools."""
    m, n = x.size()
    first = torch.empty(m, n - 1, dtype=x.dtype, device=x.device)
    second = torch.empty(m, n - 2, dtype=x.dtype, device=x.device)
    ints = torch.empty(m, n - 1, dtype=k.dtype, device=x.device)
    flips = torch.empty(m, n - 1, dtype=torch.bool, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        first[tm, :] = torch.diff(row, dim=-1)
        second[tm, :] = row.diff(n=2, dim=1)
        ints[tm, :] = torch.diff(k[tm, :])
        flips[tm, :] = torch.diff(row > 0)
    return first, second, ints, flips


@tc.kernel(static_shapes=True)
def middle_diff(x: torch.Tensor) -> torch.Tensor:
    b, s, d = x.size()
    out = torch.empty(b, s - 1, d, dtype=x.dtype, device=x.device)
    for tb in tc.tile(b):
        out[tb, :, :] = torch.diff(x[tb, :, :], dim=1)
    return out


def test_diff_matches_eager(device: str) -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 11, generator=g)
    k = torch.randint(0, 255, (6, 11), generator=g, dtype=torch.uint8)  # wraps, as in torch
    x, k = x.to(device), k.to(device)
    first, second, ints, flips = diffs(x, k)
    assert torch.equal(first, torch.diff(x))
    assert torch.equal(second, torch.diff(x, n=2))
    assert torch.equal(ints, torch.diff(k))
    assert torch.equal(flips, torch.diff(x > 0))
    y = torch.randn(3, 5, 6, generator=g).to(device)
    assert torch.equal(middle_diff(y), torch.diff(y, dim=1))
    assert "tl.gather" in _code(diffs, (x, k))  # rows of 11: slices gathered in registers


def test_diff_along_a_tile_or_with_prepend_is_an_error_with_the_rewrite(device: str) -> None:
    @tc.kernel(static_shapes=True)
    def along_tile(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.size(0) - 1, device=x.device)
        for t in tc.tile(x.size(0)):
            out[t] = torch.diff(x[t])
        return out

    with pytest.raises(UnsupportedOpError, match=r"torch\.diff along dim 0, a tile") as info:
        along_tile(torch.randn(9, device=device))
    assert "x[t.index + 1] - x[t]" in str(info.value)

    @tc.kernel(static_shapes=True)
    def prepended(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm in tc.tile(x.size(0)):
            out[tm, :] = torch.diff(x[tm, :], prepend=x[tm, :1])
        return out

    with pytest.raises(UnsupportedOpError, match=r"torch\.diff with prepend= / append="):
        prepended(torch.randn(4, 5, device=device))


@tc.kernel(static_shapes=True)
def buckets(
    seq: torch.Tensor, v: torch.Tensor, ks: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left and right searches of a float row, bucketize with int32 out, an int sequence."""
    m, n = v.size()
    left = torch.empty(m, n, dtype=torch.int64, device=v.device)
    right = torch.empty(m, n, dtype=torch.int64, device=v.device)
    bucket = torch.empty(m, n, dtype=torch.int32, device=v.device)
    by_int = torch.empty(m, n, dtype=torch.int64, device=v.device)
    for tm in tc.tile(m):
        vt = v[tm, :]
        left[tm, :] = torch.searchsorted(seq[:], vt)
        right[tm, :] = torch.searchsorted(seq[:], vt, side="right")
        bucket[tm, :] = torch.bucketize(vt, seq[:], out_int32=True, right=True)
        by_int[tm, :] = torch.bucketize(vt, ks[:])
    return left, right, bucket, by_int


def test_searchsorted_and_bucketize_match_eager(device: str) -> None:
    seq = torch.tensor([-1.0, 0.0, 0.0, 0.5, 2.0], device=device)  # 5 boundaries: 3 padded lanes
    row = [-2.0, -1.0, 0.0, 0.25, 0.5, 3.0, float("nan"), float("inf"), -float("inf")]
    g = torch.Generator().manual_seed(2)
    v = (torch.cat([torch.tensor([row] * 3), torch.randn(3, 9, generator=g)]) * 1.0).to(device)
    ks = torch.tensor([-1, 0, 1, 1, 3, 7, 9], device=device)
    left, right, bucket, by_int = buckets(seq, v, ks)
    assert left.dtype == torch.int64 and bucket.dtype == torch.int32
    assert torch.equal(left, torch.searchsorted(seq, v))
    assert torch.equal(right, torch.searchsorted(seq, v, right=True))
    assert torch.equal(bucket, torch.bucketize(v, seq, out_int32=True, right=True))
    assert torch.equal(by_int, torch.bucketize(v, ks))
    assert "tl.sum" in _code(buckets, (seq, v, ks))


@tc.kernel(static_shapes=True)
def long_searches(
    seq: torch.Tensor, v: torch.Tensor, ks: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Searches of a 1-D tile of values in long sorted sequences (binary lifting)."""
    left = torch.empty(v.size(0), dtype=torch.int64, device=v.device)
    right = torch.empty(v.size(0), dtype=torch.int32, device=v.device)
    by_int = torch.empty(v.size(0), dtype=torch.int64, device=v.device)
    for t in tc.tile(v.size(0)):
        left[t] = torch.searchsorted(seq[:], v[t])
        right[t] = torch.bucketize(v[t], seq[:], out_int32=True, right=True)
        by_int[t] = torch.searchsorted(ks[:], v[t].to(torch.int64), side="right")
    return left, right, by_int


def test_long_sequences_are_searched_by_binary_lifting(device: str) -> None:
    """A 1-D tile of values in a sequence of 1024 or more is searched in log2(n) gathers (an
    inverse-CDF sampler's [64, 4096] compare-and-count was 2.5x slower than torch.compile):
    ties on both sides, NaN (counts all), infinities, values past both ends, a length that is
    not a power of two and an int sequence."""
    g = torch.Generator().manual_seed(6)
    seq = torch.sort(torch.randint(-300, 300, (1500,), generator=g).float() / 4).values
    picked = seq[torch.randint(0, 1500, (20,), generator=g)]
    edges = torch.tensor([float("nan"), float("inf"), -float("inf"), -1e9, 1e9, seq[0], seq[-1]])
    v = torch.cat([picked, edges, torch.randn(40, generator=g) * 40])
    ks = torch.arange(0, 3000, 2)
    seq, v, ks = seq.to(device), v.to(device), ks.to(device)
    left, right, by_int = long_searches(seq, v, ks)
    assert torch.equal(left, torch.searchsorted(seq, v))
    assert torch.equal(right, torch.bucketize(v, seq, out_int32=True, right=True))
    assert torch.equal(by_int, torch.searchsorted(ks, v.long(), side="right"))
    kernel = _code(long_searches, (seq, v, ks)).split("@triton.jit")[1]
    # no [values, n] compare and sum: 11 steps, one load of the sequence each (both searches
    # of seq too: they do not share steps), read where it lies
    assert "tl.sum(" not in kernel and kernel.count("tl.load(seq + ") == 22, kernel
    assert kernel.count("tl.load(ks + ") == 11, kernel


@tc.kernel(static_shapes=True)
def self_search(b: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequence searched for its own elements (one dim in both operands), and a number."""
    ranks = torch.empty(b.size(0), dtype=torch.int64, device=b.device)
    shifted = torch.empty(v.size(0), dtype=torch.int64, device=b.device)
    for _ in tc.tile(1):
        ranks[:] = torch.searchsorted(b[:], b[:], right=True)
    for t in tc.tile(v.size(0)):
        shifted[t] = torch.bucketize(v[t], b[:]) + torch.searchsorted(b[:], 0.5)
    return ranks, shifted


@tc.kernel(static_shapes=False)
def run_time_boundaries(b: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    out = torch.empty(v.size(0), dtype=torch.int64, device=v.device)
    for t in tc.tile(v.size(0)):
        out[t] = torch.bucketize(v[t], b[:])
    return out


def test_searchsorted_of_its_own_dim_a_number_and_a_run_time_length(device: str) -> None:
    g = torch.Generator().manual_seed(4)
    b = torch.tensor([0.0, 1, 1, 2, 5], device=device)
    v = (torch.randn(9, generator=g) * 3).to(device)
    ranks, shifted = self_search(b, v)
    assert torch.equal(ranks, torch.searchsorted(b, b, right=True))
    half = torch.tensor(0.5, device=device)
    assert torch.equal(shifted, torch.bucketize(v, b) + torch.searchsorted(b, half))
    longer = torch.tensor([0.0, 1, 1, 2, 5, 7, 9], device=device)
    for seq in (b, longer):  # one compiled kernel, two lengths
        assert torch.equal(run_time_boundaries(seq, v), torch.bucketize(v, seq))


def test_searchsorted_forms_it_cannot_take_are_errors(device: str) -> None:
    def searching(call: str) -> tc.Kernel:
        @tc.kernel(static_shapes=True)
        def k(seq: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            out = torch.empty(v.size(0), dtype=torch.int64, device=v.device)
            for t in tc.tile(v.size(0)):
                if call == "sorter":
                    out[t] = torch.searchsorted(seq[:], v[t], sorter=seq[:].long())
                elif call == "2d":
                    out[t] = torch.searchsorted(seq[:, :], v[t])
                else:
                    out[t] = torch.searchsorted(seq[t], v[t])
            return out

        return k

    v = torch.randn(16, device=device)
    with pytest.raises(UnsupportedOpError, match="sorter="):
        searching("sorter")(torch.randn(8, device=device), v)
    with pytest.raises(ShapeError, match="sorted sequence is a 2-D tile .* leading dims"):
        searching("2d")(torch.randn(2, 8, device=device), v)  # batched: v is not [2, k]
    with pytest.raises(UnsupportedOpError, match=r"searchsorted along dim 0, a tile") as info:
        searching("tile")(torch.randn(16, device=device), v)
    assert "b[:]" in str(info.value)


@tc.kernel(static_shapes=True)
def repeats(
    x: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """By a power of two (a reshape), by 3 (a gather), along a middle dim, and a 1-D tile."""
    m, n = x.size()
    by4 = torch.empty(m, n * 4, dtype=x.dtype, device=x.device)
    by3 = torch.empty(m, n * 3, dtype=x.dtype, device=x.device)
    mid = torch.empty(m, n * 2, 2, dtype=x.dtype, device=x.device)
    flat = torch.empty(v.size(0) * 5, dtype=v.dtype, device=v.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        by4[tm, :] = torch.repeat_interleave(row, 4, dim=1)
        by3[tm, :] = row.repeat_interleave(3, dim=-1)
        mid[tm, :, :] = torch.stack([row, -row], dim=2).repeat_interleave(2, dim=1)
        flat[:] = torch.repeat_interleave(v[:], 5)
    return by4, by3, mid, flat


def test_repeat_interleave_matches_eager(device: str) -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 7, generator=g).to(device)
    v = torch.arange(6, dtype=torch.int32, device=device)
    by4, by3, mid, flat = repeats(x, v)
    assert torch.equal(by4, x.repeat_interleave(4, dim=1))
    assert torch.equal(by3, x.repeat_interleave(3, dim=1))
    assert torch.equal(mid, torch.stack([x, -x], dim=2).repeat_interleave(2, dim=1))
    assert torch.equal(flat, v.repeat_interleave(5))
    code = _code(repeats, (x, v))
    # by 4: a broadcast and a merge; by 3: i // 3 read from a scratch row (a tl.gather into
    # more lanes than its source's fails to compile for GPUs: test_widening_gathers.py)
    assert "tl.reshape" in code and "gather_row" in code


def test_repeat_interleave_by_a_tensor_names_the_argument(device: str) -> None:
    @tc.kernel(static_shapes=True)
    def by_tensor(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.size(0), 2 * x.size(1), device=x.device)
        for tm in tc.tile(x.size(0)):
            out[tm, :] = torch.repeat_interleave(x[tm, :], r[:], dim=1)
        return out

    with pytest.raises(UnsupportedOpError, match=r"repeat_interleave with repeats=.*Python int"):
        by_tensor(torch.randn(4, 3, device=device), torch.full((3,), 2, device=device))


@tc.kernel(static_shapes=True)
def windows(
    x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Windows of 3 every step along rows of 11, of 4 every 2, along a middle dim of a 3-D
    tile, and one window of the whole row."""
    m, n = x.size()
    threes = torch.empty(m, n - 2, 3, dtype=x.dtype, device=x.device)
    fours = torch.empty(m, (n - 4) // 2 + 1, 4, dtype=x.dtype, device=x.device)
    mid = torch.empty(y.size(0), (y.size(1) - 3) // 2 + 1, y.size(2), 3, device=x.device)
    whole = torch.empty(m, 1, n, dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        threes[tm, :, :] = row.unfold(1, 3, 1)
        fours[tm, :, :] = row.unfold(-1, 4, 2)
        whole[tm, :, :] = row.unfold(1, n, 1)
    for tb in tc.tile(y.size(0)):
        mid[tb, :, :, :] = y[tb, :, :].unfold(1, 3, 2)
    return threes, fours, mid, whole


@pytest.mark.parametrize("blocks", [[1, 1], [4, 2]])
def test_unfold_matches_eager(blocks: list[int], device: str) -> None:
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(6, 11, generator=g), torch.randn(3, 7, 5, generator=g)
    x, y = x.to(device), y.to(device)
    bound = windows.bind((x, y))
    got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x, y)
    want = (x.unfold(1, 3, 1), x.unfold(1, 4, 2), y.unfold(1, 3, 2), x.unfold(1, 11, 1))
    for g_, w in zip(got, want, strict=True):
        assert torch.equal(g_, w)
    assert "tl.gather" in _code(windows, (x, y))


def test_unfold_forms_it_cannot_take_are_errors(device: str) -> None:
    def unfolding(call: str) -> tc.Kernel:
        @tc.kernel(static_shapes=True)
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty(x.size(0), 2, 2, device=x.device)
            for t in tc.tile(x.size(0)):
                if call == "tile":
                    out[t, :, :] = x[t, :].unfold(0, 2, 1)
                elif call == "big":
                    out[t, :, :] = x[t, :].unfold(1, 9, 1)
                else:
                    out[t, :, :] = x[t, :].unfold(1, 2, 0)
            return out

        return k

    x = torch.randn(8, 3, device=device)
    with pytest.raises(UnsupportedOpError, match=r"Tensor\.unfold along dim 0, a tile") as info:
        unfolding("tile")(x)
    assert "x[t.index[:, None] * step" in str(info.value)
    with pytest.raises(UnsupportedOpError, match=r"size=9 is larger than dim 1's 3"):
        unfolding("big")(x)
    with pytest.raises(UnsupportedOpError, match=r"step=0: step must be a Python int >= 1"):
        unfolding("step")(x)


@pytest.mark.crosscompile
def test_sequence_ops_cross_compile() -> None:
    meta = {"device": "meta"}
    a, b = torch.empty(300, **meta), torch.empty(24, **meta)
    assert_defaults_cross_compile(outers, (a, b, torch.empty(24, dtype=torch.int64, **meta)))
    x = torch.empty(300, 100, **meta)
    assert_defaults_cross_compile(diffs, (x, torch.empty(300, 100, dtype=torch.uint8, **meta)))
    seq, v = torch.empty(20, **meta), torch.empty(300, 33, **meta)
    assert_defaults_cross_compile(buckets, (seq, v, torch.empty(12, dtype=torch.int64, **meta)))
    assert_defaults_cross_compile(repeats, (x, torch.empty(10, dtype=torch.int32, **meta)))
    assert_defaults_cross_compile(windows, (x, torch.empty(64, 7, 40, **meta)))

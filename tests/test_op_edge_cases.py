"""Ops at the edges of their domains, against eager PyTorch in the interpreter: ``log1p`` of
tiny values keeps their digits, ``torch.prod`` of integer and float rows (int64 as torch),
and a tile indexed by an int picks one element of a whole dim. Found by fuzzing small kernels
against eager (session 31)."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tilecraft.errors import DeviceCodeError, ShapeError, UnsupportedOpError


@tc.kernel(static_shapes=True)
def log1p_of(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.log1p(x[tm])
    return out


def test_log1p_keeps_the_digits_of_tiny_values() -> None:
    """log(1 + 1e-8) is 0 in fp32; log1p is 1e-8 (and inf, -1, NaN and signed zeros as torch)."""
    x = torch.tensor(
        [1e-8, -1e-8, 1e-3, 0.5, -0.5, 3.0, 1e30, float("inf"), -1.0, -2.0, float("nan"), -0.0]
    )
    torch.testing.assert_close(log1p_of(x), torch.log1p(x), rtol=3e-7, atol=0, equal_nan=True)


@tc.kernel(static_shapes=True)
def row_products(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = torch.int64 if not x.dtype.is_floating_point else x.dtype
    out = torch.empty([x.size(0)], dtype=dtype, device=x.device)
    kept = torch.empty([x.size(0), 1], dtype=dtype, device=x.device)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.prod(x[tm, :], dim=1)
        kept[tm, :] = x[tm, :].prod(-1, keepdim=True)
    return out, kept


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.float32])
def test_prod_of_rows_matches_torch(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        x = torch.rand(5, 7, generator=gen) + 0.5
    else:
        x = torch.randint(-2, 3, (5, 7), generator=gen).to(dtype)
    out, kept = row_products(x)
    torch.testing.assert_close(out, x.prod(1))
    torch.testing.assert_close(kept, x.prod(-1, keepdim=True))


@tc.kernel(static_shapes=True)
def corners(boxes: torch.Tensor) -> torch.Tensor:
    """Box areas from a computed [n, 4] tile indexed by ints (x1, y1, x2, y2)."""
    out = torch.empty([boxes.size(0)], dtype=boxes.dtype, device=boxes.device)
    for tn in tc.tile(boxes.size(0)):
        b = boxes[tn, :] * 1.0
        out[tn] = (b[:, 2] - b[:, 0]) * (b[:, -1] - b[:, 1])
    return out


@tc.kernel(static_shapes=True)
def past_the_end(boxes: torch.Tensor) -> torch.Tensor:
    out = torch.empty([boxes.size(0)], dtype=boxes.dtype, device=boxes.device)
    for tn in tc.tile(boxes.size(0)):
        out[tn] = boxes[tn, :][:, 4]
    return out


def test_an_int_index_picks_one_element_of_a_tile_dim() -> None:
    boxes = torch.rand(9, 4)
    expect = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    torch.testing.assert_close(corners(boxes), expect)
    with pytest.raises(ShapeError, match="index 4 is out of range for a tile dim of 4"):
        past_the_end(boxes)


@tc.kernel(static_shapes=True)
def row_stats(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    m = x.size(0)
    anys = torch.empty([m], dtype=torch.bool, device=x.device)
    alls = torch.empty([m], dtype=torch.bool, device=x.device)
    norms = torch.empty([m, 3], dtype=x.dtype, device=x.device)
    filled = torch.empty_like(x)
    for tm in tc.tile(m):
        row = x[tm, :]
        anys[tm] = torch.any(row > 1.0, dim=1)
        alls[tm] = (row > -1.0).all(dim=1)
        norms[tm, 0] = torch.linalg.vector_norm(row, dim=1)
        norms[tm, 1] = torch.linalg.vector_norm(row, ord=1, dim=1)
        norms[tm, 2] = torch.linalg.vector_norm(row, ord=float("inf"), dim=1)
        filled[tm, :] = row.masked_fill(row < 0, 0.5) + torch.square(row)
    return anys, alls, norms, filled


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_any_all_norms_masked_fill_and_square_match_torch(dtype: torch.dtype) -> None:
    x = torch.randn(9, 37, generator=torch.Generator().manual_seed(1)).to(dtype)
    anys, alls, norms, filled = row_stats(x)
    assert torch.equal(anys, torch.any(x > 1.0, dim=1))
    assert torch.equal(alls, (x > -1.0).all(dim=1))
    want = torch.stack(
        [torch.linalg.vector_norm(x.float(), ord=o, dim=1) for o in (2, 1, float("inf"))], 1
    ).to(dtype)
    torch.testing.assert_close(norms, want)
    torch.testing.assert_close(filled, x.masked_fill(x < 0, 0.5) + torch.square(x))


@tc.kernel(static_shapes=True)
def half_where(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        row = x[tm, :]
        out[tm, :] = torch.where(row < 0, 0.5, row)
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_constant_selected_into_half_precision_runs_in_the_interpreter(
    dtype: torch.dtype,
) -> None:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(2)).to(dtype)
    assert torch.equal(half_where(x), torch.where(x < 0, 0.5, x))


@tc.kernel(static_shapes=True)
def cropped(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(1) - 1], dtype=x.dtype, device=x.device)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = torch.nn.functional.pad(x[tm, :] * 1.0, (-1, 0))
    return out


@pytest.mark.parametrize("n", [2, 3, 9])
def test_a_negative_pad_crops_like_a_slice(n: int) -> None:
    x = torch.randn(3, n)
    torch.testing.assert_close(cropped(x), torch.nn.functional.pad(x, (-1, 0)))


@tc.kernel(static_shapes=True)
def int8_matmul(a: torch.Tensor, b: torch.Tensor, into_acc: bool = True) -> torch.Tensor:
    """An int8 GEMM, each K block's product into ``acc=`` or added to it (``acc + dot``)."""
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.int32, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.int32)
        for tk in tc.tile(k):
            if into_acc:
                acc = tc.dot(a[tm, tk], b[tk, tn], acc=acc)
            else:
                acc = acc + tc.dot(a[tm, tk], b[tk, tn])
        out[tm, tn] = acc
    return out


def test_int8_dots_accumulate_in_int32() -> None:
    """int8 x int8 into an int32 accumulator: the dot sums in int32 (it went through an fp32
    accumulator, and the interpreter returned its bits)."""
    gen = torch.Generator().manual_seed(3)
    a = torch.randint(-128, 128, (19, 96), generator=gen, dtype=torch.int8)
    b = torch.randint(-128, 128, (96, 33), generator=gen, dtype=torch.int8)
    assert torch.equal(int8_matmul(a, b), a.int() @ b.int())


@pytest.mark.crosscompile
def test_int8_dots_cross_compile() -> None:
    from tests.cross_targets import assert_defaults_cross_compile

    a = torch.empty(512, 256, dtype=torch.int8)
    b = torch.empty(256, 512, dtype=torch.int8)
    assert_defaults_cross_compile(int8_matmul, (a, b))


@tc.kernel(static_shapes=True)
def sum_then_reread(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m = x.size(0)
    s = torch.empty([m], dtype=torch.float32, device=x.device)
    y = torch.empty([m], dtype=torch.float32, device=x.device)
    for tm in tc.tile(m):
        s[tm] = x[tm, :].sum(1)
        y[tm] = s[tm] * 2.0
    return s, y


def test_a_load_after_a_store_stays_after_it_when_the_sum_rolls() -> None:
    """``s[tm] = x.sum(1); y = s[tm]``: with the row summed in chunks the load of ``s`` was
    emitted before the chunk loop and the store (ir/phases.py), reading garbage."""
    x = torch.randn(3, 40, generator=torch.Generator().manual_seed(0))
    bound = sum_then_reread.bind((x,))
    config = bound.config_spec.default().replace(reduction_loops=[16])
    s, y = bound.run(bound.compile_config(config), x)
    torch.testing.assert_close(y, x.sum(1) * 2, rtol=1e-5, atol=1e-5)


@tc.kernel(static_shapes=True)
def best_score(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m], dtype=torch.float32, device=a.device)
    for tm in tc.tile(m):
        best = tc.full([tm], float("-inf"), dtype=torch.float32)
        for tn in tc.tile(n):
            acc = tc.zeros([tm, tn], dtype=torch.float32)
            for tk in tc.tile(k):
                acc = tc.dot(a[tm, tk], b[tk, tn], acc=acc)
            masked = torch.where(tn.index[None, :] < n, acc, float("-inf"))
            best = torch.maximum(best, masked.amax(1))
        out[tm] = best
    return out


def test_a_dot_in_an_inner_loop_over_a_short_dim_gets_a_working_default() -> None:
    """n = 5 columns walked by an inner loop holding a dot: the split rule halved that loop's
    block to 4, below tl.dot's 16, and the default was a ConfigError."""
    a, b = torch.randn(17, 33), torch.randn(33, 5)
    spec = best_score.bind((a, b)).config_spec
    assert all(blk >= s.lo for blk, s in zip(spec.default().block_sizes, spec.blocks, strict=True))
    torch.testing.assert_close(best_score(a, b), (a @ b).amax(1), rtol=1e-4, atol=1e-4)


@tc.kernel(static_shapes=True)
def positions_one_hot(idx: torch.Tensor, e: int) -> torch.Tensor:
    out = torch.empty([idx.size(0), e], dtype=torch.int32, device=idx.device)
    for tt in tc.tile(idx.size(0)):
        out[tt, :] = (tc.arange(e)[None, :] == idx[tt][:, None]).to(torch.int32)
    return out


@pytest.mark.parametrize("e", [1, 7])
def test_a_whole_dim_of_one_position_stores_into_a_size_1_dim(e: int) -> None:
    idx = torch.randint(0, e, (45,), generator=torch.Generator().manual_seed(4))
    want = torch.nn.functional.one_hot(idx, e).int()
    assert torch.equal(positions_one_hot(idx, e), want)


@tc.kernel(static_shapes=True)
def negate_flags(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in tc.tile([x.size(0), x.size(1)]):
        out[tm, tn] = ~x[tm, tn]
    return out


def test_bool_tiles_through_block_pointers_stay_bool() -> None:
    """A block pointer to bool loads int8: ``~`` of it flipped every bit (all True)."""
    x = torch.rand(5, 17, generator=torch.Generator().manual_seed(0)) < 0.5
    bound = negate_flags.bind((x,))
    config = bound.config_spec.default().replace(indexing=["block_ptr", "pointer"])
    assert torch.equal(bound.run(bound.compile_config(config), x), ~x)


def test_an_int8_dot_without_acc_is_an_int32_product() -> None:
    """``acc + tc.dot(a, b)`` of int8 blocks: each block's product is int32 (an int8 one
    wrapped, so the sum depended on the K block, and ref mode agreed with no config)."""
    gen = torch.Generator().manual_seed(5)
    a = torch.randint(-128, 128, (3, 100), generator=gen, dtype=torch.int8)
    b = torch.randint(-128, 128, (100, 2), generator=gen, dtype=torch.int8)
    assert torch.equal(int8_matmul(a, b, False), a.int() @ b.int())
    assert tc.dot(a, b).dtype == torch.int32  # the eager meaning (ref mode) is the same


@tc.kernel(static_shapes=True)
def bounded_by_a_0d_tensor(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """A 0-d tensor argument as an operand of torch functions, either side."""
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        xt = x[t]
        hi = torch.minimum(s, torch.maximum(xt, -s))
        out[t] = torch.where(xt > 0, hi, torch.clamp(xt * s, min=-s)) + (1.0 - s) * (s > 0)
    return out


@tc.kernel(static_shapes=True)
def gathers_a_whole_row(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(idx, dtype=x.dtype)
    for t in tc.tile(idx.size(0)):
        out[t] = torch.take_along_dim(x, idx[t], dim=0)
    return out


def test_a_0d_tensor_is_an_operand_of_torch_functions(device: str) -> None:
    """torch.maximum / minimum / where / clamp raised 'must be Tensor, not HostTensor' for a 0-d
    tensor argument that arithmetic reads as a scalar; a 1-D one is still a located error."""
    x = torch.randn(50, generator=torch.Generator().manual_seed(3)).to(device)
    s = torch.tensor(0.5, device=device)
    want = torch.where(x > 0, torch.minimum(s, torch.maximum(x, -s)), torch.clamp(x * s, min=-s))
    want = want + (1.0 - s) * (s > 0)
    torch.testing.assert_close(bounded_by_a_0d_tensor(x, s), want)
    with pytest.raises(DeviceCodeError, match="torch.take_along_dim of a host tensor.*1-D"):
        gathers_a_whole_row(x, torch.zeros(4, dtype=torch.int64, device=device))


@tc.kernel(static_shapes=True)
def selected_by_0d_equality(x: torch.Tensor, s: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """``==`` / ``!=`` with 0-d tensor arguments on either side, against a constant, a tile and
    another 0-d tensor."""
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        v = x[t]
        a = torch.where(s == 2.0, v, -v) + torch.where(v == s, 100.0, 0.0)
        out[t] = a + torch.where(s == r, v * 10, v) + (2.0 != r).float()  # noqa: SIM300
    return out


@tc.kernel(static_shapes=True)
def compares_a_whole_argument(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = torch.where(x == y, x[t], 0.0)
    return out


@pytest.mark.parametrize("r_value", [2.0, 3.0])
def test_equality_of_0d_tensor_arguments_compares_values(device: str, r_value: float) -> None:
    """``s == 2.0`` of a 0-d tensor argument in device code was Python's identity test (False
    whatever ``s`` held): ``torch.where`` then raised or picked the wrong branch."""
    x = torch.tensor([1.0, 2.0, 3.0, 2.0, -4.0], device=device)
    s = torch.tensor(2.0, device=device)
    r = torch.tensor(r_value, device=device)
    want = torch.where(s == 2.0, x, -x) + torch.where(x == s, 100.0, 0.0)
    want = want + torch.where(s == r, x * 10, x) + (r != 2.0).float()
    torch.testing.assert_close(selected_by_0d_equality(x, s, r), want)
    with pytest.raises(DeviceCodeError, match="torch.eq of a host tensor.*'x' is 1-D"):
        compares_a_whole_argument(x, x.clone())


@tc.kernel(static_shapes=True)
def scaled_by_host_max(x: torch.Tensor) -> torch.Tensor:
    """Row maxima in one loop, their max on the host (a 0-d tensor), then every element minus
    it in a second loop."""
    m, n = x.size()
    row_max = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row_max[tm] = torch.amax(x[tm, :], dim=1)
    top = row_max.max()
    out = torch.empty_like(x)
    for tm, tn in tc.tile([m, n]):
        out[tm, tn] = x[tm, tn] - top
    return out


def test_a_0d_host_tensor_is_read_as_a_scalar_in_device_code() -> None:
    """``x[tm, tn] - top`` with ``top = row_max.max()`` computed on the host raised 'cannot use
    a HostTensor as a device value'."""
    x = torch.randn(7, 33, generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(scaled_by_host_max(x), x - x.max())


@tc.kernel(static_shapes=True)
def labels_one_hot(labels: torch.Tensor, c: int) -> torch.Tensor:
    out = torch.empty([labels.size(0), c], dtype=torch.int64, device=labels.device)
    for tn in tc.tile(labels.size(0)):
        out[tn, :] = torch.nn.functional.one_hot(labels[tn], num_classes=c)
    return out


@pytest.mark.parametrize("c", [1, 5, 16])
def test_one_hot_of_a_tile_matches_torch(c: int) -> None:
    labels = torch.randint(0, c, (37,), generator=torch.Generator().manual_seed(7))
    assert torch.equal(labels_one_hot(labels, c), torch.nn.functional.one_hot(labels, c))


@tc.kernel(static_shapes=True)
def positional_spreads(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.size()
    var = torch.empty([m], dtype=x.dtype, device=x.device)
    std = torch.empty([m, 1], dtype=x.dtype, device=x.device)
    whole = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        var[tm] = torch.var(x[tm, :], 1, False)
        std[tm, :] = x[tm, :].std(1, False, True)
        v, mu = torch.var_mean(x[tm, :], 1, False, True)
        whole[tm] = (v + mu)[:, 0]
    return var, std, whole


def test_var_and_std_take_unbiased_and_keepdim_by_position(device: str) -> None:
    """torch.var(x, 1, False) divided by n - 1 and std's positional keepdim was dropped: both
    were read from keywords only (fuzz round 55d)."""
    x = torch.randn(6, 11, device=device)
    var, std, whole = positional_spreads(x)
    torch.testing.assert_close(var, torch.var(x, 1, False))
    torch.testing.assert_close(std, x.std(1, False, True))
    v, mu = torch.var_mean(x, 1, False, True)
    torch.testing.assert_close(whole, (v + mu)[:, 0])


@tc.kernel(static_shapes=True)
def softmax_in_fp64(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.float64, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = torch.log_softmax(x[tm, :], dim=1, dtype=torch.float64)
    return out


@tc.kernel(static_shapes=True)
def int_softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = torch.softmax(x[tm, :], dim=1, dtype=torch.int32)
    return out


def test_softmax_dtype_casts_the_input_first_and_is_a_float(device: str) -> None:
    """log_softmax(dtype=torch.float64) of an fp32 tile was computed in fp32, then widened
    (6e-7 off torch); softmax(dtype=torch.int32) returned zeros where torch raises (fuzz round
    55d)."""
    x = torch.randn(5, 37, device=device) * 3
    want = torch.log_softmax(x, dim=1, dtype=torch.float64)
    torch.testing.assert_close(softmax_in_fp64(x), want, rtol=1e-13, atol=1e-13)
    with pytest.raises(UnsupportedOpError, match="a floating dtype only"):
        int_softmax(torch.arange(12, device=device).view(3, 4).int())

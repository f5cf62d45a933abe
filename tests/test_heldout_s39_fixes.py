"""Fixes from session 39's held-out kernels: the index of a block-size-1 tile (or of ``tc.grid``)
is one scalar in both modes (ref mode gave a one-element vector, so code that indexed it ran
there and failed to compile) and indexing it as a vector says why; ``arange(n)`` of a run-time
size follows it; device code's factories without a device follow the kernel in ref mode; a
``range()`` over a run-time size says what to do."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
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


def test_indexing_that_scalar_as_a_vector_fails_alike_and_says_why(device: str) -> None:
    x = torch.rand(3, 10, device=device)
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


def test_range_over_a_run_time_size_says_what_to_do(device: str) -> None:
    """Was "UnsupportedOpError: TypeError: 'TileValue' object cannot be interpreted as an
    integer" (an internal class name, no hint)."""
    with pytest.raises(DeviceCodeError, match="known only at run time") as info:
        horner(torch.rand(8, 4, device=device), torch.rand(8, device=device))
    text = str(info.value)
    assert "TileValue" not in text and "tc.specialize" in text and "tc.grid" in text
    assert "test_heldout_s39_fixes.py" in text


@tc.kernel(static_shapes=True)
def edge_pads(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.size()
    rep = torch.empty([m, n + 3], dtype=x.dtype, device=x.device)
    ref = torch.empty([m, n + 3], dtype=x.dtype, device=x.device)
    cir = torch.empty([m, n + 3], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        rep[tm, :] = torch.nn.functional.pad(row, (1, 2), mode="replicate")
        ref[tm, :] = torch.nn.functional.pad(row, (2, 1), mode="reflect")
        cir[tm, :] = torch.nn.functional.pad(row, (1, 2), mode="circular")
    return rep, ref, cir


@tc.kernel(static_shapes=True)
def sobel_x(img: torch.Tensor) -> torch.Tensor:
    b, h, w = img.size()
    out = torch.empty_like(img)
    for tb, ti in tc.tile([b, h], block_size=[1, None]):
        rows = img[tb.begin, ti, :]
        wide = torch.nn.functional.pad(rows[None], (1, 1), mode="replicate")[0]
        out[tb.begin, ti, :] = wide[:, 2:] - wide[:, :-2]
    return out


def test_f_pad_replicate_reflect_and_circular_on_tiles(device: str) -> None:
    """F.pad of a tile took mode='constant' only (ref mode ran the others: a Sobel filter's
    replicated border compiled to "F.pad of a tile with mode='replicate'")."""
    x = torch.randn(5, 7, device=device)
    F = torch.nn.functional
    want = (
        F.pad(x[None], (1, 2), mode="replicate")[0],
        F.pad(x[None], (2, 1), mode="reflect")[0],
        F.pad(x[None], (1, 2), mode="circular")[0],
    )
    for got, expected in zip(edge_pads(x), want, strict=True):
        assert torch.equal(got, expected)
    img = torch.randn(2, 6, 9, device=device)
    wide = F.pad(img, (1, 1), mode="replicate")
    assert torch.equal(sobel_x(img), wide[..., 2:] - wide[..., :-2])


def test_f_pad_reflect_wider_than_the_dim_is_refused_as_torch_does(device: str) -> None:
    @tc.kernel(static_shapes=True)
    def too_wide(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty([x.size(0), x.size(1) + 8], dtype=x.dtype, device=x.device)
        for tm in tc.tile(x.size(0)):
            out[tm, :] = torch.nn.functional.pad(x[tm, :], (4, 4), mode="reflect")
        return out

    with pytest.raises(DeviceCodeError, match="at most 3 for a dim of 4"):
        too_wide(torch.randn(3, 4, device=device))


@pytest.mark.crosscompile
def test_edge_pads_cross_compile() -> None:
    assert_defaults_cross_compile(edge_pads, (torch.empty(64, 200, device="meta"),))


@tc.kernel(static_shapes=True)
def chunked_products(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r, n = a.size()
    prod = torch.empty([r], dtype=torch.float32, device=a.device)
    firsts = torch.empty([r], dtype=torch.float32, device=a.device)
    for tr in tc.tile(r):
        carry = tc.full([tr], 1.0, dtype=torch.float32)
        first_sum = tc.zeros([tr], dtype=torch.float32)
        for tn in tc.tile(n):
            incl = torch.cumprod(a[tr, tn], dim=1)
            carry = carry * incl[:, -1]  # the last valid lane, a partial tile's too
            first_sum = first_sum + a[tr, tn][:, 0]
        prod[tr] = carry
        firsts[tr] = first_sum
    return prod, firsts


@pytest.mark.parametrize("block", [4, 8, 64])
def test_a_tiles_first_and_last_elements_along_a_loop_dim(block: int, device: str) -> None:
    """``incl[:, -1]`` along an inner tile loop's dim was "positions depend on the config"
    compiled, while ref mode ran it (front-to-back alpha compositing's transmittance)."""
    a = 0.5 + 0.5 * torch.rand(3, 21, device=device)  # 21: a partial last tile
    kernel = tc.kernel(
        chunked_products.fn, static_shapes=True, config=tc.Config(block_sizes=[2, block])
    )
    prod, firsts = kernel(a)
    torch.testing.assert_close(prod, a.prod(dim=1))
    want_firsts = a[:, ::block].sum(dim=1)
    torch.testing.assert_close(firsts, want_firsts)


@tc.kernel(static_shapes=False)
def minus_picked(x: torch.Tensor, n: int, where: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tb in tc.tile(n):
        whole = x[:]
        at = where[0]  # a loaded position, -2: from the end
        out[tb] = x[tb] - whole[n - 1] + whole[at]
    return out


def test_a_whole_dim_indexed_with_a_run_time_int(device: str) -> None:
    """``whole[n - 1]`` under static_shapes=False said "a scalar device value was used as a
    Python bool" (the tracer's own test of the index), then named an internal class."""
    x = torch.arange(10, dtype=torch.int32, device=device) * 3
    where = torch.tensor([-2], device=device)
    assert torch.equal(minus_picked(x, 10, where), x - x[9] + x[-2])


@tc.kernel(static_shapes=True)
def chained_products(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    n, d = b.size(0), c.size(1)
    out = torch.empty([m, d], dtype=a.dtype, device=a.device)
    for tm, td in tc.tile([m, d]):
        acc = tc.zeros([tm, td], dtype=a.dtype)
        for tn in tc.tile(n):
            s = tc.zeros([tm, tn], dtype=a.dtype)
            for tk in tc.tile(k):
                s = tc.dot(a[tm, tk], b[tn, tk].t(), acc=s)
            acc = acc + s @ c[tn, td]
        out[tm, td] = acc
    return out


def test_fp64_products_accumulate_in_fp64(device: str) -> None:
    """fp64 operands were typed as an fp32 product while tl.dot returns fp64: the next product
    read garbage (NaN, or a loss gradient of zeros), or tl.dot's accumulator check failed."""
    g = torch.Generator().manual_seed(0)
    a, b, c = (
        torch.randn(s, generator=g, dtype=torch.float64) for s in ((20, 32), (40, 32), (40, 16))
    )
    a, b, c = a.to(device), b.to(device), c.to(device)
    got = chained_products(a, b, c)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, (a @ b.t()) @ c, rtol=1e-12, atol=1e-12)


@pytest.mark.crosscompile
def test_fp64_products_cross_compile() -> None:
    args = tuple(
        torch.empty(s, dtype=torch.float64, device="meta")
        for s in ((256, 64), (512, 64), (512, 64))
    )
    assert_defaults_cross_compile(chained_products, args)


@tc.kernel(static_shapes=True)
def add_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = x[tm, :] + bias[None, :]
    return out


def test_whole_dims_of_different_sizes_say_so(device: str) -> None:
    """Was "[BLOCK_0, RDIM_1] and [1, RDIM_2] do not broadcast" with a hint to add [None, :]
    (there already): a bias of 63 for 64 columns."""
    with pytest.raises(ShapeError, match=r"RDIM_1 \(64\)\] and \[1, RDIM_2 \(63\)\]") as info:
        add_bias(torch.randn(8, 64, device=device), torch.randn(63, device=device))
    assert "sizes differ" in str(info.value) and "explicit [:, None]" not in str(info.value)


@tc.kernel(static_shapes=True)
def norms_with_host_params(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    m, h = x.size()
    ln = torch.empty_like(x)
    rms = torch.empty_like(x)
    for tm in tc.tile(m):
        row = x[tm, :]
        ln[tm, :] = torch.nn.functional.layer_norm(row, [h], w, b, 1e-5)
        rms[tm, :] = torch.nn.functional.rms_norm(row, [h], w, 1e-6)
    return ln, rms


def test_norms_take_host_weights_as_eager_code_passes_them(device: str) -> None:
    """``F.layer_norm(e, [h], ln_weight, ln_bias)`` was "host tensor 'ln_weight' used as a value
    in device code" (BERT's embeddings): the weight had to be written ln_weight[:]."""
    x, w, b = (
        torch.randn(6, 48, device=device),
        torch.randn(48, device=device),
        torch.randn(48, device=device),
    )
    ln, rms = norms_with_host_params(x, w, b)
    F = torch.nn.functional
    torch.testing.assert_close(ln, F.layer_norm(x, [48], w, b, 1e-5))
    torch.testing.assert_close(rms, F.rms_norm(x, [48], w, 1e-6))


@tc.kernel(static_shapes=True)
def thousand_blocks(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0), block_size=1000):
        out[t] = x[t] * 2.0
    return out


def test_a_block_size_that_is_no_power_of_two_fails_alike_in_ref_mode(device: str) -> None:
    x = torch.randn(3000, device=device)
    with pytest.raises(DeviceCodeError, match="block_size=1000 must be a power of two"):
        thousand_blocks(x)
    with pytest.raises(DeviceCodeError, match="block_size=1000 must be a power of two"):
        thousand_blocks.run_ref(x)


@tc.kernel(static_shapes=True)
def flattened_tail(x: torch.Tensor) -> torch.Tensor:
    m, h, a, b = x.size()
    out = torch.empty([m, h, a * b], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :, :] = x[tm, :, :, :].flatten(2) * 2.0
    return out


def test_flatten_of_trailing_whole_dims(device: str) -> None:
    """``flatten(2)`` of [T, 3, 4, 2] took -1 as 24: the 3 was named by its dim, not a size."""
    x = torch.randn(5, 3, 4, 2, device=device)
    assert torch.equal(flattened_tail(x), x.flatten(2) * 2.0)


@tc.kernel(static_shapes=False)
def part_dot(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        head = x[tm, :11]  # a static 11
        out[tm] = torch.sum(head * v[:][None, :], dim=1)  # v's run-time 11
    return out


def test_a_static_dim_stands_for_a_run_time_dim_of_its_size(device: str) -> None:
    """A static 11 (a slice) beside v's run-time 11: the static dim stands for it and the launch
    checks v's size (it was refused; torch broadcasts them while the sizes agree)."""
    x, v = torch.randn(4, 16, device=device), torch.randn(11, device=device)
    torch.testing.assert_close(part_dot(x, v), (x[:, :11] * v).sum(1), rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError, match=r"v\.shape\[0\]"):  # the same size bucket: checked
        part_dot(x, torch.randn(12, device=device))


@tc.kernel(static_shapes=False)
def plus_picked(x: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tb in tc.tile(x.size(0)):
        whole = x[:]
        out[tb] = x[tb] + whole[where[0]]
    return out


def test_a_negative_run_time_index_counts_from_each_calls_end(device: str) -> None:
    """The end a negative index counts from is the run-time size's: a second call of another
    size on the same compiled kernel read x[8] of 14 (the first call's 10 - 2)."""
    where = torch.tensor([-2], device=device)
    for n in (10, 14):
        x = torch.arange(n, dtype=torch.int32, device=device) * 3
        assert torch.equal(plus_picked(x, where), x + x[-2])

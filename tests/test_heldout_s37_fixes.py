"""What session 37's held-out kernels found (benchmarks/gen_kernels/heldout_s37*.py): each test
fails on the tree before its fix. Static and run-time whole dims of one size kept apart, a
relaunched loop's error naming what changed, device ``for`` over Python tuples, ``number /
tile`` as torch computes it, eager autograd of host code that views an argument by its own
dims, hypot without invalid-value warnings, and the fixed-block index error's advice."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest
import torch

import tilecraft as tc
from tests.conftest import HAS_CUDA
from tilecraft.errors import DeviceCodeError, ShapeError

K = 20


# explicit configs: these tests are about tracing, not tuning
@tc.kernel(static_shapes=False, config=tc.Config(block_sizes=[2]))
def count_k(x: torch.Tensor) -> torch.Tensor:
    b, v = x.size()
    out = torch.empty([b], dtype=torch.float32, device=x.device)
    for tb in tc.tile(b):
        row_sum = x[tb, :].sum(-1)
        cnt = torch.sum(torch.where(torch.arange(K) >= 0, 1.0, 0.0))
        out[tb] = row_sum * 0.0 + cnt
    return out


@tc.kernel(static_shapes=False, config=tc.Config(block_sizes=[2]))
def topk_mask(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tb in tc.tile(x.size(0)):
        row = x[tb, :]
        vals, _ = torch.topk(row, K, dim=-1)
        out[tb, :] = row.masked_fill(row < vals[:, -1:], float("-inf"))
    return out


def test_a_literal_whole_dim_stays_static_beside_a_run_time_dim_of_its_size(device: str) -> None:
    """With static_shapes=False, ``torch.arange(20)`` took the run-time row dim of 20 seen at
    the first call: at V = 25 it counted 25 (silently), and topk's k dim became the run-time V
    dim (ShapeError at V == K)."""
    for v in (20, 25, 100):
        assert bool((count_k(torch.randn(3, v, device=device)) == K).all()), v
    for v in (100, K):
        x = torch.randn(3, v, device=device)
        want = x.masked_fill(x < x.topk(K, dim=-1).values[:, -1:], float("-inf"))
        torch.testing.assert_close(topk_mask(x), want)


@tc.kernel(static_shapes=True)
def power_steps(g: torch.Tensor) -> torch.Tensor:
    x = g.mT
    for _ in range(2):
        y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        for tm in tc.tile(x.size(0)):
            y[tm, :] = x[tm, :] * 0.5
        x = y
    return x


def test_a_loop_relaunched_on_another_layout_names_what_changed() -> None:
    with pytest.raises(DeviceCodeError, match=r"'x' changed: strides \(1, 48\) then") as err:
        power_steps(torch.randn(32, 48))
    assert ".contiguous()" in str(err.value) and "shape/dtype" not in str(err.value)


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[4]))
def pack_for(x: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    xv = x.view(m, k // 2, 2)
    out = torch.empty([m, k // 2], dtype=torch.uint8, device=x.device)
    for tm in tc.tile(m):
        codes = []
        for v in (xv[tm, :, 0], xv[tm, :, 1]):
            codes.append(torch.clamp(v, 0, 15).to(torch.uint8))
        out[tm, :] = codes[0] | (codes[1] << 4)
    return out


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[4]))
def unpack_enumerate(p: torch.Tensor) -> torch.Tensor:
    m, k2 = p.size()
    out = torch.empty([m, k2, 2], dtype=torch.float32, device=p.device)
    for tm in tc.tile(m):
        byte = p[tm, :]
        for j, code in enumerate((byte & 0xF, byte >> 4)):
            out[tm, :, j] = code.to(torch.float32)
    return out


def test_a_device_for_over_a_python_tuple_is_unrolled(device: str) -> None:
    x = torch.randint(0, 16, (5, 32), device=device).float()
    packed = x[:, 0::2].to(torch.uint8) | (x[:, 1::2].to(torch.uint8) << 4)
    torch.testing.assert_close(pack_for(x), packed)
    torch.testing.assert_close(unpack_enumerate(packed), x.view(5, 16, 2))


@tc.kernel(static_shapes=True)
def hist_eq(img: torch.Tensor) -> torch.Tensor:
    """OpenCV's equalizeHist over uint8 images [B, H, W]."""
    b, h, w = img.size()
    flat = img.view(b, h * w)
    hist = torch.zeros([b, 256], dtype=torch.int32, device=img.device)
    for tb, tp in tc.tile([b, h * w], block_size=[1, None]):
        v = flat[tb.begin, tp].to(torch.int64)
        tc.atomic_add(hist, [tb.begin, v], torch.ones_like(v, dtype=torch.int32))
    lut = torch.empty([b, 256], dtype=torch.uint8, device=img.device)
    for tb in tc.tile(b):
        hh = hist[tb, :]
        cdf = torch.cumsum(hh, dim=1)
        cmin = torch.amin(torch.where(hh > 0, cdf, h * w + 1), dim=1)[:, None]
        scale = 255.0 / torch.clamp(h * w - cmin, min=1).float()
        lut[tb, :] = torch.clamp(torch.round((cdf - cmin).float() * scale), 0, 255).to(torch.uint8)
    out = torch.empty_like(img)
    for tb, ti, tj in tc.tile([b, h, w], block_size=[1, None, None]):
        out[tb.begin, ti, tj] = lut[tb.begin, img[tb.begin, ti, tj].to(torch.int64)]
    return out


def _equalized(img: torch.Tensor) -> torch.Tensor:
    outs = []
    for im in img:
        hist = torch.bincount(im.flatten().long(), minlength=256)
        cdf = hist.cumsum(0)
        cmin = cdf[hist > 0].min()
        scale = 255.0 / torch.clamp(im.numel() - cmin, min=1).float()
        lut = torch.clamp(torch.round((cdf - cmin).float() * scale), 0, 255).to(torch.uint8)
        outs.append(lut[im.long()])
    return torch.stack(outs)


def test_a_number_over_a_tile_rounds_as_torch_does(device: str) -> None:
    """torch computes ``255.0 / n`` as ``n.reciprocal() * 255.0``; one division put two LUT
    entries of a 13 x 21 image on the other side of .5 from eager (127.499992 against
    127.500008), every config then differed from ref mode in whole gray levels, and the call
    had no working config."""
    g = torch.Generator().manual_seed(0)
    img = torch.randint(0, 256, (2, 13, 21), generator=g, dtype=torch.uint8).to(device)
    torch.testing.assert_close(hist_eq(img), _equalized(img), rtol=0, atol=0)


@tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[16]))
def double_points(pts: torch.Tensor) -> torch.Tensor:
    n = pts.size(0)
    flat = pts.view(n * 2)
    out = torch.empty_like(flat)
    for t in tc.tile(n * 2):
        out[t] = flat[t] * 2.0
    return out.view(n, 2)


double_points.register_backward(
    lambda ctx, g: (g * 2.0,), setup_context=lambda ctx, inputs, output: None
)


def test_eager_autograd_of_host_code_viewing_an_argument_by_its_own_dims(device: str) -> None:
    """The autograd check made the op on stand-ins whose dims are never 2 ("shape '[1440]' is
    invalid for input of size 518400"); it now takes the call's sizes, as the call does."""
    p = torch.randn(10, 2, device=device, requires_grad=True)
    y = double_points(p)
    y.sum().backward()
    torch.testing.assert_close(y.detach(), p.detach() * 2)
    assert p.grad is not None
    torch.testing.assert_close(p.grad, torch.full_like(p, 2.0))


@tc.kernel(static_shapes=True)
def magnitude(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(re)
    for t in tc.tile(re.size(0)):
        out[t] = torch.hypot(re[t], im[t])
    return out


def test_hypot_of_zeros_and_infinities_warns_of_nothing(device: str) -> None:
    re = torch.tensor([3.0, 0.0, 1.0, 0.0, float("inf")] * 8, device=device)
    im = torch.tensor([4.0, 0.0, 0.0, 2.0, float("inf")] * 8, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = magnitude(re, im)
    torch.testing.assert_close(got, torch.hypot(re, im))
    assert not [w for w in caught if "invalid value" in str(w.message)]


CHUNK = 16


@tc.kernel(static_shapes=True)
def chunk_totals(a: torch.Tensor) -> torch.Tensor:
    b, n = a.size()
    out = torch.empty([b, n // CHUNK], dtype=a.dtype, device=a.device)
    for tb in tc.tile(b, block_size=1):
        for tt in tc.tile(n, block_size=CHUNK):
            acs = torch.cumsum(a[tb.begin, tt], dim=0)
            out[tb.begin, tt.begin // CHUNK] = acs[-1]
    return out


@tc.kernel(static_shapes=True)
def chunk_thirds(a: torch.Tensor) -> torch.Tensor:
    b, n = a.size()
    out = torch.empty([b, n // CHUNK], dtype=a.dtype, device=a.device)
    for tb in tc.tile(b, block_size=1):
        for tt in tc.tile(n, block_size=CHUNK):
            out[tb.begin, tt.begin // CHUNK] = torch.cumsum(a[tb.begin, tt], dim=0)[3]
    return out


def test_an_index_along_a_fixed_block_says_why_and_how_to_pick_the_last_element() -> None:
    """The error said the block's positions depend on the config, false for block_size=16;
    the last element (session 39) is the tile's last valid lane, any other index an error."""
    a = torch.randn(2, 64)
    torch.testing.assert_close(chunk_totals(a), a.view(2, 4, CHUNK).sum(-1))
    with pytest.raises(ShapeError, match=r"block_size=16, whose last tile may be partial") as e:
        chunk_thirds(a)
    assert "v[..., -1]" in str(e.value)


def _extremes(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    m = x.size(0)
    mx, mn, amax = (torch.empty(m, dtype=x.dtype, device=x.device) for _ in range(3))
    am, an, am2 = (torch.empty(m, dtype=torch.int64, device=x.device) for _ in range(3))
    for tm in tc.tile(m):
        v, i = torch.max(x[tm, :], dim=1)
        w, j = torch.min(x[tm, :], dim=1)
        mx[tm], am[tm], mn[tm], an[tm] = v, i, w, j
        am2[tm] = torch.argmax(x[tm, :], dim=1)
        amax[tm] = torch.amax(x[tm, :], dim=1)
    return mx, am, mn, an, am2, amax


@pytest.mark.parametrize("chunk", [None, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max_min_and_their_indices_keep_torchs_nan_tie_and_sign_rules(
    chunk: int | None, dtype: torch.dtype, device: str
) -> None:
    """The interpreter reduces with NumPy (a per-pair combine made a 4100-wide top-8 take 18 s
    a call), GPUs with the combines: both give torch's first NaN, first tie and -0.0."""
    config = tc.Config(block_sizes=[2], reduction_loops=[chunk])
    kernel = tc.kernel(_extremes, static_shapes=True, config=config)
    x = torch.randint(-3, 4, (7, 37), generator=torch.Generator().manual_seed(1)).to(dtype)
    x[1, 5], x[1, 9], x[4, 3] = float("nan"), float("nan"), float("inf")
    x[2, :], x[3, :], x[5, :] = float("-inf"), float("nan"), -0.0
    x = x.to(device)
    got = kernel(x)
    v, i = torch.max(x, 1)
    w, j = torch.min(x, 1)
    for g, e in zip(got, (v, i, w, j, torch.argmax(x, 1), torch.amax(x, 1)), strict=True):
        torch.testing.assert_close(g, e, equal_nan=True, rtol=0, atol=0)
    assert bool(torch.signbit(got[0][5])) and bool(torch.signbit(got[5][5]))


def test_gpu_code_keeps_the_nan_combines_and_the_interpreter_uses_numpy() -> None:
    from tilecraft.runtime.kernel import BoundKernel
    from tilecraft.targets.target import Target

    kernel = tc.kernel(_extremes, static_shapes=True)
    args = kernel.bind_arguments((torch.randn(8, 64),), {})
    gpu = BoundKernel(kernel, args, target=Target.parse("cuda:90"))
    code = gpu.to_triton_code(gpu.config_spec.default())
    assert "_tc_argmax_nan" in code and "_tc_max_nan" in code and "_interp(" not in code
    interpreted = BoundKernel(kernel, args, target=Target.parse("interpret"))
    code = interpreted.to_triton_code(interpreted.config_spec.default())
    assert "_tc_arg_best_interp(" in code and "_tc_argmax_nan)" not in code


@tc.kernel(static_shapes=True)
def tile_means(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.size(0) // 16, dtype=x.dtype, device=x.device)
    for t in tc.tile(x.size(0), block_size=16):
        out[t.id] = torch.sum(x[t]) / t.block_size
    return out


def test_a_fixed_block_size_in_float_math_compiles(device: str) -> None:
    """Was ``16.to(tl.float32)`` (a SyntaxError in every candidate: no working config)."""
    x = torch.randn(64, device=device)
    torch.testing.assert_close(tile_means(x), x.view(4, 16).mean(1))


@tc.kernel(static_shapes=True)
def gamma_curve(x: torch.Tensor, g: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in tc.tile(x.size(0)):
        out[t] = x[t] ** g
    return out


def test_zero_to_a_float_power_warns_of_nothing(device: str) -> None:
    """pow took log2(0): the interpreter warned of a divide by zero at every black pixel."""
    x = torch.tensor([0.0, 0.25, 1.0, 0.0, 4.0, 9.0] * 6, device=device)
    for g in (2.2, -0.5, 0.0):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = gamma_curve(x, g)
        torch.testing.assert_close(got, x**g)
        assert not [w for w in caught if "divide by zero" in str(w.message)], g


COEFFS = (3.4445, -4.7750, 2.0315)  # Muon's Newton-Schulz coefficients


@tc.kernel(static_shapes=True)
def odd_poly(x: torch.Tensor) -> torch.Tensor:
    a, b, c = COEFFS
    out = torch.empty_like(x)
    for tn in tc.tile(x.size(0)):
        v = x[tn]
        out[tn] = a * v + b * v * v * v + c * v * v * v * v * v
    return out


def test_a_standalone_export_takes_a_module_tuple_of_numbers(tmp_path: Path, device: str) -> None:
    """Was "cannot export: the host code reads 'COEFFS' (a tuple)"."""
    x = torch.randn(100, device=device)
    source = odd_poly.bind((x,)).to_triton_code(standalone=True)
    assert "COEFFS = (3.4445, -4.775, 2.0315)" in source
    path = tmp_path / "odd_poly_export.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("odd_poly_export", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.testing.assert_close(module.odd_poly(x), odd_poly(x))


@tc.kernel(static_shapes=True)
def gamma_correct(img: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """uint8 images [B, H, W]: a 256-entry gamma LUT, then a gather per pixel."""
    b, h, w = img.size()
    lut = torch.empty([256], dtype=torch.uint8, device=img.device)
    for t in tc.tile(256):
        v = 255.0 * (t.index.float() / 255.0) ** gamma[0]
        lut[t] = torch.clamp(torch.round(v), 0, 255).to(torch.uint8)
    out = torch.empty_like(img)
    for tb, ti, tj in tc.tile([b, h, w], block_size=[1, None, None]):
        out[tb.begin, ti, tj] = lut[img[tb.begin, ti, tj].to(torch.int64)]
    return out


@pytest.mark.skipif(
    HAS_CUDA, reason="the tie is the interpreter's pow rounding (CPU tensors, TRITON_INTERPRET)"
)
def test_a_gathered_rounding_tie_of_pow_is_now_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At this gamma, LUT entry 58 is 20.5 in eager fp32 and was 20.500002 compiled (fp32's
    exp2(y log2 x), 36 ulp off): every pixel of gray level 58 was one code off, 3% of these
    images, and only the tuner's agreed-ties rule (``agreed_ties``, tested below) gave a
    result. pow is now libdevice's on GPUs and fp64 in the interpreter: the LUT is eager's."""
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    g = torch.Generator().manual_seed(0)
    img = torch.randint(0, 256, (2, 16, 16), generator=g).to(torch.uint8)
    img[0, 0, :16] = 58
    gamma = torch.tensor([1.7023255825042725])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = gamma_correct(img, gamma)
    lut = torch.round(255.0 * (torch.arange(256).float() / 255.0) ** gamma[0]).clamp(0, 255)
    assert torch.equal(got.cpu(), lut.to(torch.uint8)[img.long()])


def test_one_config_alone_off_by_one_codes_is_still_a_wrong_result() -> None:
    from tilecraft.autotune.classify import Attempt, Category
    from tilecraft.autotune.discover import agreed_ties

    def tried(blocks: int, digest: str) -> Attempt:
        return Attempt(tc.Config(block_sizes=[blocks]), Category.WRONG_RESULT, digest=digest)

    assert agreed_ties([tried(4, "a"), tried(8, "b"), tried(16, "")]) is None
    assert agreed_ties([tried(4, ""), tried(8, "")]) is None
    agreed = agreed_ties([tried(4, "a"), tried(8, "b"), tried(16, "b")])
    assert agreed is not None and agreed.config.block_sizes == (8,)


def _moving_sum(x: torch.Tensor, as_hinted: bool) -> torch.Tensor:
    n = x.size(0)
    out = torch.empty_like(x)
    for t in tc.tile(n, block_size=16):
        idx = t.begin - 1 + torch.arange(18)
        halo = tc.load(x, [idx], extra_mask=(idx >= 0) & (idx < n))
        v = halo[:-2] + halo[1:-1] + halo[2:]
        if as_hinted:
            tc.store(
                out, [t.begin + torch.arange(16)], v, extra_mask=t.begin + torch.arange(16) < t.end
            )
        else:
            out[t] = v
    return out


def test_a_halo_tile_stored_at_the_block_says_how_to_store_it(device: str) -> None:
    """``h[1:-1]`` of an ``arange(B + 2)`` halo is a whole dim of B, not the loop's block: the
    error had no hint; the hint's form runs and matches."""
    plain = tc.kernel(_moving_sum, static_shapes=True)
    x = torch.randn(60, device=device)
    with pytest.raises(ShapeError, match="does not fit") as err:
        plain(x, False)
    assert "never lines up with a tile loop's block" in str(err.value)
    assert "tc.store(out, [t.begin + torch.arange(16)]" in str(err.value)
    padded = torch.nn.functional.pad(x, (1, 1))
    want = padded[:-2] + padded[1:-1] + padded[2:]
    torch.testing.assert_close(plain(x, True), want)


@tc.kernel(static_shapes=False, config=tc.Config(block_sizes=[2]))
def add_ramp(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = x[tm, :] + torch.arange(8).float()
    return out


def test_a_constant_dim_standing_for_a_run_time_dim_is_checked_at_launch(device: str) -> None:
    """With static_shapes=False a static whole dim (``torch.arange(8)``, ``x[t, 2:10]``) may
    stand where a run-time dim of the traced size is (the rows were 8 wide): the launch checks
    that they still are, as torch's broadcast would, instead of reading other positions."""
    x = torch.randn(4, 8, device=device)
    torch.testing.assert_close(add_ramp(x), x + torch.arange(8, device=device).float())
    with pytest.raises(ShapeError, match=r"x\.shape\[1\] must be 8"):
        add_ramp(torch.randn(4, 7, device=device))

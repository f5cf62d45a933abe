"""Held-out kernels written from the docs only, session 30, second batch (see :mod:`.heldout_rows`
for why held-out kernels exist): indexing- and layout-heavy data movement. Rows of a table picked
by an index vector (``index_select``); a circular shift of each row (``torch.roll`` of a row
tile); space-to-depth of NCHW images (``F.pixel_unshuffle``); the length-4 sliding windows of a
signal (``x.unfold(-1, 4, 1)``); rows added into a copy of a table at repeated indices
(``index_add``, atomics); nearest-neighbour resampling of NCHW maps at per-pixel integer
coordinates, clamped to the image; a suffix sum of each row (flip, cumsum, flip); and a padding
mask that zeroes the positions past each sequence's length. Each comes with its eager reference
(see :mod:`.case`).

Notes: everything was supported as first written from the docs (``x[idx[tn], :]`` rows,
``torch.roll(x[tm, :], shifts=shift, dims=-1)`` of a row tile, ``pixel_shuffle_2x``'s [.., 2, ..,
2] views with constant indices, four shifted loads ``x[tb, tch, tw.index + k]`` stored into a last
dim of 4 under ``tc.static_range``, ``tc.atomic_add`` with an index tile into a host-side
``base.clone()``, a 4-D tile loop gathering ``x[tb.begin, tch, yy, xx]`` (the tile's dim first, as
torch places it), flip / cumsum / flip of a whole row, a per-sequence mask ``torch.where``); every
default is correct in the interpreter. The torch calls themselves are not device ops:
``x.index_select(0, idx[tn])`` on the host tensor is a ``DeviceCodeError`` ("no device-side
attribute") whose hint does not mention index tiles (``dispatch._hint_for``'s index_select hint is
not reached from a host tensor's method), and ``x[tr, :].unfold(-1, 4, 1)`` an
``UnsupportedOpError``. Cross-compiled for sm_90 at the benchmark shapes (not timed: no GPU time
was left), the defaults, weakest first. ``roll_last_dim``: blocks [2] of whole 4096 rows at 8 warps
(8192 programs), 16-byte loads and stores, 123 registers (48 predicted), no spill, but the roll is
a register ``tl.gather`` of the 4096-wide row that lowers to 16384 ``shfl.sync.idx`` a thread in
straight-line code (1.1e9 warp shuffles in all, milliseconds at one a clock an SM, against about
0.06 ms of memory traffic; ``take_along_last_dim``'s register gather of the same count, spilling,
ran 208 ms at 32x the programs). The same roll as a memory gather, ``x[tm, (tn.index + n - shift) %
n]``, defaults to [32, 128] at 4 warps, 32 registers, no shuffles, the shifted columns as scalar
``ld.global.b16`` (32 a thread), 16-byte stores; as two constant slices (``out[tm, shift:] = x[tm,
:n - shift]`` and the rest) loads and stores are all scalar 2-byte (33 of each a thread).
``reverse_cumsum_rows``: one 4096 row a program at 4 warps, 16-byte loads and stores, 164 registers
(80 predicted), no spill, the two flips two such gathers (32774 shuffles a thread, plus the
scan's); ``tc.associative_scan(add, x[tb, :], 1, reverse=True)`` (docs/patterns.md's backward
recurrence) compiles to the same code (flip, scan, flip), while the suffix sum written as ``sum(x,
keepdim) - cumsum(x) + x`` needs 64 registers and 55 shuffles. ``unfold_1d_k4``: blocks [16, 16,
32] of (batch, channel, window) at 8 warps (2048 programs), 180 registers where 32 are predicted
(one program an SM), the four shifted loads all scalar ``ld.global.b16`` (128 a thread, k = 0 too:
the joined [.., 32, 4] store gives each thread one window's four values, and the loads take that
layout; so too at L = 4099, where no window mask is needed, at 108 registers), the windows stored
as 8-byte vectors (32 a thread) after 4 KB of shared-memory layout conversion; the same windows
written as ``torch.stack([w0, w1, w2, w3], dim=3)`` default to [8, 16, 16], 46 registers, 32 scalar
loads and 8 stores of 8 bytes a thread, and the signal viewed as rows [B C, L] ([32, 128] at 4
warps) spills 288 bytes at 96 registers. ``pixel_unshuffle_2x``: [32, 128] of (row, column) per
plane at 4 warps (4096 programs), 78 registers (32 predicted), each input row one 16-byte span load
split into its even and odd columns (4 KB of shared memory for the layout conversions), 16-byte
stores. ``grid_nearest_sample``: [8, 16, 64] of (channel, row, column) at 8 warps (4096 programs),
48 registers, the coordinates 16-byte loads (read once for 8 channels), the gather one scalar
``ld.global.b32`` an element (32 a thread), emitted inside a permute pair with its values brought
to the 16-byte stores through 4 KB of shared memory. ``index_add_rows``: [32, 128] at 4 warps (8192
programs), 54 registers (82 predicted), src 16-byte loads, the adds vector atomics
``atom.global.gpu.relaxed.add.v4.f32`` (8 a thread), the ids as replicated 8-byte loads; the copy
of base is torch's. ``masked_fill_rows_by_length``: [8, 8, 128] of (sequence, position, feature) at
8 warps (8192 programs), 32 registers, the x load masked by the keep condition (padded rows not
read) as 16-byte vectors, 16-byte stores. ``index_select_rows``: [4] rows at 8 warps (8192
programs), 31 registers, 16-byte loads and stores. Every default also compiles for gfx942.

Since this batch was written (session 30, not yet timed on a GPU): ``roll_last_dim``'s roll of
4096-element rows re-reads x at the rolled positions (``tile_gather.long_line``: 42 registers,
32 scalar loads, no shuffles on sm_90), and ``reverse_cumsum_rows``'s flips along 4096 (a power
of two) are ``tl.flip`` butterflies (56 registers, 448 shuffles a thread).
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Case, Inputs, gen, one_kernel_case, randint, randn

ROLL_SHIFT = 5  # roll_last_dim: positions each row moves to the right (circularly)
WINDOW = 4  # unfold_1d_k4: the window's length (step 1)
MAX_JITTER = 4  # grid_nearest_sample: the coordinates' largest offset from a plain rescale


# --------------------------------------------------------------------------- index_select rows


@tc.kernel(static_shapes=True)
def index_select_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x.index_select(0, idx) of a table x [V, D] bf16 and row ids idx [N] int64 (gathering the
    rows of a vocabulary or memory bank for a batch of ids): [N, D] bf16. Each program takes a
    block of ids and copies their whole rows."""
    (n,) = idx.size()
    d = x.size(1)
    out = torch.empty([n, d], dtype=x.dtype, device=x.device)
    for tn in tc.tile(n):
        out[tn, :] = x[idx[tn], :]
    return out


def _index_select_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (V, D, N)``: the table bf16 randn, N row ids uniform in [0, V) (repeats)."""
    v, d, n = shape
    g = gen(seed)
    return randn((v, d), torch.bfloat16, device, g), randint(0, v, (n,), device, g)


def index_select_rows_reference(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return x.index_select(0, idx)


# --------------------------------------------------------------------------- roll last dim


@tc.kernel(static_shapes=True)
def roll_last_dim(x: torch.Tensor, shift: int) -> torch.Tensor:
    """torch.roll(x, shift, dims=-1) of x [M, N] bf16 (a circular time shift of each signal, or
    of each row of a periodic feature map): [M, N] bf16. Each program takes a block of whole
    rows and rolls the row tile."""
    m, _ = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.roll(x[tm, :], shifts=shift, dims=-1)
    return out


def _matrix_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (M, N)``: bf16 randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def roll_last_dim_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.roll(x, shifts=ROLL_SHIFT, dims=-1)


# --------------------------------------------------------------------------- pixel unshuffle


@tc.kernel(static_shapes=True)
def pixel_unshuffle_2x(x: torch.Tensor) -> torch.Tensor:
    """F.pixel_unshuffle(x, 2) of x [B, C, H, W] bf16 (space-to-depth before a strided stem, or
    a downsampling without loss): out [B, 4 C, H / 2, W / 2] with out[b, 4 c + 2 i + j, h, w]
    = x[b, c, 2 h + i, 2 w + j]. The input is viewed as [B C, H / 2, 2, W / 2, 2] and the
    output as [B C, 2, 2, H / 2, W / 2] (the offsets i, j as dims of 2, indexed with
    constants); each program fills one (b, c) plane's four outputs for a block of (h, w)."""
    b, c, h, w = x.size()
    h2, w2 = h // 2, w // 2
    xv = x.view(b * c, h2, 2, w2, 2)
    out = torch.empty([b * c, 2, 2, h2, w2], dtype=x.dtype, device=x.device)
    for tbc, th, tw in tc.tile([b * c, h2, w2], block_size=[1, None, None]):
        out[tbc.begin, 0, 0, th, tw] = xv[tbc.begin, th, 0, tw, 0]
        out[tbc.begin, 0, 1, th, tw] = xv[tbc.begin, th, 0, tw, 1]
        out[tbc.begin, 1, 0, th, tw] = xv[tbc.begin, th, 1, tw, 0]
        out[tbc.begin, 1, 1, th, tw] = xv[tbc.begin, th, 1, tw, 1]
    return out.view(b, 4 * c, h2, w2)


def _images_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, H, W)``: bf16 randn (H and W even)."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def pixel_unshuffle_2x_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pixel_unshuffle(x, 2)


# --------------------------------------------------------------------------- unfold, window 4


@tc.kernel(static_shapes=True)
def unfold_1d_k4(x: torch.Tensor) -> torch.Tensor:
    """x.unfold(-1, 4, 1) of x [B, C, L] bf16, materialized (the windows of a short causal
    convolution, or n-gram features of a signal): [B, C, L - 3, 4] bf16 with out[..., l, k] =
    x[..., l + k]. Each program takes a block of batches, channels and window starts and stores
    the windows' four elements, each a shifted load."""
    b, c, length = x.size()
    n_win = length - WINDOW + 1
    out = torch.empty([b, c, n_win, WINDOW], dtype=x.dtype, device=x.device)
    for tb, tch, tw in tc.tile([b, c, n_win]):
        for k in tc.static_range(WINDOW):
            out[tb, tch, tw, k] = x[tb, tch, tw.index + k]
    return out


def _signal_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, L)``: bf16 randn."""
    return (randn(shape, torch.bfloat16, device, gen(seed)),)


def unfold_1d_k4_reference(x: torch.Tensor) -> torch.Tensor:
    return x.unfold(-1, WINDOW, 1).contiguous()


# --------------------------------------------------------------------------- index_add rows


@tc.kernel(static_shapes=True)
def index_add_rows(base: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """base.index_add(0, idx, src) of a table base [V, D] fp32, row ids idx [N] int64 (with
    repeats) and rows src [N, D] fp32 (a scatter-add of messages into their destination
    nodes, or of sparse gradient rows into a dense buffer): [V, D] fp32. The copy of base is
    made on the host; each program takes a block of src rows and columns and adds them into
    their rows atomically."""
    n, d = src.size()
    out = base.clone()
    for tn, td in tc.tile([n, d]):
        tc.atomic_add(out, [idx[tn], td], src[tn, td])
    return out


def _index_add_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (V, D, N)``: base and src fp32 randn, N row ids uniform in [0, V)."""
    v, d, n = shape
    g = gen(seed)
    base = randn((v, d), torch.float32, device, g)
    idx = randint(0, v, (n,), device, g)
    return base, idx, randn((n, d), torch.float32, device, g)


def index_add_rows_reference(
    base: torch.Tensor, idx: torch.Tensor, src: torch.Tensor
) -> torch.Tensor:
    return base.index_add(0, idx, src)


# --------------------------------------------------------------------------- nearest resampling


@tc.kernel(static_shapes=True)
def grid_nearest_sample(x: torch.Tensor, ys: torch.Tensor, xs: torch.Tensor) -> torch.Tensor:
    """Nearest-neighbour resampling of NCHW maps x [B, C, H, W] fp32 at integer source
    coordinates ys, xs [B, Ho, Wo] int32 (a flow warp or a resize whose coordinates were
    rounded beforehand), clamped to the image: out [B, C, Ho, Wo] fp32 with out[b, c, i, j] =
    x[b, c, clamp(ys[b, i, j], 0, H - 1), clamp(xs[b, i, j], 0, W - 1)]. Each program takes
    one batch's block of channels, output rows and output columns, and gathers from the
    channels' maps at the block's coordinates."""
    b, c, h, w = x.size()
    _, ho, wo = ys.size()
    out = torch.empty([b, c, ho, wo], dtype=x.dtype, device=x.device)
    for tb, tch, ti, tj in tc.tile([b, c, ho, wo], block_size=[1, None, None, None]):
        yy = torch.clamp(ys[tb.begin, ti, tj], 0, h - 1)
        xx = torch.clamp(xs[tb.begin, ti, tj], 0, w - 1)
        out[tb.begin, tch, ti, tj] = x[tb.begin, tch, yy, xx]
    return out


def _grid_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, C, H, W, Ho, Wo)``: maps fp32 randn; coordinates a plain rescale of the
    output grid onto the input (i H / Ho, j W / Wo) plus an int offset in [-MAX_JITTER,
    MAX_JITTER] per pixel and axis (a small flow), so that those near the borders fall
    outside the image and clamp. int32."""
    b, c, h, w, ho, wo = shape
    g = gen(seed)
    x = randn((b, c, h, w), torch.float32, device, g)
    rows = (torch.arange(ho, device=device) * h // ho)[None, :, None]
    cols = (torch.arange(wo, device=device) * w // wo)[None, None, :]
    dy = randint(-MAX_JITTER, MAX_JITTER + 1, (b, ho, wo), device, g)
    dx = randint(-MAX_JITTER, MAX_JITTER + 1, (b, ho, wo), device, g)
    return x, (rows + dy).to(torch.int32), (cols + dx).to(torch.int32)


def grid_nearest_sample_reference(
    x: torch.Tensor, ys: torch.Tensor, xs: torch.Tensor
) -> torch.Tensor:
    b, c, h, w = x.shape
    _, ho, wo = ys.shape
    flat = ys.long().clamp(0, h - 1) * w + xs.long().clamp(0, w - 1)
    picked = x.reshape(b, c, h * w).gather(2, flat.reshape(b, 1, ho * wo).expand(b, c, -1))
    return picked.reshape(b, c, ho, wo)


# --------------------------------------------------------------------------- reverse cumsum


@tc.kernel(static_shapes=True)
def reverse_cumsum_rows(x: torch.Tensor) -> torch.Tensor:
    """torch.flip(torch.cumsum(torch.flip(x, [-1]), -1), [-1]) of x [B, L] fp32: out[b, t] =
    x[b, t] + ... + x[b, L - 1], the suffix sums of each row (undiscounted returns of rewards,
    or a reverse-time accumulation). Each program takes a block of whole rows and flips,
    scans and flips the row tile."""
    b, _ = x.size()
    out = torch.empty_like(x)
    for tb in tc.tile(b):
        xt = x[tb, :]
        out[tb, :] = torch.flip(torch.cumsum(torch.flip(xt, [1]), dim=1), [1])
    return out


def _rewards_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, L)``: fp32 randn."""
    return (randn(shape, torch.float32, device, gen(seed)),)


def reverse_cumsum_rows_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.flip(torch.cumsum(torch.flip(x, [-1]), -1), [-1])


# --------------------------------------------------------------------------- padding mask


@tc.kernel(static_shapes=True)
def masked_fill_rows_by_length(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """x [B, T, D] bf16 with the positions t >= lengths[b] set to 0 (lengths [B] int64: the
    padding of a right-padded batch of sequences zeroed before a pooling or a loss): [B, T, D]
    bf16. Each program takes a block of sequences, positions and features and keeps the
    positions before their sequence's length."""
    b, t, d = x.size()
    out = torch.empty_like(x)
    for tb, tt, td in tc.tile([b, t, d]):
        keep = tt.index[None, :] < lengths[tb][:, None]
        out[tb, tt, td] = torch.where(keep[:, :, None], x[tb, tt, td], 0.0)
    return out


def _padded_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, T, D)``: x bf16 randn, lengths uniform in [1, T] int64."""
    b, t, d = shape
    g = gen(seed)
    return randn((b, t, d), torch.bfloat16, device, g), randint(1, t + 1, (b,), device, g)


def masked_fill_rows_by_length_reference(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    positions = torch.arange(x.shape[1], device=x.device)
    pad = positions[None, :, None] >= lengths[:, None, None]
    return x.masked_fill(pad, 0.0)


CASES = [
    one_kernel_case(
        "index_select_rows",
        index_select_rows,
        _index_select_inputs,
        index_select_rows_reference,
        ((65536, 2048, 32768),),  # 134 MB gathered, 134 MB written
        ((50, 37, 20), (7, 130, 33)),
        1e-6,  # a copy: exact
    ),
    Case(
        name="roll_last_dim",
        kernels=(roll_last_dim,),
        make_inputs=_matrix_inputs,
        reference=roll_last_dim_reference,
        run=lambda ks, inp: ks["roll_last_dim"](*inp, ROLL_SHIFT),
        gpu_shapes=((16384, 4096),),  # 134 MB each way
        cpu_shapes=((37, 100), (5, 3)),
        atol=1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "pixel_unshuffle_2x",
        pixel_unshuffle_2x,
        _images_inputs,
        pixel_unshuffle_2x_reference,
        ((8, 128, 256, 256),),  # 134 MB each way
        ((2, 3, 10, 14), (1, 5, 6, 38)),
        1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "unfold_1d_k4",
        unfold_1d_k4,
        _signal_inputs,
        unfold_1d_k4_reference,
        ((16, 256, 4096),),  # 34 MB read, 134 MB written
        ((2, 3, 37), (3, 5, 4)),
        1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "index_add_rows",
        index_add_rows,
        _index_add_inputs,
        index_add_rows_reference,
        ((32768, 1024, 32768),),  # base 134 MB copied, src 134 MB added (atomics)
        ((50, 37, 80), (7, 130, 33)),
        1e-5,  # sums of a few randn rows (|out| < 16) in another order: a few fp32 ulp
    ),
    one_kernel_case(
        "grid_nearest_sample",
        grid_nearest_sample,
        _grid_inputs,
        grid_nearest_sample_reference,
        ((8, 64, 128, 128, 256, 256),),  # 34 MB of maps gathered, 134 MB written, 4 MB coords
        ((2, 3, 9, 11, 13, 7), (1, 5, 20, 6, 10, 17)),
        1e-6,  # a copy: exact
    ),
    one_kernel_case(
        "reverse_cumsum_rows",
        reverse_cumsum_rows,
        _rewards_inputs,
        reverse_cumsum_rows_reference,
        ((8192, 4096),),  # 134 MB each way
        ((37, 100), (5, 300)),
        1e-4,  # suffix sums of up to 300 randn (|sum| < 60) in another order: fp32 ulp there
        # 4e-6, a few tens of ulp at most
    ),
    one_kernel_case(
        "masked_fill_rows_by_length",
        masked_fill_rows_by_length,
        _padded_inputs,
        masked_fill_rows_by_length_reference,
        ((16, 4096, 1024),),  # 134 MB each way (about half of it padding, not read)
        ((3, 37, 20), (5, 7, 130)),
        1e-6,  # a copy or a zero: exact
    ),
]

"""Group-norm passes over channels-last [4, 16384, 320] bf16 (32 groups of 10 channels), three
hand-written Triton layouts of one tile (session 52, issue 11's group_norm_silu_nhwc row):

* ``pad``: [rows, groups, 16] with 10 of 16 lanes used (the code tilecraft generates);
* ``flat``: [rows, P] contiguous lanes, per-group sums by a segmented sum after the loop and
  per-group values spread to lanes once before it;
* ``gather``: contiguous 16-byte loads repacked to [rows, groups, 16] by ``tl.gather``.

For each: a statistics pass (a sum per group) and the normalize-and-store pass, over block
sizes, warps and splits, timed with ``triton.testing.do_bench`` (median) beside a copy of x.
``DEV=cpu TRITON_INTERPRET=1`` checks the kernels' values on a small shape.
Results: ``benchmarks/results/group_layouts_s52_h100.md``."""

import functools
import os

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

DEV = os.environ.get("DEV", "cuda")
NI, HW, C, G = (1, 2048, 320, 32) if DEV == "cpu" else (4, 16384, 320, 32)
CG = C // G


@triton.jit
def pad_sum(
    x,
    part,
    HW: tl.constexpr,
    C: tl.constexpr,
    CG: tl.constexpr,
    NGB: tl.constexpr,
    B: tl.constexpr,
    BH: tl.constexpr,
    R: tl.constexpr,
    SPAN: tl.constexpr,
):
    img = tl.program_id(0) // NGB
    gb = tl.program_id(0) % NGB
    g = gb * B + tl.arange(0, B)
    r = tl.arange(0, R)
    acc = tl.zeros([BH, B, R], tl.float32)
    start = tl.program_id(1) * SPAN
    for h0 in tl.range(start, start + SPAN, BH):
        h = h0 + tl.arange(0, BH)
        v = tl.load(
            x + img * HW * C + h[:, None, None] * C + g[None, :, None] * CG + r[None, None, :],
            (r < CG)[None, None, :],
            other=0,
        ).to(tl.float32)
        acc += v
    s = tl.sum(tl.sum(acc, 2), 0)
    tl.store(
        part + (tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)) * B + tl.arange(0, B), s
    )


@triton.jit
def flat_sum(
    x,
    part,
    HW: tl.constexpr,
    C: tl.constexpr,
    CG: tl.constexpr,
    NGB: tl.constexpr,
    B: tl.constexpr,
    BH: tl.constexpr,
    P: tl.constexpr,
    SPAN: tl.constexpr,
):
    img = tl.program_id(0) // NGB
    gb = tl.program_id(0) % NGB
    lane = tl.arange(0, P)
    lmask = lane < B * CG
    acc = tl.zeros([BH, P], tl.float32)
    start = tl.program_id(1) * SPAN
    for h0 in tl.range(start, start + SPAN, BH):
        h = h0 + tl.arange(0, BH)
        v = tl.load(
            x + img * HW * C + h[:, None] * C + gb * B * CG + lane[None, :], lmask[None, :], other=0
        ).to(tl.float32)
        acc += v
    col = tl.sum(acc, 0)
    seg = (lane // CG)[None, :] == tl.arange(0, B)[:, None]
    s = tl.sum(tl.where(seg, col[None, :], 0.0), 1)
    tl.store(
        part + (tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)) * B + tl.arange(0, B), s
    )


@triton.jit
def pad_norm(
    x,
    out,
    w,
    bias,
    mean,
    rstd,
    HW: tl.constexpr,
    C: tl.constexpr,
    CG: tl.constexpr,
    NGB: tl.constexpr,
    B: tl.constexpr,
    BH: tl.constexpr,
    R: tl.constexpr,
    SPAN: tl.constexpr,
):
    img = tl.program_id(0) // NGB
    gb = tl.program_id(0) % NGB
    g = gb * B + tl.arange(0, B)
    r = tl.arange(0, R)
    rm = r < CG
    m = tl.load(mean + img * (NGB * B) + g)
    rs = tl.load(rstd + img * (NGB * B) + g)
    ww = tl.load(w + g[:, None] * CG + r[None, :], rm[None, :], other=0).to(tl.float32)[None, :, :]
    bb = tl.load(bias + g[:, None] * CG + r[None, :], rm[None, :], other=0).to(tl.float32)[
        None, :, :
    ]
    start = tl.program_id(1) * SPAN
    for h0 in tl.range(start, start + SPAN, BH):
        h = h0 + tl.arange(0, BH)
        off = img * HW * C + h[:, None, None] * C + g[None, :, None] * CG + r[None, None, :]
        v = tl.load(x + off, rm[None, None, :], other=0).to(tl.float32)
        y = (v - m[None, :, None]) * rs[None, :, None] * ww + bb
        tl.store(out + off, (y * tl.sigmoid(y)).to(tl.bfloat16), rm[None, None, :])


@triton.jit
def flat_norm(
    x,
    out,
    w,
    bias,
    mean,
    rstd,
    HW: tl.constexpr,
    C: tl.constexpr,
    CG: tl.constexpr,
    NGB: tl.constexpr,
    B: tl.constexpr,
    BH: tl.constexpr,
    P: tl.constexpr,
    SPAN: tl.constexpr,
):
    img = tl.program_id(0) // NGB
    gb = tl.program_id(0) % NGB
    lane = tl.arange(0, P)
    lmask = lane < B * CG
    g = gb * B + tl.arange(0, B)
    m = tl.load(mean + img * (NGB * B) + g)
    rs = tl.load(rstd + img * (NGB * B) + g)
    seg = (lane // CG)[None, :] == tl.arange(0, B)[:, None]
    ml = tl.sum(tl.where(seg, m[:, None], 0.0), 0)
    rl = tl.sum(tl.where(seg, rs[:, None], 0.0), 0)
    ww = tl.load(w + gb * B * CG + lane, lmask, other=0).to(tl.float32)
    bb = tl.load(bias + gb * B * CG + lane, lmask, other=0).to(tl.float32)
    start = tl.program_id(1) * SPAN
    for h0 in tl.range(start, start + SPAN, BH):
        h = h0 + tl.arange(0, BH)
        off = img * HW * C + h[:, None] * C + gb * B * CG + lane[None, :]
        v = tl.load(x + off, lmask[None, :], other=0).to(tl.float32)
        y = (v - ml[None, :]) * rl[None, :] * ww[None, :] + bb[None, :]
        tl.store(out + off, (y * tl.sigmoid(y)).to(tl.bfloat16), lmask[None, :])


@triton.jit
def _repacked(x, base, rows, B: tl.constexpr, CG: tl.constexpr, R: tl.constexpr, BH: tl.constexpr):
    """[BH, B, R] tile of x[rows, base + b*CG + r] read as contiguous flat rows + a gather."""
    lane = tl.arange(0, B * R)
    flat = tl.load(x + base + rows[:, None] + lane[None, :], (lane < B * CG)[None, :], other=0)
    src = (lane // R) * CG + lane % R  # lane (b, r) <- flat position b*CG + r
    src = tl.minimum(src, B * R - 1)
    picked = tl.gather(flat, tl.broadcast_to(src[None, :], [BH, B * R]), axis=1)
    return tl.reshape(picked, [BH, B, R])


@triton.jit
def gat_sum(
    x,
    part,
    HW: tl.constexpr,
    C: tl.constexpr,
    CG: tl.constexpr,
    NGB: tl.constexpr,
    B: tl.constexpr,
    BH: tl.constexpr,
    R: tl.constexpr,
    SPAN: tl.constexpr,
):
    img = tl.program_id(0) // NGB
    gb = tl.program_id(0) % NGB
    r = tl.arange(0, R)
    acc = tl.zeros([BH, B, R], tl.float32)
    start = tl.program_id(1) * SPAN
    for h0 in tl.range(start, start + SPAN, BH):
        h = h0 + tl.arange(0, BH)
        v = _repacked(x, img * HW * C + gb * B * CG, h * C, B, CG, R, BH).to(tl.float32)
        acc += tl.where((r < CG)[None, None, :], v, 0.0)
    s = tl.sum(tl.sum(acc, 2), 0)
    tl.store(
        part + (tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)) * B + tl.arange(0, B), s
    )


@triton.jit
def gat_norm(
    x,
    out,
    w,
    bias,
    mean,
    rstd,
    HW: tl.constexpr,
    C: tl.constexpr,
    CG: tl.constexpr,
    NGB: tl.constexpr,
    B: tl.constexpr,
    BH: tl.constexpr,
    R: tl.constexpr,
    SPAN: tl.constexpr,
):
    img = tl.program_id(0) // NGB
    gb = tl.program_id(0) % NGB
    g = gb * B + tl.arange(0, B)
    r = tl.arange(0, R)
    rm = r < CG
    m = tl.load(mean + img * (NGB * B) + g)
    rs = tl.load(rstd + img * (NGB * B) + g)
    ww = tl.load(w + g[:, None] * CG + r[None, :], rm[None, :], other=0).to(tl.float32)[None, :, :]
    bb = tl.load(bias + g[:, None] * CG + r[None, :], rm[None, :], other=0).to(tl.float32)[
        None, :, :
    ]
    lane = tl.arange(0, B * R)
    back = (lane // CG) * R + lane % CG  # flat position l <- lane (l // CG, l % CG)
    back = tl.minimum(back, B * R - 1)
    start = tl.program_id(1) * SPAN
    base = img * HW * C + gb * B * CG
    for h0 in tl.range(start, start + SPAN, BH):
        h = h0 + tl.arange(0, BH)
        v = _repacked(x, base, h * C, B, CG, R, BH).to(tl.float32)
        y = (v - m[None, :, None]) * rs[None, :, None] * ww + bb
        y = (y * tl.sigmoid(y)).to(tl.bfloat16)
        flat = tl.gather(
            tl.reshape(y, [BH, B * R]), tl.broadcast_to(back[None, :], [BH, B * R]), axis=1
        )
        tl.store(out + base + h[:, None] * C + lane[None, :], flat, (lane < B * CG)[None, :])


def _timed(kern, grid, args, consts, warps, check):  # type: ignore[no-untyped-def]
    """(median ms, values right) of one launch of ``kern``; None where it fails to compile."""
    launch = functools.partial(kern[grid], *args, *consts, num_warps=warps)
    try:
        launch()
        ok = check()
        bench = do_bench if DEV == "cuda" else (lambda f, return_mode=None: (f(), 1.0)[1])
        return bench(launch, return_mode="median"), ok
    except Exception as exc:  # noqa: BLE001  (a config that fails to compile is reported)
        print("ERR", kern.__name__, consts, warps, str(exc)[:100])
        return None


def main() -> None:
    torch.manual_seed(0)
    x = (torch.randn(NI, HW, C, device=DEV) + 0.5).to(torch.bfloat16)
    w = torch.randn(C, device=DEV).to(torch.bfloat16)
    bias = torch.randn(C, device=DEV).to(torch.bfloat16)
    ref_sum = x.float().view(NI, HW, G, CG).sum(dim=(1, 3))
    mean = ref_sum.flatten() / (HW * CG)
    rstd = torch.rand(NI * G, device=DEV) + 0.5
    xg = x.float().view(NI, HW, G, CG)
    y = (xg - mean.view(NI, 1, G, 1)) * rstd.view(NI, 1, G, 1)
    y = y * w.float().view(G, CG) + bias.float().view(G, CG)
    ref_out = (y * torch.sigmoid(y)).to(torch.bfloat16).view(NI, HW, C)
    nbytes = x.numel() * 2
    if DEV == "cuda":
        copy = do_bench(lambda: x.clone(), return_mode="median")
        print(f"copy (r+w) {copy * 1e3:.1f} us = {2 * nbytes / copy / 1e6:.0f} GB/s")
    rows = []
    for b in (4, 8) if DEV == "cuda" else (4,):
        for bh in (64, 128):
            for warps in (4, 8) if DEV == "cuda" else (4,):
                for split in (8, 16):
                    rows += _one_tile(x, w, bias, mean, rstd, ref_sum, ref_out, b, bh, warps, split)
    for kind in ("sum", "norm"):
        for name in ("pad", "flat", "gather"):
            chosen = sorted((r for r in rows if r[0] == kind and r[1] == name), key=lambda r: r[6])
            print(f"== {kind} {name}: best 5 of {len(chosen)}")
            moved = nbytes * (1 if kind == "sum" else 2)
            for r in chosen[:5]:
                b, bh, warps, split, ms, ok = r[2], r[3], r[4], r[5], r[6], r[7]
                print(
                    f"  B={b} BH={bh} warps={warps} split={split}  {ms * 1e3:.1f} us  "
                    f"{moved / ms / 1e6:.0f} GB/s ok={ok}"
                )
        for r in rows:
            if r[0] == kind and r[2:6] == (4, 128, 8, 8):  # tilecraft's tile (at 8 warps)
                print(f"  [4, 128] tile, 8 warps, split 8: {r[1]} {r[6] * 1e3:.1f} us")


def _one_tile(x, w, bias, mean, rstd, ref_sum, ref_out, b, bh, warps, split):  # type: ignore[no-untyped-def]
    ngb, span = G // b, HW // split
    if span % bh:
        return []
    p = triton.next_power_of_2(b * CG)
    grid = (NI * ngb, split)
    rows = []
    part = torch.empty(split * NI * ngb * b, device=DEV)
    for name, kern, lanes in (("pad", pad_sum, 16), ("flat", flat_sum, p), ("gather", gat_sum, 16)):
        consts = (HW, C, CG, ngb, b, bh, lanes, span)
        check = lambda: torch.allclose(part.view(split, NI, G).sum(0), ref_sum, rtol=1e-3, atol=1.0)  # noqa: E731
        if (found := _timed(kern, grid, (x, part), consts, warps, check)) is not None:
            rows.append(("sum", name, b, bh, warps, split, *found))
    out = torch.empty_like(x)
    for name, kern, lanes in (
        ("pad", pad_norm, 16),
        ("flat", flat_norm, p),
        ("gather", gat_norm, 16),
    ):
        consts = (HW, C, CG, ngb, b, bh, lanes, span)
        check = lambda: (out.float() - ref_out.float()).abs().max().item() < 0.1  # noqa: E731
        found = _timed(kern, grid, (x, out, w, bias, mean, rstd), consts, warps, check)
        if found is not None:
            rows.append(("norm", name, b, bh, warps, split, *found))
    return rows


if __name__ == "__main__":
    main()

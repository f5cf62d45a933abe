"""Held-out kernels written from the docs only, session 28, third batch (see :mod:`.heldout_rows`
for why held-out kernels exist), all on layouts with a tiny or non-power-of-two contiguous dim:
RGB to grayscale of channels-last images (the three channels indexed with constants, as
``docs/patterns.md`` does for pairs); a per-head bias [H, 64] added to [B, H, S, 64]; YOLO's box
decode of [N, 85] predictions (constant column slices 0:2, 2:4 and 4:, the last 81 wide); unit
quaternions ([N, 4] rows normalized); the IoU of paired boxes ([N, 4] each, one value a row);
attention probabilities averaged over the heads (a reduction over a middle dim of 16); and
channels-last RGB images to channels-first (a [pixels, 3] tile stored transposed). Each comes
with its eager reference (see :mod:`.case`).

Notes: nothing the kernels use was unsupported. Cross-compiled for sm_90 at the benchmark shapes,
the defaults load these narrow dims one element a thread at a time: ``rgb_to_gray_nhwc``'s three
and ``bbox_iou_pairs``' four constant-indexed loads of one row stay separate strided loads
(``ld.global.b16`` / ``ld.global.b32``; ``docs/patterns.md``'s merge into one load is for a last
dim of 2); ``quaternion_normalize``'s whole-row ``q[tn, :]`` tile [32, 4] fp32 is laid out one
element a thread (threadsPerWarp [8, 4]: ``ld.global.b32``, where each row is one 16-byte
vector) with 32 rows, 512 bytes, a program; ``nhwc3_to_nchw`` pads the 3 channels to 4 and
moves b16 elements one at a time both ways through a [32, 4] tile; ``yolo_box_decode`` pads the
81-wide slice to 128 and takes 128 registers a thread at blocks [32] (the 340-byte rows allow no
vector loads). ``mean_over_heads`` loads its [16, 16, 32] tile (all heads) with 16-byte loads.
"""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels.case import Inputs, gen, one_kernel_case, randint, randn

GRAY = (0.299, 0.587, 0.114)  # rgb_to_gray_nhwc: ITU-R BT.601 luma weights
YOLO_COLS = 85  # yolo_box_decode: x, y, w, h, objectness and 80 class scores
NORM_EPS = 1e-12  # quaternion_normalize: F.normalize's eps
IOU_EPS = 1e-7  # bbox_iou_pairs: added to the union (torchvision-style guard)


# --------------------------------------------------------------------------- RGB to gray


@tc.kernel(static_shapes=True)
def rgb_to_gray_nhwc(img: torch.Tensor) -> torch.Tensor:
    """Grayscale of channels-last images: img [B, H, W, 3] bf16 gives [B, H, W] bf16 with
    gray = 0.299 R + 0.587 G + 0.114 B in fp32. The pixels are viewed as [B H W, 3] and each
    program takes a block of pixels, the three channels indexed with constants."""
    b, h, w, _ = img.size()
    px = img.view(b * h * w, 3)
    out = torch.empty([b * h * w], dtype=img.dtype, device=img.device)
    for tp in tc.tile(b * h * w):
        r = px[tp, 0].to(torch.float32)
        g = px[tp, 1].to(torch.float32)
        bl = px[tp, 2].to(torch.float32)
        out[tp] = (GRAY[0] * r + GRAY[1] * g + GRAY[2] * bl).to(out.dtype)
    return out.view(b, h, w)


def _image_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, W)``: an 8-bit image scaled to [0, 1] (k / 255) as bf16 [B, H, W, 3]."""
    b, h, w = shape
    pixels = randint(0, 256, (b, h, w, 3), device, gen(seed))
    return ((pixels.to(torch.float32) / 255.0).to(torch.bfloat16),)


def rgb_to_gray_nhwc_reference(img: torch.Tensor) -> torch.Tensor:
    x = img.float()
    gray = GRAY[0] * x[..., 0] + GRAY[1] * x[..., 1] + GRAY[2] * x[..., 2]
    return gray.to(img.dtype)


# --------------------------------------------------------------------------- per-head bias


@tc.kernel(static_shapes=True)
def per_head_bias_add(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x [B, H, S, D] bf16 plus a per-head bias [H, D] bf16 broadcast over the batch and the
    sequence (fp32 add, bf16 out). Each program takes a block of one (b, h)'s rows with their
    whole D."""
    b, h, s, _ = x.size()
    out = torch.empty_like(x)
    for tb, th, ts in tc.tile([b, h, s], block_size=[1, 1, None]):
        xt = x[tb.begin, th.begin, ts, :].to(torch.float32)
        bt = bias[th.begin, :].to(torch.float32)
        out[tb.begin, th.begin, ts, :] = (xt + bt[None, :]).to(out.dtype)
    return out


def _head_bias_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S, D)``: x bf16 randn and a bias [H, D] bf16 of 0.5 randn."""
    b, h, s, d = shape
    g = gen(seed)
    x = randn((b, h, s, d), torch.bfloat16, device, g)
    bias = (0.5 * randn((h, d), torch.float32, device, g)).to(torch.bfloat16)
    return x, bias


def per_head_bias_add_reference(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return (x.float() + bias.float()[None, :, None, :]).to(x.dtype)


# --------------------------------------------------------------------------- YOLO box decode


@tc.kernel(static_shapes=True)
def yolo_box_decode(pred: torch.Tensor, grid: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """YOLO's decode of raw predictions pred [N, 85] fp32 (x, y, w, h, objectness, 80 class
    logits) with each row's grid cell [N, 2] and anchor size [N, 2] (fp32): the box centre is
    sigmoid(x, y) + cell, its size exp(w, h) * anchor, the other 81 columns sigmoid. Each
    program takes a block of rows, the three column ranges as constant slices."""
    n, _ = pred.size()
    out = torch.empty_like(pred)
    for tn in tc.tile(n):
        out[tn, 0:2] = torch.sigmoid(pred[tn, 0:2]) + grid[tn, :]
        out[tn, 2:4] = torch.exp(pred[tn, 2:4]) * anchors[tn, :]
        out[tn, 4:] = torch.sigmoid(pred[tn, 4:])
    return out


def _yolo_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)`` rows: predictions 2 randn (w, h 0.5 randn, as a trained head's stay
    near 0), grid cells integers in [0, 80) and anchors 40 exp(0.7 randn) pixels."""
    (n,) = shape
    g = gen(seed)
    pred = 2 * randn((n, YOLO_COLS), torch.float32, device, g)
    scale = torch.ones(YOLO_COLS, device=device)
    scale[2:4] = 0.25
    grid = randint(0, 80, (n, 2), device, g).to(torch.float32)
    anchors = 40 * torch.exp(0.7 * randn((n, 2), torch.float32, device, g))
    return pred * scale, grid, anchors


def yolo_box_decode_reference(
    pred: torch.Tensor, grid: torch.Tensor, anchors: torch.Tensor
) -> torch.Tensor:
    xy = torch.sigmoid(pred[:, 0:2]) + grid
    wh = torch.exp(pred[:, 2:4]) * anchors
    return torch.cat([xy, wh, torch.sigmoid(pred[:, 4:])], dim=1)


# --------------------------------------------------------------------------- quaternion normalize


@tc.kernel(static_shapes=True)
def quaternion_normalize(q: torch.Tensor) -> torch.Tensor:
    """Unit quaternions: each row of q [N, 4] fp32 divided by its length (F.normalize: the
    length clamped at 1e-12). Each program takes a block of whole rows."""
    n, _ = q.size()
    out = torch.empty_like(q)
    for tn in tc.tile(n):
        v = q[tn, :]
        norm = torch.sqrt(torch.sum(v * v, dim=-1, keepdim=True))
        out[tn, :] = v / torch.clamp(norm, min=NORM_EPS)
    return out


def _quat_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: q [N, 4] fp32 randn times a per-row length in (0.1, 10) (a rotation
    drifted off the unit sphere by integration, or a raw network output)."""
    (n,) = shape
    g = gen(seed)
    q = randn((n, 4), torch.float32, device, g)
    return (q * torch.exp(randn((n, 1), torch.float32, device, g)),)


def quaternion_normalize_reference(q: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(q, dim=-1, eps=NORM_EPS)


# --------------------------------------------------------------------------- paired IoU


@tc.kernel(static_shapes=True)
def bbox_iou_pairs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The IoU of paired boxes: a, b [N, 4] fp32 as (x1, y1, x2, y2) give iou [N] fp32 of row
    i of a with row i of b (a box-regression loss's IoU term). The four coordinates are
    indexed with constants; each program takes a block of rows."""
    n, _ = a.size()
    iou = torch.empty([n], dtype=torch.float32, device=a.device)
    for tn in tc.tile(n):
        ax1, ay1, ax2, ay2 = a[tn, 0], a[tn, 1], a[tn, 2], a[tn, 3]
        bx1, by1, bx2, by2 = b[tn, 0], b[tn, 1], b[tn, 2], b[tn, 3]
        iw = torch.clamp(torch.minimum(ax2, bx2) - torch.maximum(ax1, bx1), min=0.0)
        ih = torch.clamp(torch.minimum(ay2, by2) - torch.maximum(ay1, by1), min=0.0)
        inter = iw * ih
        union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
        iou[tn] = inter / (union + IOU_EPS)
    return iou


def _box_pair_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (N,)``: boxes a with centres in a 640 x 640 image and sizes 60 exp(0.5 randn),
    and boxes b near them (centres moved by 0.4 of the size, sizes scaled by exp(0.3 randn)):
    predictions paired with their targets, most overlapping, some not at all."""
    (n,) = shape
    g = gen(seed)
    centre = 320 + 150 * randn((n, 2), torch.float32, device, g)
    size = 60 * torch.exp(0.5 * randn((n, 2), torch.float32, device, g))
    centre_b = centre + 0.4 * size * randn((n, 2), torch.float32, device, g)
    size_b = size * torch.exp(0.3 * randn((n, 2), torch.float32, device, g))
    a = torch.cat([centre - size / 2, centre + size / 2], dim=1)
    b = torch.cat([centre_b - size_b / 2, centre_b + size_b / 2], dim=1)
    return a, b


def bbox_iou_pairs_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    lt = torch.maximum(a[:, :2], b[:, :2])
    rb = torch.minimum(a[:, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / (area_a + area_b - inter + IOU_EPS)


# --------------------------------------------------------------------------- mean over heads


@tc.kernel(static_shapes=True)
def mean_over_heads(probs: torch.Tensor) -> torch.Tensor:
    """Attention probabilities probs [B, H, S, S] bf16 averaged over the heads (an attention
    map to plot, or attention rollout): [B, S, S] bf16, summed in fp32. Each program takes one
    batch's (query, key) block with all H heads (the `:` makes H the reduced dim)."""
    b, _, s, _ = probs.size()
    out = torch.empty([b, s, s], dtype=probs.dtype, device=probs.device)
    for tb, ti, tj in tc.tile([b, s, s], block_size=[1, None, None]):
        p = probs[tb.begin, :, ti, tj].to(torch.float32)
        out[tb.begin, ti, tj] = torch.mean(p, dim=0).to(out.dtype)
    return out


def _probs_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, S)``: softmax over the keys of 2 randn scores, as bf16 [B, H, S, S]."""
    b, h, s = shape
    scores = 2 * randn((b, h, s, s), torch.float32, device, gen(seed))
    return (torch.softmax(scores, dim=-1).to(torch.bfloat16),)


def mean_over_heads_reference(probs: torch.Tensor) -> torch.Tensor:
    return probs.float().mean(dim=1).to(probs.dtype)


# --------------------------------------------------------------------------- NHWC to NCHW


@tc.kernel(static_shapes=True)
def nhwc3_to_nchw(img: torch.Tensor) -> torch.Tensor:
    """Channels-last RGB images img [B, H, W, 3] bf16 to channels-first [B, 3, H, W] (what a
    decoded image batch goes through before a conv net). Viewed as [B, H W, 3] in and
    [B, 3, H W] out, each program loads a block of pixels with their 3 channels and stores it
    transposed."""
    b, h, w, c = img.size()
    src = img.view(b, h * w, c)
    out = torch.empty([b, c, h * w], dtype=img.dtype, device=img.device)
    for tb, tp in tc.tile([b, h * w], block_size=[1, None]):
        out[tb.begin, :, tp] = src[tb.begin, tp, :].t()
    return out.view(b, c, h, w)


def nhwc3_to_nchw_reference(img: torch.Tensor) -> torch.Tensor:
    return img.permute(0, 3, 1, 2).contiguous()


def _randn_image_inputs(shape: tuple[int, ...], device: str, seed: int) -> Inputs:
    """``shape = (B, H, W)``: a normalized image batch, bf16 randn [B, H, W, 3]."""
    b, h, w = shape
    return (randn((b, h, w, 3), torch.bfloat16, device, gen(seed)),)


CASES = [
    one_kernel_case(
        "rgb_to_gray_nhwc",
        rgb_to_gray_nhwc,
        _image_inputs,
        rgb_to_gray_nhwc_reference,
        ((64, 512, 512),),
        ((2, 7, 9), (1, 13, 33)),
        2.0**-8,  # bf16 out in [0, 1]: one ulp where fp32 sums in another order round otherwise
    ),
    one_kernel_case(
        "per_head_bias_add",
        per_head_bias_add,
        _head_bias_inputs,
        per_head_bias_add_reference,
        ((8, 32, 2048, 64),),
        ((2, 3, 37, 64), (1, 5, 13, 40)),
        1e-6,  # one fp32 add rounded to bf16: exact
    ),
    one_kernel_case(
        "yolo_box_decode",
        yolo_box_decode,
        _yolo_inputs,
        yolo_box_decode_reference,
        ((32 * 25200,),),  # a batch of 32 at 640 x 640: 3 anchors x (80^2 + 40^2 + 20^2) cells
        ((37,), (300,)),
        1e-3,  # sizes below ~300 px at these shapes: an exp a few fp32 ulp away (3e-5 an ulp)
    ),
    one_kernel_case(
        "quaternion_normalize",
        quaternion_normalize,
        _quat_inputs,
        quaternion_normalize_reference,
        ((16 * 1024 * 1024,),),
        ((37,), (300,)),
        1e-6,  # unit vectors: a few fp32 ulp
    ),
    one_kernel_case(
        "bbox_iou_pairs",
        bbox_iou_pairs,
        _box_pair_inputs,
        bbox_iou_pairs_reference,
        ((16 * 1024 * 1024,),),
        ((37,), (300,)),
        1e-6,  # IoU in [0, 1]: a few fp32 ulp (a GPU divide is within 2 ulp)
    ),
    one_kernel_case(
        "mean_over_heads",
        mean_over_heads,
        _probs_inputs,
        mean_over_heads_reference,
        ((4, 16, 2048),),
        ((2, 3, 37), (1, 5, 70)),
        2.0**-8,  # bf16 out below 1: one ulp where an fp32 sum in another order rounds otherwise
    ),
    one_kernel_case(
        "nhwc3_to_nchw",
        nhwc3_to_nchw,
        _randn_image_inputs,
        nhwc3_to_nchw_reference,
        ((64, 512, 512),),
        ((2, 7, 9), (1, 13, 33)),
        1e-6,  # a copy: exact
    ),
]

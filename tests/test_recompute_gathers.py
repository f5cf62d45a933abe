"""Gathers along a long line of a computed tile recompute it at the gathered positions
(``frontend/recompute.py``): moving windows over computed rows (a reflect pad then ``unfold``
of a median, ``torch.diff`` of a ``torch.cat``) read their loads there instead of ``tl.gather``
of the row, which failed Triton's OptimizeThreadLocality pass at 2048 (sm_90, gfx942) and ran
ptxas past 18 GB at 16000. Numerics in the interpreter against eager torch, no ``tl.gather``
in the generated code, and the defaults cross-compiled at the lengths that failed."""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile


@tc.kernel(static_shapes=True)
def despike_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A median of 3 (edges replicated), then a centred mean and std over 5 (edges reflected)."""
    r = x.size(0)
    mean, std = torch.empty_like(x), torch.empty_like(x)
    for tr in tc.tile(r):
        a, b, c = F.pad(x[tr, :], (1, 1), mode="replicate").unfold(1, 3, 1).unbind(-1)
        m = torch.maximum(torch.minimum(a, b), torch.minimum(torch.maximum(a, b), c))
        w5 = F.pad(m, (2, 2), mode="reflect").unfold(1, 5, 1)
        mean[tr, :] = w5.mean(dim=-1)
        std[tr, :] = w5.std(dim=-1)
    return mean, std


def _despike_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m = F.pad(x, (1, 1), mode="replicate").unfold(1, 3, 1).median(dim=-1).values
    w5 = F.pad(m, (2, 2), mode="reflect").unfold(1, 5, 1)
    return w5.mean(-1), w5.std(-1)


@tc.kernel(static_shapes=True)
def preemphasis_deltas(
    audio: torch.Tensor, coef: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b, t = audio.size()
    y = torch.empty_like(audio)
    d1 = torch.empty([b, t - 1], dtype=audio.dtype, device=audio.device)
    d2 = torch.empty([b, t - 2], dtype=audio.dtype, device=audio.device)
    for tb in tc.tile(b):
        x = audio[tb, :]
        yt = torch.cat([x[:, :1], x[:, 1:] - coef * x[:, :-1]], dim=1)
        y[tb, :] = yt
        d1[tb, :] = torch.diff(yt, dim=1)
        d2[tb, :] = torch.diff(yt, n=2, dim=1)
    return y, d1, d2


@tc.kernel(static_shapes=True)
def centred_roll(x: torch.Tensor) -> torch.Tensor:
    """A roll of a row minus its mean: the mean is the same all along the row (kept)."""
    out = torch.empty_like(x)
    for tr in tc.tile(x.size(0)):
        row = x[tr, :]
        out[tr, :] = torch.roll(row - row.mean(dim=-1, keepdim=True), 3, dims=1)
    return out


@tc.kernel(static_shapes=True)
def roll_then_overwrite(x: torch.Tensor) -> torch.Tensor:
    """The row is stored over before the gather: its loads must not be read again."""
    out = torch.empty_like(x)
    for tr in tc.tile(x.size(0)):
        m = x[tr, :] * 2.0
        x[tr, :] = torch.zeros_like(m)
        out[tr, :] = torch.roll(m, 1, dims=1)
    return out


def _code(kernel: tc.Kernel, args: tuple) -> str:
    bound = kernel.bind(args)
    return bound.to_triton_code(bound.config_spec.default())


def test_a_moving_window_over_a_computed_row_recomputes_it(device: str) -> None:
    x = torch.randn(5, 100, device=device)
    got, want = despike_stats(x), _despike_reference(x)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    code = _code(despike_stats, (x.cpu(),))
    assert "tl.gather(" not in code, code


def test_differences_of_a_concatenated_row_recompute_it(device: str) -> None:
    a = torch.randn(4, 77, device=device)
    y, d1, d2 = preemphasis_deltas(a, 0.97)
    want = torch.cat([a[:, :1], a[:, 1:] - 0.97 * a[:, :-1]], dim=1)
    torch.testing.assert_close(y, want)
    torch.testing.assert_close(d1, want.diff(dim=1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(d2, want.diff(n=2, dim=1), rtol=1e-5, atol=1e-5)
    assert "tl.gather(" not in _code(preemphasis_deltas, (a.cpu(), 0.97))


def test_values_the_same_along_the_row_are_kept(device: str) -> None:
    x = torch.randn(3, 50, device=device)
    torch.testing.assert_close(centred_roll(x), torch.roll(x - x.mean(1, keepdim=True), 3, 1))
    assert "tl.gather(" not in _code(centred_roll, (x.cpu(),))


def test_a_row_written_before_the_gather_is_not_read_again(device: str) -> None:
    x = torch.randn(3, 300, device=device)
    want = torch.roll(x * 2.0, 1, 1)
    got = roll_then_overwrite(x.clone())
    torch.testing.assert_close(got, want)
    code = _code(roll_then_overwrite, (x.cpu(),))  # the values rolled: a row of the program's
    assert "gather_row = _tc_gather_" in code and code.count("tl.load(") == 2, code


def test_the_windows_compile_at_lengths_that_failed() -> None:
    """sm_90 / gfx942 defaults: a 2048-row despike (the OptimizeThreadLocality assertion) and
    16000-sample pre-emphasis deltas (ptxas past 18 GB) compile."""
    assert_defaults_cross_compile(despike_stats, (torch.randn(64, 2048),))
    assert_defaults_cross_compile(preemphasis_deltas, (torch.randn(256, 16000), 0.97))


@tc.kernel(static_shapes=True)
def even_rows_normalized(metric: torch.Tensor) -> torch.Tensor:
    """ToMe's split of tokens after normalizing them: every other row of a computed tile."""
    b, n, c = metric.size()
    out = torch.empty([b, (n + 1) // 2, c], dtype=torch.float32, device=metric.device)
    for tb in tc.tile(b, block_size=1):
        x = metric[tb.begin, :, :]
        x = x / x.norm(dim=-1, keepdim=True)
        out[tb.begin, :, :] = x[0::2, :]
    return out


def test_a_kept_dim_of_one_is_recomputed_as_one(device: str) -> None:
    """The norm kept as [n, 1] is recomputed at the picked rows as [k, 1]: recomputed at the
    slice's index broadcast over the row ([k, c]) it loaded a [k, c, c] tile, c times the data
    (at 577 x 64 past Triton's tile limit for every config)."""
    m = torch.randn(2, 77, 40, device=device)
    want = (m / m.norm(dim=-1, keepdim=True))[:, 0::2, :]
    torch.testing.assert_close(even_rows_normalized(m), want)
    loads = re.findall(r"\[([^\]]*)\] = load\(", even_rows_normalized.bind((m.cpu(),)).ir())
    assert loads, "no loads in the IR"
    for dims in loads:
        assert sum(d.strip() != "1" for d in dims.split(",")) <= 2, loads

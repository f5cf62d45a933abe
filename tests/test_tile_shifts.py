"""Constant slices and F.pad of register tiles (frontend/tile_shifts.py): register gathers.
Numerics on the GPU (the interpreter on a CPU) and in ref mode against eager PyTorch (padded
dims, two configs), a CTC forward written with torch's shift idiom, errors naming what the user
did, cross-compiles for cuda:90 and hip:gfx942."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft as tc
from benchmarks.gen_kernels.rewritten import ctc_loss_forward_pads
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import DeviceCodeError, ShapeError, UnsupportedOpError

NEG = float("-inf")


@tc.kernel(static_shapes=True)
def shifts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A row moved right with -inf in front, moved left with zeros behind, every other one."""
    m, n = x.size()
    right, left = torch.empty_like(x), torch.empty_like(x)
    evens = torch.empty([m, (n + 1) // 2], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        right[tm, :] = F.pad(row[:, :-1], (1, 0), value=NEG)
        left[tm, :] = F.pad(row[:, 2:], (0, 2)) + row
        evens[tm, :] = row[:, ::2]
    return right, left, evens


def _expected(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return F.pad(x[:, :-1], (1, 0), value=NEG), F.pad(x[:, 2:], (0, 2)) + x, x[:, ::2]


@pytest.mark.parametrize("config", [None, tc.Config(block_sizes=[2])])
def test_slices_and_pads_match_torch(config: tc.Config | None, device: str) -> None:
    x = torch.randn(5, 13, device=device)  # 13 pads to 16, 12 and 7 to 16 and 8
    bound = shifts.bind((x,))
    got = bound.run(bound.compile_config(config or bound.config_spec.default()), x)
    for have, want in zip(got, _expected(x), strict=True):
        torch.testing.assert_close(have, want)
    for have, want in zip(shifts.run_ref(x), _expected(x), strict=True):
        torch.testing.assert_close(have, want)
    code = bound.to_triton_code(bound.config_spec.default())
    assert code.count("tl.gather(") == 5, code  # two slices and a pad a shift, one slice


def test_ctc_written_with_pads(device: str) -> None:
    g = torch.Generator().manual_seed(0)
    log_probs = torch.log_softmax(torch.randn(12, 3, 5, generator=g), dim=-1).to(device)
    targets = torch.randint(1, 5, (3, 4), generator=g).to(device)
    tgt_lens = torch.tensor([4, 2, 3], device=device)
    in_lens = torch.tensor([12, 9, 10], device=device)
    want = F.ctc_loss(log_probs, targets, in_lens, tgt_lens, reduction="none")
    got = ctc_loss_forward_pads(log_probs, targets, in_lens, tgt_lens)
    torch.testing.assert_close(got, want)


@tc.kernel(static_shapes=True)
def slice_a_block(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm] = F.pad(x[tm][1:], (0, 1))
    return out


@tc.kernel(static_shapes=True)
def slice_by_a_device_value(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        row = x[tm, :]
        out[tm, :] = F.pad(row[:, : k[0]], (0, 1))
    return out


@tc.kernel(static_shapes=True)
def reflect_pad(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = F.pad(x[tm, :-1], (7, 0), mode="reflect")[:, :8]  # wider than 7 - 1
    return out


@tc.kernel(static_shapes=True)
def reversed_by_slice(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = x[tm, :][:, ::-1]
    return out


@pytest.mark.parametrize(
    ("kernel", "args", "error", "match"),
    [
        (slice_a_block, (torch.randn(8),), ShapeError, "slicing a tile along dim 0 .* BLOCK_0"),
        (
            slice_by_a_device_value,
            (torch.randn(4, 8), torch.tensor([3])),
            UnsupportedOpError,
            "bounds must be ints known when the kernel compiles",
        ),
        (reflect_pad, (torch.randn(4, 8),), DeviceCodeError, "mode='reflect'"),
        (reversed_by_slice, (torch.randn(4, 8),), DeviceCodeError, "steps must be positive"),
    ],
)
def test_shift_errors_name_the_call(
    kernel: tc.Kernel, args: tuple[torch.Tensor, ...], error: type, match: str, device: str
) -> None:
    with pytest.raises(error, match=match) as info:
        kernel(*(a.to(device) for a in args))
    assert "test_tile_shifts.py" in str(info.value)


@pytest.mark.crosscompile
def test_shifts_cross_compile() -> None:
    assert_defaults_cross_compile(shifts, (torch.randn(512, 1000),))


@tc.kernel(static_shapes=True)
def rotate_halves(x: torch.Tensor) -> torch.Tensor:
    """A rotary-style half swap of a computed row, its halves sliced at a specialized int."""
    out = torch.empty_like(x)
    half = tc.specialize(x.size(1) // 2)
    for tm in tc.tile(x.size(0)):
        row = x[tm, :] * 2.0
        out[tm, :] = torch.cat([-row[:, half:], row[:, :half]], dim=1)
    return out


@tc.kernel(static_shapes=False)
def slice_at_run_time_int(x: torch.Tensor, k: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        row = x[tm, :]
        out[tm, :] = F.pad(row[:, :k], (0, 1))
    return out


def test_tile_slices_take_specialized_ints(device: str) -> None:
    """tc.specialize's int (an int subclass) bounds a tile slice like a literal int does."""
    x = torch.randn(5, 8, device=device)
    expect = torch.cat([-2.0 * x[:, 4:], 2.0 * x[:, :4]], dim=1)
    torch.testing.assert_close(rotate_halves(x), expect)


def test_a_run_time_int_slice_bound_names_what_to_do(device: str) -> None:
    with pytest.raises(UnsupportedOpError, match=r"\[:7\]: 7 is a run-time int") as info:
        slice_at_run_time_int(torch.randn(4, 8, device=device), 7)
    assert "tc.specialize" in str(info.value) and "test_tile_shifts.py" in str(info.value)


@tc.kernel(static_shapes=True)
def rotate_blocks(x: torch.Tensor) -> torch.Tensor:
    """Aligned blocks of a computed row: halves swapped and negated (rotary's rotate-half), and
    the second quarter added to the last (quarters of 4)."""
    out = torch.empty_like(x)
    n = x.size(1)
    h, q = n // 2, n // 4
    for tm in tc.tile(x.size(0)):
        row = x[tm, :].to(torch.float32) * 2.0
        rotated = torch.cat([-row[:, h:], row[:, :h]], dim=1)
        mixed = torch.cat([row[:, q : 2 * q], row[:, 3 * q :]], dim=1)
        out[tm, :] = (rotated + torch.cat([mixed, mixed], dim=1)).to(out.dtype)
    return out


def _rotate_blocks_eager(x: torch.Tensor) -> torch.Tensor:
    row = x.float() * 2.0
    n = x.shape[1]
    h, q = n // 2, n // 4
    rotated = torch.cat([-row[:, h:], row[:, :h]], dim=1)
    mixed = torch.cat([row[:, q : 2 * q], row[:, 3 * q :]], dim=1)
    return (rotated + torch.cat([mixed, mixed], dim=1)).to(x.dtype)


@pytest.mark.parametrize("n", [8, 64, 128])
def test_aligned_blocks_of_a_computed_tile_split_its_layout(n: int, device: str) -> None:
    """A half or quarter of a whole power-of-two dim, at a multiple of its length, is a reshape
    into dims of 2, permutes and ``tl.split``: no register gather (each element through warp
    shuffles)."""
    x = torch.randn(5, n).to(device, torch.bfloat16)
    bound = rotate_blocks.bind((x,))
    code = bound.to_triton_code(bound.config_spec.default())
    assert "tl.split(" in code and "tl.gather(" not in code, code
    torch.testing.assert_close(rotate_blocks(x), _rotate_blocks_eager(x))


def test_unaligned_or_loaded_slices_keep_their_gathers(device: str) -> None:
    """An unaligned slice of a computed tile stays a register gather; a slice of a loaded long
    row re-reads memory (no split either way)."""
    x = torch.randn(4, 16, device=device)
    bound = middle_of_a_row.bind((x,))  # [4, 12) of 16: not at a multiple of its length
    code = bound.to_triton_code(bound.config_spec.default())
    assert "tl.split(" not in code and "tl.gather(" in code, code
    torch.testing.assert_close(middle_of_a_row(x), x[:, 4:12] * 2.0)
    y = torch.randn(4, 64, device=device)
    bound = halves_of_a_load.bind((y,))
    code = bound.to_triton_code(bound.config_spec.default())
    assert "tl.split(" not in code and "tl.gather(" not in code, code
    torch.testing.assert_close(halves_of_a_load(y), y[:, 32:] - y[:, :32])


@tc.kernel(static_shapes=True)
def halves_of_a_load(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(1) // 2], dtype=x.dtype, device=x.device)
    h = x.size(1) // 2
    for tm in tc.tile(x.size(0)):
        row = x[tm, :]
        out[tm, :] = row[:, h:] - row[:, :h]
    return out


@tc.kernel(static_shapes=True)
def middle_of_a_row(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(1) // 2], dtype=x.dtype, device=x.device)
    q = x.size(1) // 4
    for tm in tc.tile(x.size(0)):
        row = x[tm, :] * 2.0
        out[tm, :] = row[:, q : 3 * q]
    return out


@pytest.mark.crosscompile
def test_aligned_blocks_cross_compile() -> None:
    assert_defaults_cross_compile(rotate_blocks, (torch.randn(512, 128).to(torch.bfloat16),))

"""torch.gather / torch.take_along_dim of a tile (frontend/tile_gather.py -> ``tl.gather``):
generated code, numerics in the interpreter and in ref mode against eager PyTorch (padded whole
dims, two configs), the gathered dim kept whole, errors naming what the user did, cross-compiles
for cuda:90 and hip:gfx942, and a CTC-style recurrence on the GPU."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from tests.cross_targets import assert_defaults_cross_compile
from tilecraft.errors import DeviceCodeError, IndexOutOfBoundsError, ShapeError


@tc.kernel(static_shapes=True)
def shifted_and_reversed(x: torch.Tensor, perm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: x[s] + x[s - 1] (clamped), and x permuted by ``perm`` along the rows' tile dim
    (a gather along dim 0 of a [n, tm] transpose)."""
    m, n = x.size()
    shifted, permuted = torch.empty_like(x), torch.empty_like(x)
    for tm in tc.tile(m):
        row = x[tm, :]
        back = torch.clamp(tc.arange(n) - 1, min=0)
        shifted[tm, :] = row + torch.gather(row, 1, back[None, :].expand(tm, n))
        cols = row.t()  # [n, tm]
        order = perm[:][:, None].expand(n, tm)
        permuted[tm, :] = torch.gather(cols, 0, order).t()
    return shifted, permuted


def _expected(x: torch.Tensor, perm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.shape[1]
    back = torch.clamp(torch.arange(n, device=x.device) - 1, min=0).expand_as(x)
    return x + torch.gather(x, 1, back), x[:, perm]


@pytest.mark.parametrize("config", [None, tc.Config(block_sizes=[2])])
def test_gather_matches_torch(config: tc.Config | None, device: str) -> None:
    x = torch.randn(7, 37, device=device)  # 37 pads to 64: indices stay within the valid positions
    perm = torch.randperm(37, generator=torch.Generator().manual_seed(1)).to(device)
    bound = shifted_and_reversed.bind((x, perm))
    got = bound.run(bound.compile_config(config or bound.config_spec.default()), x, perm)
    for have, want in zip(got, _expected(x, perm), strict=True):
        torch.testing.assert_close(have, want)


def test_gather_codegen_and_ref_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    x, perm = torch.randn(5, 12), torch.randperm(12)
    bound = shifted_and_reversed.bind((x, perm))
    code = bound.to_triton_code(bound.config_spec.default())
    # the gather of the loaded row reads x at the positions (gather_loads); the transposed
    # row's, along its dim 0 (the line crosses warps), goes through a scratch row
    assert "tl.gather(" not in code and code.count("gather_row = _tc_gather_") == 1, code
    for have, want in zip(shifted_and_reversed.run_ref(x, perm), _expected(x, perm), strict=True):
        torch.testing.assert_close(have, want)


@tc.kernel(static_shapes=True)
def take_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, idx.size(0)], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        out[tm, :] = torch.take_along_dim(x[tm, :], idx[:][None, :], dim=1)
    return out


def test_take_along_dim_broadcasts_the_index(device: str) -> None:
    x, idx = torch.randn(6, 16, device=device), torch.tensor([3, 3, 0, 15, 7], device=device)
    torch.testing.assert_close(take_rows(x, idx), x[:, idx])


@tc.kernel(static_shapes=True)
def take_from_scaled_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, idx.size(0)], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        # a scan's result is no function of loads at the gathered positions: a register gather
        out[tm, :] = torch.take_along_dim(torch.cumsum(x[tm, :], dim=1), idx[:][None, :], dim=1)
    return out


def test_gathered_dim_is_never_chunked(device: str) -> None:
    x, idx = torch.randn(8, 4096, device=device), torch.arange(0, 4096, 7, device=device)
    spec = take_from_scaled_rows.bind((x, idx)).config_spec
    assert spec.reductions and all(not r.loopable for r in spec.reductions)
    assert any("torch.gather" in r.reason for r in spec.reductions), spec.reductions
    torch.testing.assert_close(
        take_from_scaled_rows(x, idx), x.cumsum(1)[:, idx], atol=1e-3, rtol=1e-4
    )


@pytest.mark.crosscompile
def test_a_long_gather_of_a_computed_tile_goes_through_memory() -> None:
    """A [1, 4096] cumsum gathered at 586 positions: as a tl.gather it did not finish compiling
    for sm_90 in 600 s; through a scratch row it is a store, a barrier and a load."""
    x, idx = torch.randn(8, 4096), torch.arange(0, 4096, 7)
    code = take_from_scaled_rows.bind((x, idx)).to_triton_code(tc.Config(block_sizes=[1]))
    assert "tl.gather(" not in code and code.count("tl.debug_barrier()") == 2, code
    assert "_tc_gather_0 = torch.empty(32768, dtype=torch.float32" in code  # 8 rows of 4096
    assert_defaults_cross_compile(take_from_scaled_rows, (x, idx))


@tc.kernel(static_shapes=True)
def partner_of_scanned_rows(x: torch.Tensor) -> torch.Tensor:
    """A bitonic-style exchange of a computed row: each position takes its partner i ^ 1 of the
    row's cumsum (a scan's output: neither re-read nor recomputed)."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        cs = torch.cumsum(x[tm, :], dim=1)
        partner = (tc.arange(n) ^ 1)[None, :].expand_as(cs)
        out[tm, :] = cs - torch.gather(cs, 1, partner)
    return out


@pytest.mark.parametrize(("n", "memory"), [(64, False), (256, False), (512, True)])
def test_a_computed_line_up_to_256_keeps_its_register_gather(
    n: int, memory: bool, device: str
) -> None:
    """A scratch row (store, barrier, load) lost to the register gather on the H100 at 64 and
    256 positions (a bitonic sort of [32, 64] rows 2.98 ms vs 0.146; a DTW wavefront's [256]
    diagonals 1.24 vs 0.705 ms); past 256 a thread's shuffles grow with the square of its
    share of the line."""
    x = torch.randn(4, n)
    bound = partner_of_scanned_rows.bind((x,))
    code = bound.to_triton_code(tc.Config(block_sizes=[2]))
    assert ("tl.gather(" in code) is not memory, code
    assert ("tl.debug_barrier()" in code) is memory, code
    x = x.to(device)
    cs = x.cumsum(1)
    want = cs - cs[:, torch.arange(n, device=device) ^ 1]
    torch.testing.assert_close(partner_of_scanned_rows(x), want, atol=1e-4, rtol=1e-4)


@tc.kernel(static_shapes=True)
def target_logit_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy as users write it: the target's logit gathered out of the whole row (one
    index a row), ignore_index -100."""
    n, _ = logits.size()
    out = torch.empty([n], dtype=torch.float32, device=logits.device)
    for tn in tc.tile(n):
        tgt = target[tn]
        valid = tgt != -100
        x = logits[tn, :].to(torch.float32)
        picked = torch.gather(x, 1, torch.where(valid, tgt, 0)[:, None]).squeeze(1)
        out[tn] = torch.where(valid, torch.logsumexp(x, dim=-1) - picked, 0.0)
    return out


@tc.kernel(static_shapes=True)
def pick_one(x: torch.Tensor, k: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """One element a row by a [tm, 1] index, of floats (NaN, -0.0, -inf among them), ints and
    bools."""
    m, _ = x.size()
    fx, fk = torch.empty([m, 1], dtype=x.dtype, device=x.device), torch.empty_like(idx)
    fb = torch.empty([m, 1], dtype=torch.bool, device=x.device)
    for tm in tc.tile(m):
        at = idx[tm, :]
        fx[tm, :] = torch.gather(x[tm, :], 1, at)
        fk[tm, :] = torch.gather(k[tm, :], 1, at)
        fb[tm, :] = torch.gather(k[tm, :] > 0, 1, at)
    return fx, fk, fb


def test_one_index_a_row_is_a_masked_max_that_chunks(device: str) -> None:
    """A gather of one element a row (a target's logit) reads the row by a masked max: exact
    for NaN, -0.0 and infinities, and the row loops in chunks. Gathered with tl.gather from a
    whole [2, 32768] fp32 row, ptxas ran past 20 GB (sm_90)."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(9, 300, generator=gen)
    x[0, 7], x[1, 8], x[2, 9] = float("nan"), -0.0, float("-inf")
    k = torch.randint(-50, 50, (9, 300), generator=gen)
    idx = torch.randint(0, 300, (9, 1), generator=gen)
    idx[:3, 0] = torch.tensor([7, 8, 9])
    x, k, idx = x.to(device), k.to(device), idx.to(device)
    got = pick_one(x, k, idx)
    want = (x.gather(1, idx), k.gather(1, idx), (k > 0).gather(1, idx))
    for have, expect in zip(got, want, strict=True):
        torch.testing.assert_close(have, expect, rtol=0, atol=0, equal_nan=True)
    assert torch.signbit(got[0][1, 0])  # -0.0 stays -0.0
    bound = pick_one.bind((x, k, idx))
    assert "tl.gather" not in bound.to_triton_code(bound.config_spec.default())
    target = torch.randint(0, 300, (9,), generator=gen)
    target[4] = -100
    logits = torch.randn(9, 300, generator=gen).to(torch.bfloat16)
    target, logits = target.to(device), logits.to(device)
    xf = logits.float()
    expect = torch.logsumexp(xf, -1) - xf.gather(1, target.clamp(min=0)[:, None]).squeeze(1)
    torch.testing.assert_close(
        target_logit_loss(logits, target), torch.where(target != -100, expect, 0.0)
    )
    meta = (
        torch.empty(4096, 32000, dtype=torch.bfloat16, device="meta"),
        torch.empty(4096, dtype=torch.int64, device="meta"),
    )
    default = target_logit_loss.bind(meta).config_spec.default()
    assert any(default.reduction_loops), default  # the vocabulary row runs in chunks


@tc.kernel(static_shapes=True)
def gather_along_block(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.gather(x[tm], 0, torch.zeros_like(x[tm]).to(torch.int32))
    return out


@tc.kernel(static_shapes=True)
def gather_float_index(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = torch.gather(x[tm, :], 1, x[tm, :])
    return out


@tc.kernel(static_shapes=True)
def gather_rank_mismatch(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = torch.gather(x[tm, :], 1, tc.arange(x.size(1)))
    return out


@tc.kernel(static_shapes=True)
def gather_from_host(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm, :] = torch.gather(x, 1, tc.arange(x.size(1))[None, :].expand(tm, x.size(1)))
    return out


@pytest.mark.parametrize(
    ("kernel", "error", "match", "hint"),
    [
        (gather_along_block, ShapeError, "BLOCK_0 is a tile loop's block", "whole dim"),
        (gather_float_index, DeviceCodeError, "index must be an integer tile", "torch.int32"),
        (gather_rank_mismatch, ShapeError, r"needs the rank of the tile", "unsqueeze"),
        (gather_from_host, DeviceCodeError, "torch.gather of a host tensor", "index it"),
    ],
)
def test_gather_errors_name_the_call(
    kernel: tc.Kernel, error: type, match: str, hint: str, device: str
) -> None:
    shape = (4, 8) if kernel is not gather_along_block else (8,)
    x = torch.randn(*shape, device=device)
    with pytest.raises(error, match=match) as info:
        kernel(x)
    assert "test_tile_gather.py" in str(info.value) and hint in str(info.value)


@tc.kernel(static_shapes=True)
def shift_recurrence(x: torch.Tensor, steps: int) -> torch.Tensor:
    """A state over a whole dim, advanced ``steps`` times by state[s] = state[s] + 0.5 *
    state[s - 1] (state[-1] = 0): each step a register shift, as a CTC forward's alpha."""
    b, n = x.size()
    out = torch.empty_like(x)
    for tb in tc.tile(b, block_size=1):
        pos = tc.arange(n)
        state = x[tb.begin, :]
        for _ in tc.grid(steps):
            prev = torch.where(pos >= 1, torch.gather(state, 0, torch.clamp(pos - 1, min=0)), 0.0)
            state = state + 0.5 * prev
        out[tb.begin, :] = state
    return out


def _recurrence(x: torch.Tensor, steps: int) -> torch.Tensor:
    state = x.double()
    for _ in range(steps):
        prev = torch.nn.functional.pad(state[:, :-1], (1, 0))
        state = state + 0.5 * prev
    return state.to(x.dtype)


def test_recurrence_through_gathers(device: str) -> None:
    x = torch.randn(3, 241, device=device)
    torch.testing.assert_close(shift_recurrence(x, 6), _recurrence(x, 6), rtol=1e-5, atol=1e-5)


@pytest.mark.crosscompile
def test_gathers_cross_compile() -> None:
    assert_defaults_cross_compile(
        shifted_and_reversed, (torch.randn(512, 1000), torch.arange(1000))
    )
    assert_defaults_cross_compile(shift_recurrence, (torch.randn(64, 241), 100))
    assert_defaults_cross_compile(  # a vocabulary row: tl.gather's code would not fit ptxas
        target_logit_loss,
        (
            torch.empty(4096, 32000, dtype=torch.bfloat16, device="meta"),
            torch.empty(4096, dtype=torch.int64, device="meta"),
        ),
    )


@pytest.mark.gpu
def test_recurrence_through_gathers_on_gpu() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(64, 241, generator=gen, device="cuda")
    want = _recurrence(x.cpu(), 20)  # values grow ~1.5x a step: atol scales with them
    got = shift_recurrence(x, 20).cpu()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * want.abs().max().item())
    perm = torch.randperm(1000, device="cuda")
    y = torch.randn(300, 1000, generator=gen, device="cuda")
    for have, want in zip(shifted_and_reversed(y, perm), _expected(y, perm), strict=True):
        torch.testing.assert_close(have, want)


@tc.kernel(static_shapes=True)
def shift_past_the_start(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        row = x[tm, :]
        out[tm, :] = torch.gather(row, 1, (tc.arange(x.size(1)) - 1)[None, :].expand_as(row))
    return out


def test_ref_mode_names_an_index_out_of_range() -> None:
    """Compiled code does not check a gather's index; ref mode (the tuner's baseline) does,
    before torch would assert on a GPU."""
    with pytest.raises(
        IndexOutOfBoundsError, match=r"torch.gather: .* -1 is not in \[0, 8\)"
    ) as info:
        shift_past_the_start.run_ref(torch.randn(4, 8))
    assert "test_tile_gather.py" in str(info.value) and "torch.clamp" in str(info.value)


@tc.kernel(static_shapes=True)
def rolled(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.roll of a row's whole dim, forward and back, and of a [n, n] tile along both."""
    m, n = x.size()
    ahead, both = torch.empty_like(x), torch.empty([n, n], dtype=x.dtype, device=x.device)
    for tm in tc.tile(m):
        row = x[tm, :]
        ahead[tm, :] = torch.roll(row, 3, dims=1) - row.roll(-n - 1, 1)
    for _ in tc.tile(1, block_size=1):
        square = x[0:n, :]
        both[:, :] = torch.roll(square, shifts=(1, -2), dims=(0, 1))
    return ahead, both


def test_roll_matches_torch(device: str) -> None:
    x = torch.randn(13, 13, device=device)  # 13 pads to 16: the rolled positions wrap at 13, not 16
    ahead, both = rolled(x)
    torch.testing.assert_close(ahead, torch.roll(x, 3, 1) - torch.roll(x, -14, 1))
    torch.testing.assert_close(both, torch.roll(x, (1, -2), (0, 1)))
    code = rolled.bind((x,)).to_triton_code(tc.Config(block_sizes=[4]))
    # along the rows (16 x 16 lanes: the line crosses warps) the square is read again at the
    # rolled rows; the three rolls along rows of 16 stay register gathers
    assert code.count("tl.gather(") == 3, code


@tc.kernel(static_shapes=True)
def roll_a_block(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        out[tm] = torch.roll(x[tm], 1, 0)
    return out


def test_roll_along_a_block_names_it(device: str) -> None:
    with pytest.raises(
        ShapeError, match="torch.roll along dim 0 .* BLOCK_0 is a tile loop's block"
    ):
        roll_a_block(torch.randn(8, device=device))


@tc.kernel(static_shapes=False)
def flipped_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.flip(x[tm, :], dims=[1]) * 2
    return out


def test_flip_with_a_run_time_row_length(device: str) -> None:
    """The mirror point is the row's length, a kernel argument here (one compile serves both)."""
    for n in (37, 45):
        x = torch.randn(5, n, device=device)
        torch.testing.assert_close(flipped_rows(x), x.flip(1) * 2)


@tc.kernel(static_shapes=True)
def reversed_sums(x: torch.Tensor) -> torch.Tensor:
    """Flips of a loaded row and of a computed one (a cumsum's; flipped on both sides it would
    be one reverse scan: tests/test_scans.py)."""
    m, _ = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        row = x[tm, :]
        out[tm, :] = torch.flip(torch.cumsum(row, dim=1), [1]) + torch.flip(row, [1])
    return out


def test_a_flip_along_a_whole_power_of_two_dim_is_tl_flip(device: str) -> None:
    """Rows of 64: both flips are ``tl.flip`` (log2(n) butterfly steps, no per-element gather);
    rows of 48 pad to 64, where tl.flip would move the padding first: they stay gathers."""
    gen = torch.Generator().manual_seed(9)
    for n, flips in ((64, 2), (48, 0)):
        x = torch.randn(6, n, generator=gen).to(device)
        code = reversed_sums.bind((x,)).to_triton_code(
            reversed_sums.bind((x,)).config_spec.default()
        )
        assert code.count("tl.flip(") == flips, code
        expect = torch.flip(torch.cumsum(x, 1), [1]) + torch.flip(x, [1])
        torch.testing.assert_close(reversed_sums(x), expect)


@tc.kernel(static_shapes=True)
def rolled_rows(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for tm in tc.tile(m):
        out[tm, :] = torch.roll(x[tm, :], 5, dims=-1)
    return out


def test_a_roll_of_a_long_loaded_line_reads_memory(device: str) -> None:
    """Past 32 elements a line the roll re-reads x at the rolled positions (a register gather
    along 4096-element rows compiled to 16384 shuffles a thread); a short line stays a gather."""
    gen = torch.Generator().manual_seed(10)
    for n, gathers in ((100, 0), (24, 1)):
        x = torch.randn(7, n, generator=gen).to(device)
        bound = rolled_rows.bind((x,))
        assert bound.to_triton_code(bound.config_spec.default()).count("tl.gather(") == gathers
        torch.testing.assert_close(rolled_rows(x), torch.roll(x, 5, -1))


@pytest.mark.crosscompile
def test_reversed_sums_of_long_rows_shuffle_little_on_sm90() -> None:
    """[8192, 4096] fp32: two register gathers compiled to 32768 ``shfl.sync.idx`` a thread at
    164 registers; memory-free tl.flip butterflies instead."""
    import re

    from tests.cross_targets import TARGETS
    from tilecraft.runtime.kernel import BoundKernel
    from tilecraft.tools.crosscompile import CompileJob
    from tilecraft.tools.worker import run_compile_jobs

    x = torch.empty(8192, 4096, device="meta")
    bound = BoundKernel(reversed_sums, reversed_sums.bind_arguments((x,), {}), target=TARGETS[0])
    _, _, traced, kernels = bound.generate(bound.config_spec.default())
    (report,) = run_compile_jobs([CompileJob.of(kernels[0], traced.loops[0], TARGETS[0])], 300)
    assert report.ok, report.error
    shuffles = len(re.findall(r"shfl\.sync", report.ptx))
    assert "shfl.sync.idx" not in report.ptx and shuffles < 1024, shuffles
    assert report.spills == 0 and (report.registers or 0) <= 128, report


@pytest.mark.gpu
def test_flips_and_rolls_of_long_rows_on_gpu() -> None:
    gen = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(512, 4096, generator=gen, device="cuda")
    expect = torch.flip(torch.cumsum(x, 1), [1]) + torch.flip(x, [1])
    torch.testing.assert_close(reversed_sums(x), expect, rtol=1e-4, atol=1e-3)
    y = torch.randn(512, 3000, generator=gen, device="cuda").to(torch.bfloat16)
    torch.testing.assert_close(rolled_rows(y), torch.roll(y, 5, -1))

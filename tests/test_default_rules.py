"""The default's rules for split reductions (config/split.py: one wave of resident programs from
the resource model) and row loops (config/row_loops.py: whole-row chunks up to a register limit,
one row per program, warps from the chunk) on cuda:90 (132 SMs, 32 warps) and gfx942 (304 CUs,
16 wave64s): a tall column sum, a 40920-wide row, a 16384-wide row walked twice, short rows."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.norms import rms_norm_llama, welford_layer_norm
from benchmarks.gen_kernels.reductions import column_sum, online_softmax
from examples.rms_norm import rms_norm_bwd, rms_norm_fwd
from tilecraft.config import occupancy, tile_budget
from tilecraft.config.resolve import predicted_registers
from tilecraft.config.row_loops import amortizing_rows, chunk_limit, row_chunk
from tilecraft.config.spec import ConfigSpec
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")
MI300 = Target.parse("hip:gfx942")


def _spec(kernel: tc.Kernel, *args: torch.Tensor, target: Target = H200) -> ConfigSpec:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target).config_spec


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, dtype=torch.bfloat16, device="meta")


# -- split reductions ------------------------------------------------------------------------
@pytest.mark.parametrize(("target", "split"), [(H200, 16), (MI300, 32)])
def test_tall_column_sum_splits_to_a_wave_of_resident_programs(target: Target, split: int) -> None:
    """Columns in 32-wide tiles (64 bytes of each bf16 row: H200 0.0477 ms, 16-wide 0.0552),
    split until about a wave of the programs resident as they run, deferred sum included
    (H200: split 16 0.0457 ms, 32 0.0491; default_change_s13b)."""
    spec = _spec(column_sum, _meta(65536, 1024), target=target)
    config = spec.default()
    assert config.block_sizes[1] == 32 and config.split_reductions == (split,)
    programs = spec.resolve(config, warn=False).resources.programs[0]
    assert programs is not None
    wave = target.limits.num_sms * occupancy.resident_programs(spec, config)
    assert wave / 2 < programs < wave * 2  # about one wave of resident programs, not of SMs
    rows_block = config.block_sizes[0]
    assert 65536 // (rows_block * split) >= 4  # each share keeps several iterations


def test_a_loop_over_loaded_bounds_splits_finer() -> None:
    """Sequences of random lengths (``tc.tile(cu[i], cu[i + 1])``): a program's work is
    uneven, so the split aims at ``UNEVEN_WAVES`` waves of resident programs (H200 graph
    replays, 8 sequences of 32768 rows x 4096: split 2 0.211 ms, 4 0.143, 8 0.115, 16 0.114;
    graph_replay_varlen_s13); the tall column sum's fixed trip count keeps one wave."""
    from benchmarks.gen_kernels import HELDOUT
    from tilecraft.config.split import UNEVEN_WAVES

    case = HELDOUT["varlen_mean"]
    spec = _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))
    config = spec.default()
    programs = spec.programs(0, config) * config.split_reductions[0]
    wave = H200.limits.num_sms * occupancy.resident_programs(spec, config)
    assert config.split_reductions[0] >= 8
    assert UNEVEN_WAVES * wave / 2 < programs < UNEVEN_WAVES * wave * 2


@pytest.mark.parametrize("shape", [(4, 150, 512, 512), (8, 19, 512, 1024)])
def test_a_grid_with_a_poor_last_wave_splits(shape: tuple[int, ...]) -> None:
    """Dice loss per (image, class tile): 152 programs at one program an SM run two waves on
    132 SMs, 58% busy; the default splits the pixel loop into the fewest shares that keep 90%
    of the slots busy (4: five waves of a quarter the length) and keeps its tile (H200: 0.339 ->
    0.261 ms and 0.321 -> 0.218; dice_split_s25)."""
    from benchmarks.gen_kernels import ALL_CASES
    from tilecraft.config.split import TAIL_FILL

    case = ALL_CASES["dice_loss_per_class"]
    spec = _spec(case.kernels[0], *case.make_inputs(shape, "meta", 0))
    config = spec.default()
    programs = spec.programs(0, config)
    sms = H200.limits.num_sms
    assert occupancy.resident_programs(spec, config) == 1
    assert programs is not None and sms < programs < 2 * sms  # two waves, unsplit
    split = config.split_reductions[0]
    assert split == 4, config
    total = programs * split
    assert total >= TAIL_FILL * -(-total // sms) * sms


def test_a_grid_of_whole_waves_is_not_split() -> None:
    """The same kernel at a shape whose programs fall evenly on the SMs (4 x 132 class tiles
    of 4: four on every SM) keeps its loop whole, and so does a masked mean pool whose 512
    programs run about four an SM (97% even; H200: unsplit 0.080 ms, split 2 0.097, split 8
    0.151; maskpool_tail_s25)."""
    from benchmarks.gen_kernels import ALL_CASES

    case = ALL_CASES["dice_loss_per_class"]
    spec = _spec(case.kernels[0], *case.make_inputs((4, 528, 256, 256), "meta", 0))
    config = spec.default()
    programs = spec.programs(0, config)
    assert programs is not None and programs % H200.limits.num_sms == 0, (programs, config)
    assert config.split_reductions in ((), (1,)), config
    case = ALL_CASES["masked_mean_pool"]
    spec = _spec(case.kernels[0], *case.make_inputs((64, 512, 4096), "meta", 0))
    config = spec.default()
    assert spec.programs(0, config) == 512 and config.split_reductions in ((), (1,)), config


def test_a_pooled_tile_keeps_whole_lines_of_its_contiguous_dim() -> None:
    """A masked mean over the middle dim of [64, 512, 4096] bf16 (tiles [batch, hidden] with a
    time loop): shrinking halves the batch and time blocks before the hidden dim, each row of
    which is contiguous in memory, falls below 256 bytes (H200 graph replays: [4, 128, 16]
    0.075 ms, the old [8, 32, 32] 0.0955, torch.compile 0.0772; graph_replay_maskpool_s13)."""
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT["masked_mean_pool"]
    spec = _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))
    config = spec.default()
    batch, hidden, time = config.block_sizes
    assert hidden * 2 >= 256 and batch * hidden * time <= 8192, config


def test_a_grid_far_under_a_wave_halves_below_the_segment_floor() -> None:
    """Decode attention over 256 heads carries an online softmax over 8192 keys (no split): its
    head block halves past 16 while the grid is under a wave (H200: 16 heads a program 3.2 ms,
    2 heads 1.0, one head 0.36 at 128-key chunks); a 1000-row sum, whose programs do not loop,
    stays at 125 programs (250 did not gain)."""
    from benchmarks.gen_kernels import HELDOUT
    from examples.sum import sum_last

    case = HELDOUT["decode_attention"]
    kernel = case.kernels[0]
    args = (*case.make_inputs(case.gpu_shapes[0], "meta", 0), 0.088)
    spec = _spec(kernel, *args)
    programs = spec.resolve(spec.default(), warn=False).resources.programs[0]
    assert programs == 256
    rows = _spec(sum_last, _meta(1000, 1000))
    assert rows.resolve(rows.default(), warn=False).resources.programs[0] == 125


@pytest.mark.parametrize(("dtype", "width"), [(torch.bfloat16, 32), (torch.float32, 16)])
def test_filling_the_device_keeps_64_bytes_of_each_row(dtype: torch.dtype, width: int) -> None:
    """Halving grid blocks for more programs stops at 64 bytes of a contiguous row; the split
    fills the device instead."""
    spec = _spec(column_sum, torch.empty(65536, 1024, dtype=dtype, device="meta"))
    config = spec.default()
    assert config.block_sizes[1] == width and (config.split_reductions[0] or 1) > 1


def test_a_narrow_whole_dim_s_outer_block_keeps_64_bytes_a_run() -> None:
    """GroupNorm + SiLU over channels-last [4, 128, 128, 320] bf16, one image and a block of
    the 32 groups a program, each group's 10 channels whole (``xv[b, ts, tg, :]``): a group
    index covers 20 contiguous bytes, so one group a program read 20 of every 640 bytes (H100:
    [1 group, 512 rows] split 2 0.254 ms). The groups block keeps 64 bytes a run in whole
    32-byte sectors: 4 groups (80 bytes) end mid-sector every other program, 8 groups are 160
    bytes, five sectors ([4, 128] split 8 0.153 ms, [8, 64] split 16 0.129; gn_split_s37_h100),
    and the split fills the device. The group norm's weight [32, 10] sets no floor (not a bulk
    access)."""
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT["group_norm_silu_nhwc"]
    spec = _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))
    groups = spec.blocks[0]
    assert groups.run_bytes == 20 and groups.row_floor == 8
    config = spec.default()
    assert config.block_sizes[0] * 20 % 32 == 0, config
    programs = spec.programs(0, config)
    assert programs is not None and programs * config.split_reductions[0] >= 132, config


@pytest.mark.parametrize(
    ("run_bytes", "floor"), [(20, 8), (10, 16), (6, 16), (24, 4), (40, 4), (48, 2), (62, 8)]
)
def test_narrow_runs_cover_whole_sectors(run_bytes: int, floor: int) -> None:
    """The least block of a narrow run keeps 64 bytes and ends on a 32-byte sector (up to
    256 bytes: 62-byte runs stop at 8 blocks, 496 bytes)."""
    from tilecraft.config.dims import BlockSpec

    block = BlockSpec(slot=0, extent=4096, role="grid", run_bytes=run_bytes)
    assert block.row_floor == floor


def test_resident_programs_follow_threads_and_registers() -> None:
    spec = _spec(column_sum, _meta(65536, 1024))
    light = tc.Config(block_sizes=[16, 16], num_warps=4)
    assert predicted_registers(spec, light, 4).per_thread <= 32
    assert occupancy.resident_programs(spec, light) == 16  # by threads: 2048 / 128
    heavy = tc.Config(block_sizes=[512, 16], num_warps=8)
    registers = predicted_registers(spec, heavy, 8).per_thread
    by_registers = 65536 // (-(-registers // 8) * 8 * 256)
    assert occupancy.resident_programs(spec, heavy) == by_registers < 8  # 8: by threads


def test_a_grid_that_fills_the_resident_wave_is_not_split() -> None:
    spec = _spec(column_sum, _meta(1024, 262144))
    assert spec.default().split_reductions in ((), (1,))


# -- row loops -------------------------------------------------------------------------------
def test_row_chunks_take_the_row_up_to_the_register_limit_with_little_padding() -> None:
    assert chunk_limit(H200) == chunk_limit(MI300) == 8192  # 16 elements a thread, half the warps
    assert row_chunk(8000, H200) == 8192  # a whole row
    assert row_chunk(131072, H200) == 8192  # the limit
    assert row_chunk(32000, H200) == 8192  # 4 chunks, 768 masked columns
    assert row_chunk(40920, H200) == 8192  # 5 chunks, 40 masked columns
    assert row_chunk(9000, H200) == 4096  # not 2 x 8192 with 808 valid in the last
    assert row_chunk(50257, H200) == 4096  # 8192 would pad by 14%
    # 7168: one 8192 chunk pads 1024 columns, as two of 4096 do: halving only adds a pass
    assert row_chunk(7168, H200) == 8192
    assert row_chunk(12288, H200) == 4096  # three 4096 chunks pad nothing, 2 x 8192 pad 4096


def test_a_two_pass_fp8_quantization_row_of_7168_is_one_chunk() -> None:
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT["fp8_row_quant"]
    spec = _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))
    assert list(spec.default().block_sizes) == [1, 8192, 8192]


@pytest.mark.parametrize(("target", "warps"), [(H200, 16), (MI300, 8)])
def test_a_40920_wide_row_is_one_row_per_program_in_8192_chunks(target: Target, warps: int) -> None:
    spec = _spec(rms_norm_llama, _meta(4096, 40920), _meta(40920), target=target)
    config = spec.default()
    assert list(config.block_sizes) == [1] and list(config.reduction_loops) == [8192]
    assert config.num_warps == warps  # 16 elements per thread
    assert not predicted_registers(spec, config, warps).spills


def test_a_16384_wide_row_walked_twice_fits_the_registers() -> None:
    args = (_meta(4096, 16384), _meta(16384), _meta(16384))
    # half the row per chunk at half the most warps (a 32-warp program holds an SM alone)
    h200_spec = _spec(welford_layer_norm, *args)
    h200 = h200_spec.default()
    assert list(h200.block_sizes) == [1, 8192, 8192] and h200.num_warps == 16
    assert not predicted_registers(h200_spec, h200, 16).spills
    mi300 = _spec(welford_layer_norm, *args, target=MI300).default()
    assert list(mi300.block_sizes) == [1, 8192, 8192] and mi300.num_warps == 8


@pytest.mark.parametrize("target", [H200, MI300])
def test_short_rows_stay_whole(target: Target) -> None:
    x, w = _meta(4096, 4096), _meta(4096)
    config = _spec(rms_norm_fwd, x, w, target=target).default()
    assert list(config.reduction_loops) == [None]  # a full-row tile of 4096 is not looped
    softmax = _spec(online_softmax, _meta(65536, 512), target=target).default()
    assert list(softmax.block_sizes) == [8, 512, 512]  # several short rows per program


def test_the_wide_row_default_computes_rms_norm_in_the_interpreter(device: str) -> None:
    from benchmarks.gen_kernels.norms import rms_norm_reference

    config = _spec(rms_norm_llama, _meta(3, 40920), _meta(40920)).default()
    assert list(config.reduction_loops) == [8192]
    x, w = torch.randn(3, 40920, device=device), torch.rand(40920, device=device) + 0.5
    bound = BoundKernel(rms_norm_llama, rms_norm_llama.bind_arguments((x, w), {}))
    out = bound.run(bound.compile_config(config), x, w)
    torch.testing.assert_close(out, rms_norm_reference(x, w), rtol=1e-4, atol=1e-4)


@tc.kernel(static_shapes=True)
def row_max_per_program(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows scaled by their max, plus one scalar per program (its largest max): a per-program
    store a thousand times smaller than a row."""
    m_block = tc.register_block_size(x.size(0))
    out = torch.empty_like(x)
    peaks = x.new_empty([(x.size(0) + m_block - 1) // m_block], dtype=torch.float32)
    for tm in tc.tile(x.size(0), block_size=m_block):
        row = x[tm, :].to(torch.float32)
        top = torch.amax(row, dim=-1)
        out[tm, :] = (row / top[:, None]).to(x.dtype)
        peaks[tm.id] = torch.amax(top, dim=0)
    return out, peaks


@pytest.mark.parametrize("n", [40920, 128256])
def test_per_program_partials_take_several_rows_per_program(n: int) -> None:
    """RMSNorm backward writes an [n] fp32 partial per program (8n bytes written and read back)
    against 6n bytes per bf16 row: 4 rows per program, its chunk narrowed to keep the tile."""
    rows = 4608 if n == 40920 else 2048
    x, w = _meta(rows, n), _meta(n)
    spec = _spec(rms_norm_bwd, x, x, w, torch.empty(rows, device="meta"))
    loop = spec.loops[0]
    assert amortizing_rows(loop, loop.grid_syms[0]) == 4
    config = spec.default()
    assert list(config.block_sizes) == [4] and list(config.reduction_loops) == [2048]
    assert config.num_warps == 8  # 8 bf16 (16 bytes) of each row a thread: 128-bit loads
    assert not predicted_registers(spec, config, config.num_warps or 4).spills


@pytest.mark.parametrize(("n", "chunks"), [(4096, [None]), (8192, [4096])])
def test_whole_rows_with_per_program_partials_take_several_rows(
    n: int, chunks: list[int | None]
) -> None:
    """A row short enough to stay one tile still writes an [n] fp32 partial per program: the
    rows per program rise to amortize it after the tile budget shrank them (2 -> 4 rows at 4096
    columns); a raised tile past 16384 elements loops its row in chunks that keep it there."""
    x, w = _meta(16384, n), _meta(n)
    spec = _spec(rms_norm_bwd, x, x, w, torch.empty(16384, device="meta"))
    config = spec.default()
    assert list(config.block_sizes) == [4] and list(config.reduction_loops) == chunks
    assert not predicted_registers(spec, config, config.num_warps or 4).spills
    # the held-out kernel with the same pattern (dw partials indexed by the tile id)
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT["rms_norm_bwd"]
    held = _spec(case.kernels[0], *case.make_inputs((16384, n), "meta", 0))
    assert list(held.default().block_sizes) == [4]


def test_a_small_per_program_store_keeps_one_row_per_program() -> None:
    spec = _spec(row_max_per_program, _meta(4096, 40920))
    loop = spec.loops[0]
    assert amortizing_rows(loop, loop.grid_syms[0]) == 1
    assert list(spec.default().block_sizes) == [1]
    plain = _spec(rms_norm_llama, _meta(4096, 40920), _meta(40920)).loops[0]
    assert amortizing_rows(plain, plain.grid_syms[0]) == 1  # no per-program store at all


def test_amortized_rms_norm_backward_default_matches_eager_in_the_interpreter(
    device: str,
) -> None:
    g = torch.Generator().manual_seed(0)
    x, dy = torch.randn(9, 4000, generator=g), torch.randn(9, 4000, generator=g)
    w = torch.rand(4000, generator=g) + 0.5
    x, dy, w = x.to(device), dy.to(device), w.to(device)
    rstd = torch.rsqrt(x.pow(2).mean(-1) + 1e-6)
    config = tc.Config(block_sizes=[4], reduction_loops=[512], num_warps=4)
    bound = BoundKernel(rms_norm_bwd, rms_norm_bwd.bind_arguments((dy, x, w, rstd), {}))
    grad_x, grad_w = bound.run(bound.compile_config(config), dy, x, w, rstd)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    (xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr).backward(dy)
    torch.testing.assert_close(grad_x, xr.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grad_w, wr.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name",
    [
        "column_sum_tall",
        "rms_norm_full_row",
        "welford_layer_norm",
        "online_softmax_two_pass",
        "layer_norm_bwd_seed",
        "kl_div_rows",
    ],  # fmt: skip
)
def test_new_defaults_match_eager_on_gpu(name: str) -> None:
    from benchmarks.gen_kernels import CASES
    from benchmarks.gen_kernels.case import assert_matches_reference

    # dW of seed 000 sums 4608 rows to ~300: one bf16 ulp apart at worst
    assert_matches_reference(CASES[name], CASES[name].gpu_shapes[0], "cuda")


# -- rows along a middle dim (channels_last) -------------------------------------------------
@tc.kernel(static_shapes=True)
def pool_means(x: torch.Tensor) -> torch.Tensor:
    """Mean over [H, W] per (batch, channel) of a [B, C, H, W] tensor."""
    b, c, h, w = x.size()
    out = torch.empty([b, c], dtype=x.dtype, device=x.device)
    for tb, tch in tc.tile([b, c]):
        out[tb, tch] = torch.mean(x[tb, tch, :, :].to(torch.float32), dim=[-2, -1]).to(x.dtype)
    return out


def test_channels_last_rows_run_along_the_channels() -> None:
    """In channels_last memory the channel dim has stride 1: it is the tile's contiguous dim
    (not W, the last index), keeps 64 bytes of each row while the batch block halves, and the
    warps stop at one thread per kept (batch, channel) element: the reduced H x W stay within
    threads (H200 graph replays, 256x2048x7x7 bf16: old [8, 16] 8 warps 0.0765 ms, [4, 32]
    8 warps 0.0729, [4, 32] 4 warps 0.0319, torch.compile 0.0553)."""
    x = torch.empty(256, 2048, 7, 7, dtype=torch.bfloat16, device="meta")
    spec = _spec(pool_means, x.contiguous(memory_format=torch.channels_last))
    assert spec.blocks[1].contiguous and not spec.blocks[0].contiguous
    config = spec.default()
    assert config.block_sizes[1] >= 32 > config.block_sizes[0]
    kept = config.block_sizes[0] * config.block_sizes[1]
    assert config.num_warps * H200.warp_size <= kept
    # the same kernel on a contiguous (NCHW) tensor walks rows of H x W: no channel lanes
    nchw = _spec(pool_means, x)
    assert not nchw.blocks[1].contiguous or nchw.blocks[1].load_itemsize == 0


# -- deferred sums and occupancy -------------------------------------------------------------
def test_deferred_sums_give_way_where_the_loop_reduces_each_step_anyway() -> None:
    """A label-smoothed cross entropy's vocab loop takes a row max each step (online logsumexp):
    deferring its two plain sums only adds tile accumulators, 82 registers against 40 on sm_90
    (1 program an SM against 3; H200 2.00 ms against 1.05, graph_replay_ce_s14). A column sum,
    whose deferred sum is its loop's only reduction, keeps it."""
    from benchmarks.default_change import case_calls
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT["label_smoothed_ce"]
    kernel, args = case_calls(case, case.gpu_shapes[0])[0]
    spec = _spec(kernel, *args)
    config = spec.default()
    assert config.deferred_sums is False
    on = occupancy.resident_threads(spec, config.replace(deferred_sums=True))
    assert on < H200.limits.max_threads_per_sm // 2
    assert occupancy.resident_threads(spec, config) > on
    assert _spec(column_sum, _meta(65536, 1024)).default().deferred_sums is not False


# -- loops that reduce into one address --------------------------------------------------------
@tc.kernel(static_shapes=True)
def sum_of_squares(x: torch.Tensor) -> torch.Tensor:
    total = torch.zeros([1], dtype=torch.float32, device=x.device)
    for tm, tn in tc.tile(x.size()):
        v = x[tm, tn].to(torch.float32)
        tc.atomic_add(total, [0], torch.sum(v * v))
    return total


def test_a_loop_reducing_into_one_address_reads_64_kb_a_program() -> None:
    """Each program of a global sum pays a cross-warp reduction and an atomic on the address
    every program shares: 32000 programs of 8 KB ran the clipped Adam's norm pass far from
    memory speed. The contiguous block takes whole rows (to 16 KB) first, then the rows grow;
    [64, 512] (1 KB of each 8 KB row) ran 0.162 ms, [16, 4096] 0.0698 (l2norm_s16)."""
    from tilecraft.config.shared_atomics import PROGRAM_BYTES, reduces_into_one_address

    spec = _spec(sum_of_squares, _meta(32000, 4096))
    assert reduces_into_one_address(spec.loops[0])
    blocks = list(spec.default().block_sizes)
    assert blocks[1] == 4096 and blocks[0] * blocks[1] * 2 >= PROGRAM_BYTES, blocks
    wide = list(_spec(sum_of_squares, _meta(4000, 32768)).default().block_sizes)
    assert wide[1] * 2 == 16384 and wide[0] * wide[1] * 2 >= PROGRAM_BYTES, wide
    small = _spec(sum_of_squares, _meta(512, 512))  # 4 programs a SM at most: left alone
    assert small.default().block_sizes == small.plain_default().block_sizes
    assert small.programs(0, small.default()) in (None, *range(1, 1 + 4 * 132))


def test_loops_with_other_outputs_keep_their_tiles() -> None:
    from benchmarks.gen_kernels import HELDOUT
    from benchmarks.gen_kernels.heldout_s14b import (
        ADAM_BETAS,
        ADAM_EPS,
        ADAM_LR,
        ADAM_MAX_NORM,
        ADAM_STEP,
        ADAM_WD,
    )

    adam_scalars = (ADAM_LR, *ADAM_BETAS, ADAM_EPS, ADAM_WD, ADAM_MAX_NORM, ADAM_STEP)
    from tilecraft.config.shared_atomics import reduces_into_one_address

    adam, focal = HELDOUT["clipped_lazy_adam"], HELDOUT["focal_loss"]
    inputs = adam.make_inputs(adam.gpu_shapes[0], "meta", 0)
    spec = _spec(adam.kernels[0], *inputs, *adam_scalars)
    assert [reduces_into_one_address(loop) for loop in spec.loops] == [True, False]
    assert list(spec.default().block_sizes) == [8, 4096, 32, 128]  # the update pass: unchanged
    inputs = focal.make_inputs(focal.gpu_shapes[0], "meta", 0)
    spec = _spec(focal.kernels[0], *inputs, 0.25, 2.0)
    assert not reduces_into_one_address(spec.loops[0])  # a loss per row beside the totals
    assert list(spec.default().block_sizes) == [8]


def test_tile_over_a_torch_size_and_the_global_sum_match_eager(device: str) -> None:
    """``tc.tile(x.size())`` iterates the Size's dims (it is a tuple; a type() check once read it
    as one bound and refused it); the global sum matches eager at two tilings."""
    x = torch.randn(70, 300, generator=torch.Generator().manual_seed(0)).to(device)
    bound = sum_of_squares.bind((x,))
    for blocks in ([16, 64], [64, 512]):
        got = bound.run(bound.compile_config(tc.Config(block_sizes=blocks)), x)
        torch.testing.assert_close(got, x.square().sum().reshape(1), rtol=1e-4, atol=1e-3)


@pytest.mark.crosscompile
def test_a_vocab_argmax_loops_its_row_without_spilling() -> None:
    """Greedy argmax over 128256 logits: the whole row (131072 lanes) spilled 176 bytes a
    thread at 32 warps on sm_90 and 46 VGPRs on gfx942; arg-reductions loop in chunks now."""
    from benchmarks.gen_kernels import HELDOUT
    from tilecraft.tools.check import check_kernel

    case = HELDOUT["greedy_argmax"]
    args = case.make_inputs(case.gpu_shapes[0], "meta", 0)
    spec = _spec(case.kernels[0], *args)
    assert list(spec.default().reduction_loops) == [8192]
    targets = [H200, MI300]
    rows = check_kernel(case.kernels[0], args, targets, lambda b: [b.config_spec.default()])
    for row in rows:
        assert row.report is not None and row.report.ok, (row.target, row.status)
        assert row.report.spills == 0, (row.target, row.report.spills)


@tc.kernel(static_shapes=True)
def project_whole_k(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A projection with K loaded whole (``x[tn, :] @ w[:, :]``)."""
    out = torch.empty([x.size(0), w.size(1)], dtype=torch.float32, device=x.device)
    for tn in tc.tile(x.size(0)):
        out[tn, :] = x[tn, :].to(torch.float32) @ w[:, :].to(torch.float32)
    return out


@tc.kernel(static_shapes=True)
def kmeans_whole_k(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """k-means assignment with the centroids as one whole ':' tile."""
    n, d = x.size()
    ids = torch.empty([n], dtype=torch.int64, device=x.device)
    for tn in tc.tile(n):
        xt = x[tn, :].to(torch.float32)
        ct = centroids[:, :].to(torch.float32)
        dist = (xt * xt).sum(-1)[:, None] - 2.0 * (xt @ ct.t()) + (ct * ct).sum(-1)[None, :]
        ids[tn] = torch.argmin(dist, dim=-1)
    return ids


def test_a_value_no_config_can_hold_is_named_with_what_to_do() -> None:
    """A projection with its 65536-long K loaded whole: tl.dot sums over K, so no config can
    loop it, and every config holds 16 x 65536 elements a program; discovery's error names the
    value and says to tile the dim."""
    from tilecraft.autotune.classify import NoWorkingConfigError
    from tilecraft.config.unfit import unfit_values

    spec = _spec(project_whole_k, _meta(4096, 65536), _meta(65536, 16))
    message = unfit_values(spec)
    assert "test_default_rules.py:" in message and "1048576 elements" in message
    assert "tl.dot sums over it" in message and "tc.tile(" in message
    error = NoWorkingConfigError("project_whole_k", [], None, message)
    assert "tc.tile(" in str(error.hint)
    assert unfit_values(_spec(project_whole_k, _meta(4096, 1024), _meta(1024, 16))) == ""


def test_whole_centroids_loop_as_the_dot_output_dim(device: str) -> None:
    """4096 centroids as a whole dim (``centroids[:, :]``, ``xt @ ct.t()``): 512 fp32 elements
    a thread at 32 warps if held at once (ptxas refused every config). The centroid dim is the
    dot's N, not its K, so it loops in chunks (the argmin carries across them) and fits."""
    from tilecraft.config.unfit import unfit_values

    spec = _spec(kmeans_whole_k, _meta(65536, 128), _meta(4096, 128))
    assert unfit_values(spec) == ""
    centroid_dim = [r for r in spec.reductions if r.extent == 4096]
    assert centroid_dim and centroid_dim[0].loopable, spec.reductions
    default = spec.default()
    assert default.reduction_loops[centroid_dim[0].slot] is not None, default
    x, c = torch.randn(37, 20, device=device), torch.randn(50, 20, device=device)
    for chunk in (None, 16):
        config = tc.Config(block_sizes=[16], reduction_loops=[None, chunk])
        looped = tc.kernel(kmeans_whole_k.fn, config=config, static_shapes=True)
        assert torch.equal(looped(x, c), torch.cdist(x, c).argmin(-1))


# -- grids under a wave keep long rows; row vectors in vectorized layouts ----------------------
def test_filling_the_device_halves_rows_before_the_contiguous_block() -> None:
    """A masked mean pool over [64, 2048, 2048] bf16, grid [batch, hidden]: halving the widest
    block gave [16 sequences, 32 columns] (64 bytes of each row); the batch halves first now and
    each row keeps 256 bytes (H200 graph replays, pool_s16: 0.252 ms -> 0.221 before its split).
    """
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT["length_masked_mean_pool"]
    spec = _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))
    blocks = tile_budget.fill_device(spec, [32, 128, 256])
    assert blocks[1] == 128 and blocks[0] <= 4, blocks
    assert spec.programs(0, spec.default()) >= H200.limits.num_sms


@pytest.mark.crosscompile
def test_row_vector_of_a_vectorized_tile_costs_its_share() -> None:
    """Triton gives each thread a 16-byte vector along the fastest dim, so a [rows, 1] mask of a
    [rows, chunk, 128] bf16 tile is 1/8 of the tile's elements a thread, not all of them: the
    pool's default was predicted at 82 registers (2 programs an SM, no split), ptxas gives 57;
    with the layout's vectors the model says 68 and the grid is split to fill the SMs
    (pool_s16 / mask_ab_s16: 0.221 ms unsplit, 0.130 split in two)."""
    from benchmarks.gen_kernels import HELDOUT
    from tilecraft.tools.check import check_kernel

    case = HELDOUT["length_masked_mean_pool"]
    args = case.make_inputs(case.gpu_shapes[0], "meta", 0)
    spec = _spec(case.kernels[0], *args)
    config = spec.default()
    assert config.split_reductions is not None and max(config.split_reductions) >= 2, config
    unsplit = config.replace(split_reductions=[1])
    predicted = spec.predicted(unsplit).per_thread
    rows = check_kernel(case.kernels[0], args, [H200], lambda b: [unsplit])
    report = rows[0].report
    assert report is not None and report.ok and report.spills == 0
    assert abs(predicted - report.registers) <= 0.25 * report.registers, (predicted, report)


def test_lanes_along_a_reduced_row_do_not_cut_the_warps() -> None:
    """fp8 quantization by groups of 128: each [rows, groups, 128] tile is reduced over its
    contiguous 128 (the lanes run along it), so one thread per kept (row, group) element is not
    the layout; cutting to 2 warps ran 0.0321 ms against 0.0293 at 4 (4096x7168 bf16, H200,
    default_change_s16)."""
    from examples.fp8_quant import quant_groups

    spec = _spec(quant_groups, _meta(4096, 7168))
    assert spec.contiguous_reductions == {0}
    assert (spec.default().num_warps or 4) >= 4


def test_deferred_sums_stay_unless_plain_sums_hold_more_threads_within_the_model_error() -> None:
    """A layer-norm backward at [4 rows, 8 row blocks] x 1024: the model predicted 128
    registers with per-step sums (two programs an SM, so it dropped the deferred sums); ptxas
    allocates 171 (one program, as with the deferred sums at 213). The plain config must hold
    more threads at a quarter more registers than predicted."""
    from benchmarks.default_change import example_call
    from examples import layer_norm

    kernel, args = example_call(layer_norm, (1000, 1000), 1, "meta")
    spec = _spec(kernel, *args)
    config = spec.default()
    assert config.deferred_sums is not False, config
    plain = config.replace(deferred_sums=False)
    assert occupancy.resident_threads(spec, plain) > occupancy.resident_threads(
        spec, config.replace(deferred_sums=True)
    )  # the unguarded rule would have switched


# -- pointwise loops beside reductions --------------------------------------------------------
def test_a_pointwise_loop_keeps_its_tiles_beside_a_reduction_loop() -> None:
    """A global-norm clip: row norms (whole rows) in one loop, then [R, C] scaled in another.
    The scaling loop is pointwise and takes the 2-D pointwise tile's 128 contiguous columns;
    the row loop of the same kernel used to make every loop look like a reduction's ([32, 32]
    tiles: 8192 programs of 4 KB)."""
    from benchmarks.gen_kernels import HELDOUT

    case = HELDOUT["multi_tensor_l2norm_clip"]
    spec = _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))
    pointwise = spec.grid_slots[1]
    assert [spec.default().block_sizes[s] for s in pointwise] == [32, 128]
    assert spec.blocks[pointwise[-1]].whole_dims is False
    assert spec.blocks[spec.grid_slots[0][0]].whole_dims is True

"""The resource model's transient values (config/resources.py): an elementwise chain that streams
into a reduction costs no tile of registers, one that must survive a reduction or a store does,
and a pure elementwise loop keeps whole tiles. Numbers are ptxas's for sm_90 (cross-compiled)."""

from __future__ import annotations

import torch

import tilecraft as tc
from benchmarks.gen_kernels import HELDOUT
from examples.matmul import matmul
from examples.rms_norm import rms_norm_bwd
from examples.softmax import softmax
from tilecraft.config.fma_operands import FMA_K_STEP
from tilecraft.config.resolve import predicted_registers
from tilecraft.config.resources import predict_registers
from tilecraft.config.spec import ConfigSpec
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")


def _spec(kernel: tc.Kernel, *args: torch.Tensor) -> ConfigSpec:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=H200).config_spec


def _bf16(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, dtype=torch.bfloat16, device="meta")


@tc.kernel(static_shapes=True)
def scaled_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` scaled by its row sum: ``xf`` must stay whole across the reduction."""
    out = torch.empty_like(x)
    for tm in tc.tile(x.size(0)):
        xf = x[tm, :].to(torch.float32)
        total = torch.sum(xf * xf, dim=-1)
        out[tm, :] = (xf / total[:, None]).to(x.dtype)
    return out


@tc.kernel(static_shapes=True)
def row_sums(x: torch.Tensor) -> torch.Tensor:
    """The same chain with nothing after the reduction: it streams into the sum."""
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tm in tc.tile(x.size(0)):
        xf = x[tm, :].to(torch.float32)
        out[tm] = torch.sum(xf * xf, dim=-1)
    return out


def test_a_chain_into_a_reduction_is_transient_one_across_it_is_a_tile() -> None:
    config = tc.Config(block_sizes=[8], reduction_loops=[None], num_warps=4)
    x = _bf16(4096, 4096)
    streamed = predicted_registers(_spec(row_sums, x), config, 4).per_thread
    kept = predicted_registers(_spec(scaled_rows, x), config, 4).per_thread
    # 8 x 4096 over 128 threads: 256 elements each; xf in fp32 is 256 registers when kept
    assert kept - streamed >= 256
    assert streamed < 255  # the bf16 load (128 registers) and the base, no fp32 tile


def test_rms_norm_backward_chunks_are_predicted_near_ptxas() -> None:
    """4 rows x 2048 at 8 warps: ptxas 80 registers (without transient values the model said
    192 and the default took 16 warps, 0.786 ms on the H200 against 0.585 at 8)."""
    x, w = _bf16(4608, 40920), _bf16(40920)
    spec = _spec(rms_norm_bwd, x, x, w, torch.empty(4608, device="meta"))
    config = tc.Config(block_sizes=[4], reduction_loops=[2048], num_warps=8)
    assert 80 <= predicted_registers(spec, config, 8).per_thread <= 128


def test_softmax_chunk_is_predicted_near_ptxas() -> None:
    """Rolled softmax: three chunk loops (max, sum, output), each holding one accumulator and
    its load's chunk; ptxas (aligned pointers) 32 and 40 registers. The model stays on the safe
    side and within 60%: counting every phase's accumulators and values at once, it said 64."""
    spec = _spec(softmax, _bf16(8192, 32000))
    for chunk, warps, ptxas in ((16384, 32, 32), (8192, 16, 40)):
        config = tc.Config(block_sizes=[1], reduction_loops=[chunk], num_warps=warps)
        assert ptxas <= predicted_registers(spec, config, warps).per_thread <= ptxas * 1.6


def test_rolled_phases_hold_their_own_accumulators() -> None:
    """KL divergence of two logit rows in 4096-wide chunks at 8 warps: five rolled reductions
    in three chunk loops, at most two accumulators and two loads' chunks live at once (ptxas:
    59 registers); counting all five accumulators and the whole-row values predicted 144."""
    from benchmarks.gen_kernels import CASES

    case = CASES["kl_div_rows"]
    spec = _spec(case.kernels[0], *case.make_inputs((4096, 32000), "meta", 0))
    config = tc.Config(block_sizes=[1], reduction_loops=[4096], num_warps=8)
    assert 59 <= predicted_registers(spec, config, 8).per_thread <= 90


def test_pure_elementwise_loops_keep_whole_tiles() -> None:
    """RoPE [8, 16] at 8 warps compiles to 192 registers: its chains are not streamed."""
    from examples.rope import make_inputs, rope_rotate_half

    args = make_inputs((8192, 32, 128), torch.bfloat16, "meta", 0)
    spec = _spec(rope_rotate_half, *args)
    config = tc.Config(block_sizes=[8, 16], num_warps=8)
    assert predicted_registers(spec, config, 8).per_thread > 128


def test_strategies_that_hold_accumulators_in_registers_cost_them() -> None:
    """A deferred sum keeps its tile accumulator through the loop (16 x 256 fp32 over 128
    threads: 32 registers, less the 2 of the [256] carry it replaces); a row loop run chunks
    outer keeps each accumulator's chunk (2 x 2048 fp32 over 256 threads: 16 registers)."""
    from benchmarks.gen_kernels import CASES
    from examples.sum import sum_first

    spec = _spec(sum_first, _bf16(4096, 4096))
    tiles = tc.Config(block_sizes=[16, 256], num_warps=4, num_stages=1)
    per_step = predicted_registers(spec, tiles.replace(deferred_sums=False), 4).per_thread
    deferred = predicted_registers(spec, tiles.replace(deferred_sums=True), 4).per_thread
    assert 28 <= deferred - per_step <= 32  # (the peak may move within the loop)
    case = CASES["layer_norm_bwd_seed"]
    seed = _spec(case.kernels[0], *case.make_inputs((4608, 40920), "meta", 0))
    rows = tc.Config(block_sizes=[16, 2], reduction_loops=[2048], num_warps=8, num_stages=1)
    in_memory = predicted_registers(seed, rows.replace(chunk_outer=False), 8).per_thread
    outer = predicted_registers(seed, rows.replace(chunk_outer=True), 8).per_thread
    assert 14 <= outer - in_memory <= 16


def test_each_chunk_loop_reads_the_loads_its_values_need() -> None:
    """A full-row RMSNorm rolled over its row: the sum's chunk loop reads x alone; the output's
    reads x again and the weight (loaded in no earlier phase: a load counts where it is used)."""
    from benchmarks.gen_kernels import CASES
    from tilecraft.ir.nodes import SymKind
    from tilecraft.ir.phases import chunk_loop_loads

    case = CASES["rms_norm_full_row"]
    spec = _spec(case.kernels[0], *case.make_inputs((64, 4000), "meta", 0))
    body = spec.loops[0].body
    (row,) = {id(d): d for n in body for d in n.syms() if d.kind is SymKind.RDIM}.values()
    reads = chunk_loop_loads(body, row)
    names = {p: sorted(n.attrs["tensor"].name for n in loads) for p, loads in reads.items()}
    assert names == {0: ["x"], 1: ["weight", "x"]}


def test_fp32_ieee_dots_hold_their_operands_in_registers() -> None:
    """fp32 operands with input_precision="ieee" run on the FMA units with operand slices in
    registers (sm_90 ptxas, 8 warps: 128x128x32 176 registers, 128x128x64 spills 856 B,
    128x256x64 3160 B). The model counts them, so the default does not spill; tf32 (wgmma)
    does not pay them."""
    args = (torch.empty(4096, 4096, device="meta"), torch.empty(4096, 4096, device="meta"))
    ieee = tc.kernel(matmul.fn, static_shapes=True, dot_precision="ieee")
    tf32 = tc.kernel(matmul.fn, static_shapes=True, dot_precision="tf32")
    spec = _spec(ieee, *args)

    def regs(s: ConfigSpec, m: int, n: int, k: int) -> int:
        config = tc.Config(block_sizes=[m, n, k], num_warps=8, num_stages=2)
        return predicted_registers(s, config, 8).per_thread

    assert 160 <= regs(spec, 128, 128, 32) <= 200  # ptxas 176
    assert regs(spec, 128, 128, 64) > 255 and regs(spec, 128, 256, 64) > 255  # both spill
    assert regs(_spec(tf32, *args), 128, 128, 64) < regs(spec, 128, 128, 64)
    default = spec.default()
    assert not predicted_registers(spec, default, default.num_warps or 4).spills


def test_fp32_fma_dots_shrink_k_first_and_are_never_warp_specialized() -> None:
    """An FMA dot's K block sets only its operand slices; its M x N tile sets each thread's
    outer product per shared-memory read. Over budget, K halves first (H200, fp32 4096^3:
    128x128x32 3.10 ms, the old 64x128x64 3.42). Warp-specialized consumers cannot hold the
    operands (64x128x64 at 4 warps spilled 11984 B a thread): never the default for FMA dots;
    tf32 dots (wgmma) keep both."""
    ieee = tc.kernel(matmul.fn, static_shapes=True, dot_precision="ieee")
    tf32 = tc.kernel(matmul.fn, static_shapes=True, dot_precision="tf32")
    for m, k, n in [(4096, 4096, 4096), (4096, 512, 4096)]:
        args = (torch.empty(m, k, device="meta"), torch.empty(k, n, device="meta"))
        fma = _spec(ieee, *args).default()
        assert list(fma.block_sizes) == [128, 128, FMA_K_STEP]
        assert not any(fma.range_warp_specializes)
        assert int(_spec(tf32, *args).default().block_sizes[2]) > FMA_K_STEP
    args = (torch.empty(4096, 512, device="meta"), torch.empty(512, 4096, device="meta"))
    assert any(_spec(tf32, *args).default().range_warp_specializes)


def test_amd_mfma_lanes_hold_more_rows_of_a_row_vector() -> None:
    """A 32x32 MFMA spreads a wave's accumulator rows over 2 lane groups (NVIDIA's mma over 8),
    so each lane holds 16 rows of attention's running max and sum: gfx942 compiles the
    attention example at 128x64 / 8 warps to 190 VGPRs (the model said 101 with NVIDIA's
    groups, 136 now). Pointwise kernels are unchanged."""
    from examples.attention import attention

    q = torch.empty(64, 4096, 128, dtype=torch.bfloat16, device="meta")
    config = tc.Config(block_sizes=[128, 64], num_warps=8, num_stages=1)

    def regs(target: str, kernel: tc.Kernel, *args: object) -> int:
        bound = BoundKernel(kernel, kernel.bind_arguments(args, {}), target=Target.parse(target))
        return predicted_registers(bound.config_spec, config, 8).per_thread

    hip = regs("hip:gfx942", attention, q, q, q, False)
    assert 130 <= hip <= 200
    # the groups only matter where the loop has a dot: softmax's row vectors keep their cost
    (loop,) = _spec(softmax, _bf16(64, 4096)).loops
    costs = {
        groups: predict_registers(
            loop,
            lambda sym: 4 if sym.index == 0 else 4096,
            512,
            65536,
            mma_row_groups=groups,
            warp_size=64,
        ).per_thread
        for groups in (2, 8)
    }
    assert costs[2] == costs[8]


def _case_spec(name: str) -> ConfigSpec:
    from benchmarks.gen_kernels import ALL_CASES

    case = ALL_CASES[name]
    return _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))


def test_an_unset_knob_counts_as_it_will_run() -> None:
    """The default's rules size warps and splits on configs whose knobs are unset (None: on
    where offered). A tall column sum's deferred sum holds a [256, 32] fp32 tile: ptxas 59
    registers with it, 32 without; the model said 33 for the unset config (6 programs per SM
    instead of 4) and its split rule overshot (H200: split 32 0.0491 ms, 16 0.0457)."""
    spec = _case_spec("column_sum_tall")
    tiles = tc.Config(block_sizes=[256, 32], num_warps=8, num_stages=1)
    unset = predicted_registers(spec, tiles, 8).per_thread
    assert unset == predicted_registers(spec, tiles.replace(deferred_sums=True), 8).per_thread
    assert unset - predicted_registers(spec, tiles.replace(deferred_sums=False), 8).per_thread >= 28
    assert 59 <= unset <= 72


def test_a_loaded_tile_keeps_its_own_layout_until_broadcast() -> None:
    """A masked mean pool loads a [batch, time] int64 mask and broadcasts it over the hidden
    dim: Triton loads it in a layout of its own (a few elements a thread), not as a slice of
    the [batch, time, hidden] layout (32 a thread, replicated). ptxas at [4, 128, 16] / 8 warps:
    40 registers, 56 with the deferred sum; the model said 120 and 151 (then 57 and 82)."""
    spec = _case_spec("masked_mean_pool")
    tiles = tc.Config(block_sizes=[4, 128, 16], num_warps=8, num_stages=1)
    assert predicted_registers(spec, tiles.replace(deferred_sums=False), 8).per_thread <= 64
    assert predicted_registers(spec, tiles.replace(deferred_sums=True), 8).per_thread <= 90


@tc.kernel(static_shapes=True)
def gumbel_argmax(logits: torch.Tensor, seed: int) -> torch.Tensor:
    """Gumbel-max sampling: a tl.rand draw per logit, looped with the row's argmax."""
    b, v = logits.size()
    tokens = torch.empty([b], dtype=torch.int64, device=logits.device)
    for tb in tc.tile(b):
        noise = -torch.log(-torch.log(tc.rand([tb, v], seed)))
        tokens[tb] = torch.argmax(logits[tb, :].to(torch.float32) + noise, dim=-1).to(torch.int64)
    return tokens


def test_random_numbers_hold_philox_counters() -> None:
    """tl.rand keeps four 32-bit counter words per element through its rounds: at 16 elements
    a thread ptxas allocates 104 registers (sm_90), which the model put at 41 without them."""
    spec = BoundKernel(
        gumbel_argmax, gumbel_argmax.bind_arguments((_bf16(256, 128256), 7), {}), target=H200
    ).config_spec
    config = tc.Config(block_sizes=[1], reduction_loops=[8192], num_warps=16)
    assert 90 <= predicted_registers(spec, config, 16).per_thread <= 120


@tc.kernel(static_shapes=True)
def column_max_with_index(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.max over the rows of each column tile: a value and an index reduction of one
    input, which codegen emits as one tuple reduction."""
    values = torch.empty([x.size(1)], dtype=x.dtype, device=x.device)
    indices = torch.empty([x.size(1)], dtype=torch.int64, device=x.device)
    for tn in tc.tile(x.size(1)):
        v, i = torch.max(x[:, tn].to(torch.float32), dim=0)
        values[tn] = v.to(x.dtype)
        indices[tn] = i
    return values, indices


@tc.kernel(static_shapes=True)
def column_max_only(x: torch.Tensor) -> torch.Tensor:
    values = torch.empty([x.size(1)], dtype=x.dtype, device=x.device)
    for tn in tc.tile(x.size(1)):
        values[tn] = torch.amax(x[:, tn].to(torch.float32), dim=0).to(x.dtype)
    return values


def test_a_max_and_argmax_pair_streams_its_input_like_one_reduction() -> None:
    """The fp32 cast feeding both members of a torch.max pair is not held to the second: the
    pair is one reduction (a [512, 64] bf16 tile at 4 warps held it as 256 more registers
    than ptxas allocated)."""
    config = tc.Config(block_sizes=[64], reduction_loops=[None], num_warps=4)
    x = _bf16(512, 4096)
    pair = predicted_registers(_spec(column_max_with_index, x), config, 4).per_thread
    single = predicted_registers(_spec(column_max_only, x), config, 4).per_thread
    assert pair - single <= 4  # the [64] index result, not a [512, 64] fp32 tile


def test_grouped_stores_hold_every_value_of_the_group() -> None:
    """A window-of-4 unfold stores four shifted loads into the four elements of each window:
    codegen emits the group as one store at the last (ir/paired_slices.py), so all four loaded
    tiles are live there. [8, 8, 128] bf16 tiles at 8 warps: 32 elements a thread each, four
    tiles 64 registers packed, 128 as the scalar loads they compile to; ptxas allocates 134 for
    sm_90 (one tile alone predicted 32)."""
    case = HELDOUT["unfold_1d_k4"]
    spec = _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))
    config = tc.Config(block_sizes=[8, 8, 128], num_warps=8)
    assert predicted_registers(spec, config, 8).per_thread >= 16 + 128


def test_erf_in_a_gemm_epilogue_holds_temporaries_beside_the_accumulator() -> None:
    """gelu(x @ w + bias) + residual (exact gelu: libdevice erff) at 128x256 tiles, 8 warps:
    ptxas (sm_90) allocates 255 registers and spills 352 bytes, where the accumulator and
    residual alone predicted 272 and the same epilogue with tanh's gelu compiles to 169; so the
    default keeps 128x128 tiles (178 registers, no spill)."""
    case = HELDOUT["gemm_bias_gelu_residual"]
    spec = _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))
    default = spec.default()
    assert default.block_sizes[:2] == (128, 128)
    wide = default.replace(block_sizes=[128, 256, 64])
    assert predicted_registers(spec, wide, 8).spills
    assert not predicted_registers(spec, default, 8).spills


@tc.kernel(static_shapes=True)
def shifted_sum(x: torch.Tensor, shift: int) -> torch.Tensor:
    """out[r, w] = x[r, w] + x[r, w + shift]: the shifted load's alignment is the shift's."""
    r, length = x.size()
    out = torch.empty([r, length - 8], dtype=x.dtype, device=x.device)
    for tr, tw in tc.tile([r, length - 8]):
        out[tr, tw] = x[tr, tw] + x[tr, tw.index + shift]
    return out


def test_narrow_loads_that_cannot_be_vectors_hold_a_register_an_element() -> None:
    """A bf16 load at an odd element offset (a shifted window) or masked at an odd extent
    compiles to one ld.global.b16 per element, each in a 32-bit register of its own (a
    window-of-4 unfold over 4093 windows at [8, 8, 128], 8 warps: 134 registers on sm_90).
    The model counts such a tile whole registers, and the default shrinks the unfold's tile
    until its loads fit 128 registers."""
    config = tc.Config(block_sizes=[8, 512], num_warps=4)  # 32 elements a thread a tile

    def cost(shift: int, length: int) -> int:
        spec = _spec(shifted_sum, _bf16(64, length), shift)
        return predicted_registers(spec, config, 4).per_thread

    assert cost(1, 4104) - cost(2, 4104) == 16  # the shifted tile: 32 registers, not 16
    assert cost(3, 4104) == cost(1, 4104)
    assert cost(2, 4105) == cost(1, 4104) + 16  # extent 4097: both loads' masks are odd
    case = HELDOUT["unfold_1d_k4"]
    spec = _spec(case.kernels[0], *case.make_inputs(case.gpu_shapes[0], "meta", 0))
    wide = tc.Config(block_sizes=[8, 8, 128], num_warps=8)
    assert predicted_registers(spec, wide, 8).per_thread >= 16 + 128
    assert predicted_registers(spec, spec.default(), 4).per_thread <= 128


@tc.kernel(static_shapes=True)
def _softmax_then_scale(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.size()
    probs = torch.empty_like(x)
    scaled = torch.empty_like(x)
    for tm in tc.tile(m):
        probs[tm, :] = torch.softmax(x[tm, :].float(), dim=1).to(x.dtype)
    for tm, tn in tc.tile([m, n]):
        scaled[tm, tn] = x[tm, tn] * 2
    return probs, scaled


def test_check_reports_each_loops_own_prediction() -> None:
    """`tilecraft check` shows each generated kernel's own loop's registers, not the plan's
    worst loop's for all (an elementwise loop beside a whole-row softmax)."""
    from tilecraft.config.resolve import loop_registers
    from tilecraft.tools.check import check_kernel

    args = (_bf16(4096, 8192),)
    rows = check_kernel(_softmax_then_scale, args, [H200], lambda b: [b.config_spec.default()])
    assert len(rows) == 2
    spec = _spec(_softmax_then_scale, *args)
    config = spec.resolve(rows[0].config, warn=False).config
    want = [e.per_thread for e in loop_registers(spec, config, config.num_warps or 4)]
    assert [r.predicted_registers for r in rows] == want
    assert want[0] > want[1]

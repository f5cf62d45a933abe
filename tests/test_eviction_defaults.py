"""The default's L2 eviction policies (config/eviction.py) on cuda:90 (50 MiB of L2): in a
kernel whose programs read rows twice, where the rows the resident programs re-read at once fit
in L2 and all of them do not, those rows and the tensors every program reads are kept (`last`);
everything else, and every load of a kernel that reads nothing twice, keeps the hardware's
policy; the generated loads carry them; targets without policies (AMD, Intel), targets whose L2
is not known and dot kernels get none."""

from __future__ import annotations

import pytest
import torch

import tilecraft as tc
from benchmarks.gen_kernels.norms import ln_bwd_cta_partials, rms_norm_llama, welford_layer_norm
from benchmarks.gen_kernels.reductions import column_sum, online_softmax
from examples.matmul import matmul
from tilecraft.config import eviction
from tilecraft.config.spec import ConfigSpec
from tilecraft.runtime.kernel import BoundKernel
from tilecraft.targets.target import Target

H200 = Target.parse("cuda:90")


def _bound(kernel: tc.Kernel, *args: object, target: Target = H200) -> BoundKernel:
    return BoundKernel(kernel, kernel.bind_arguments(args, {}), target=target)


def _spec(kernel: tc.Kernel, *args: object, target: Target = H200) -> ConfigSpec:
    return _bound(kernel, *args, target=target).config_spec


def _meta(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device="meta")


@tc.kernel(static_shapes=True)
def halves_row_sum(x: torch.Tensor) -> torch.Tensor:
    """One load of x, two loop levels deep (a loop over the row's halves, then over each)."""
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in tc.tile(m):
        acc = tc.zeros([tile_m], dtype=torch.float32)
        for half in tc.tile(0, 2, block_size=1):
            for tile_n in tc.tile(half.begin * (n // 2), (half.begin + 1) * (n // 2)):
                acc += x[tile_m, tile_n].to(torch.float32).sum(-1)
        out[tile_m] = acc
    return out


def test_a_row_walked_by_two_loops_and_its_weights_are_kept() -> None:
    """Welford: x in both loops over the row, weight and bias read by every row's program."""
    args = (_meta(4096, 16384), _meta(16384), _meta(16384), 1e-5)
    config = _spec(welford_layer_norm, *args).default()
    assert config.load_eviction_policies == ("last",) * 4


def test_a_rolled_row_is_kept_only_when_two_chunk_loops_read_it() -> None:
    """RMSNorm over 40920 columns is chunked (sum of squares, then the normalization reads the
    row again); at 4096 columns the row stays in registers and is read once."""
    rolled = _spec(rms_norm_llama, _meta(4096, 40920), _meta(40920), 1e-6).default()
    assert rolled.reduction_loops[0] is not None
    assert rolled.load_eviction_policies == ("last", "last")
    whole = _spec(rms_norm_llama, _meta(4096, 4096), _meta(4096), 1e-6).default()
    assert whole.reduction_loops[0] is None
    assert not any(whole.load_eviction_policies)


def test_reread_bytes_count_each_row_a_program_reads_twice_once() -> None:
    """Per program: Welford re-reads its bf16 row of x (both loops read it; weight and bias are
    read once), RMSNorm its 40920-wide row (two chunk loops), a column sum nothing."""
    welford = _spec(welford_layer_norm, _meta(4096, 16384), _meta(16384), _meta(16384), 1e-5)
    assert eviction.reread_bytes(welford, welford.default(), 0) == 16384 * 2
    rms = _spec(rms_norm_llama, _meta(4096, 40920), _meta(40920), 1e-6)
    assert eviction.reread_bytes(rms, rms.default(), 0) == 40920 * 2
    colsum = _spec(column_sum, _meta(65536, 1024))
    assert eviction.reread_bytes(colsum, colsum.default(), 0) == 0


def test_kernels_that_read_nothing_twice_keep_the_hardware_policy() -> None:
    """``first`` on a streaming read made such kernels slower on the H200 (add 4608x40920
    0.31 -> 0.37 ms): a column sum keeps the hardware's policy; a softmax written as two loops
    over a short row still reads it twice."""
    assert not any(_spec(column_sum, _meta(65536, 1024)).default().load_eviction_policies)
    # one load inside nested loops is read once, not once per loop level
    assert not any(_spec(halves_row_sum, _meta(4096, 32768)).default().load_eviction_policies)
    assert (
        _spec(online_softmax, _meta(8192, 8192)).default().load_eviction_policies == ("last",) * 2
    )


def test_rows_are_kept_only_where_l2_can_hold_them_and_would_not_anyway() -> None:
    """Column softmax 4096x4096: its 32 MiB of input fits L2 whatever the policy (H200: 0.0509 ms
    without, 0.054 with ``last``); logsumexp over the middle dim of 16x4096x1024: what its
    resident programs re-read at once (~99 MiB) does not fit (0.0892 without, 0.0945 with);
    cross entropy over 1000 rows of 50257 logits: ~51 MiB at once (0.113 without, 0.121 with),
    over 4096 rows of 32000: ~16 MiB (0.098 without, 0.0874 with)."""
    from benchmarks.gen_kernels import HELDOUT
    from examples import cross_entropy

    for name in ("column_softmax", "logsumexp_middle"):
        case = HELDOUT[name]
        inputs = case.make_inputs(case.gpu_shapes[0], "meta", 0)
        config = _spec(case.kernels[0], *inputs).default()
        assert any(c is not None for c in config.reduction_loops)  # its rows are read twice
        assert not any(config.load_eviction_policies)
    for rows, vocab, kept in ((1000, 50257, False), (4096, 32000, True)):
        inputs = cross_entropy.make_inputs((rows, vocab), torch.bfloat16, "meta", 0)
        config = _spec(cross_entropy.cross_entropy, *inputs).default()
        assert ("last" in config.load_eviction_policies) is kept


def test_rows_a_program_finds_from_its_tile_bounds_are_its_own() -> None:
    """The seed's layer-norm backward loops over rows ``cta.begin:cta.end``: x and dy are read
    again by the column-chunk pass; rstd and mean are each program's own rows (read once, as
    the loop bounds come from the program's tile), the weight every program's. (At 8192x12288:
    at its own 4608x40920 the resident programs' rows, ~103 MiB, do not fit L2.)"""
    m, n = 8192, 12288
    stats = (_meta(m, dtype=torch.float32), _meta(m, dtype=torch.float32))
    args = (_meta(m, n), _meta(m, n), *stats, _meta(n))  # dy, x, mean, rstd, weight
    config = _spec(ln_bwd_cta_partials, *args).default()
    # loads in program order: x, dy, rstd, mean, weight
    assert config.load_eviction_policies == ("last", "last", "", "", "last")


def test_loads_carry_the_policies_in_generated_code() -> None:
    bound = _bound(online_softmax, _meta(8192, 8192))
    config = bound.config_spec.default()
    assert config.load_eviction_policies == ("last", "last")
    code = bound.to_triton_code(config)
    assert code.count("eviction_policy='evict_last'") == 2


@pytest.mark.parametrize("target", ["hip:gfx942", "xpu", "cuda:100", "interpret"])
def test_targets_without_policies_or_a_known_l2_get_none(target: str) -> None:
    args = (_meta(64, 256), _meta(256), _meta(256), 1e-5)
    spec = _spec(welford_layer_norm, *args, target=Target.parse(target))
    assert not any(spec.default().load_eviction_policies)


def test_dot_kernels_keep_the_hardware_policy() -> None:
    """Operands re-read across programs by tile: neither label fits (L2 grouping orders it)."""
    config = _spec(matmul, _meta(4096, 4096), _meta(4096, 4096)).default()
    assert not any(config.load_eviction_policies)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("case_name", "example"),
    [("kl_div_rows", None), ("online_softmax_two_pass", None), (None, (4096, 32000))],  # fmt: skip
)
def test_kept_rows_compute_the_same_on_the_gpu(
    case_name: str | None, example: tuple[int, int] | None
) -> None:
    """Defaults that keep rows (``evict_last`` loads) against eager, on random data."""
    from benchmarks.gen_kernels import CASES
    from examples import cross_entropy

    if case_name is not None:
        case = CASES[case_name]
        inputs = case.make_inputs(case.gpu_shapes[0], "cuda", 0)
        kernel = tc.kernel(case.kernels[0].fn, static_shapes=case.kernels[0].static_shapes)
        got, want = kernel(*inputs), case.reference(*inputs)
        atol = case.atol
    else:
        inputs = cross_entropy.make_inputs(example, torch.bfloat16, "cuda", 0)
        kernel = tc.kernel(cross_entropy.cross_entropy.fn)
        got, want = kernel(*inputs), cross_entropy.reference(*inputs)
        atol = 1e-2
    config = kernel.bind(inputs).default_program().config
    assert "last" in config.load_eviction_policies
    torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=1e-2)


def test_an_index_computed_through_a_long_chain_is_not_called_shared() -> None:
    """The grid-dependence walk recurses through a load's index computation; past Python's
    recursion limit it assumes the load depends on the program (no ``last`` for it)."""
    from tilecraft.config.eviction import _GridDependence
    from tilecraft.ir.nodes import DeviceLoop, Node, Op, Sym, SymKind

    row = Sym(SymKind.BLOCK, 0, 64, config_slot=0)
    value = Node(Op.ARG, [], (), torch.int32, {"name": "k"})
    for _ in range(5000):
        value = Node(Op.BINARY, [value], (), torch.int32, {"fn": "add"})
    load = Node(Op.LOAD, [value], (1,), torch.float32, {"index": (None,)})
    loop = DeviceLoop(0, [row], [load], {}, {}, None, [row])  # (no source location)
    assert _GridDependence(loop).load(load)
    shallow = Node(Op.LOAD, [], (1,), torch.float32, {"index": (None,)})
    assert not _GridDependence(loop).load(shallow)


def test_the_plan_names_each_kept_load() -> None:
    """``tilecraft check`` / ``Plan.describe()`` show the policy of each load that has one."""
    spec = _spec(rms_norm_llama, _meta(4096, 40920), _meta(40920), 1e-6)
    text = spec.resolve(spec.default(), warn=False).describe()
    assert "access 0 (load): pointer, evict_last" in text
    assert "access 1 (load): pointer, evict_last" in text
    assert "access 2" not in text  # the store: no policy, plain pointer

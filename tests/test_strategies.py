"""Codegen strategies selected by config fields (issue: the full config space).

Golden checks of generated Triton (ordered line matches, FileCheck style) for the seed-003 shape
of rms_norm and for a grouped, TMA-fed matmul, plus interpreter runs of each strategy and of random
configs against eager references.
"""

from __future__ import annotations

import random
import re

import pytest
import torch
from kernels import rms_norm

import tilecraft as tc
from tilecraft.errors import ConfigError


@tc.kernel
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    _, n = b.size()
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tm, tn in tc.tile([m, n]):
        acc = tc.zeros([tm, tn], dtype=torch.float32)
        for tk in tc.tile(k):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc.to(out.dtype)
    return out


def check_order(code: str, patterns: list[str]) -> None:
    """Each regex must match a line after the previous match (like FileCheck's CHECK lines)."""
    lines = code.splitlines()
    at = 0
    for pattern in patterns:
        for i in range(at, len(lines)):
            if re.search(pattern, lines[i]):
                at = i + 1
                break
        else:
            raise AssertionError(f"no line after line {at} matches {pattern!r} in:\n{code}")


SEED_003 = tc.Config(
    block_sizes=[4],
    reduction_loops=[256],
    pid_type="persistent_interleaved",
    indexing="tensor_descriptor",
    range_unroll_factors=[2],
    range_multi_buffers=[False],
    range_flattens=[True],
    maxnreg=128,
)


def test_golden_rms_norm_seed_003_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:90")
    x, w = torch.randn(2048, 1024, dtype=torch.bfloat16), torch.randn(1024, dtype=torch.bfloat16)
    code = rms_norm.bind((x, w)).to_triton_code(SEED_003)
    check_order(
        code,
        [
            r"def _tc_rms_norm_0\(x, w, out, num_programs, eps, _BLOCK_0: tl.constexpr, _RBLOCK_1: tl.constexpr\)",
            r"x_desc = tl.make_tensor_descriptor\(x, \[2048, 1024\], \[1024, 1\], \[_BLOCK_0, _RBLOCK_1\]\)",
            r"out_desc = tl.make_tensor_descriptor\(out, ",
            r"for virtual_pid in tl.range\(tl.program_id\(0\), total_tiles, num_programs, "
            r"loop_unroll_factor=2, disallow_acc_multi_buffer=True, flatten=True\):",
            r"for roffset_1 in tl.range\(0, 1024, _RBLOCK_1\):",  # phase 1: the sum of squares
            r"x_desc.load\(\[offset_0, roffset_1\]\)",
            r"tl.sum\(v_acc, 1\)",
            r"tl.rsqrt",
            r"for roffset_1_1 in tl.range\(0, 1024, _RBLOCK_1\):",  # phase 2: x re-loaded
            r"x_desc.load\(\[offset_0, roffset_1_1\]\)",
            r"tl.load\(w \+",  # w[None, :] has a None index: pointer, not a descriptor
            r"out_desc.store\(\[offset_0, roffset_1_1\], ",
            r"num_programs = sm_count\(env\['x'\]\) \* 1",
            r"ensure_allocator\(\)",
            r"maxnreg=128",
        ],
    )


def test_golden_matmul_l2_grouping_tensor_descriptor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:90")
    a = torch.randn(1024, 512, dtype=torch.bfloat16)
    b = torch.randn(512, 768, dtype=torch.bfloat16)
    cfg = tc.Config(
        block_sizes=[128, 128, 64],
        l2_groupings=[8],
        indexing="tensor_descriptor",
        num_warps=8,
        num_stages=3,
    )
    code = matmul.bind((a, b)).to_triton_code(cfg)
    check_order(
        code,
        [
            r"a_desc = tl.make_tensor_descriptor\(a, \[1024, 512\], \[512, 1\], \[_BLOCK_0, _BLOCK_2\]\)",
            r"b_desc = tl.make_tensor_descriptor\(b, \[512, 768\], \[768, 1\], \[_BLOCK_2, _BLOCK_1\]\)",
            r"inner_pid = tl.program_id\(0\) % \(\(8\) \* \(6\)\)",
            r"pids_in_group = 8 \* \(6\)",
            r"group_rows = tl.minimum\(\(8\) - first_pid, 8\)",
            r"pid_0 = first_pid \+ \(inner_pid % pids_in_group\) % group_rows",
            r"pid_1 = \(inner_pid % pids_in_group\) // group_rows",
            r"for offset_2 in tl.range\(0, 512, _BLOCK_2\):",
            r"a_desc.load\(\[offset_0, offset_2\]\)",
            r"b_desc.load\(\[offset_2, offset_1\]\)",
            r"tl.dot\(load, load_1, acc=",
            r"out_desc.store\(\[offset_0, offset_1\], ",
            r"_tc_matmul_0\[\(8 \* 6,\)\]",
        ],
    )


def _rms_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()).to(x.dtype)


STRATEGIES = [
    SEED_003,
    tc.Config(
        block_sizes=[8], pid_type="persistent_blocked", num_sm_multiplier=2, indexing="block_ptr"
    ),
    tc.Config(block_sizes=[16], pid_type="xyz", load_eviction_policies=["first", "last"]),
    tc.Config(
        block_sizes=[2],
        reduction_loops=[32],
        indexing=["block_ptr", "pointer", "tensor_descriptor"],
    ),
]


@pytest.mark.parametrize("config", STRATEGIES, ids=lambda c: c.pid_type)
def test_rms_norm_strategies_run(config: tc.Config) -> None:
    x, w = torch.randn(37, 100), torch.randn(100)
    bound = rms_norm.bind((x, w))
    out = bound.run(bound.compile_config(config), x, w)
    torch.testing.assert_close(out, _rms_ref(x, w), rtol=1e-5, atol=1e-5)


MATMUL_STRATEGIES = [
    tc.Config(block_sizes=[16, 16, 16], l2_groupings=[2], loop_orders=[[1, 0]]),
    tc.Config(
        block_sizes=[32, 16, 16],
        pid_type="persistent_interleaved",
        l2_groupings=[4],
        indexing="block_ptr",
    ),
    tc.Config(
        block_sizes=[16, 32, 16],
        pid_type="xyz",
        loop_orders=[[1, 0]],
        range_unroll_factors=[0, 2],
        range_num_stages=[0, 2],
    ),
    tc.Config(block_sizes=[16, 16, 32], indexing="tensor_descriptor", range_flattens=[None, False]),
]


@pytest.mark.parametrize("config", MATMUL_STRATEGIES, ids=lambda c: f"{c.pid_type}-{c.indexing}")
def test_matmul_strategies_run(config: tc.Config) -> None:
    a, b = torch.randn(70, 48), torch.randn(48, 40)
    bound = matmul.bind((a, b))
    torch.testing.assert_close(
        bound.run(bound.compile_config(config), a, b), a @ b, rtol=1e-4, atol=1e-4
    )


def test_random_strategy_configs_are_normalized_and_correct() -> None:
    x, w = torch.randn(37, 100), torch.randn(100)
    bound = rms_norm.bind((x, w))
    rng = random.Random(7)
    for _ in range(12):
        config = bound.config_spec.random(rng)
        assert bound.config_spec.normalize(config) == config
        out = bound.run(bound.compile_config(config), x, w)
        torch.testing.assert_close(out, _rms_ref(x, w), rtol=1e-5, atol=1e-5)


def test_normalize_rejects_impossible_strategies() -> None:
    a, b = torch.randn(70, 48), torch.randn(48, 40)
    spec = matmul.bind((a, b)).config_spec
    with pytest.raises(ConfigError, match="loop_orders"):
        spec.normalize(tc.Config(block_sizes=[16, 16, 16], loop_orders=[[0, 0]]))
    with pytest.raises(ConfigError, match="l2_groupings"):
        spec.normalize(tc.Config(block_sizes=[16, 16, 16], pid_type="xyz", l2_groupings=[8]))
    with pytest.raises(ConfigError, match="flatten_loops"):
        spec.normalize(tc.Config(block_sizes=[16, 16, 16], flatten_loops=[True]))
    # a per-access list for another number of loads is repaired (written for other shapes)
    with pytest.warns(UserWarning, match="indexing has 2 entries; this kernel has 3"):
        fixed = spec.normalize(
            tc.Config(block_sizes=[16, 16, 16], indexing=["block_ptr", "pointer"])
        )
    assert set(fixed.indexing) <= {"pointer", ""}, fixed.indexing


def test_xyz_only_when_the_grid_fits() -> None:
    x = torch.randn(70000 * 2, 2)
    w = torch.randn(2)

    @tc.kernel
    def scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm, tn in tc.tile([x.size(1), x.size(0)], block_size=[1, 1]):
            out[tn, tm] = x[tn, tm] * w[tm]
        return out

    spec = scale.bind((x, w)).config_spec
    assert "xyz" not in spec.space.pid_types()  # 140000 tiles on the y axis > 65535
    with pytest.raises(ConfigError, match="pid_type='xyz'"):
        spec.normalize(tc.Config(pid_type="xyz"))


def test_tensor_descriptor_needs_sm90(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = torch.randn(64, 128), torch.randn(128)
    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:80")
    spec = rms_norm.bind((x, w)).config_spec
    assert all("tensor_descriptor" not in c for c in spec.space.indexing_choices)
    with pytest.warns(
        UserWarning, match=r"indexing\[0\]='tensor_descriptor' is not available here \(cuda:80"
    ):
        cfg = spec.normalize(tc.Config(indexing=["tensor_descriptor", "pointer", "pointer"]))
    assert cfg.indexing[0] == "pointer"  # an unavailable kind falls back to the neutral one
    monkeypatch.setenv("TILECRAFT_STRICT", "1")
    with pytest.raises(ConfigError, match="tensor_descriptor"):
        spec.normalize(tc.Config(indexing=["tensor_descriptor", "pointer", "pointer"]))


def test_maxnreg_only_where_the_backend_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = torch.randn(64, 128), torch.randn(128)
    monkeypatch.setenv("TILECRAFT_TARGET", "hip:gfx942")
    bound = rms_norm.bind((x, w))
    rng = random.Random(0)
    assert all(bound.config_spec.random(rng).maxnreg is None for _ in range(20))
    with pytest.warns(UserWarning, match="maxnreg=128 is not supported by the hip backend"):
        code = bound.to_triton_code(tc.Config(maxnreg=128))
    assert "maxnreg" not in code
    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:90")
    assert "maxnreg=128" in rms_norm.bind((x, w)).to_triton_code(tc.Config(maxnreg=128))


def test_random_matmul_configs_fit_shared_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipelined dot operands live in shared memory: random configs keep their stages within the
    target's limit (an H200 has 227 KB per block)."""
    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:90")
    a = torch.randn(4096, 4096, dtype=torch.bfloat16)
    spec = matmul.bind((a, a)).config_spec
    rng = random.Random(0)
    limit = spec.target.limits.max_shared_bytes
    estimates = [spec.estimated_shared_bytes(spec.random(rng)) for _ in range(100)]
    assert max(estimates) <= limit
    big = tc.Config(block_sizes=[256, 256, 128], num_stages=4)
    assert spec.estimated_shared_bytes(big) == 4 * (256 * 128 + 128 * 256) * 2 > limit


def test_strategy_neighbours_for_the_tuner(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local search's strategy moves: each normalizes, each changes one knob, and a
    matmul on sm_90 can reach TMA loads and L2 grouping in one step."""
    from tilecraft.autotune.candidates import neighbors

    monkeypatch.setenv("TILECRAFT_TARGET", "cuda:90")
    a, b = torch.randn(1024, 512, dtype=torch.bfloat16), torch.randn(512, 768, dtype=torch.bfloat16)
    spec = matmul.bind((a, b)).config_spec
    pipeline = spec.default()  # sm_90: TMA, persistent, L2-grouped; every move from it normalizes
    assert pipeline.l2_groupings == (8,)
    assert any(
        spec.normalize(c).pid_type == "xyz" for c in neighbors(spec, pipeline, strategies=True)
    )
    centre = spec.normalize(spec.plain_default())
    moves = [spec.normalize(c) for c in neighbors(spec, centre, strategies=True)]
    assert moves and all(m != centre for m in moves)
    assert any(m.pid_type == "persistent_interleaved" for m in moves)
    assert any(list(m.l2_groupings) == [8] for m in moves)
    assert any(all(i == "tensor_descriptor" for i in m.indexing) for m in moves)
    assert any(list(m.load_eviction_policies) == ["first", "first"] for m in moves)
    before = centre.to_dict()
    changed = [
        {k for k, v in m.to_dict().items() if before.get(k) != v} - {"num_sm_multiplier"}
        for m in moves
    ]  # a persistent pid_type brings its SM multiplier
    assert all(len(c) == 1 for c in changed), changed
    monkeypatch.setenv("TILECRAFT_TARGET", "hip:gfx942")  # no TMA on AMD: never offered
    spec = matmul.bind((a, b)).config_spec
    moves = neighbors(spec, spec.normalize(spec.default()), strategies=True)
    assert moves and not any("tensor_descriptor" in (m.indexing or ()) for m in moves)

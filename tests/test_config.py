"""Config (validation, keys, repr) and ConfigSpec (default, random, normalize)."""

from __future__ import annotations

import random
import subprocess
import sys
import warnings

import pytest
import torch
from kernels import matmul, rms_norm

import tilecraft
import tilecraft as tc
from tilecraft.config.normalize import MAX_NUMEL
from tilecraft.errors import ConfigError, TilecraftError

# ----------------------------------------------------------------------------------------------
# kernels
# ----------------------------------------------------------------------------------------------


@tc.kernel
def colsum_partials(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    m_block = tc.register_block_size(m)
    partial = torch.empty((m + m_block - 1) // m_block, n, dtype=torch.float32, device=x.device)
    for cta in tc.tile(m, block_size=m_block):
        acc = x.new_zeros(n, dtype=torch.float32)  # a register tile on the reduction dim of n
        for mb in tc.tile(cta.begin, cta.end):
            acc += x[mb, :].to(torch.float32).sum(0)
        partial[cta.id, :] = acc
    return partial.sum(0)


@tc.kernel
def row_argmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty(m, dtype=torch.int64, device=x.device)
    for tm in tc.tile(m):
        out[tm] = torch.argmax(x[tm, :], dim=-1)
    return out


@tc.kernel
def tunable_scale(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    factor = tc.register_tunable("factor", [2, 4])
    out = torch.empty_like(x)
    for t in tc.tile(n):
        out[t] = x[t] * factor
    return out


def _x(m: int = 37, n: int = 100, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(m * 1000 + n)
    return (torch.randn(m, n, generator=g) + 0.25).to(dtype)


def _bounds() -> dict[str, tc.BoundKernel]:
    return {
        "rms_norm": rms_norm.bind((_x(), _x(1, 100)[0])),
        "rms_norm_wide": rms_norm.bind((_x(5, 40920, torch.bfloat16), _x(1, 40920)[0])),
        "matmul": matmul.bind((_x(37, 50), _x(50, 45))),
        "colsum_partials": colsum_partials.bind((_x(),)),
        "row_argmax": row_argmax.bind((_x(),)),
        "tunable": tunable_scale.bind((_x(1, 100)[0],)),
    }


@pytest.fixture(scope="module")
def bounds() -> dict[str, tc.BoundKernel]:
    return _bounds()


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"block_sizes": [32, 48]}, "block_sizes: 48"),
        ({"block_sizes": [0]}, "block_sizes: 0"),
        ({"block_sizes": [16.0]}, "block_sizes"),
        ({"reduction_loops": [24]}, "reduction_loops: 24"),
        ({"num_warps": 3}, "num_warps=3"),
        ({"num_warps": 64}, "num_warps=64"),
        ({"num_stages": 0}, "num_stages=0"),
        ({"pid_type": "diagonal"}, "pid_type='diagonal'"),
        ({"indexing": ["pointer", "texture"]}, "indexing='texture'"),
    ],
)
def test_config_validation_errors(fields: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        tc.Config(**fields)
    assert needle in str(info.value)
    assert isinstance(info.value, TilecraftError)


def test_config_accepts_valid_values() -> None:
    cfg = tc.Config(
        block_sizes=[1, 16, 1024],
        reduction_loops=[None, 64],
        num_warps=8,
        num_stages=3,
        pid_type="persistent_interleaved",
        indexing=["pointer", "block_ptr", "tensor_descriptor"],
        maxnreg=128,
    )
    assert cfg.block_sizes == (1, 16, 1024)
    assert cfg.reduction_loops == (None, 64)
    assert cfg.indexing == ("pointer", "block_ptr", "tensor_descriptor")


def test_config_key_is_stable() -> None:
    a = tc.Config(block_sizes=[32, 64], num_warps=4, reduction_loops=[None], factor=2)
    b = tc.Config(factor=2, reduction_loops=(None,), num_warps=4, block_sizes=(32, 64))
    assert a == b and a.key() == b.key()
    assert len(a.key()) == 16 and int(a.key(), 16) >= 0
    assert a.key() != tc.Config(block_sizes=[32, 64], num_warps=8, factor=2).key()
    assert a.key() != a.replace(factor=4).key()
    assert tc.Config().key() == tc.Config().key()
    # the same key in another process (no dependence on hash randomization or ids)
    code = (
        "import tilecraft as tc; print(tc.Config(block_sizes=[32, 64], num_warps=4, "
        "reduction_loops=[None], factor=2).key())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert other.stdout.strip() == a.key()


@pytest.mark.parametrize(
    "cfg",
    [
        tc.Config(),
        tc.Config(block_sizes=[32], reduction_loops=[None], num_warps=4, num_stages=1),
        tc.Config(block_sizes=[64, 64, 32], num_warps=8, num_stages=3, maxnreg=128),
        tc.Config(block_sizes=[8, 4], reduction_loops=[32], pid_type="xyz", factor=4),
        tc.Config(
            block_sizes=[16],
            range_num_stages=[0, 0],
            load_eviction_policies=["", "last"],
            indexing=["pointer", "block_ptr"],
            loop_orders=[[1, 0]],
            range_multi_buffers=[None, False],
            mode="fast",
        ),
    ],
    ids=["empty", "rms", "matmul", "user", "helion"],
)
def test_config_repr_is_pasteable(cfg: tc.Config) -> None:
    text = repr(cfg)
    assert text.startswith("tc.Config(")
    again = eval(text.replace("tc.", "tilecraft."), {"tilecraft": tilecraft})
    assert again == cfg
    assert again.key() == cfg.key()
    assert tc.Config.from_dict(cfg.to_dict()) == cfg


def test_config_user_values_and_replace() -> None:
    cfg = tc.Config(block_sizes=[32], factor=4)
    assert cfg.user_values == {"factor": 4}
    bigger = cfg.replace(block_sizes=[64])
    assert bigger.block_sizes == (64,) and bigger.user_values == {"factor": 4}
    assert cfg.block_sizes == (32,)  # frozen: replace makes a new config
    with pytest.raises(AttributeError):
        cfg.num_warps = 8  # type: ignore[misc]


# ----------------------------------------------------------------------------------------------
# ConfigSpec
# ----------------------------------------------------------------------------------------------

ALL = ["rms_norm", "rms_norm_wide", "matmul", "colsum_partials", "row_argmax", "tunable"]


@pytest.mark.parametrize("name", ALL)
def test_default_is_normalized_and_valid(bounds: dict[str, tc.BoundKernel], name: str) -> None:
    spec = bounds[name].config_spec
    default = spec.default()
    assert spec.normalize(default) == default
    assert len(default.block_sizes) == len(spec.blocks)
    assert len(default.reduction_loops) == len(spec.reductions)
    assert default.num_warps is not None and default.num_stages is not None
    largest, _ = spec.largest_value(default)
    assert largest <= MAX_NUMEL
    for b, size in zip(spec.blocks, default.block_sizes):
        assert b.lo <= size <= b.hi


def test_default_loops_a_huge_reduction(bounds: dict[str, tc.BoundKernel]) -> None:
    spec = bounds["rms_norm_wide"].config_spec
    default = spec.default()
    assert default.reduction_loops[0] is not None  # 65536 columns do not fit in registers
    spec_default_code = bounds["rms_norm_wide"].to_triton_code(default)
    assert "roffset" in spec_default_code


@pytest.mark.parametrize("name", ALL)
def test_random_configs_always_normalize(bounds: dict[str, tc.BoundKernel], name: str) -> None:
    spec = bounds[name].config_spec
    seen = set()
    for seed in range(50):
        cfg = spec.random(random.Random(seed))
        normalized = spec.normalize(cfg)
        assert spec.largest_value(normalized)[0] <= MAX_NUMEL
        seen.add(normalized.key())
    if spec.blocks:
        assert len(seen) > 5  # it really is random
    assert spec.random(random.Random(7)) == spec.random(random.Random(7))


def test_random_configs_compile_and_run(bounds: dict[str, tc.BoundKernel]) -> None:
    bound = bounds["rms_norm"]
    x, w = bound._example[0][:2]
    want = rms_norm.run_ref(x, w)
    for seed in range(3):
        program = bound.compile_config(bound.config_spec.random(random.Random(seed)))
        torch.testing.assert_close(bound.run(program, x, w), want, rtol=1e-5, atol=1e-5)


def test_normalize_fills_omitted_fields(bounds: dict[str, tc.BoundKernel]) -> None:
    spec = bounds["matmul"].config_spec
    out = spec.normalize(tc.Config(block_sizes=[32, 32, 16]))
    assert out.block_sizes == (32, 32, 16)
    assert out.num_warps is not None and out.num_stages is not None
    assert spec.normalize(tc.Config()).block_sizes == spec.default().block_sizes


def test_normalize_clamps_oversize_blocks(bounds: dict[str, tc.BoundKernel]) -> None:
    spec = bounds["rms_norm"].config_spec  # m = 37: a block over 64 covers nothing more
    assert spec.normalize(tc.Config(block_sizes=[1024])).block_sizes == (64,)


def test_normalize_repairs_or_rejects_tile_over_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.ones(32, 40920, dtype=torch.bfloat16)  # nothing runs; binding needs real tensors
    w = torch.ones(40920, dtype=torch.bfloat16)
    spec = rms_norm.bind((x, w)).config_spec
    with pytest.warns(UserWarning, match="2097152 elements"):
        repaired = spec.normalize(tc.Config(block_sizes=[32], reduction_loops=[None]))
    assert spec.largest_value(repaired)[0] <= MAX_NUMEL  # seed 000's [32, 65536] tile is shrunk
    assert spec.largest_value(repaired)[0] <= (repaired.num_warps or 4) * 32 * 512
    monkeypatch.setenv("TILECRAFT_STRICT", "1")
    with pytest.raises(ConfigError) as info:
        rms_norm.bind((x, w)).config_spec.normalize(
            tc.Config(block_sizes=[32], reduction_loops=[None])
        )
    text = str(info.value)
    assert str(MAX_NUMEL) == "1048576" and "1048576" in text
    assert str(32 * 65536) in text  # the [32, 65536] tile
    assert "kernels.py:" in text  # the line of the value
    assert "reduction_loops" in text  # the hint says how to fix it
    # a looped reduction or a smaller block is fine
    assert spec.normalize(tc.Config(block_sizes=[32], reduction_loops=[4096]))
    assert spec.normalize(tc.Config(block_sizes=[1], reduction_loops=[None], num_warps=4))


@pytest.mark.parametrize("blocks", [[32, 32], [32, 32, 32, 32]])
def test_normalize_rejects_wrong_block_sizes_length(
    bounds: dict[str, tc.BoundKernel], blocks: list[int]
) -> None:
    spec = bounds["matmul"].config_spec
    with pytest.raises(ConfigError, match=f"block_sizes has {len(blocks)} entries; .* has 3"):
        spec.normalize(tc.Config(block_sizes=blocks))


def test_normalize_repairs_wrong_reduction_loops_length(
    bounds: dict[str, tc.BoundKernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config written for other shapes (a size-1 row has no reduction dim) keeps whole dims,
    with a warning; strict mode rejects it."""
    spec = bounds["rms_norm"].config_spec
    with pytest.warns(UserWarning, match="reduction_loops has 2 entries"):
        fixed = spec.normalize(tc.Config(block_sizes=[8], reduction_loops=[32, 32]))
    assert list(fixed.reduction_loops) == [None] * len(spec.reductions)
    monkeypatch.setenv("TILECRAFT_STRICT", "1")
    with pytest.raises(ConfigError, match="reduction_loops has 2 entries"):
        spec.normalize(tc.Config(block_sizes=[8], reduction_loops=[32, 32]))


def test_explicit_reduction_loops_survive_a_size_one_row() -> None:
    """The same explicit config serves [7, 48] and [7, 1] rows (at n = 1 the row is no
    reduction dim): repaired, not a ConfigError."""

    @tc.kernel(static_shapes=True, config=tc.Config(block_sizes=[2], reduction_loops=[16]))
    def row_scale(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty_like(x)
        for tm in tc.tile(m):
            xt = x[tm, :]
            out[tm, :] = xt / torch.clamp(xt.abs().sum(-1), min=1e-5)[:, None]
        return out

    for n in (48, 1):
        x = torch.randn(7, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = row_scale(x)
        torch.testing.assert_close(got, x / x.abs().sum(-1, keepdim=True).clamp(min=1e-5))


@pytest.mark.parametrize("slot", [0, 1, 2])
def test_normalize_rejects_dot_dims_below_16(bounds: dict[str, tc.BoundKernel], slot: int) -> None:
    spec = bounds["matmul"].config_spec
    assert [b.dot_role for b in spec.blocks] == ["mn", "mn", "k"]
    blocks = [32, 32, 32]
    blocks[slot] = 8
    with pytest.raises(ConfigError) as info:
        spec.normalize(tc.Config(block_sizes=blocks))
    assert f"block_sizes[{slot}]=8" in str(info.value)
    assert "16" in str(info.value) and "tl.dot" in str(info.value)
    # random configs never go below 16 on dot dims
    for seed in range(20):
        assert min(spec.random(random.Random(seed)).block_sizes) >= 16


def test_looping_reduction_with_carried_register_tile_keeps_it_in_its_row(
    bounds: dict[str, tc.BoundKernel],
) -> None:
    """A carried [n] accumulator stored once into its program's row can live there while the
    width is looped (tests/test_row_homes.py has the refusals); a narrow row stays whole."""
    spec = bounds["colsum_partials"].config_spec
    (red,) = spec.reductions
    assert red.loopable and [h.name for h in red.homes] == ["acc"]
    plan = spec.resolve(tc.Config(block_sizes=[8, 4], reduction_loops=[32]))
    assert plan.reduction_loops == (32,) and [h.tensor for h in plan.carried_homes] == ["partial"]
    assert spec.default().reduction_loops == (None,)


def test_an_argmax_row_can_be_looped_but_not_split(bounds: dict[str, tc.BoundKernel]) -> None:
    """Each lane keeps its best and index across chunks (tests/test_semantics.py checks the
    numbers); partial results from other programs have no combine, so no split."""
    spec = bounds["row_argmax"].config_spec
    (red,) = spec.reductions
    assert red.loopable
    config = spec.normalize(tc.Config(block_sizes=[8], reduction_loops=[32]))
    assert config.reduction_loops == (32,)
    site, why = spec.split_sites[0]
    assert site is None and "argmax" in why and "cannot be combined" in why
    with pytest.raises(ConfigError, match="cannot be combined"):
        spec.normalize(config.replace(split_reductions=[4]))


def test_reduction_chunk_not_smaller_than_extent_means_unlooped(
    bounds: dict[str, tc.BoundKernel],
) -> None:
    spec = bounds["rms_norm"].config_spec  # n = 100 -> a 128 block
    assert spec.normalize(tc.Config(block_sizes=[8], reduction_loops=[128])).reduction_loops == (
        None,
    )


def test_helion_neutral_fields_are_accepted(bounds: dict[str, tc.BoundKernel]) -> None:
    bound = bounds["rms_norm"]
    cfg = tc.Config(
        block_sizes=[8],
        reduction_loops=[None],
        range_num_stages=[0, 0],
        range_unroll_factors=[0, 0],
        range_multi_buffers=[None, None],
        range_flattens=[None, None],
        range_warp_specializes=[None, None],
        load_eviction_policies=["", ""],
        l2_groupings=[1],
        flatten_loops=[False],
        indexing="pointer",
        pid_type="flat",
        num_warps=4,
        num_stages=1,
    )
    normalized = bound.config_spec.normalize(cfg)
    assert normalized.block_sizes == (8,)
    x, w = bound._example[0][:2]
    program = bound.compile_config(cfg)
    torch.testing.assert_close(bound.run(program, x, w), rms_norm.run_ref(x, w))


def test_user_tunables(bounds: dict[str, tc.BoundKernel]) -> None:
    spec = bounds["tunable"].config_spec
    assert spec.tunables == {"factor": (2, 4)}
    assert spec.default().user_values == {"factor": 2}
    assert spec.normalize(tc.Config(factor=4)).user_values == {"factor": 4}
    with pytest.raises(ConfigError, match=r"tunable factor=3 is not one of \[2, 4\]"):
        spec.normalize(tc.Config(factor=3))


def test_user_tunable_value_reaches_device_code(bounds: dict[str, tc.BoundKernel]) -> None:
    bound = bounds["tunable"]
    (x,) = bound._example[0]
    for factor in (2, 4):
        program = bound.compile_config(tc.Config(block_sizes=[128], factor=factor))
        torch.testing.assert_close(bound.run(program, x), x * factor)


@tc.kernel(static_shapes=True)
def row_totals_by_grid(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for i in tc.grid(m):  # one row a program: no tunable block at all
        out[i] = torch.sum(x[i, :].to(torch.float32))
    return out


def test_a_kernel_without_blocks_normalizes_an_empty_config() -> None:
    """No block sizes given and none to give: the default is not consulted for them (it
    normalizes its own config, which would recurse), and the kernel runs."""
    x = torch.randn(5, 33)
    spec = row_totals_by_grid.bind((x,)).config_spec
    assert spec.blocks == [] and list(spec.normalize(tc.Config(num_warps=2)).block_sizes) == []
    torch.testing.assert_close(row_totals_by_grid(x), x.sum(1))


@pytest.mark.parametrize(
    "fields",
    [
        {"num_sm_multiplier": "2"},
        {"num_sm_multiplier": 0},
        {"num_sm_multiplier": 2.5},
        {"l2_groupings": ["a"]},
        {"l2_groupings": [2.0]},
        {"l2_groupings": [0]},
    ],
)
def test_config_names_a_field_of_the_wrong_type(fields: dict[str, object]) -> None:
    """num_sm_multiplier and l2_groupings of the wrong type died in codegen naming no field,
    or ran as another value (0 as 1, 2.5 as 2; fuzz round 55c)."""
    name = next(iter(fields))
    with pytest.raises(ConfigError, match=name):
        tc.Config(block_sizes=[16], **fields)  # type: ignore[arg-type]
